"""What the page shows of a task's history: its charts and the table of its nights, ready to render.

Plain data (the template only lays it out): every link built here, every value formatted here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlencode

from airflow_provider_loadtest.plugins.bounds import (
    COLUMNS,
    FAILING_LISTED,
    LINKED_NAME_CHARS,
    NAME_CHARS,
    NAMES_LISTED,
    ROWS_PER_NIGHT,
    SERIES_DRAWN,
    TEXT_CHARS,
    PageBudget,
    clip,
)
from airflow_provider_loadtest.plugins.charts import Chart, chart, movement, number, percent, unit_of
from airflow_provider_loadtest.plugins.compare import (
    ANCHOR,
    Comparison,
    comparable,
    compare,
    compare_href,
    night_key,
)
from airflow_provider_loadtest.plugins.history import (
    Night,
    Series,
    TaskHistory,
    Verdict,
    flagged,
    newest_night,
    run_url,
    task_instance_url,
    task_url,
    view_task_url,
)
from airflow_provider_loadtest.plugins.night_effect import effect_chart, effect_series, effect_text
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


#: How a DAG without a gate gets charts, in one line (a unit test checks each keyword against the
#: operator's signature, so the example cannot drift from the operator).
GATE_EXAMPLE = (
    'RunScenarioOperator(task_id="load_test", scenario_id="...", '
    'metric_budgets={"RESPONSE_TIME_PERCENTILE_95": "<= 800"}, baseline="history")'
)


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
    #: The night effect's line ("" without one) and its status (a CSS class: "regression" failed).
    night_effect: str = ""
    night_effect_status: str = ""
    #: On a task's page: this night's part in the comparison ("night", "reference" or ""), and the links
    #: that set it beside the reference, or as the reference (none for a night without gate rows).
    compared: str = ""
    as_night: str = ""
    as_reference: str = ""


@dataclass(frozen=True)
class ChartGroup:
    """The charts of all requests (``transaction`` None) or of one transaction, built as the page is
    rendered (``charts``): one chart at a time, none once the page is full or the viewer left."""

    transaction: str | None
    series: tuple[Series, ...]
    base: str
    dag_id: str
    task_id: str
    #: The night effect's group: its one series drawn as the night effect (``night_effect.effect_chart``).
    night_effect: bool = False
    #: Whether a series of the group fails or is suspected on the newest night (its charts open).
    flagged: bool = False

    @property
    def label(self) -> str:
        return "" if self.transaction is None else clip(self.transaction, NAME_CHARS)

    def charts(self, budget: PageBudget) -> Iterator[Chart]:
        draw = effect_chart if self.night_effect else chart
        for one in self.series:
            if budget.full:
                return
            yield draw(one, self.base, self.dag_id, self.task_id)


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
    #: What the page left out, in sentences (series not drawn, columns, rows past a night's bound).
    omitted: tuple[str, ...] = ()
    #: Transactions whose series are not drawn here, each linked to a page that draws them.
    more: tuple[tuple[str, str], ...] = ()
    #: The transaction this page draws the charts of (None: the task's own choice).
    transaction: str | None = None
    #: Every series' shared movement per night (None: no night has one, or the page is one transaction's).
    night_effect: ChartGroup | None = None
    #: Two nights side by side (a task's page: ``compare.compare``); on a DAG's tab, None.
    comparison: Comparison | None = None
    #: The task page's comparison (linked from a DAG's tab).
    compare_page: str = ""

    def table(self, budget: PageBudget) -> Iterator[TableRow]:
        """The table's rows while the page has room (the page says when it had to stop)."""
        for row in self.rows:
            if budget.full:
                return
            yield row


def _failing(row: Row) -> str:
    where = f" ({clip(row.transaction, NAME_CHARS)})" if row.transaction else ""
    return f"{clip(row.metric, NAME_CHARS)}{where}: {clip(row.reason or row.kind.label, TEXT_CHARS)}"


def _failing_lines(night: Night) -> tuple[str, ...]:
    result = night.result
    failing = result.failing_entries
    lines = [_failing(result.row(i)) for i in failing[:FAILING_LISTED]]
    more = len(failing) - len(lines) + result.left_out_failing
    if more:
        lines.append(f"and {more:,} more failing row(s)")
    return tuple(lines)


def _accepted(rows: list[Row]) -> str:
    if not rows:
        return ""
    names = ", ".join(
        f"{clip(r.metric, NAME_CHARS)} ({clip(r.transaction, NAME_CHARS)})"
        if r.transaction
        else clip(r.metric, NAME_CHARS)
        for r in rows[:FAILING_LISTED]
    )
    return clip(f"{names}: {rows[0].accepted}", TEXT_CHARS)


def _cell(row: Row | None) -> Cell:
    if row is None:
        return Cell("-", "", "none", "not gated on this night")
    change = percent(row.change_pct) if row.change_pct is not None else ""
    unit = unit_of(row.metric)
    value = f"{number(row.value)}{(' ' + unit) if unit else ''}"
    title = f"{clip(row.metric, NAME_CHARS)}: {value} ({row.kind.label})"
    if moved := movement(row):
        title += f"; {moved}"
    if row.reason:
        title += f": {clip(row.reason, TEXT_CHARS)}"
    return Cell(number(row.value), change, row.kind.value, title)


def _omitted(history: TaskHistory, columns: list[str], base: str) -> tuple[list[str], list[tuple[str, str]]]:
    """What the page leaves out of ``history``, said in sentences, and the transactions to link."""
    said: list[str] = []
    left_out = history.left_out
    if left_out:
        said.append(
            f"{len(left_out):,} of {len(history.keys):,} series are not drawn here (a page draws at most "
            f"{SERIES_DRAWN}); each transaction below opens its own charts."
        )
    if len(history.metrics) > len(columns):
        said.append(
            f"The table shows {len(columns)} of the {len(history.metrics):,} metrics of all requests."
        )
    rows_left = sum(n.result.left_out for n in history.nights)
    if rows_left:
        crowded = sum(1 for n in history.nights if n.result.left_out)
        said.append(
            f"{crowded:,} night(s) have more than {ROWS_PER_NIGHT:,} gate rows: the {rows_left:,} rows past "
            "them are not read (their failures are counted in each night's verdict)."
        )
    names = list(dict.fromkeys(k.transaction for k in left_out if k.transaction is not None))
    page = view_task_url(base, history.dag_id, history.task_id)
    links = [
        (
            clip(n, NAME_CHARS),
            f"{page}?{urlencode({'transaction': n})}" if len(n) <= LINKED_NAME_CHARS else "",
        )
        for n in names[:NAMES_LISTED]
    ]
    if len(names) > NAMES_LISTED:
        said.append(f"{len(names) - NAMES_LISTED:,} more transactions are not named here.")
    return said, links


def _picking(comparison: Comparison, night: Night) -> dict[str, str]:
    """A table row's part in the comparison and its links to change it (``TableRow.compared``...): links
    relative to the task's page itself (only a query: 365 nights write 730 of them)."""
    key = night_key(night)
    if key == comparison.night_key:
        return {"compared": "night"}
    if key == comparison.reference_key:
        return {"compared": "reference"}
    if not comparable(night):
        return {}
    # Without a comparison (the picks were not nights) each link picks one night, the other by default.
    night_pick, reference_pick = comparison.night_key or None, comparison.reference_key or None
    return {
        "as_night": compare_href("", key, reference_pick),
        "as_reference": compare_href("", night_pick, key),
    }


def task_view(
    history: TaskHistory, base: str, picks: tuple[str | None, str | None] | None = None
) -> TaskView:
    """The view of one task's history; ``base``: Airflow's path prefix for links into its UI; ``picks``:
    on a task's page, the two nights to compare (``?compare=`` and ``?with=``, None: the defaults). Linear
    in the nights and the series drawn; the charts themselves are built as the page is rendered."""
    dag_id, task_id = history.dag_id, history.task_id
    transactions = list(dict.fromkeys(s.key.transaction for s in history.series))
    marked = flagged(history.nights)
    groups = [
        ChartGroup(tx, group, base, dag_id, task_id, flagged=any(s.key in marked for s in group))
        for tx in sorted(transactions, key=lambda tx: tx is not None)
        if (group := tuple(history.series_of(tx)))
    ]
    page = view_task_url(base, dag_id, task_id)
    comparison = None if picks is None else compare(history, *picks)
    metrics = history.metrics[:COLUMNS]
    rows = []
    for night in history.nights:
        result = night.result
        verdict = night.verdict
        effect = result.night_effect
        rows.append(
            TableRow(
                night=night,
                run_href=run_url(base, dag_id, night.run_id),
                ti_href=task_instance_url(base, dag_id, night.run_id, task_id, night.map_index),
                verdict=verdict.value,
                verdict_class=_VERDICT_CLASS[verdict],
                failing=_failing_lines(night),
                accepted=_accepted(night.accepted),
                cells=tuple(_cell(result.row_of(m, None)) for m in metrics),
                report_url=result.report_url,
                report_label=clip(result.bench_result_id or "report", NAME_CHARS),
                night_effect="" if effect is None else effect_text(effect),
                night_effect_status="" if effect is None else effect.status,
                **({} if comparison is None else _picking(comparison, night)),
            )
        )
    latest = newest_night(history.nights)
    omitted, more = _omitted(history, metrics, base)
    effects = effect_series(history.nights) if history.transaction is None else None
    return TaskView(
        dag_id=dag_id,
        task_id=task_id,
        total=history.total,
        shown=len(history.nights),
        groups=tuple(groups),
        headers=tuple((clip(short_label(m), NAME_CHARS), clip(m, NAME_CHARS)) for m in metrics),
        rows=tuple(rows),
        task_page=task_url(base, dag_id, task_id),
        latest_verdict=latest.verdict.value if latest else "",
        latest_class=_VERDICT_CLASS[latest.verdict] if latest else "neutral",
        omitted=tuple(omitted),
        more=tuple(more),
        transaction=history.transaction,
        night_effect=None if effects is None else ChartGroup(None, (effects,), base, dag_id, task_id, True),
        comparison=comparison,
        compare_page=f"{page}#{ANCHOR}",
    )
