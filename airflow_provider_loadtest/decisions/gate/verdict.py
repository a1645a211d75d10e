"""The gate's verdict: its rows and the table the task log shows, the message a failure raises.

``rows.py`` holds the rows themselves (``GateRow``, the statuses); every name of both is importable
from ``decisions.gate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.decisions.gate.rows import (
    BUDGET,
    NOT_MEASURED,
    GateRow,
    format_number,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.family import NightEffect
    from airflow_provider_loadtest.decisions.gate.history import GateHistory


@dataclass(frozen=True)
class Verdict:
    """The gate's rows and what they mean for the task (``history``: what to leave in XCom for the
    next night under ``baseline="history"``; ``night``: the night effect, every series' shared
    movement, judged once for the run as a whole; ``budget_text``: what the gate's false-alarm budget
    buys with this many series)."""

    rows: tuple[GateRow, ...]
    baseline_id: str | None
    note: str | None = None  # e.g. why no baseline was compared
    history: GateHistory | None = None
    night: NightEffect | None = None
    budget_text: str | None = None
    #: Under ``baseline="history"``, what was judged (``judging.SeriesSpec``s, every series of the night)
    #: and the applied load (``load.LoadSeries``): the night's record keeps them (``nights.py``).
    judged: tuple[Any, ...] = ()
    judged_loads: tuple[Any, ...] = ()

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows) and (self.night is None or self.night.passed)

    def ranked(self) -> list[GateRow]:
        """The rows that moved beyond their noise first, furthest first (``own_sd``), then the rest in
        their order: the first rows of the table are the ones to look at."""
        moved = sorted(
            (row for row in self.rows if row.own_sd is not None),
            key=lambda row: (row.passed, -(row.own_sd or 0.0)),
        )
        return moved + [row for row in self.rows if row.own_sd is None]

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
        with_own = any(row.own_sd is not None for row in self.rows)
        header = (
            *(("transaction",) if with_transaction else ()),
            "metric",
            "value",
            "budget",
            "baseline",
            *(("noise band",) if with_band else ()),
            "change",
            *(("beyond noise",) if with_own else ()),
            "result",
        )
        ordered = self.ranked() if self.night is not None else list(self.rows)
        lines = [header] + [
            (
                *((_transaction_text(row),) if with_transaction else ()),
                row.metric,
                format_number(row.value),
                row.budget or "-",
                _baseline_text(row),
                *((_band_text(row),) if with_band else ()),
                _change_text(row),
                *((f"{row.own_sd:+.1f} sd" if row.own_sd is not None else "-",) if with_own else ()),
                _result_text(row),
            )
            for row in ordered
        ]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines
        )

    def notes(self) -> list[str]:
        """What the log should say beside the table: the night effect and what the budget buys, then
        suspected changes, short histories, accepted ones."""
        first = [text for text in (self.night.text() if self.night else None, self.budget_text) if text]
        return first + [f"{_series_text(row)}: {row.note}" for row in self.rows if row.note]

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
        if self.night is not None and not self.night.passed:
            parts.insert(
                0,
                f"every series together (the night effect) {self.night.shift_sd:+.2f} sd: "
                f"{self.night.reason}",
            )
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
