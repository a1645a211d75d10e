"""A gated task's history: its nights (task runs), their verdicts, and one series per gated metric.

Plain data (no Airflow, no database): ``store`` reads the nights, ``charts`` draws the series, the
templates show both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from functools import cached_property, lru_cache
from urllib.parse import quote

from airflow_provider_loadtest.plugins.bounds import SERIES_DRAWN
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

    @cached_property  # a night is a point on each chart
    def stamp(self) -> float:
        """``at`` in epoch seconds, for the charts' x axis."""
        return self.at.timestamp()

    @cached_property  # a night is a point on each chart and a row of the table
    def day(self) -> str:
        return self.at.strftime("%Y-%m-%d")

    @property
    def failing(self) -> tuple[Row, ...]:
        """The failing rows read (``result.left_out_failing`` counts those past the rows read)."""
        return self.result.failing

    @property
    def verdict(self) -> Verdict:
        result = self.result
        if not result.has_result:
            return Verdict.RUNNING if self.ti_state in _NOT_ENDED else Verdict.NO_VERDICT
        effect = result.night_effect  # every series moved together: a regression of the whole run
        if result.failing_entries or result.left_out_failing or (effect is not None and not effect.passed):
            return Verdict.FAIL
        if self.ti_state == "failed":
            return Verdict.RUN_FAILED
        if result.suspected or (effect is not None and effect.status == "suspected"):
            return Verdict.SUSPECTED
        return Verdict.PASS if result.entries else Verdict.NO_GATE

    @property
    def accepted(self) -> list[Row]:
        """The rows whose change a person accepted (the gate's note says so: read only on those)."""
        return list(self.result.accepted)


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
    """A gated task's nights, newest first, and the series drawn (one per gated metric and transaction,
    at most ``bounds.SERIES_DRAWN``), with every series' key."""

    dag_id: str
    task_id: str
    nights: tuple[Night, ...]
    #: How many nights exist in all (``nights`` may hold only the newest ones).
    total: int
    series: tuple[Series, ...] = field(default=())
    #: Every series of these nights, the drawn ones first (all requests' first, then by transaction).
    keys: tuple[SeriesKey, ...] = field(default=())
    #: The transaction the series were chosen from (None: all of them).
    transaction: str | None = None

    @property
    def metrics(self) -> list[str]:
        """The metrics of all requests, for the table's columns."""
        return [k.metric for k in self.keys if k.transaction is None]

    @property
    def transactions(self) -> list[str]:
        return list(dict.fromkeys(k.transaction for k in self.keys if k.transaction is not None))

    @property
    def left_out(self) -> tuple[SeriesKey, ...]:
        """The series not drawn."""
        drawn = {s.key for s in self.series}
        return tuple(k for k in self.keys if k not in drawn)

    def series_of(self, transaction: str | None) -> list[Series]:
        return [s for s in self.series if s.key.transaction == transaction]


def build(
    dag_id: str,
    task_id: str,
    nights: Sequence[Night],
    total: int | None = None,
    *,
    drawn: int = SERIES_DRAWN,
    transaction: str | None = None,
) -> TaskHistory:
    """The history of ``nights`` (in any order): the first ``drawn`` series (those of ``transaction``
    only when given) in the order the newest nights list them: those failing or suspected on the newest
    night with a verdict first (``flagged``: a red badge above charts that all pass would send the
    reader hunting), then all requests', then the transactions'.

    Linear in the rows read: each night's rows are indexed once (``RunResult.by_series``), and only the
    drawn series are looked up night by night."""
    newest_first = tuple(sorted(nights, key=lambda n: (n.at, n.map_index), reverse=True))
    oldest_first = newest_first[::-1]
    seen: dict[tuple[str, str | None], None] = {}
    for night in newest_first:
        seen.update(dict.fromkeys(night.result.by_series))
    keys = [SeriesKey(metric, tx) for metric, tx in seen]
    marked = flagged(newest_first)
    keys.sort(key=lambda k: (k not in marked, k.transaction is not None))  # stable
    wanted = [k for k in keys if transaction is None or k.transaction == transaction]
    chosen = wanted[: max(drawn, 0)]
    series = tuple(
        Series(key, oldest_first, tuple(n.result.row_of(key.metric, key.transaction) for n in oldest_first))
        for key in chosen
    )
    others = set(wanted)
    return TaskHistory(
        dag_id=dag_id,
        task_id=task_id,
        nights=newest_first,
        total=len(nights) if total is None else total,
        series=series,
        keys=(*wanted, *(k for k in keys if k not in others)),
        transaction=transaction,
    )


def flagged(newest_first: Sequence[Night]) -> frozenset[SeriesKey]:
    """The series failing or suspected on the newest night that has a verdict (none without one)."""
    latest = next((n for n in newest_first if n.result.has_result), None)
    if latest is None:
        return frozenset()
    statuses = latest.result.statuses
    return frozenset(
        SeriesKey(metric, tx)
        for (metric, tx), index in latest.result.by_series.items()  # each series' entry, as ``row_of``'s
        if statuses[index].failed or statuses[index] is Status.SUSPECTED
    )


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


def view_task_url(base: str, dag_id: str, task_id: str) -> str:
    """A task's tab in this view (``plugins.URL_PREFIX``), as opened inside the tab's frame."""
    from airflow_provider_loadtest.plugins import URL_PREFIX

    return f"{base}{URL_PREFIX}/dags/{_segment(dag_id)}/tasks/{_segment(task_id)}"


#: Verdicts from the worst: what a night of several task instances (a mapped task) says as a whole.
WORST_FIRST = (
    Verdict.FAIL,
    Verdict.RUN_FAILED,
    Verdict.SUSPECTED,
    Verdict.RUNNING,
    Verdict.NO_VERDICT,
    Verdict.PASS,
    Verdict.NO_GATE,
)
_SEVERITY = {verdict: rank for rank, verdict in enumerate(WORST_FIRST)}


def newest_night(nights: Sequence[Night]) -> Night | None:
    """The night that speaks for the newest DAG run of ``nights`` (newest first): of its task instances
    (the map indexes of a mapped task), the one with the worst verdict, so that one failing instance
    makes the night fail on the overview and on the tab alike, whichever map index it is."""
    if not nights:
        return None
    newest = [n for n in nights if n.run_id == nights[0].run_id]
    return min(newest, key=lambda n: _SEVERITY[n.verdict])
