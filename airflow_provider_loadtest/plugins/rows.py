"""What the view reads from XCom: one task run's result and its gate rows, read tolerantly.

The gate's rows grow over time (the history judgement adds a status, the history's centre and noise
band; per-transaction gates add a transaction), and XCom keeps every older shape for as long as the
DAG runs are kept. This module is the one place that reads them: today's keys and the newer ones when
present, with anything unknown or malformed ignored rather than failing the page. When
``decisions.gate.GateRow`` can read its own XCom (``GateRow.from_xcom``), ``gate_rows`` is the one
function to switch over.

No Airflow imports: plain data in, plain data out (unit-tested without a database).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Status(Enum):
    """One metric's verdict on one night, from the best to the worst (``rank``)."""

    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    #: Moved, but within the history's usual noise: passes.
    NOISE = "noise"
    #: Outside the noise band but not (yet) a confirmed regression: passes, worth a look.
    SUSPECTED = "suspected"
    REGRESSION = "regression"
    BUDGET = "budget"
    NOT_MEASURED = "not_measured"

    @property
    def failed(self) -> bool:
        return self in (Status.REGRESSION, Status.BUDGET, Status.NOT_MEASURED)

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def rank(self) -> int:
        return _RANK[self]


_LABELS = {
    Status.PASS: "pass",
    Status.NOISE: "noise",
    Status.SUSPECTED: "suspected",
    Status.REGRESSION: "regression",
    Status.BUDGET: "over budget",
    Status.NOT_MEASURED: "not measured",
}
_RANK = {status: rank for rank, status in enumerate(Status)}

#: Keys a row may carry to say that a change was accepted (the first truthy one wins, its text, if
#: any, is shown); the history gate says it in its ``note`` (``ACCEPTED_NOTE``).
ACCEPTED_KEYS = ("accepted", "accepted_change", "accepted_at", "accepted_by")
ACCEPTED_NOTE = "change accepted"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class Row:
    """One gated metric (of one transaction, or of all requests) on one night."""

    metric: str
    value: float | None
    passed: bool
    status: Status
    transaction: str | None = None
    budget: str | None = None
    baseline: float | None = None
    change_pct: float | None = None
    max_regression_pct: float | None = None
    reason: str | None = None
    centre: float | None = None
    noise: float | None = None
    band_low: float | None = None
    band_high: float | None = None
    history_n: int | None = None
    #: What the gate's log said beside the row (suspected, short history, accepted).
    note: str | None = None
    #: Set when this night's change was accepted (``True``, or the marker's text).
    accepted: str | bool = False

    @property
    def band(self) -> tuple[float, float] | None:
        """The history's noise band: as stored, else centre +- noise."""
        if self.band_low is not None and self.band_high is not None:
            return (min(self.band_low, self.band_high), max(self.band_low, self.band_high))
        if self.centre is not None and self.noise is not None:
            return (self.centre - abs(self.noise), self.centre + abs(self.noise))
        return None


def _status(data: Mapping[str, Any], value: float | None, passed: bool) -> Status:
    """The stored status when it is one we know, else what today's keys say."""
    stored = data.get("status")
    if isinstance(stored, str):
        try:
            return Status(stored.lower())
        except ValueError:
            pass
    if value is None:
        return Status.NOT_MEASURED if not passed else Status.PASS
    if passed:
        return Status.PASS
    reason = data.get("reason")
    if isinstance(reason, str) and "budget" in reason and "worse than" not in reason:
        return Status.BUDGET
    return Status.REGRESSION


def _accepted(data: Mapping[str, Any]) -> str | bool:
    for key in ACCEPTED_KEYS:
        marker = data.get(key)
        if marker:
            return marker if isinstance(marker, str) else True
    note = data.get("note")
    if isinstance(note, str) and note.lower().startswith(ACCEPTED_NOTE):
        return note
    return False


def gate_row(data: object) -> Row | None:
    """One row as ``GateRow.to_xcom()`` wrote it (any version), or None when it is not one."""
    if not isinstance(data, Mapping):
        return None
    metric = data.get("metric")
    if not isinstance(metric, str) or not metric:
        return None
    value = _number(data.get("value"))
    passed = data.get("passed") is True
    return Row(
        metric=metric,
        value=value,
        passed=passed,
        status=_status(data, value, passed),
        transaction=_text(data.get("transaction")),
        budget=_text(data.get("budget")),
        baseline=_number(data.get("baseline")),
        change_pct=_number(data.get("change_pct")),
        max_regression_pct=_number(data.get("max_regression_pct")),
        reason=_text(data.get("reason")),
        centre=_number(data.get("centre")),
        noise=_number(data.get("noise")),
        band_low=_number(data.get("band_low")),
        band_high=_number(data.get("band_high")),
        history_n=_count(data.get("history_n")),
        note=_text(data.get("note")),
        accepted=_accepted(data),
    )


def gate_rows(data: object) -> list[Row]:
    """The rows of a ``gate`` list, skipping what is not a row."""
    if not isinstance(data, list):
        return []
    return [row for row in map(gate_row, data) if row is not None]


def _http_url(value: object) -> str | None:
    """A link we may put in the page: http(s) only (XCom is written by tasks, not trusted)."""
    if isinstance(value, str) and value.lower().startswith(("https://", "http://")):
        return value
    return None


@dataclass(frozen=True)
class RunResult:
    """What ``RunScenarioOperator`` left in XCom for one task run (its ``return_value``, or only its
    run record while the run goes on or when the task ended without a verdict)."""

    bench_result_id: str | None
    report_url: str | None
    state: str | None
    scenario_id: str | None
    test_name: str | None
    rows: tuple[Row, ...]
    #: False when only the run record exists: the task has not returned (yet).
    has_result: bool

    @classmethod
    def from_xcom(cls, result: object, record: object = None) -> RunResult:
        """``result``: the task's ``return_value``; ``record``: its run record (``loadtest_run``)."""
        has_result = isinstance(result, Mapping)
        data: Mapping[str, Any] = result if isinstance(result, Mapping) else {}
        start: Mapping[str, Any] = record if isinstance(record, Mapping) else {}

        def pick(key: str) -> str | None:
            return _text(data.get(key)) or _text(start.get(key))

        return cls(
            bench_result_id=pick("bench_result_id"),
            report_url=_http_url(data.get("report_url")) or _http_url(start.get("report_url")),
            state=_text(data.get("state")),
            scenario_id=pick("scenario_id"),
            test_name=pick("test_name"),
            rows=tuple(gate_rows(data.get("gate"))),
            has_result=has_result,
        )
