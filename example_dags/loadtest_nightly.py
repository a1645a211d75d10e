"""Nightly load test: wait until the report template exists, then start the scenario with it.

Copy this file into your DAGs folder and point the ``loadtest_default`` connection at the service
(host: the API base URL, empty for the SaaS; password: your API key). The ids come from Airflow
Variables, so the same file runs against the real service and against the bundled simulator
(``python -m airflow_provider_loadtest.simulator``), whose seed uses the defaults below.

Importing this file costs almost nothing beyond Airflow itself: the provider's operators load their
HTTP client only when a task runs, so DAG parsing stays fast.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from airflow_provider_loadtest.sensors.template import TemplateSensor

# Rendered when the task runs (not at parse time), so changing a Variable needs no code change.
# The ids are the last segment of the workspace's / scenario's URL in the service's web UI.
WORKSPACE_ID = "{{ var.value.get('loadtest_workspace_id', 'demo-workspace') }}"
# This DAG's own Variable: pointing another example DAG at another scenario leaves this one alone.
SCENARIO_ID = "{{ var.value.get('loadtest_nightly_scenario_id', 'demo-scenario') }}"
TEMPLATE_NAME = "{{ var.value.get('loadtest_template_name', 'Nightly SLA report') }}"

with DAG(
    dag_id="loadtest_nightly",
    description="Start the nightly load test with the 'Nightly SLA report' template",
    schedule="0 2 * * *",  # 02:00 UTC, when the system under test is quiet
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,  # a missed night is not worth a burst of load tests when the scheduler comes back
    max_active_runs=1,  # two load tests at once would measure each other
    tags=["loadtest"],
    doc_md=__doc__,
) as dag:
    # Someone may still be editing the report template in the web UI: wait for it rather than fail,
    # freeing the worker slot between checks (reschedule), and give up after an hour.
    wait_for_template = TemplateSensor(
        task_id="wait_for_template",
        workspace_id=WORKSPACE_ID,
        template_name=TEMPLATE_NAME,  # exact match first, then ignoring case; two matches fail
        mode="reschedule",
        poke_interval=120,
        timeout=timedelta(hours=1).total_seconds(),
    )

    run_load_test = RunScenarioOperator(
        task_id="run_load_test",
        scenario_id=SCENARIO_ID,
        template_id=wait_for_template.output,  # the id the sensor found
        workspace_id=WORKSPACE_ID,  # lets the task build the "Load test report" link
        test_name="nightly {{ dag_run.run_after | ds }}",  # how the run is named in the service's result list
        # The task fails when any threshold alarm of the run is CRITICAL: a slow night gets noticed.
        fail_on_alarm_severity="CRITICAL",
        # Past two hours something is wrong: the run is stopped (no runaway bill) and the task fails.
        timeout=timedelta(hours=2),
        # Safe to retry: a retry re-attaches to the run the failed try started (Airflow 3.3+): it waits
        # on a run still going and keeps the verdict of a FINISHED one, instead of starting a second,
        # billed load test. A run that ended in ERROR or ABORTED fails the task without retries: it is
        # not started again unless restart_failed_runs=True.
        retries=2,
        retry_delay=timedelta(minutes=2),
        # Waiting happens on the worker, or in the triggerer when [operators] default_deferrable is
        # true in your airflow.cfg; pass deferrable=True to force it.
    )

    wait_for_template >> run_load_test
