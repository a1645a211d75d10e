"""A throwaway SQLite database with Airflow's own tables, and nights of gated tasks written into it as
the operator leaves them (or as a direct database write can): for the view's tests that read XCom for
real (plans, run ids, deep values, connections held)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

START = datetime(2026, 1, 1, 2, tzinfo=UTC)
TASK = "run_load_test"


def gate(rows: int = 3, **changes: Any) -> list[dict[str, Any]]:
    base = {"metric": "RESPONSE_TIME_PERCENTILE_95", "value": 468.0, "passed": True, "status": "pass"}
    return [{**base, "transaction": f"T{i}" if i else "", **changes} for i in range(rows)]


def result(night: int, rows: int = 3, **changes: Any) -> str:
    """A ``return_value`` as stored: its JSON text."""
    return json.dumps({"bench_result_id": f"br-{night}", "state": "FINISHED", "gate": gate(rows, **changes)})


def engine_at(path: Path) -> Engine:
    """A file database (SQLAlchemy pools its connections: ``QueuePool``) with Airflow's tables."""
    from airflow.models import import_all_models
    from airflow.models.base import Base

    import_all_models()
    engine = create_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    return engine


def seed(
    engine: Engine,
    dag_id: str,
    tasks: list[str],
    nights: int,
    value: Callable[[str, int], str | None] = lambda task, night: result(night),
    run_id: Callable[[int], str] = lambda night: f"scheduled__{night:04d}",
) -> None:
    """``nights`` DAG runs of ``dag_id``, each with a run record and ``value(task, night)`` (None: no
    result yet) for every task of ``tasks``, written as the Task Execution API stores them."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    runs = []
    for night in range(nights):
        at = START + timedelta(days=night)
        runs.append(
            {
                "dag_id": dag_id,
                "run_id": run_id(night),
                "logical_date": at,
                "run_after": at,
                "run_type": "scheduled",
                "state": "success",
            }
        )
    with Session(engine) as session, session.begin():
        session.execute(DagRun.__table__.insert(), runs)
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id).where(DagRun.dag_id == dag_id)).all())
        tis, xcoms, raw = [], [], []
        for night in range(nights):
            rid = run_id(night)
            for task in tasks:
                tis.append(
                    {
                        "dag_id": dag_id,
                        "task_id": task,
                        "run_id": rid,
                        "map_index": -1,
                        "state": "success",
                        "try_number": 1,
                        "pool": "default_pool",
                        "pool_slots": 1,
                    }
                )
                stored = {"loadtest_run": json.dumps({"bench_result_id": f"br-{night}"})}
                made = value(task, night)
                if made is not None:
                    stored["return_value"] = made
                for key, text in stored.items():
                    if not _plain(text):
                        raw.append((text, ids[rid], task, key))
                    xcoms.append(
                        {
                            "dag_run_id": ids[rid],
                            "task_id": task,
                            "map_index": -1,
                            "key": key,
                            "dag_id": dag_id,
                            "run_id": rid,
                            "value": json.loads(text) if _plain(text) else None,
                            "timestamp": START,
                        }
                    )
        session.execute(TaskInstance.__table__.insert(), tis)
        session.execute(XComModel.__table__.insert(), xcoms)
        for text, run, task, key in raw:  # as a direct database write stores it: its text, unchecked
            session.connection().exec_driver_sql(
                "UPDATE xcom SET value = ? WHERE dag_run_id = ? AND task_id = ? AND key = ?",
                (text, run, task, key),
            )


def _plain(text: str) -> bool:
    """Whether ``text`` can go through the JSON column (a value nested 1,000 deep cannot: it is
    written as its text, as a direct database write would)."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


class Checkouts:
    """The pool's connections checked out now and at most, from the pool's own events."""

    def __init__(self, engine: Engine) -> None:
        self.now = self.most = 0
        event.listen(engine, "checkout", self._out)
        event.listen(engine, "checkin", self._in)

    def _out(self, *_: Any) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def _in(self, *_: Any) -> None:
        self.now -= 1


@contextmanager
def session_on(engine: Engine) -> Iterator[Session]:
    """What ``app.reading`` gives, on ``engine``: a short session, committed and closed after."""
    session = Session(engine)
    try:
        yield session
        session.commit()
    finally:
        session.close()
