"""Documents about a running or finished test: state, progress, live metrics, alarms (beyond-the-spec)."""

from __future__ import annotations

import math
from typing import Any

from .base import ApiAdapter, ApiModel, Number
from .enums import AlarmSeverity, BenchResultState, Open

__all__ = [
    "BenchResult",
    "GlobalMetric",
    "GlobalMetrics",
    "Progress",
    "ThresholdAlarm",
    "ThresholdAlarmListAdapter",
]


class BenchResult(ApiModel):
    """A test run, ``GET /runtime/bench-results/{id}`` (beyond-the-spec "Watch a run")."""

    id: str | None = None
    batch_id: str | None = None
    scenario_id: str | None = None
    design_project_id: str | None = None
    result_project_id: str | None = None
    state: Open[BenchResultState] | None = None

    @property
    def is_terminal(self) -> bool:
        """FINISHED, ABORTED or ERROR; an unknown or missing state is not terminal."""
        return BenchResultState.is_terminal_value(self.state)


class Progress(ApiModel):
    """Progress of a run, ``GET /runtime/bench-results/progress/{id}`` (beyond-the-spec).

    ``value`` is a percentage, 0 to 100, often with decimals (``{"value": 0.5}`` is half a percent):
    both official clients print it as ``%.2f%%`` as it comes. (An older guess read a float up to 1.0
    as a fraction; the official clients show it is not.)
    """

    value: Number | None = None

    @property
    def percent(self) -> float | None:
        """Progress in percent, clamped to [0, 100]; None when the value is missing or not finite."""
        value = self.value
        if value is None or isinstance(value, bool) or not math.isfinite(value):
            return None
        return min(max(float(value), 0.0), 100.0)


class GlobalMetric(ApiModel):
    """One live figure of a run (hits, errors, average elapsed, throughput; beyond-the-spec)."""

    name: str | None = None
    # A number in practice; a string is tolerated (and kept) rather than failing the whole answer.
    value: Number | str | None = None
    unit: str | None = None


class GlobalMetrics(ApiModel):
    """``GET /analysis/metrics/global/{id}``: ``{"metrics": [...]}`` (beyond-the-spec)."""

    metrics: list[GlobalMetric] | None = None

    def by_name(self) -> dict[str, GlobalMetric]:
        """Metrics keyed by name (unnamed ones are skipped; a repeated name keeps the first)."""
        result: dict[str, GlobalMetric] = {}
        for metric in self.metrics or []:
            if metric.name is not None and metric.name not in result:
                result[metric.name] = metric
        return result


class ThresholdAlarm(ApiModel):
    """One alarm answered by ``POST /analysis/threshold-alarms`` (beyond-the-spec "Pass or fail").

    Only ``id`` and ``severity`` are published; the other fields are optional guesses, extras are kept.
    """

    id: str | None = None
    severity: Open[AlarmSeverity] | None = None
    name: str | None = None
    message: str | None = None
    metric: Any = None  # shape unpublished (a metric id or object): kept as received
    value: Number | str | None = None

    @property
    def severity_rank(self) -> int | None:
        """Gravity of ``severity`` (PASSED 0, WARNING 1, CRITICAL 2); None when missing or unknown."""
        return AlarmSeverity.rank_of(self.severity)


#: Parses the answer of ``POST /analysis/threshold-alarms`` (a JSON list of alarms).
ThresholdAlarmListAdapter: ApiAdapter[list[ThresholdAlarm]] = ApiAdapter(list[ThresholdAlarm])
