"""The quality gate: what a task gates (budgets, regression bounds, the baseline), how each night is
judged, and the verdict.

A package of its own beside the run's control (``decisions/``), sans-I/O, in small modules whose
dependencies point one way:

* ``rows``: a row of the verdict and its statuses (no dependencies: the view reads them back);
* ``rules``: the metrics, which way each gets worse, budgets, bounds, the checked ``GateSpec``;
* ``verdict``: the rows together, the log's table and the failure message;
* ``history``: ``baseline="history"``, one series judged against the noise of its last passing nights;
* ``family``: every series of a night judged together under one false-alarm budget (the night effect);
* ``judging``: fetching a run's values and judging them (``evaluate``), ``replay_history``, ``replay_gate``;
* ``transactions``: the gates per transaction (JTL label).

Importing this package stays cheap (the operator checks plain gate settings at DAG-parse time):
``history`` and ``family`` load on first use. Every public name is importable from here, as it was
when the gate was one module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.decisions.gate.judging import (
    Baseline,
    SeriesSpec,
    asset_extra,
    evaluate,
    judge,
    judge_gate,
    judge_history,
    judge_metric,
    measure,
    replay_gate,
    replay_gate_night,
    replay_history,
    report_metrics,
    summary_metric,
)
from airflow_provider_loadtest.decisions.gate.rows import (
    BUDGET,
    NOISE,
    NOT_MEASURED,
    PASS,
    REGRESSION,
    STATUSES,
    SUSPECTED,
    GateRow,
    Unreadable,
    change_pct,
    format_number,
)
from airflow_provider_loadtest.decisions.gate.rules import (
    BASELINE_XCOM_KEY,
    HISTORY,
    METRIC_DIRECTIONS,
    PREVIOUS,
    Budget,
    Direction,
    GateSpec,
    check_metric_id,
    load_history,
    parse_baseline,
    parse_budgets,
    parse_regression,
)
from airflow_provider_loadtest.decisions.gate.verdict import Verdict

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.history import (
        GateHistory,
        HistorySettings,
        HistoryUnreadable,
        SeriesHistory,
    )

    DEFAULT_HISTORY: HistorySettings

__all__ = [  # noqa: RUF022 - grouped by meaning, not sorted
    "PREVIOUS",
    "HISTORY",
    "BASELINE_XCOM_KEY",
    "DEFAULT_HISTORY",
    "PASS",
    "NOISE",
    "SUSPECTED",
    "REGRESSION",
    "BUDGET",
    "NOT_MEASURED",
    "STATUSES",
    "Direction",
    "METRIC_DIRECTIONS",
    "check_metric_id",
    "Budget",
    "parse_budgets",
    "parse_regression",
    "parse_baseline",
    "GateSpec",
    "report_metrics",
    "summary_metric",
    "measure",
    "Unreadable",
    "Baseline",
    "GateRow",
    "change_pct",
    "format_number",
    "judge_metric",
    "judge",
    "judge_history",
    "replay_history",
    "SeriesSpec",
    "judge_gate",
    "replay_gate",
    "replay_gate_night",
    "Verdict",
    "evaluate",
    "asset_extra",
    "GateHistory",
    "HistorySettings",
    "SeriesHistory",
    "HistoryUnreadable",
]

#: Names of ``history.py`` offered here without loading it for every gate.
_FROM_HISTORY = ("GateHistory", "HistorySettings", "SeriesHistory", "HistoryUnreadable")


def __getattr__(name: str) -> Any:
    """``DEFAULT_HISTORY`` (``baseline="history"`` settings when the task gives none) and the history
    classes, loaded on first use (PEP 562)."""
    if name == "DEFAULT_HISTORY":
        return load_history().HistorySettings()
    if name in _FROM_HISTORY:
        return getattr(load_history(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
