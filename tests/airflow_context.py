"""What Airflow 3 hands a running task, faked once for every test that runs a task outside Airflow.

The unit tests' contexts (``tests/unit/test_run_lifecycle._context``) and the chaos runner
(``tests/chaos/runner.py``) both build theirs here, so neither can drift from Airflow on its own: the
package reads ``ti.try_number``, ``ti.max_tries``, ``dag_run.clear_number`` and ``dag_run.conf``, and the
task state store, and a context without them leaves the branches that use them dead in every test
(a plain retry's ``clear_number`` is what tells it from a clear of the DAG run).
``tests/integration/test_airflow_context.py`` compares the names given here with what a real
``airflow dags test`` task receives.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from unittest import mock

DAG_ID = "loadtest_dag"
TASK_ID = "run"
RUN_ID = "manual__2026-11-23T13:00:00+00:00"

#: The context keys given here, each one Airflow's own name for it (``RuntimeTaskInstance.
#: get_template_context`` in the Task SDK). ``task_state_store`` only where the test gives a store.
CONTEXT_KEYS = ("ti", "task_instance", "dag_run", "run_id", "params", "task_state_store")
#: The ``dag_run`` attributes given here (the Task SDK's ``DagRun`` model of the execution API).
DAG_RUN_FIELDS = ("dag_id", "run_id", "run_type", "clear_number", "conf", "logical_date")
#: The ``ti`` attributes given here (``RuntimeTaskInstance``), besides ``xcom_push``/``xcom_pull``.
TI_FIELDS = ("dag_id", "task_id", "run_id", "map_index", "try_number", "max_tries", "start_date")
#: The task state store's methods used or given here (``TaskStateStoreAccessor``).
STORE_METHODS = ("get", "set", "delete", "clear")


class StoreDown(RuntimeError):
    """The API server did not answer a task state store call (what the Task SDK raises is of this kind:
    an ``AirflowRuntimeError`` or a connection error, never a value)."""


class TaskStateStore:
    """Airflow 3.3's task state store of one task instance, shared by all its tries and clears.

    As the Task SDK's ``TaskStateStoreAccessor``: ``get(key, default)``, ``set(key, value, *, retention)``
    refusing ``None``, ``delete``, ``clear``; a value goes through JSON (what is read back is a copy).
    ``data`` holds what is stored, for tests to look at or seed. ``fail_get`` makes every read raise;
    ``fail_sets`` lists which writes (1 = the first) raise; ``fail_every_set`` makes every write raise.
    """

    def __init__(
        self,
        data: dict[str, Any] | None = None,
        *,
        fail_get: bool = False,
        fail_sets: tuple[int, ...] = (),
        fail_every_set: bool = False,
    ) -> None:
        self.data: dict[str, Any] = {key: _json_copy(value) for key, value in (data or {}).items()}
        self.fail_get = fail_get
        self.fail_sets = fail_sets
        self.fail_every_set = fail_every_set
        self.sets = 0
        self._lock = threading.Lock()

    def get(self, key: str, default: Any = None) -> Any:
        if self.fail_get:
            raise StoreDown("state store: API server answered 503")
        with self._lock:
            value = self.data.get(key)
        return default if value is None else _json_copy(value)

    def set(self, key: str, value: Any, *, retention: Any = None) -> None:
        if value is None:
            raise ValueError("Cannot set value as None")
        with self._lock:
            self.sets += 1
            failing = self.fail_every_set or self.sets in self.fail_sets
        if failing:
            raise StoreDown("state store: API server answered 503")
        copy = _json_copy(value)  # must be JSON-safe, and later changes to `value` are not stored
        with self._lock:
            self.data[key] = copy

    def delete(self, key: str) -> None:
        with self._lock:
            self.data.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self.data.clear()


def _json_copy(value: Any) -> Any:
    return json.loads(json.dumps(value))


def dag_run(*, clear_number: int = 0, conf: dict[str, Any] | None = None, run_id: str = RUN_ID) -> Any:
    """The running DAG run as the Task SDK gives it: ``clear_number`` is 0 until the DAG run or one of
    its tasks is cleared, and grows by one on each clear; ``conf`` is ``{}`` when none was given."""
    return SimpleNamespace(
        dag_id=DAG_ID,
        run_id=run_id,
        run_type="manual",
        clear_number=clear_number,
        conf=dict(conf or {}),
        logical_date=datetime(2026, 11, 23, 13, 0, tzinfo=UTC),
    )


def mock_ti(*, try_number: int = 1, max_tries: int = 0, **attributes: Any) -> mock.MagicMock:
    """A task instance whose ``xcom_push``/``xcom_pull`` calls the test can read back.

    ``try_number`` is 1 on the first try ever and keeps counting across clears; ``max_tries`` is the
    task's ``retries`` and Airflow raises it on each clear (to ``try_number + retries``).
    """
    values: dict[str, Any] = {
        "dag_id": DAG_ID,
        "task_id": TASK_ID,
        "run_id": RUN_ID,
        "map_index": -1,
        "try_number": try_number,
        "max_tries": max_tries,
        "start_date": None,
    }
    values.update(attributes)
    return mock.MagicMock(name="ti", **values)


def task_context(
    ti: Any,
    store: Any = None,
    *,
    clear_number: int = 0,
    conf: dict[str, Any] | None = None,
    run: Any = None,
) -> dict[str, Any]:
    """The context of one try: ``ti`` as given, its DAG run (``run``, or one with ``clear_number`` and
    ``conf``), and the task state store when there is one (Airflow before 3.3 gives none)."""
    the_run = run if run is not None else dag_run(clear_number=clear_number, conf=conf)
    context: dict[str, Any] = {
        "ti": ti,
        "task_instance": ti,
        "dag_run": the_run,
        "run_id": the_run.run_id,
        "params": {},
    }
    if store is not None:
        context["task_state_store"] = store
    return context
