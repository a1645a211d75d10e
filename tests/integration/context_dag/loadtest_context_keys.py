"""A tiny DAG whose one task returns the names of what Airflow gave it (``test_airflow_context.py``).

In a folder of its own: the other end-to-end homes copy ``tests/integration/dags`` and need not parse it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow.sdk import DAG, BaseOperator


def _public(obj: Any) -> list[str]:
    return sorted(name for name in dir(obj) if not name.startswith("_"))


class DumpContext(BaseOperator):
    """Return (as XCom) the context's keys and the public names of its ``dag_run``, ``ti`` and task
    state store, with the values the start-once rules read."""

    def execute(self, context: Any) -> dict[str, Any]:
        dag_run, ti = context["dag_run"], context["ti"]
        store = context.get("task_state_store")
        return {
            "keys": sorted(context.keys()),
            "dag_run": _public(dag_run),
            "ti": _public(ti),
            "store": _public(store) if store is not None else None,
            "clear_number": dag_run.clear_number,
            "conf": dag_run.conf,
            "try_number": ti.try_number,
            "max_tries": ti.max_tries,
            "task_instance_is_ti": context["task_instance"] is ti,
            "run_id_is_dag_runs": context["run_id"] == dag_run.run_id,
        }


with DAG(
    dag_id="loadtest_context_keys",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
):
    DumpContext(task_id="dump", retries=2)
