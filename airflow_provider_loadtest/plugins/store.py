"""Reading the gated tasks' nights from Airflow's own database (XCom, task instances, DAG runs), in
the API server's session: no store of ours, nothing written.

A gated task is one that left a run record (XCom ``loadtest_run``, pushed by ``RunScenarioOperator``
as soon as its run starts), so the view finds every task that started a load test, whatever the
operator's class name, and a night whose task has not returned yet still shows. The verdict is the
task's ``return_value``.

Values are read as the API server's own XCom endpoint reads them: the raw JSON in the table, never
through a custom XCom backend (a backend that stores values elsewhere leaves a reference here, which
the view skips as "no verdict"). They are read as text (``CAST(value AS TEXT)``: on PostgreSQL the
driver would decode JSONB itself, with no depth limit) and decoded here, clipped and depth-limited
(``rows.RunResult.from_json``, ``rows.loads``).

Each query reads only what a page shows (issue 35): the gated tasks and their counts in one grouped
query; a task's newest nights through ``idx_xcom_task_instance`` (DAG and task id) and the primary
keys of the tables it joins; their values by DAG, task and run ids (``_of_task``: an ``IN`` list on the
run ids alone let SQLite's planner pick ``idx_xcom_key`` and read every ``return_value`` of the
deployment). Run ids are read clipped by the database (``RUN_ID_CHARS``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from sqlalchemy import Text, and_, cast, func, select
from sqlalchemy.orm import aliased

from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY
from airflow_provider_loadtest.plugins.bounds import RUN_ID_CHARS, clip
from airflow_provider_loadtest.plugins.decoded import RESULTS
from airflow_provider_loadtest.plugins.history import Night
from airflow_provider_loadtest.plugins.rows import RunResult, loads

if TYPE_CHECKING:
    from sqlalchemy.orm import Session
    from sqlalchemy.sql import ColumnElement, Select

RESULT_KEY = "return_value"
#: DAG runs looked up in one statement (one bound value each: SQLite allows 32,766).
KEYS_PER_QUERY = 1000
#: Values fetched from the database at a time, each decoded (and its texts clipped) before the next are
#: fetched: 20 nights of a 75 MB value are never all in memory at once (before: 2 GB of peak RSS).
VALUES_AT_ONCE = 2


def _value(raw: Any) -> Any:
    """An XCom value as read (``CAST(value AS TEXT)``: its JSON text), decoded by ``rows.loads``
    (depth-limited: None when unreadable); a value some driver decoded already is taken as it is."""
    return loads(raw) if isinstance(raw, str | bytes) else raw


def _text(column: Any) -> Any:
    """``column``'s JSON as text, for our own decoder (not the driver's: PostgreSQL's JSONB)."""
    return cast(column, Text)


def tasks_query(dag_id: str) -> Select[str, int]:
    """The tasks of ``dag_id`` that ever started a load test and how many nights each has: one query
    for every task of the DAG tab (not one per task). A task id longer than Airflow allows (only a
    direct database write stores one) is not a task this view shows."""
    return (
        select(XComModel.task_id, func.count())
        .where(
            XComModel.dag_id == dag_id,
            key_is(XComModel.key, RUN_RECORD_KEY),
            func.length(XComModel.task_id) <= RUN_ID_CHARS,
        )
        .group_by(XComModel.task_id)
        .order_by(XComModel.task_id)
    )


def gated_tasks(session: Session, dag_id: str) -> dict[str, int]:
    """The tasks of ``dag_id`` that ever started a load test, by task id, with their nights' count."""
    return {task_id: int(count) for task_id, count in session.execute(tasks_query(dag_id))}


def gated_task_ids(session: Session, dag_id: str) -> list[str]:
    """The tasks of ``dag_id`` that ever started a load test, by task id."""
    return list(gated_tasks(session, dag_id))


def count_nights(session: Session, dag_id: str, task_id: str) -> int:
    query = select(func.count()).where(
        XComModel.dag_id == dag_id, XComModel.task_id == task_id, key_is(XComModel.key, RUN_RECORD_KEY)
    )
    return int(session.scalar(query) or 0)


def _run_id(read: str) -> str:
    """A run id as read (``RUN_ID_CHARS`` + 1 characters at most): clipped when it was longer."""
    return clip(read, RUN_ID_CHARS)


def with_night(query: Any, started: Any, result: Any) -> Any:
    """``query`` over run records (``started``, an XCom alias) joined to their DAG run, and outer-joined
    to their ``return_value`` (``result``, another alias; None while the task goes) and task instance:
    what a night is, for the tab and the overview alike."""
    return (
        query.join(DagRun, DagRun.id == started.dag_run_id)
        .outerjoin(
            result,
            and_(
                result.dag_run_id == started.dag_run_id,
                result.task_id == started.task_id,
                result.map_index == started.map_index,
                key_is(result.key, RESULT_KEY),
            ),
        )
        .outerjoin(
            TaskInstance,
            and_(
                TaskInstance.dag_id == started.dag_id,
                TaskInstance.run_id == started.run_id,
                TaskInstance.task_id == started.task_id,
                TaskInstance.map_index == started.map_index,
            ),
        )
    )


def nights_query(dag_id: str, task_id: str, limit: int, offset: int = 0) -> Select[Any]:
    """A task's nights ``offset`` to ``offset + limit`` (newest first), without their values."""
    started = aliased(XComModel)
    result = aliased(XComModel)
    columns = select(
        started.dag_run_id,
        func.substr(started.run_id, 1, RUN_ID_CHARS + 1),
        started.map_index,
        result.timestamp,
        DagRun.run_after,
        DagRun.logical_date,
        TaskInstance.state,
    )
    query: Select[Any] = (
        with_night(columns, started, result)
        .where(started.dag_id == dag_id, started.task_id == task_id, key_is(started.key, RUN_RECORD_KEY))
        .order_by(func.coalesce(DagRun.logical_date, DagRun.run_after).desc(), started.map_index)
        .limit(limit)
        .offset(offset)
    )
    return query


def nights(session: Session, dag_id: str, task_id: str, limit: int, offset: int = 0) -> list[Night]:
    """The newest ``limit`` nights of a task (one per DAG run and map index), newest first, past the
    ``offset`` newest.

    Results already decoded by this process are not read again (``decoded.RESULTS``: keyed by their XCom
    row and its timestamp; concurrent misses decoded once); the others are read by primary key, as
    stored. The run record is read only for nights without a result (a result repeats what the record
    holds)."""
    found = list(session.execute(nights_query(dag_id, task_id, limit, offset)))
    keys = {(run, task_id, index, stamp) for run, _, index, stamp, *_ in found if stamp is not None}
    results = RESULTS.get_many(keys, lambda missing: _results(session, dag_id, missing))
    records = _records(
        session, dag_id, task_id, [(run, index) for run, _, index, stamp, *_ in found if stamp is None]
    )
    return [
        Night(
            run_id=_run_id(run_id),
            map_index=map_index,
            run_after=run_after,
            logical_date=logical_date,
            ti_state=None if state is None else str(getattr(state, "value", state)),
            result=results.get((run, task_id, map_index, stamp))
            or RunResult.from_xcom(None, records.get((run, map_index))),
        )
        for run, run_id, map_index, stamp, run_after, logical_date, state in found
    ]


def _batches(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), KEYS_PER_QUERY):
        yield items[start : start + KEYS_PER_QUERY]


def key_is(column: Any, key: str) -> ColumnElement[bool]:
    """``column == key``, compared as an expression (``key || ''``) that no index serves, so that the
    task's index (``idx_xcom_task_instance``) or the primary key leads. SQLite's planner has no
    statistics (Airflow never runs ``ANALYZE``) and, given an equality on the indexed ``key``, picked
    ``idx_xcom_key`` on one run in two: every run record (or every ``return_value``) of the deployment.
    PostgreSQL and MySQL, with statistics, would not pick it; the expression costs them nothing, as
    every query here narrows by DAG and task (or DAG run) first."""
    same: ColumnElement[bool] = column.concat("") == key
    return same


def _of_task(model: Any, key: str, dag_id: str, task_id: str, runs: Sequence[int]) -> ColumnElement[bool]:
    """XCom rows ``key`` of ``dag_id.task_id`` on the DAG runs ``runs`` (row ids): by the DAG and task id
    first, so the plan reads ``idx_xcom_task_instance`` (or the primary key): the task's own rows,
    never every ``key`` row of the deployment (an ``IN`` list on the run ids alone let SQLite's planner
    pick ``idx_xcom_key``). One ``IN`` list, not an ``OR`` per night: compiling 365 of those cost more
    than reading the values."""
    return and_(
        model.dag_id == dag_id, model.task_id == task_id, model.dag_run_id.in_(runs), key_is(model.key, key)
    )


def results_query(dag_id: str, task_id: str, runs: Sequence[int]) -> Select[Any]:
    """The ``return_value`` of ``dag_id.task_id`` on the DAG runs ``runs`` (row ids), as JSON text."""
    return (
        select(XComModel.dag_run_id, XComModel.map_index, XComModel.timestamp, _text(XComModel.value))
        .where(_of_task(XComModel, RESULT_KEY, dag_id, task_id, runs))
        .execution_options(yield_per=VALUES_AT_ONCE)
    )


def _results(session: Session, dag_id: str, keys: list[Any]) -> dict[Any, RunResult]:
    """The results of ``keys`` (DAG run row id, task id, map index, timestamp), decoded from the values
    as stored: not by the column's JSON type, ``RunResult.from_json`` decodes only what the view reads."""
    if not keys:
        return {}
    task_id = keys[0][1]
    wanted = set(keys)
    decoded = {}
    for batch in _batches(sorted({run for run, *_ in keys})):
        for run, index, stamp, value in session.execute(results_query(dag_id, task_id, batch)):
            key = (run, task_id, index, stamp)
            if key in wanted:
                decoded[key] = _result(value, None)
    return decoded


def _result(stored: Any, record: Any) -> RunResult:
    """A night's result from its stored value: JSON text (SQLite, MySQL), or a value the database
    driver decoded already (PostgreSQL's JSONB)."""
    if isinstance(stored, str | bytes):
        return RunResult.from_json(stored, record)
    return RunResult.from_xcom(_value(stored), record)


def dag_exists(session: Session, dag_id: str) -> bool:
    """Whether Airflow knows ``dag_id`` (a row in its ``dag`` table, as its own DAG endpoints ask)."""
    from airflow.models.dag import DagModel

    return session.scalar(select(DagModel.dag_id).where(DagModel.dag_id == dag_id)) is not None


def _records(
    session: Session, dag_id: str, task_id: str, keys: list[tuple[int, int]]
) -> dict[tuple[int, int], Any]:
    """The run records of the nights ``keys`` (DAG run row id, map index) that have no result yet."""
    found = {}
    wanted = set(keys)
    for batch in _batches(sorted({run for run, _ in keys})):
        query = (
            select(XComModel.dag_run_id, XComModel.map_index, _text(XComModel.value))
            .where(_of_task(XComModel, RUN_RECORD_KEY, dag_id, task_id, batch))
            .execution_options(yield_per=VALUES_AT_ONCE)
        )
        found.update(
            {(run, i): _value(value) for run, i, value in session.execute(query) if (run, i) in wanted}
        )
    return found
