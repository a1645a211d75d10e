"""``airflow dags test``, plus a JSON summary of the run read from what ``dag.test()`` returns.

Run as a script in the Airflow home's environment by ``local_airflow.AirflowHome.dags_test``:
``python devtools/dag_test.py DAG_ID SUMMARY_JSON [LOGICAL_DATE|none] [--conf JSON]`` (``none``: a run
without a logical date). It does what the CLI
command does (find the DAG in the DAGs folder, ``dag.test()`` with the DAG-run conf, exit 1 when the run
failed) and then writes the run's
state and, per task, its state, try number, end date and XComs through the DagRun and TaskInstance objects
``dag.test()`` hands back and Airflow's XCom model: no SQL against Airflow's tables, which change
between releases.

``--leave-xcom TASK_ID KEY VALUE_JSON`` stands in for an earlier DAG run instead (``local_airflow.
AirflowHome.leave_xcom``): the run on LOGICAL_DATE is created with its tasks marked successful, not run
(``dag.test(mark_success_pattern=...)``), and the task's XCom ``KEY`` is set to the value, as the task
would have pushed it (the Task SDK's serialisation, then ``XComModel.set``). A later run's
``xcom_pull(include_prior_dates=True)`` finds it.

A run on a past logical date is dated as started when ``dag.test()`` began, not on that date
(``started_when_it_did``).

``--leave-nights NIGHTS_JSON`` stands in for a season of earlier DAG runs at once
(``local_airflow.AirflowHome.leave_nights``): a JSON list of ``{"logical_date", "minutes", "xcom":
{task_id: {key: value}}}``, one DAG run each, made as ``--leave-xcom`` makes one, with every XCom set;
a value holding ``"dag_run_id": null`` (a gate's night record) gets its DAG run's id. Each run and its
task instances are dated as a night's run would be (starting at its logical date, lasting ``minutes``),
not when this script ran: Airflow's DAG overview would show a run of 28 days otherwise.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

#: LOGICAL_DATE for a DAG run without one (``airflow dags trigger``, the REST API with
#: ``logical_date: null``, ``TriggerDagRunOperator``, an asset-scheduled run).
NO_LOGICAL_DATE = "none"


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


def leave_nights(dag: Any, nights: list[dict[str, Any]]) -> list[str]:
    """One DAG run per night, its tasks marked successful, its XComs set, dated as the night ran;
    the run ids, oldest first."""
    import pendulum
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.sdk.serde import serialize
    from airflow.utils.session import create_session

    run_ids = []
    for night in nights:
        logical = datetime.fromisoformat(night["logical_date"]).replace(tzinfo=UTC)
        dag_run = dag.test(logical_date=pendulum.instance(logical), mark_success_pattern=".*")
        for task_id, pushed in night["xcom"].items():
            for key, value in pushed.items():
                ours = isinstance(value, dict) and "dag_run_id" in value and value["dag_run_id"] is None
                XComModel.set(
                    key,
                    serialize({**value, "dag_run_id": dag_run.run_id} if ours else value),
                    dag_id=dag.dag_id,
                    task_id=task_id,
                    run_id=dag_run.run_id,
                    serialize=False,
                )
        start = logical + timedelta(minutes=1)
        end = start + timedelta(minutes=float(night.get("minutes", 5)))
        with create_session() as session:
            run = session.query(DagRun).filter_by(dag_id=dag.dag_id, run_id=dag_run.run_id).one()
            run.queued_at, run.start_date, run.end_date = logical, start, end
            for ti in run.get_task_instances(session=session):
                ti.queued_dttm, ti.start_date, ti.end_date = start, start, end
                ti.duration = (end - start).total_seconds()
        run_ids.append(dag_run.run_id)
    return run_ids


def started_when_it_did(dag_run: Any, began: datetime) -> None:
    """``dag.test()`` dates a run on a past logical date as started then: Airflow's DAG overview showed
    a run of a night a month ago as lasting a month. The run started when ``dag.test()`` was called."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.query(DagRun).filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id).one()
        if run.start_date is not None and run.start_date < began - timedelta(minutes=1):
            run.start_date = began


def main(
    dag_id: str,
    summary_path: str,
    logical_date: str | None = None,
    *,
    conf: dict[str, Any] | None = None,
    leave_xcom: tuple[str, str, Any] | None = None,
    leave_nights_from: str | None = None,
) -> int:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag().get_dag(dag_id)  # the DAGs folder of AIRFLOW_HOME; examples off
    if dag is None:
        print(f"DAG {dag_id!r} not found or failed to parse", file=sys.stderr)
        return 2
    if leave_nights_from is not None:
        with open(leave_nights_from, encoding="utf-8") as source:
            run_ids = leave_nights(dag, json.load(source))
        with open(summary_path, "w", encoding="utf-8") as out:
            json.dump({"dag_id": dag_id, "run_ids": run_ids, "state": "success", "tasks": {}}, out)
        return 0
    kwargs: dict[str, Any] = {"run_conf": conf}
    if logical_date == NO_LOGICAL_DATE:
        kwargs["logical_date"] = None  # as a manual trigger, the REST API or an asset makes it
    elif logical_date is not None:
        import pendulum

        kwargs["logical_date"] = pendulum.parse(logical_date)
    if leave_xcom is not None:
        kwargs["mark_success_pattern"] = ".*"
    began = datetime.now(UTC)
    dag_run = dag.test(**kwargs)
    started_when_it_did(dag_run, began)
    if leave_xcom is not None:
        from airflow.models.xcom import XComModel
        from airflow.sdk.serde import serialize

        # Stored as a task's push stores it: the Task SDK serialises, the API server keeps it as given.
        task_id, key, value = leave_xcom
        XComModel.set(
            key, serialize(value), dag_id=dag_id, task_id=task_id, run_id=dag_run.run_id, serialize=False
        )
    summary = summarise(dag_id, dag_run)
    with open(summary_path, "w", encoding="utf-8") as out:
        json.dump(summary, out, default=str)
    return 1 if summary["state"] == "failed" else 0


def _parse(argv: list[str]) -> dict[str, Any]:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dag_id")
    parser.add_argument("summary_path")
    parser.add_argument("logical_date", nargs="?")
    parser.add_argument("--conf", type=json.loads, help="the DAG run's conf, as JSON")
    parser.add_argument("--leave-xcom", nargs=3, metavar=("TASK_ID", "KEY", "VALUE_JSON"))
    parser.add_argument("--leave-nights", metavar="NIGHTS_JSON", help="a season of DAG runs (a JSON file)")
    args = parser.parse_args(argv)
    leave = args.leave_xcom
    return {
        "dag_id": args.dag_id,
        "summary_path": args.summary_path,
        "logical_date": args.logical_date,
        "conf": args.conf,
        "leave_xcom": (leave[0], leave[1], json.loads(leave[2])) if leave else None,
        "leave_nights_from": args.leave_nights,
    }


if __name__ == "__main__":
    sys.exit(main(**_parse(sys.argv[1:])))
