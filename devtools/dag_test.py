"""``airflow dags test``, plus a JSON summary of the run read from what ``dag.test()`` returns.

Run as a script in the Airflow home's environment by ``local_airflow.AirflowHome.dags_test``:
``python devtools/dag_test.py DAG_ID SUMMARY_JSON [LOGICAL_DATE]``. It does what the CLI command does
(find the DAG in the DAGs folder, ``dag.test()``, exit 1 when the run failed) and then writes the run's
state and, per task, its state, try number, end date and XComs through the DagRun and TaskInstance objects
``dag.test()`` hands back and Airflow's XCom model: no SQL against Airflow's tables, which change
between releases.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def summarise(dag_id: str, dag_run: Any) -> dict[str, Any]:
    """The run's state and, per task id, state, try number, end date and XComs by key."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    tasks: dict[str, Any] = {}
    with create_session() as session:
        for ti in dag_run.get_task_instances(session=session):
            query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_id, task_ids=ti.task_id)
            rows: list[Any] = list(session.scalars(query))
            tasks[ti.task_id] = {
                "state": None if ti.state is None else str(ti.state),
                "try_number": ti.try_number,
                "end_date": None if ti.end_date is None else ti.end_date.isoformat(),
                "xcom": {row.key: XComModel.deserialize_value(row) for row in rows},
            }
    return {"dag_id": dag_id, "run_id": dag_run.run_id, "state": str(dag_run.state), "tasks": tasks}


def main(dag_id: str, summary_path: str, logical_date: str | None = None) -> int:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag().get_dag(dag_id)  # the DAGs folder of AIRFLOW_HOME; examples off
    if dag is None:
        print(f"DAG {dag_id!r} not found or failed to parse", file=sys.stderr)
        return 2
    if logical_date is None:
        dag_run = dag.test()
    else:
        import pendulum

        dag_run = dag.test(logical_date=pendulum.parse(logical_date))
    summary = summarise(dag_id, dag_run)
    with open(summary_path, "w", encoding="utf-8") as out:
        json.dump(summary, out, default=str)
    return 1 if summary["state"] == "failed" else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
