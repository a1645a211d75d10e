"""The view's fast paths over a night's gate rows read what the gate's own reader reads.

A year of a gate of 201 series is 73,000 rows: ``RunResult`` reads each night's statuses, failing rows,
accepted changes and series in passes over the rows' texts, and makes the rows a page shows at once
(``rows._row``), instead of through ``GateRow.from_xcom`` row by row. Each is held here to the plain
reading of ``gate_rows`` (the checked path), on rows of every shape the gate or a hostile task writes.
"""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from airflow_provider_loadtest.plugins.rows import Row, RunResult, Status, gate_rows

P95 = "RESPONSE_TIME_PERCENTILE_95"


def _row(value: float | None = 500.0, **extra: Any) -> dict[str, Any]:
    return {"metric": P95, "value": value, "passed": True, "status": "pass", **extra}


#: Known and unknown statuses (derived from ``passed`` and ``reason``), a status missing, empty texts,
#: a negative count, a series written twice, accepted and other notes, failing and suspected rows.
SHAPES = [
    _row(),
    _row(780.0, passed=False, status=None, reason="more than 10 % worse than the baseline"),
    _row(None, passed=False, status="exploded", reason="no value from the service"),
    _row(900.0, passed=False, status="mystery", reason="budget <= 800 exceeded", transaction="T1"),
    _row(510.0, status="suspected", transaction="T2", note="beyond the noise on one night"),
    _row(transaction="", note="", history_n=-3, status="noise", reason="", budget=""),
    _row(note="Change accepted as the new normal", history_n=12, band_low=1.0, band_high=2.0),
    _row(600.0, transaction="T1", status="budget", passed=False),
    {"metric": "ERRORS_PERCENT", "value": 0.1},
    {"metric": P95, "value": 1.0, "passed": None, "status": None},
]


def _first_of_each(rows: list[Row]) -> dict[tuple[str, str | None], int]:
    first: dict[tuple[str, str | None], int] = {}
    for i, row in enumerate(rows):
        first.setdefault((row.metric, row.transaction), i)
    return first


@pytest.mark.parametrize("gate", [SHAPES, [_row(), _row(transaction="T9")]], ids=["every shape", "plain"])
def test_a_nights_derived_reads_are_the_gate_readers(gate: list[dict[str, Any]]) -> None:
    expected = gate_rows(gate)
    for result in (RunResult.from_json(json.dumps({"gate": gate})), RunResult.from_xcom({"gate": gate})):
        assert result.statuses == tuple(Status(r.status) for r in expected)
        assert result.codes == tuple(r.status for r in expected)
        assert result.failing_entries == tuple(i for i, r in enumerate(expected) if r.kind.failed)
        assert result.suspected == any(r.kind is Status.SUSPECTED for r in expected)
        assert result.accepted == tuple(r for r in expected if r.accepted)
        assert result.by_series == _first_of_each(expected)
        assert list(result.by_series) == list(_first_of_each(expected))  # in the gate's order


def test_rows_made_at_once_are_the_gate_readers_rows() -> None:
    """Equal, hashed alike, of the same kind, and still frozen."""
    result = RunResult.from_json(json.dumps({"gate": SHAPES}))
    expected = gate_rows(SHAPES)
    made = [result.row(i) for i in range(len(expected))]
    assert made == expected
    assert [hash(r) for r in made] == [hash(r) for r in expected]
    assert [r.kind for r in made] == [Status(r.status) for r in expected]
    assert [vars(r).keys() - {"kind"} for r in made] == [vars(r).keys() - {"kind"} for r in expected]
    with pytest.raises(FrozenInstanceError):
        made[0].value = 1.0  # type: ignore[misc]


def test_nights_listing_the_same_series_share_their_index_and_only_they() -> None:
    def of(*transactions: str | None) -> RunResult:
        return RunResult.from_json(json.dumps({"gate": [_row(transaction=t) for t in transactions]}))

    first, same, swapped, other = (
        of(None, "T1", "T2"),
        of(None, "T1", "T2"),
        of(None, "T2", "T1"),
        of(None, "T1", "T3"),
    )
    assert same.by_series is first.by_series  # made once for a year of nights alike
    for result, expected in (
        (swapped, [None, "T2", "T1"]),
        (other, [None, "T1", "T3"]),
        (first, [None, "T1", "T2"]),
    ):
        assert result.by_series == {(P95, t): i for i, t in enumerate(expected)}
