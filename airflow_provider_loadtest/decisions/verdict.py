"""The gate's verdict: one row per gated metric, and the table the task log shows.

Apart from ``gate.py`` (what is gated and how it is judged) so that the rows, read back from XCom or
an asset event's ``extra`` by ``GateRow.from_xcom``, need nothing of the judgement; ``gate.py``
re-exports every name here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_provider_loadtest.decisions.history import GateHistory

# A row's ``status``.
PASS = "pass"  # noqa: S105 - passed, nothing compared against noise (budgets only, too little history, accepted)
NOISE = "noise"  # passed: within the noise, or a change smaller than max_regression_pct
SUSPECTED = "suspected"  # passed, but beyond the noise on one night: kept out of the history meanwhile
REGRESSION = "regression"  # failed: worse than the bound and than the noise explains
BUDGET = "budget"  # failed its budget
NOT_MEASURED = "not_measured"  # failed: a value the gate needs could not be read
STATUSES = (PASS, NOISE, SUSPECTED, REGRESSION, BUDGET, NOT_MEASURED)


@dataclass(frozen=True)
class Unreadable:
    """An input the gate needed and could not read, and why: the metric fails as not measured."""

    reason: str


@dataclass(frozen=True)
class GateRow:
    """One metric's verdict; fields are None where they do not apply.

    ``status`` says why: ``pass`` (nothing compared against noise), ``noise`` (within the noise, or a
    change smaller than ``max_regression_pct``), ``suspected`` (beyond the noise on one night: passes,
    kept out of the history), ``regression``, ``budget``, ``not_measured`` (an input could not be read:
    fails). ``baseline`` is what tonight was compared against (the baseline run's value, the history's
    centre, or on a short history the median of the nights so far); ``centre`` (the mean of the
    history's nights within its robust fence), ``noise`` (one standard deviation, in the metric's
    units), ``band_low``/``band_high`` (what one night's noise explains) and ``history_n`` (the nights
    in the history) come from ``baseline="history"``.
    """

    metric: str
    value: float | None
    passed: bool
    budget: str | None = None
    baseline: float | None = None
    change_pct: float | None = None
    max_regression_pct: float | None = None
    reason: str | None = None
    status: str = PASS
    centre: float | None = None
    noise: float | None = None
    band_low: float | None = None
    band_high: float | None = None
    history_n: int | None = None
    note: str | None = None
    #: The JTL label a per-transaction row is about (None: the run as a whole).
    transaction: str | None = None

    def to_xcom(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_xcom(cls, data: Mapping[str, Any]) -> GateRow:
        """A row as ``to_xcom`` wrote it, by this or an older version (no ``status`` then: derived from
        ``passed`` and ``reason``); fields it does not know are ignored, so newer writers still read."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if known.get("status") not in STATUSES:
            reason = str(known.get("reason") or "")
            known["status"] = (
                PASS
                if known.get("passed")
                else NOT_MEASURED
                if reason.startswith("no value")
                else REGRESSION
                if "worse than" in reason
                else BUDGET
                if reason.startswith("budget")
                else REGRESSION
            )
        return cls(**{"value": None, "passed": False, **known})


def change_pct(value: float, baseline: float) -> float | None:
    """Signed change from the baseline in percent (None from a zero baseline to a non-zero value)."""
    if baseline == 0:
        return 0.0 if value == 0 else None
    return (value - baseline) / abs(baseline) * 100


def format_number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if value != int(value) or abs(value) >= 1e15 else str(int(value))


@dataclass(frozen=True)
class Verdict:
    """The gate's rows and what they mean for the task (``history``: what to leave in XCom for the
    next night under ``baseline="history"``)."""

    rows: tuple[GateRow, ...]
    baseline_id: str | None
    note: str | None = None  # e.g. why no baseline was compared
    history: GateHistory | None = None

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    @property
    def metrics(self) -> dict[str, float | None]:
        """The run's gated values, by metric id (transaction rows are in ``transactions``)."""
        return {row.metric: row.value for row in self.rows if row.transaction is None}

    @property
    def transactions(self) -> dict[str, dict[str, float | None]]:
        """The transactions' gated values: ``{label: {metric id: value}}``."""
        found: dict[str, dict[str, float | None]] = {}
        for row in self.rows:
            if row.transaction is not None:
                found.setdefault(row.transaction, {})[row.metric] = row.value
        return found

    def table(self) -> str:
        """The verdict as a fixed-width table for the task log: per metric, tonight's value, what it
        was compared against (the baseline, or the history's centre and noise band), the change, and
        the judgement. With transaction rows, a first column names the transaction (``(run)``: the
        run as a whole)."""
        with_band = any(row.band_high is not None for row in self.rows)
        with_transaction = any(row.transaction is not None for row in self.rows)
        header = (
            *(("transaction",) if with_transaction else ()),
            "metric",
            "value",
            "budget",
            "baseline",
            *(("noise band",) if with_band else ()),
            "change",
            "result",
        )
        lines = [header] + [
            (
                *((_transaction_text(row),) if with_transaction else ()),
                row.metric,
                format_number(row.value),
                row.budget or "-",
                _baseline_text(row),
                *((_band_text(row),) if with_band else ()),
                _change_text(row),
                _result_text(row),
            )
            for row in self.rows
        ]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
        )

    def notes(self) -> list[str]:
        """What the log should say beside the table: suspected changes, short histories, accepted ones."""
        return [f"{_series_text(row)}: {row.note}" for row in self.rows if row.note]

    def message(self) -> str:
        """Why the gate failed, naming every failing metric (and its transaction) with its value, the
        baseline's and the change."""
        parts = []
        for row in self.rows:
            if row.passed:
                continue
            detail = f"{_series_text(row)} {format_number(row.value)}"
            if row.baseline is not None:
                against = "history centre" if row.centre is not None else "baseline"
                detail += f" vs {against} {format_number(row.baseline)} ({_change_text(row)})"
            parts.append(f"{detail}: {row.reason}")
        against = f" (baseline run {self.baseline_id})" if self.baseline_id else ""
        return f"Quality gate failed{against}: " + "; ".join(parts)


def _transaction_text(row: GateRow) -> str:
    return "(run)" if row.transaction is None else " ".join(row.transaction.split()) or repr(row.transaction)


def _series_text(row: GateRow) -> str:
    """The metric, and the transaction it is about (``RESPONSE_TIME_AVG of 'Checkout'``)."""
    return row.metric if row.transaction is None else f"{row.metric} of {row.transaction!r}"


def _baseline_text(row: GateRow) -> str:
    if row.centre is not None:
        return f"{format_number(row.centre)} (mean of {row.history_n})"
    if row.baseline is not None and row.history_n is not None:
        return f"{format_number(row.baseline)} (median of {row.history_n})"
    return format_number(row.baseline)


def _band_text(row: GateRow) -> str:
    if row.band_low is None or row.band_high is None:
        return "-"
    return f"{format_number(round(row.band_low, 6))} .. {format_number(round(row.band_high, 6))}"


def _result_text(row: GateRow) -> str:
    if row.passed:
        return row.status
    return "FAIL: " + {NOT_MEASURED: "not measured", BUDGET: "budget"}.get(row.status, row.status)


def _change_text(row: GateRow) -> str:
    if row.change_pct is not None:
        return f"{row.change_pct:+.1f} %"
    if row.baseline == 0 and row.value is not None:
        return "from 0"
    return "-"
