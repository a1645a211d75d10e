"""What the view reads from XCom: one task run's result and its gate rows.

A gate row is read by the gate's own reader, ``decisions.gate.GateRow.from_xcom``: it knows every shape
the gate ever wrote (rows without a ``status`` before the history judgement, the history's centre and
noise band, the per-transaction ``transaction``) and ignores keys it does not know. XCom is written by
tasks, not trusted: before that reader sees a row, each known field whose value is not of the type
``GateRow`` declares (a string for a number, a NaN, a negative count) is dropped, so a malformed row
shows with the field missing instead of failing the page; what is not a row at all is skipped.

``decisions.gate`` is plain Python (no Airflow, no HTTP client, no third-party import) and only the API
server imports this module (``plugins/__init__.py`` loads it when Airflow asks for the app), so workers
pay nothing for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, get_type_hints

from airflow_provider_loadtest.decisions.gate import GateRow


class Status(Enum):
    """One metric's status on one night (``GateRow.status``, the gate's ``decisions.history`` names)."""

    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    #: Moved, but within the history's usual noise: passes.
    NOISE = "noise"
    #: Beyond the bound and the usual noise on one night, not (yet) a regression: passes, worth a look.
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


_LABELS = {
    Status.PASS: "pass",
    Status.NOISE: "noise",
    Status.SUSPECTED: "suspected",
    Status.REGRESSION: "regression",
    Status.BUDGET: "over budget",
    Status.NOT_MEASURED: "not measured",
}

#: How the history gate marks a night whose change a person accepted: its ``note`` begins so
#: (``decisions.history.judge_night``; tests/unit/test_load_tests_view.py holds the two together).
ACCEPTED_NOTE = "change accepted"


@dataclass(frozen=True)
class Row(GateRow):
    """One gated metric (of one transaction, or of all requests) on one night: the gate's own row,
    with what the view derives from it."""

    @property
    def kind(self) -> Status:
        """``status`` as the view's enum (``GateRow.from_xcom`` guarantees one the gate knows)."""
        return Status(self.status)

    @property
    def accepted(self) -> str | None:
        """The gate's note when this night's change was accepted as the new normal, else None."""
        if self.note is not None and self.note.lower().startswith(ACCEPTED_NOTE):
            return self.note
        return None

    @property
    def band(self) -> tuple[float, float] | None:
        """The history's noise band: as stored, else centre +- noise."""
        if self.band_low is not None and self.band_high is not None:
            return (min(self.band_low, self.band_high), max(self.band_low, self.band_high))
        if self.centre is not None and self.noise is not None:
            return (self.centre - abs(self.noise), self.centre + abs(self.noise))
        return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


#: A checker per type ``GateRow`` declares: the value if it is of that type, else None (dropped).
_CHECKERS: dict[object, Callable[[object], object]] = {
    float | None: _number,
    float: _number,
    str | None: _text,
    str: _text,
    int | None: _count,
    int: _count,
    bool: _flag,
}


def _field_checkers() -> dict[str, Callable[[object], object]]:
    """Each ``GateRow`` field's checker, from the field's declared type. A field of a type with no
    checker is left out (read as its default): a unit test requires a checker for every field."""
    hints = get_type_hints(GateRow)
    return {f.name: _CHECKERS[hints[f.name]] for f in fields(GateRow) if hints[f.name] in _CHECKERS}


FIELD_CHECKERS = _field_checkers()


def gate_row(data: object) -> Row | None:
    """One row as ``GateRow.to_xcom()`` wrote it (any version), or None when it is not one."""
    if not isinstance(data, Mapping) or _text(data.get("metric")) is None:
        return None
    clean: dict[str, Any] = {}
    for name, check in FIELD_CHECKERS.items():
        value = check(data.get(name))
        if value is not None:
            clean[name] = value
    row = Row.from_xcom(clean)  # a classmethod: builds a Row (typed as returning GateRow)
    return row if isinstance(row, Row) else None


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
