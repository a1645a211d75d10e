"""What the page shows of a task's history: its charts and the table of its nights, ready to render.

Plain data (the template only lays it out): every link built here, every value formatted here.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_loadtest.plugins.charts import Chart, charts, number, unit_of
from airflow_provider_loadtest.plugins.history import (
    Night,
    TaskHistory,
    Verdict,
    run_url,
    task_instance_url,
    task_url,
)
from airflow_provider_loadtest.plugins.rows import Row

_VERDICT_CLASS = {
    Verdict.PASS: "pass",
    Verdict.SUSPECTED: "suspected",
    Verdict.FAIL: "fail",
    Verdict.RUN_FAILED: "fail",
    Verdict.NO_GATE: "neutral",
    Verdict.RUNNING: "neutral",
    Verdict.NO_VERDICT: "neutral",
}


def short_label(metric: str) -> str:
    """A column header for a metric id (the id itself is the header's tooltip)."""
    label = metric.replace("RESPONSE_TIME_PERCENTILE_", "RT p").replace("RESPONSE_TIME_", "RT ")
    label = label.replace("_PERCENT", " %").replace("_", " ")
    return label.lower().replace("rt ", "RT ", 1) if label.startswith("RT") else label.capitalize()


@dataclass(frozen=True)
class Cell:
    """One metric's value on one night, for the table."""

    text: str
    change: str
    status: str
    title: str


@dataclass(frozen=True)
class TableRow:
    night: Night
    run_href: str
    ti_href: str
    verdict: str
    verdict_class: str
    failing: tuple[str, ...]
    #: The gate's note on the metrics whose change a person accepted this night ("" if none).
    accepted: str
    cells: tuple[Cell, ...]
    report_url: str | None
    report_label: str


@dataclass(frozen=True)
class ChartGroup:
    """The charts of all requests (``transaction`` None) or of one transaction."""

    transaction: str | None
    charts: tuple[Chart, ...]


@dataclass(frozen=True)
class TaskView:
    dag_id: str
    task_id: str
    total: int
    shown: int
    groups: tuple[ChartGroup, ...]
    headers: tuple[tuple[str, str], ...]  # (label, metric id)
    rows: tuple[TableRow, ...]
    task_page: str
    latest_verdict: str
    latest_class: str


def _failing(row: Row) -> str:
    where = f" ({row.transaction})" if row.transaction else ""
    return f"{row.metric}{where}: {row.reason or row.kind.label}"


def _accepted(rows: list[Row]) -> str:
    if not rows:
        return ""
    names = ", ".join(f"{r.metric} ({r.transaction})" if r.transaction else r.metric for r in rows)
    return f"{names}: {rows[0].accepted}"


def _cell(row: Row | None) -> Cell:
    if row is None:
        return Cell("-", "", "none", "not gated on this night")
    change = f"{row.change_pct:+.1f} %" if row.change_pct is not None else ""
    unit = unit_of(row.metric)
    title = f"{row.metric}: {number(row.value)}{(' ' + unit) if unit else ''} ({row.kind.label})"
    if row.reason:
        title += f": {row.reason}"
    return Cell(number(row.value), change, row.kind.value, title)


def task_view(history: TaskHistory, base: str) -> TaskView:
    """The view of one task's history; ``base``: Airflow's path prefix for links into its UI."""
    dag_id, task_id = history.dag_id, history.task_id
    groups = [ChartGroup(None, tuple(charts(history.series_of(None), base, dag_id, task_id)))]
    groups += [
        ChartGroup(tx, tuple(charts(history.series_of(tx), base, dag_id, task_id)))
        for tx in history.transactions
    ]
    metrics = history.metrics
    rows = []
    for night in history.nights:
        by_metric = {r.metric: r for r in night.result.rows if r.transaction is None}
        verdict = night.verdict
        result = night.result
        rows.append(
            TableRow(
                night=night,
                run_href=run_url(base, dag_id, night.run_id),
                ti_href=task_instance_url(base, dag_id, night.run_id, task_id, night.map_index),
                verdict=verdict.value,
                verdict_class=_VERDICT_CLASS[verdict],
                failing=tuple(_failing(row) for row in night.failing),
                accepted=_accepted(night.accepted),
                cells=tuple(_cell(by_metric.get(m)) for m in metrics),
                report_url=result.report_url,
                report_label=result.bench_result_id or "report",
            )
        )
    latest = rows[0] if rows else None
    return TaskView(
        dag_id=dag_id,
        task_id=task_id,
        total=history.total,
        shown=len(history.nights),
        groups=tuple(g for g in groups if g.charts),
        headers=tuple((short_label(m), m) for m in metrics),
        rows=tuple(rows),
        task_page=task_url(base, dag_id, task_id),
        latest_verdict=latest.verdict if latest else "",
        latest_class=latest.verdict_class if latest else "neutral",
    )
