"""The rig's DAGs: one load test per DAG run, its scenario given in the run's conf (one per task instance).

Each task instance gets a scenario of its own in the simulator, so every start and stop the simulator
records belongs to exactly one task instance. ``retries=2``: an infrastructure failure has tries to
spare, so a task that fails anyway failed on a verdict, not for want of a retry.
"""

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

for dag_id, deferrable in [("prod_sync", False), ("prod_deferrable", True)]:
    with DAG(
        dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False, max_active_runs=64
    ) as dag:
        RunScenarioOperator(
            task_id="load_test",
            scenario_id="{{ dag_run.conf['scenario'] }}",
            workspace_id="demo-workspace",
            check_interval=2,
            timeout=900,
            deferrable=deferrable,
            retries=2,
            retry_delay=timedelta(seconds=5),
        )
    globals()[dag_id] = dag


# The gate's memory on PostgreSQL (tests/production/test_gate_memory.py): every DAG run here has no logical
# date (the rig triggers through the REST API), nights run two at once, and a mapped gate changes order.
def _gate(**kwargs):
    return dict(
        workspace_id="demo-workspace",
        baseline="history",
        max_regression_pct={"RESPONSE_TIME_PERCENTILE_95": 10},
        check_interval=1,
        timeout=900,
        deferrable=True,
        retries=2,
        retry_delay=timedelta(seconds=5),
        **kwargs,
    )


with DAG(
    "rig_gate_memory", schedule=None, start_date=datetime(2024, 1, 1), catchup=False, max_active_runs=8
) as rig_gate_memory:
    RunScenarioOperator(task_id="load_test", scenario_id="{{ dag_run.conf['scenario'] }}", **_gate())

with DAG(
    "rig_gate_memory_mapped", schedule=None, start_date=datetime(2024, 1, 1), catchup=False
) as rig_gate_memory_mapped:
    from airflow.sdk import task

    @task
    def scenarios(dag_run=None):
        return list(dag_run.conf["scenarios"])

    RunScenarioOperator.partial(task_id="load_test", **_gate()).expand(scenario_id=scenarios())
