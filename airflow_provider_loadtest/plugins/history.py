"""A gated task's history: its nights (task runs), their verdicts, and one series per gated metric.

Plain data (no Airflow, no database): ``store`` reads the nights, ``charts`` draws the series, the
templates show both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from functools import lru_cache
from urllib.parse import quote

from airflow_provider_loadtest.plugins.rows import Row, RunResult, Status

#: Task instance states in which the task has not ended yet (it may still return a verdict).
_NOT_ENDED = frozenset(
    {"running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting"}
)


class Verdict(Enum):
    """One night's verdict, as the table shows it."""

    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    SUSPECTED = "suspected"
    FAIL = "fail"
    RUN_FAILED = "run failed"
    NO_GATE = "no gate"
    RUNNING = "running"
    NO_VERDICT = "no verdict"


@dataclass(frozen=True)
class Night:
    """One run of a gated task (one DAG run, one map index) and what it left in XCom."""

    run_id: str
    map_index: int
    run_after: datetime
    logical_date: datetime | None
    ti_state: str | None
    result: RunResult

    @property
    def at(self) -> datetime:
        """When the night is: its logical date (the night it stands for), else when it ran."""
        return self.logical_date or self.run_after

    @property
    def day(self) -> str:
        return self.at.strftime("%Y-%m-%d")

    @property
    def failing(self) -> list[Row]:
        return [row for row in self.result.rows if row.kind.failed]

    @property
    def verdict(self) -> Verdict:
        result = self.result
        if not result.has_result:
            return Verdict.RUNNING if self.ti_state in _NOT_ENDED else Verdict.NO_VERDICT
        if self.failing:
            return Verdict.FAIL
        if self.ti_state == "failed":
            return Verdict.RUN_FAILED
        if any(row.kind is Status.SUSPECTED for row in result.rows):
            return Verdict.SUSPECTED
        return Verdict.PASS if result.rows else Verdict.NO_GATE

    @property
    def accepted(self) -> list[Row]:
        return [row for row in self.result.rows if row.accepted]


@dataclass(frozen=True)
class SeriesKey:
    """Which chart: a metric of all requests (``transaction`` None) or of one transaction."""

    metric: str
    transaction: str | None = None


@dataclass(frozen=True)
class Series:
    """One gated metric over the nights, oldest first (``rows[i]`` is None when night i has no row)."""

    key: SeriesKey
    nights: tuple[Night, ...]
    rows: tuple[Row | None, ...]


@dataclass(frozen=True)
class TaskHistory:
    """A gated task's nights, newest first, and its series (one per gated metric and transaction)."""

    dag_id: str
    task_id: str
    nights: tuple[Night, ...]
    #: How many nights exist in all (``nights`` may hold only the newest ones).
    total: int
    series: tuple[Series, ...] = field(default=())

    @property
    def metrics(self) -> list[str]:
        """The metrics of all requests, for the table's columns."""
        return [s.key.metric for s in self.series if s.key.transaction is None]

    @property
    def transactions(self) -> list[str]:
        return list(dict.fromkeys(s.key.transaction for s in self.series if s.key.transaction))

    def series_of(self, transaction: str | None) -> list[Series]:
        return [s for s in self.series if s.key.transaction == transaction]


def build(dag_id: str, task_id: str, nights: Sequence[Night], total: int | None = None) -> TaskHistory:
    """The history of ``nights`` (in any order): series in the order the newest nights list them."""
    newest_first = tuple(sorted(nights, key=lambda n: (n.at, n.map_index), reverse=True))
    oldest_first = newest_first[::-1]
    keys: dict[SeriesKey, None] = {}
    for night in newest_first:
        for row in night.result.rows:
            keys.setdefault(SeriesKey(row.metric, row.transaction))
    ordered = sorted(keys, key=lambda k: k.transaction is not None)  # all requests first, stable
    series = []
    for key in ordered:
        rows = tuple(_row_of(night.result.rows, key) for night in oldest_first)
        series.append(Series(key, oldest_first, rows))
    return TaskHistory(
        dag_id=dag_id,
        task_id=task_id,
        nights=newest_first,
        total=len(nights) if total is None else total,
        series=tuple(series),
    )


def _row_of(rows: Iterable[Row], key: SeriesKey) -> Row | None:
    return next((r for r in rows if r.metric == key.metric and r.transaction == key.transaction), None)


# --- links into Airflow's UI ---------------------------------------------------------------------


def _segment(value: str) -> str:
    return quote(value, safe="")


def dag_url(base: str, dag_id: str) -> str:
    return f"{base}/dags/{_segment(dag_id)}"


def run_url(base: str, dag_id: str, run_id: str) -> str:
    return f"{dag_url(base, dag_id)}/runs/{_segment(run_id)}"


def task_url(base: str, dag_id: str, task_id: str) -> str:
    return f"{dag_url(base, dag_id)}/tasks/{_segment(task_id)}"


@lru_cache(maxsize=4096)  # a night is linked from each of its charts and from the table
def task_instance_url(base: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    url = f"{run_url(base, dag_id, run_id)}/tasks/{_segment(task_id)}"
    return url if map_index < 0 else f"{url}/mapped/{map_index}"
