"""Every gate at a glance (``/loadtest/``): one line per gated task of the DAGs the user may read, its
last night's verdict, the failing series named, a trend of its headline metric and of its night effect.

Its cost is bounded by what it shows, not by what XCom holds:

- a few queries find the gated tasks and their newest nights: the newest ``SCANNED_RUNS`` DAG runs of
  each readable DAG (``newest_runs``: through ``dag_run``'s index on DAG and logical date), then only
  those runs' run records, whether each left a result, and the task instances' states, by the XCom
  table's primary key (never every XCom of the deployment: a year of 500 gated tasks is 438,000 rows
  there, and no value is read);
- the nights' results are decoded through the view's decoded-results cache (``decoded.RESULTS``, the
  tab's too): the newest night of every task (to sort them), the other nights only for the lines of
  the page asked for (``PAGE_LINES`` a page);
- every text is clipped (``bounds``), the page is streamed under a ``bounds.PageBudget``.

A task gated less often than its DAG runs shows the nights it has among its DAG's newest
``SCANNED_RUNS`` runs (and one not gated in any of them is found on its DAG's own tab).

Plain data for the template (``templates/overview.html.j2``); the access checks are the auth manager's
(``readable``), made before anything of a DAG is shown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlencode

from markupsafe import Markup, escape

from airflow_provider_loadtest.plugins.bounds import NAME_CHARS, clip
from airflow_provider_loadtest.plugins.charts import in_range, line_path, number, unit_of
from airflow_provider_loadtest.plugins.history import Night, Verdict, _segment, dag_url, newest_night
from airflow_provider_loadtest.plugins.rows import RunResult

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

#: Nights drawn per task (the trends), and the DAG runs of each DAG read to find them.
NIGHTS = 14
SCANNED_RUNS = NIGHTS
#: Lines on one page (``?page=`` for the next ones): each line's nights are decoded when it is shown
#: (a cold page of 200 lines of 500 gates took 330 ms of CPU, of 100 lines the 300 ms budget holds).
PAGE_LINES = 100
#: Failing series named per line (the others counted).
FAILING_NAMED = 3
#: Tags and owners offered as filters (the others are reached by ``?tag=`` / ``?owner=``).
FILTERS_LISTED = 40
#: The longest filter value a link carries (a tag is at most 100 characters in Airflow).
FILTER_CHARS = 200
#: A verdict's rank: failing first, then suspected, then those without a verdict, passing last.
RANK = {
    Verdict.FAIL: 0,
    Verdict.RUN_FAILED: 0,
    Verdict.SUSPECTED: 1,
    Verdict.RUNNING: 2,
    Verdict.NO_VERDICT: 2,
    Verdict.NO_GATE: 2,
    Verdict.PASS: 3,
}
CSS = {0: "fail", 1: "suspected", 2: "neutral", 3: "pass"}
SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 120, 28, 3


# --- who may read what ---------------------------------------------------------------------------------


def readable(manager: Any, user: Any, session: Session) -> set[str]:
    """The DAGs ``user`` may read (the auth manager's own list, as Airflow's list endpoints filter)."""
    return set(manager.get_authorized_dag_ids(user=user, method="GET", session=session))


def may_read_load_tests(manager: Any, user: Any, dag_ids: Iterable[str], session: Session) -> set[str]:
    """Of ``dag_ids``, those whose task instances and XCom ``user`` may read: the DAG tab's own checks
    (``app._access_dependencies``), asked per DAG as its route asks them."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    wanted = sorted(set(dag_ids))
    teams_of = getattr(DagModel, "get_dag_id_to_team_name_mapping", None)  # Airflow 3.2+: one query
    team_of = getattr(DagModel, "get_team_name", None)  # 3.1: per DAG, as its requires_access_dag asks
    teams: dict[str, str | None] = {}
    if teams_of and wanted:
        teams = dict(teams_of(wanted, session=session))
    elif team_of:
        teams = {dag_id: team_of(dag_id, session=session) for dag_id in wanted}
    return {
        dag_id
        for dag_id in wanted
        if all(
            manager.is_authorized_dag(
                method="GET",
                access_entity=entity,
                details=DagDetails(id=dag_id, team_name=teams.get(dag_id)),
                user=user,
            )
            for entity in (DagAccessEntity.TASK_INSTANCE, DagAccessEntity.XCOM)
        )
    }


# --- reading -------------------------------------------------------------------------------------------


class Found(NamedTuple):
    """One night of one gated task as the query finds it (no value read yet): a tuple, thousands of
    them are made per view."""

    dag_id: str
    task_id: str
    dag_run_id: int
    run_id: str
    map_index: int
    run_after: datetime
    logical_date: datetime | None
    ti_state: str | None
    #: None when the task left no ``return_value`` (yet); else its XCom row's timestamp, which tells a
    #: value apart from any rewrite of it (a new try, or ``XComModel.set`` in the same try): the cache's
    #: key, the same as the tab's (``store.nights``), so both share what they decoded.
    stamp: Any

    @property
    def at(self) -> datetime:
        return self.logical_date or self.run_after

    @property
    def key(self) -> tuple[int, str, int, Any]:
        """The decoded cache's key: the XCom row and its timestamp (``stamp``)."""
        return (self.dag_run_id, self.task_id, self.map_index, self.stamp)


#: Gated tasks whose newest results are decoded at once to sort the overview (only their ranks are kept).
RANK_BATCH = 50

#: DAG runs per query reading their XCom (bound parameters stay far below every database's limit).
RUNS_PER_QUERY = 900


#: DAGs per query reading their newest runs.
DAGS_PER_QUERY = 300


def newest_runs(session: Session, dag_ids: set[str], runs: int) -> list[Any]:
    """The newest ``runs`` DAG runs of each of ``dag_ids`` (id, DAG, run id, run after, logical date),
    ranked as the tab orders nights (``coalesce(logical_date, run_after)``, newest first).

    Two queries, both served by ``dag_run``'s unique index on (DAG, logical date): each DAG's
    ``runs``-th newest logical date (a correlated subquery: one short walk of the index per DAG), then
    per DAG the runs from that date on, and those without a logical date that ran since. They hold the
    newest ``runs`` by ``coalesce`` (a run older than that date has ``runs`` newer ones), kept here. A DAG
    with fewer dated runs (manual and asset-triggered runs have none) is asked its newest ``runs`` by
    ``coalesce`` in a query of its own, never all its runs. No
    window over every run of every DAG (a year of 100 DAGs is 36,500 runs: 0.1 s on SQLite)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from sqlalchemy import and_, func, or_, select
    from sqlalchemy.orm import aliased

    from airflow_provider_loadtest.plugins.bounds import RUN_ID_CHARS

    if not dag_ids:
        return []
    older = aliased(DagRun)
    since = (
        select(older.logical_date)
        .where(older.dag_id == DagModel.dag_id, older.logical_date.is_not(None))
        .order_by(older.logical_date.desc())
        .limit(1)
        .offset(runs - 1)
        .scalar_subquery()
    )
    wanted = sorted(dag_ids)
    dates = list(session.execute(select(DagModel.dag_id, since).where(DagModel.dag_id.in_(wanted))))
    by_dag: dict[str, list[Any]] = {}
    # Run ids as the tab reads them: at most one character past Airflow's length (then clipped).
    run_id = func.substr(DagRun.run_id, 1, RUN_ID_CHARS + 1).label("run_id")
    columns = (DagRun.id, DagRun.dag_id, run_id, DagRun.run_after, DagRun.logical_date)
    for start in range(0, len(dates), DAGS_PER_QUERY):
        chunk = dates[start : start + DAGS_PER_QUERY]
        every = [dag_id for dag_id, date in chunk if date is None]  # fewer dated runs than asked
        newer = [
            and_(
                DagRun.dag_id == dag_id,
                or_(
                    DagRun.logical_date >= date, and_(DagRun.logical_date.is_(None), DagRun.run_after >= date)
                ),
            )
            for dag_id, date in chunk
            if date is not None
        ]
        if newer:
            for run in session.execute(select(*columns).where(or_(*newer))):
                by_dag.setdefault(run.dag_id, []).append(run)
        for dag_id in every:  # few dated runs (manual or asset-triggered runs have none): its newest only
            newest_first = func.coalesce(DagRun.logical_date, DagRun.run_after).desc()
            query = select(*columns).where(DagRun.dag_id == dag_id).order_by(newest_first, DagRun.id.desc())
            by_dag[dag_id] = list(session.execute(query.limit(runs)))
    newest: list[Any] = []
    for found in by_dag.values():
        found.sort(key=lambda r: (r.logical_date or r.run_after, r.id), reverse=True)
        newest.extend(found[:runs])
    return newest


def gated_nights(session: Session, dag_ids: set[str], runs: int = SCANNED_RUNS) -> list[Found]:
    """Every night of a gated task in the newest ``runs`` DAG runs of each of ``dag_ids``: the runs in
    one query (``newest_runs``), then their run records, whether each left a result, and its task
    instance's state and try, in one query per ``RUNS_PER_QUERY`` runs. Of the XCom table only its
    primary key's columns are read (no row, no value)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from sqlalchemy import func, select
    from sqlalchemy.orm import aliased

    from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY
    from airflow_provider_loadtest.plugins.bounds import RUN_ID_CHARS
    from airflow_provider_loadtest.plugins.store import _run_id, key_is, with_night

    dag_runs = {run.id: run for run in newest_runs(session, dag_ids, runs)}
    ids = sorted(dag_runs)
    started, result = aliased(XComModel), aliased(XComModel)
    found: list[Found] = []
    for start in range(0, len(ids), RUNS_PER_QUERY):
        columns = select(
            started.dag_run_id, started.task_id, started.map_index, TaskInstance.state, result.timestamp
        )
        query = with_night(columns, started, result).where(
            started.dag_run_id.in_(ids[start : start + RUNS_PER_QUERY]),
            key_is(started.key, RUN_RECORD_KEY),
            func.length(started.task_id) <= RUN_ID_CHARS,  # as the tab: no id Airflow cannot have
        )
        for dag_run_id, task_id, map_index, state, stamp in session.execute(query):
            run = dag_runs[dag_run_id]
            found.append(
                Found(
                    run.dag_id,
                    task_id,
                    dag_run_id,
                    _run_id(run.run_id),
                    map_index,
                    run.run_after,
                    run.logical_date,
                    None if state is None else str(getattr(state, "value", state)),
                    stamp,
                )
            )
    return found


def dag_facts(session: Session, dag_ids: set[str]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each DAG's tags and owners (Airflow's ``dag.owners`` is a comma-separated text)."""
    from airflow.models.dag import DagModel, DagTag
    from sqlalchemy import select

    if not dag_ids:
        return {}
    wanted = sorted(dag_ids)
    tags: dict[str, list[str]] = {d: [] for d in wanted}
    for dag_id, name in session.execute(select(DagTag.dag_id, DagTag.name).where(DagTag.dag_id.in_(wanted))):
        tags[dag_id].append(name)
    query = select(DagModel.dag_id, DagModel.owners).where(DagModel.dag_id.in_(wanted))
    owners: dict[str, str | None] = {dag_id: text for dag_id, text in session.execute(query)}
    return {
        d: (
            tuple(sorted(tags[d])),
            tuple(sorted({o.strip() for o in (owners.get(d) or "").split(",") if o.strip()})),
        )
        for d in wanted
    }


def results(session: Session, keys: Sequence[Hashable]) -> dict[Hashable, RunResult]:
    """The results of ``keys`` (``Found.key``), through the decoded-results cache: those it lacks are
    read in a few queries (by DAG run, the XCom table's primary key) and decoded as the tab decodes
    them (``store._result``)."""
    from airflow_provider_loadtest.plugins.decoded import RESULTS

    return RESULTS.get_many(keys, lambda missing: _decode(session, missing))


def _decode(session: Session, keys: list[Any]) -> dict[Any, RunResult]:
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    from airflow_provider_loadtest.plugins.store import RESULT_KEY, _result, _text, key_is

    wanted = {(run, task, index): key for key in keys for run, task, index, _ in [key]}
    runs = sorted({run for run, *_ in keys})
    tasks = sorted({task for _, task, *_ in keys})
    decoded: dict[Any, RunResult] = {}
    for start in range(0, len(runs), RUNS_PER_QUERY):
        query = select(
            XComModel.dag_run_id, XComModel.task_id, XComModel.map_index, _text(XComModel.value)
        ).where(
            XComModel.dag_run_id.in_(runs[start : start + RUNS_PER_QUERY]),
            XComModel.task_id.in_(tasks),
            key_is(XComModel.key, RESULT_KEY),
        )
        for run, task, index, value in session.execute(query):
            key = wanted.get((run, task, index))
            if key is not None:
                decoded[key] = _result(value, None)
    return decoded


# --- the model -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spark:
    """A small trend: a line through the nights (oldest first), its last point, its range said."""

    path: str
    last: tuple[float, float] | None
    #: Points of failing nights (drawn as marks).
    failing: tuple[tuple[float, float], ...]
    title: str
    width: int = SPARK_WIDTH
    height: int = SPARK_HEIGHT

    def markup(self, kind: str) -> Markup:
        """The trend as inline SVG (written here, not by a template macro: 400 of them a page). Only the
        title comes from XCom (a metric's name), escaped; the rest is the view's own numbers."""
        marks = "".join(
            f'<circle class="shape regression" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in self.failing
        )
        if self.last is not None:
            marks += f'<circle class="shape last" cx="{self.last[0]:.1f}" cy="{self.last[1]:.1f}" r="2"/>'
        title = escape(self.title)
        return Markup(  # noqa: S704 - the title is escaped, the rest is numbers
            f'<svg class="spark {kind}" viewBox="0 0 {self.width} {self.height}" width="{self.width}" '
            f'height="{self.height}" role="img" aria-label="{title}"><title>{title}</title>'
            f'<path class="value" d="{self.path}"/>{marks}</svg>'
        )


def sparkline(values: Sequence[float | None], failing: Sequence[bool], label: str, unit: str) -> Spark | None:
    """``values`` (oldest first; None: no value that night) as a sparkline; None when none is drawable."""
    shown = [v if v is not None and in_range(v) else None for v in values]
    drawn = [v for v in shown if v is not None]
    if not drawn:
        return None
    low, high = min(drawn), max(drawn)
    span = high - low if high > low else (abs(high) or 1.0)
    count = len(shown)
    step = (SPARK_WIDTH - 2 * SPARK_PAD) / max(count - 1, 1)
    xs = [SPARK_PAD + i * step if count > 1 else SPARK_WIDTH / 2 for i in range(count)]

    def y(value: float) -> float:
        level = (value - low) / span if high > low else 0.5
        return SPARK_HEIGHT - SPARK_PAD - level * (SPARK_HEIGHT - 2 * SPARK_PAD)

    ys = [None if v is None else y(v) for v in shown]
    points = [(x, yy) for x, yy in zip(xs, ys, strict=True) if yy is not None]
    marks = tuple((x, yy) for x, yy, bad in zip(xs, ys, failing, strict=True) if bad and yy is not None)
    suffix = f" {unit}" if unit else ""
    title = (
        f"{label}: {len(drawn)} nights, {number(low)} to {number(high)}{suffix}, "
        f"last {number(drawn[-1]) if shown[-1] is not None else '-'}{suffix}"
    )
    return Spark(line_path(xs, ys), points[-1] if points else None, marks, title)


@dataclass(frozen=True)
class Line:
    """One gated task on the overview."""

    dag_id: str
    task_id: str
    scenario: str
    verdict: str
    verdict_class: str
    rank: int
    day: str
    failing: tuple[str, ...]
    headline: str
    trend: Spark | None
    effect: Spark | None
    dag_href: str
    task_href: str
    nights: int


def _failing_names(night: Night) -> tuple[str, ...]:
    """The failing series of a night named (``FAILING_NAMED``; the others counted), each clipped; a
    failed night effect first (a regression of the whole run)."""
    result = night.result
    effect = result.night_effect
    names = ["night effect"] if effect is not None and not effect.passed else []
    indexes = result.failing_entries
    listed = indexes[: max(FAILING_NAMED - len(names), 0)]
    for i in listed:
        row = result.row(i)
        where = f" ({clip(row.transaction, NAME_CHARS)})" if row.transaction else ""
        names.append(clip(row.metric, NAME_CHARS) + where)
    more = len(indexes) - len(listed) + result.left_out_failing
    if more > 0:
        names.append(f"and {more:,} more")
    return tuple(names)


def headline_metric(nights: Sequence[Night]) -> str | None:
    """The first gated series of all requests of the newest night that has one (the run's p95 for the
    release gate): the metric its trend draws."""
    for night in nights:
        for metric, transaction in night.result.by_series:
            if transaction is None:
                return metric
    return None


def line(dag_id: str, task_id: str, nights: Sequence[Night], base: str) -> Line:
    """A task's line from its nights (newest first; the newest run's worst night speaks for it)."""
    latest = newest_night(nights) or nights[0]
    verdict = latest.verdict
    rank = RANK[verdict]
    oldest_first = list(reversed(nights))
    metric = headline_metric(nights)
    trend = effect = None
    headline = ""
    if metric is not None:
        rows = [n.result.row_of(metric, None) for n in oldest_first]
        unit = unit_of(metric)
        trend = sparkline(
            [None if r is None else r.value for r in rows],
            [r is not None and r.kind.failed for r in rows],
            clip(metric, NAME_CHARS),
            unit,
        )
        newest = rows[-1]
        if newest is not None and newest.value is not None and math.isfinite(newest.value):
            headline = f"{clip(metric, NAME_CHARS)} {number(newest.value)}{' ' + unit if unit else ''}"
    effects = [n.result.night_effect for n in oldest_first]
    if any(e is not None for e in effects):
        effect = sparkline(
            [None if e is None else e.shift_sd for e in effects],
            [e is not None and not e.passed for e in effects],
            "night effect",
            "sd",
        )
    scenario = next((s for n in nights if (s := n.result.scenario_id or n.result.test_name)), "")
    dag_tab = f"{dag_url(base, dag_id)}/plugin/{_route('DAG_ROUTE')}"
    task_tab = f"{dag_url(base, dag_id)}/tasks/{_segment(task_id)}/plugin/{_route('TASK_ROUTE')}"
    return Line(
        dag_id=dag_id,
        task_id=task_id,
        scenario=clip(scenario, NAME_CHARS),
        verdict=verdict.value,
        verdict_class=CSS[rank],
        rank=rank,
        day=latest.day,
        failing=_failing_names(latest),
        headline=headline,
        trend=trend,
        effect=effect,
        dag_href=dag_tab,
        task_href=task_tab,
        nights=len(nights),
    )


def _route(name: str) -> str:
    from airflow_provider_loadtest import plugins

    return str(getattr(plugins, name))


@dataclass(frozen=True)
class Filter:
    """A filter link: its label, where it leads, whether it is the one applied."""

    label: str
    href: str
    active: bool


@dataclass(frozen=True)
class Overview:
    lines: tuple[Line, ...]
    #: Lines matching the filters in all (``lines`` is one page of them).
    total: int
    page: int
    pages: int
    first: int
    tags: tuple[Filter, ...]
    owners: tuple[Filter, ...]
    tag: str | None
    owner: str | None
    clear_href: str
    previous_href: str
    next_href: str
    #: Gated tasks the user may read in all (before the filters).
    gated: int


def _href(root: str, **params: str | int | None) -> str:
    """A link to this page with ``params`` (none of them empty, and no ``page=1``)."""
    kept = {k: v for k, v in params.items() if v is not None and v != "" and not (k == "page" and v == 1)}
    return f"{root}?{urlencode(kept)}" if kept else root


def build(
    found: Sequence[Found],
    facts: dict[str, tuple[tuple[str, ...], tuple[str, ...]]],
    decode: Callable[[Sequence[Hashable]], dict[Hashable, RunResult]],
    *,
    base: str,
    root: str,
    tag: str | None = None,
    owner: str | None = None,
    page: int = 1,
    nights: int = NIGHTS,
    per_page: int = PAGE_LINES,
) -> Overview:
    """The overview of ``found`` (the readable DAGs' gated nights): each task's newest ``nights`` nights,
    its line, sorted failing first (then suspected, then without a verdict, then passing; by DAG and
    task within each), filtered by ``tag`` and ``owner``, one page of ``per_page`` lines. ``decode``
    gives the results of keys (``results``); only the newest night of every task and the nights of the
    page's lines are asked for."""
    by_task: dict[tuple[str, str], list[Found]] = {}
    for f in found:
        by_task.setdefault((f.dag_id, f.task_id), []).append(f)
    for task_nights in by_task.values():
        task_nights.sort(key=lambda f: (f.at, -f.map_index), reverse=True)
        del task_nights[nights:]

    def keep(dag_id: str) -> bool:
        tags, owners = facts.get(dag_id, ((), ()))
        return (tag is None or tag in tags) and (owner is None or owner in owners)

    tasks = {k: v for k, v in by_task.items() if keep(k[0])}

    def as_night(f: Found, got: dict[Hashable, RunResult]) -> Night:
        result = got.get(f.key) if f.stamp is not None else None
        return Night(f.run_id, f.map_index, f.run_after, f.logical_date, f.ti_state, result or _NO_RESULT)

    # To sort, each task's newest run (all its map indexes) speaks by its worst night: decoded a batch
    # at a time and only its rank kept, so a view holds at most a batch of results beside the cache and
    # the page's lines, however many gated tasks it sorts.
    ranks: dict[tuple[str, str], int] = {}
    newest_run = [(k, [f for f in v if f.dag_run_id == v[0].dag_run_id]) for k, v in tasks.items()]
    for start in range(0, len(newest_run), RANK_BATCH):
        batch = newest_run[start : start + RANK_BATCH]
        got = decode([f.key for _, fs in batch for f in fs if f.stamp is not None])
        for k, fs in batch:
            speaks = newest_night([as_night(f, got) for f in fs])
            ranks[k] = RANK[speaks.verdict] if speaks else RANK[Verdict.NO_VERDICT]
        del got
    order = sorted(tasks, key=lambda k: (ranks[k], k))
    pages = max(1, math.ceil(len(order) / per_page))
    page = min(max(page, 1), pages)
    shown = order[(page - 1) * per_page : page * per_page]
    got = decode([f.key for k in shown for f in tasks[k] if f.stamp is not None])
    lines = tuple(line(k[0], k[1], [as_night(f, got) for f in tasks[k]], base) for k in shown)
    all_tags = sorted({t for d, _ in by_task for t in facts.get(d, ((), ()))[0]})
    all_owners = sorted({o for d, _ in by_task for o in facts.get(d, ((), ()))[1]})
    return Overview(
        lines=lines,
        total=len(order),
        page=page,
        pages=pages,
        first=(page - 1) * per_page + 1 if shown else 0,
        tags=_filters(root, "tag", all_tags, tag, owner=owner),
        owners=_filters(root, "owner", all_owners, owner, tag=tag),
        tag=None if tag is None else clip(tag, NAME_CHARS),
        owner=None if owner is None else clip(owner, NAME_CHARS),
        clear_href=root,
        previous_href=_href(root, tag=tag, owner=owner, page=page - 1) if page > 1 else "",
        next_href=_href(root, tag=tag, owner=owner, page=page + 1) if page < pages else "",
        gated=len(by_task),
    )


def _filters(
    root: str, name: str, values: list[str], active: str | None, **other: str | None
) -> tuple[Filter, ...]:
    listed = values[:FILTERS_LISTED]
    if active is not None and active not in listed and active in values:
        listed.append(active)
    return tuple(
        Filter(clip(v, NAME_CHARS), _href(root, **other, **{name: v}), v == active)
        for v in listed
        if len(v) <= FILTER_CHARS
    )


_NO_RESULT = RunResult.from_xcom(None)
