"""Reading the gated tasks' nights from Airflow's own database (XCom, task instances, DAG runs), in
the API server's session: no store of ours, nothing written.

A gated task is one that left a run record (XCom ``loadtest_run``, pushed by ``RunScenarioOperator``
as soon as its run starts), so the view finds every task that started a load test, whatever the
operator's class name, and a night whose task has not returned yet still shows. The verdict is the
task's ``return_value``.

Values are read as the API server's own XCom endpoint reads them: the raw JSON in the table, never
through a custom XCom backend (a backend that stores values elsewhere leaves a reference here, which
the view skips as "no verdict").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from sqlalchemy import Text, and_, func, select, type_coerce
from sqlalchemy.orm import aliased

from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY
from airflow_provider_loadtest.plugins.decoded import RESULTS
from airflow_provider_loadtest.plugins.history import Night
from airflow_provider_loadtest.plugins.rows import RunResult

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

RESULT_KEY = "return_value"


def _value(raw: Any) -> Any:
    """An XCom value as stored: a JSON string (``XComModel.serialize_value``) or JSON already decoded
    by the column type (values set through the Task Execution API)."""
    if isinstance(raw, str | bytes):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def gated_task_ids(session: Session, dag_id: str) -> list[str]:
    """The tasks of ``dag_id`` that ever started a load test, by task id."""
    query = (
        select(XComModel.task_id)
        .where(XComModel.dag_id == dag_id, XComModel.key == RUN_RECORD_KEY)
        .distinct()
        .order_by(XComModel.task_id)
    )
    return list(session.scalars(query))


def count_nights(session: Session, dag_id: str, task_id: str) -> int:
    query = select(func.count()).where(
        XComModel.dag_id == dag_id, XComModel.task_id == task_id, XComModel.key == RUN_RECORD_KEY
    )
    return int(session.scalar(query) or 0)


def nights(session: Session, dag_id: str, task_id: str, limit: int) -> list[Night]:
    """The newest ``limit`` nights of a task (one per DAG run and map index), newest first.

    Results already decoded by this process are not read again (``decoded.RESULTS``: keyed by their XCom
    row and its timestamp); the others are read in one query, as stored. The run record is read only for
    nights without a result (a result repeats what the record holds)."""
    started = aliased(XComModel)
    result = aliased(XComModel)
    query = (
        select(
            started.dag_run_id,
            started.run_id,
            started.map_index,
            result.timestamp,
            DagRun.run_after,
            DagRun.logical_date,
            TaskInstance.state,
        )
        .join(DagRun, DagRun.id == started.dag_run_id)
        .outerjoin(
            result,
            and_(
                result.dag_run_id == started.dag_run_id,
                result.task_id == started.task_id,
                result.map_index == started.map_index,
                result.key == RESULT_KEY,
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
        .where(started.dag_id == dag_id, started.task_id == task_id, started.key == RUN_RECORD_KEY)
        .order_by(func.coalesce(DagRun.logical_date, DagRun.run_after).desc(), started.map_index)
        .limit(limit)
    )
    found = list(session.execute(query))
    keys = {(run, task_id, index, stamp) for run, _, index, stamp, *_ in found if stamp is not None}
    results = RESULTS.get_many(keys, lambda missing: _results(session, missing))
    records = _records(
        session, task_id, [(run, index) for run, _, index, stamp, *_ in found if stamp is None]
    )
    return [
        Night(
            run_id=run_id,
            map_index=map_index,
            run_after=run_after,
            logical_date=logical_date,
            ti_state=None if state is None else str(getattr(state, "value", state)),
            result=results.get((run, task_id, map_index, stamp))
            or RunResult.from_xcom(None, records.get((run, map_index))),
        )
        for run, run_id, map_index, stamp, run_after, logical_date, state in found
    ]


def _results(session: Session, keys: list[Any]) -> dict[Any, RunResult]:
    """The results of ``keys`` (DAG run row id, task id, map index, timestamp), decoded from the values
    as stored: not by the column's JSON type, ``RunResult.from_json`` decodes only what the view reads."""
    if not keys:
        return {}
    task_id = keys[0][1]
    query = select(
        XComModel.dag_run_id, XComModel.map_index, XComModel.timestamp, type_coerce(XComModel.value, Text)
    ).where(
        XComModel.dag_run_id.in_({run for run, *_ in keys}),
        XComModel.task_id == task_id,
        XComModel.key == RESULT_KEY,
    )
    wanted = set(keys)
    decoded = {}
    for run, index, stamp, value in session.execute(query):
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


def _records(session: Session, task_id: str, keys: list[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """The run records of the nights ``keys`` (DAG run row id, map index) that have no result yet."""
    if not keys:
        return {}
    query = select(XComModel.dag_run_id, XComModel.map_index, XComModel.value).where(
        XComModel.dag_run_id.in_({run for run, _ in keys}),
        XComModel.task_id == task_id,
        XComModel.key == RUN_RECORD_KEY,
    )
    return {(run, index): _value(value) for run, index, value in session.execute(query)}
