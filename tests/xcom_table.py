"""Airflow's XCom table and task instances, faked as Airflow 3.1-3.3 query them, for the gate's memory.

The gate's history is read through the Task SDK: ``ti.xcom_pull`` (one value, or without a map index
every map index through the execution API's sequence slice) and ``ti.get_task_states``. What matters,
and is reproduced here from ``airflow.models.xcom.XComModel.get_many`` and the execution API's routes:

* ``include_prior_dates=True`` keeps the XComs of DAG runs whose ``coalesce(logical_date, run_after)``
  is not after the pulling run's, and orders them by ``logical_date DESC`` then the XCom's timestamp: a
  run without a logical date sorts **first** on PostgreSQL (NULLS FIRST in descending order) and **last**
  on SQLite and MySQL. A single-value pull answers the first row, so the dialect changes the answer;
* a pull without ``map_indexes`` answers every map index (a single value when only one matched,
  ``None`` when none did);
* a try clears its own task instance's XComs when it starts (``clear_try``);
* ``get_task_states`` answers ``{run_id: {task_id or task_id_mapindex: state}}`` for every DAG run.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

_NOTSET = object()


@dataclass
class Run:
    run_id: str
    logical_date: datetime | None
    run_after: datetime
    conf: dict[str, Any] = field(default_factory=dict)

    @property
    def date(self) -> datetime:
        return self.logical_date or self.run_after


@dataclass
class XComTable:
    """One DAG's XComs and task states. ``dialect``: ``"postgresql"`` or ``"sqlite"`` (NULL ordering)."""

    dag_id: str = "loadtest_dag"
    dialect: str = "postgresql"
    runs: dict[str, Run] = field(default_factory=dict)
    rows: dict[tuple[str, str, int, str], tuple[int, Any]] = field(default_factory=dict)
    states: dict[tuple[str, str, int], str] = field(default_factory=dict)
    _stamp: itertools.count = field(default_factory=itertools.count)

    def add_run(self, run_id: str, logical_date: datetime | None, run_after: datetime, **conf: Any) -> Run:
        run = Run(run_id, logical_date, run_after, dict(conf))
        self.runs[run_id] = run
        return run

    def ti(self, run_id: str, task_id: str = "run", map_index: int = -1) -> FakeTI:
        return FakeTI(self, run_id, task_id, map_index)

    # --- what the execution API answers ----------------------------------------------------------

    def _ordered(self, run_id: str, task_id: str, key: str, include_prior_dates: bool) -> list[tuple]:
        here = self.runs[run_id]
        found = []
        for (r, t, m, k), (stamp, value) in self.rows.items():
            if t != task_id or k != key:
                continue
            if include_prior_dates:
                if self.runs[r].date > here.date:
                    continue
            elif r != run_id:
                continue
            found.append((self.runs[r], m, stamp, value))

        def order(row: tuple) -> tuple:
            run, _m, stamp, _v = row
            null = run.logical_date is None
            # DESC: newest first; NULLs first on PostgreSQL, last on SQLite/MySQL.
            null_rank = (0 if null else 1) if self.dialect == "postgresql" else (1 if null else 0)
            stamp_key = -(run.logical_date.timestamp() if run.logical_date else 0.0)
            return (null_rank, stamp_key, -stamp)

        return sorted(found, key=order)


class FakeTI:
    """A task instance as the Task SDK's ``RuntimeTaskInstance`` reads and writes XCom."""

    def __init__(self, table: XComTable, run_id: str, task_id: str, map_index: int) -> None:
        self.table, self.run_id, self.task_id, self.map_index = table, run_id, task_id, map_index
        self.dag_id = table.dag_id
        self.try_number, self.max_tries, self.start_date = 1, 0, None

    def context(self, **extra: Any) -> dict[str, Any]:
        run = self.table.runs[self.run_id]
        dag_run = SimpleNamespace(
            dag_id=self.dag_id,
            run_id=self.run_id,
            run_type="manual" if run.logical_date is None else "scheduled",
            clear_number=0,
            conf=dict(run.conf),
            logical_date=run.logical_date,
        )
        return {
            "ti": self,
            "task_instance": self,
            "dag_run": dag_run,
            "run_id": self.run_id,
            "params": {},
            **extra,
        }

    def clear_try(self) -> None:
        """A new try starts: Airflow deletes this task instance's XComs."""
        for key in [k for k in self.table.rows if k[:3] == (self.run_id, self.task_id, self.map_index)]:
            del self.table.rows[key]

    def set_state(self, state: str) -> None:
        self.table.states[(self.run_id, self.task_id, self.map_index)] = state

    def xcom_push(self, key: str, value: Any) -> None:
        copy = json.loads(json.dumps(value))
        self.table.rows[(self.run_id, self.task_id, self.map_index, key)] = (next(self.table._stamp), copy)

    def xcom_pull(
        self,
        task_ids: str | None = None,
        dag_id: str | None = None,
        key: str = "return_value",
        include_prior_dates: bool = False,
        *,
        map_indexes: Any = _NOTSET,
        default: Any = None,
        run_id: str | None = None,
    ) -> Any:
        task_id = task_ids or self.task_id
        rows = self.table._ordered(run_id or self.run_id, task_id, key, include_prior_dates)
        if map_indexes is _NOTSET:  # every map index: the execution API's slice, by map index
            values = [json.loads(json.dumps(v)) for _r, _m, _s, v in sorted(rows, key=lambda row: row[1])]
            if not values:
                return None
            return values[0] if len(values) == 1 else values
        wanted = -1 if map_indexes is None else map_indexes
        for _run, m, _stamp, value in rows:
            if m == wanted:
                return json.loads(json.dumps(value))
        return default

    def get_task_states(self, dag_id: str, task_ids: list[str] | None = None, **_: Any) -> dict[str, Any]:
        answer: dict[str, dict[str, str]] = {}
        for (r, t, m), state in self.table.states.items():
            if task_ids and t not in task_ids:
                continue
            answer.setdefault(r, {})[t if m < 0 else f"{t}_{m}"] = state
        return answer


def nightly(table: XComTable, start: datetime, nights: int, *, prefix: str = "scheduled") -> list[str]:
    """Scheduled DAG runs one a day (logical date = run_after, Airflow 3's cron timetables)."""
    ids = []
    for i in range(nights):
        when = start + timedelta(days=i)
        run_id = f"{prefix}__{when.isoformat()}"
        table.add_run(run_id, when, when)
        ids.append(run_id)
    return ids
