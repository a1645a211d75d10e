"""Nightly load test with its report delivered: the PDF for people, JUnit XML and logs for machines.

Copy this file into your DAGs folder and point the ``loadtest_default`` connection at the service
(host: the API base URL, empty for the SaaS; password: your API key). Ids and the destination come
from Airflow Variables, so the same file runs against the real service and against the bundled
simulator (``python -m airflow_provider_loadtest.simulator``), whose seed uses the defaults below.

Files land under ``loadtest_report_root`` in a folder per night (``.../2026-11-23/``): a local folder
by default; set the Variable to ``s3://my-bucket/load-tests`` (with the Amazon provider installed) or
any other object store Airflow knows to share them. Every file is written atomically: a reader never
sees half a PDF.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.report import DownloadReportOperator, DownloadRunFilesOperator
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

# Rendered when the task runs, so changing a Variable needs no code change. The ids are the last
# segment of the workspace's / scenario's URL in the service's web UI.
WORKSPACE_ID = "{{ var.value.get('loadtest_workspace_id', 'demo-workspace') }}"
# This DAG's own Variable: pointing another example DAG at another scenario leaves this one alone.
SCENARIO_ID = "{{ var.value.get('loadtest_nightly_report_scenario_id', 'demo-scenario') }}"
TEMPLATE_NAME = "{{ var.value.get('loadtest_template_name', 'Nightly SLA report') }}"
# One folder per DAG run (run_after is when it was due: set for every kind of run, manual ones
# included, where {{ ds }} is undefined without a logical date), so runs never overwrite each other.
NIGHT_FOLDER = (
    "{{ var.value.get('loadtest_report_root', '/tmp/loadtest-reports') }}/{{ dag_run.run_after | ts_nodash }}"
)

with DAG(
    dag_id="loadtest_nightly_report",
    description="Nightly load test, then its PDF report, JUnit XML and logs into a dated folder",
    schedule="0 2 * * *",  # 02:00 UTC, when the system under test is quiet
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,  # a missed night is not worth a burst of load tests when the scheduler comes back
    max_active_runs=1,  # two load tests at once would measure each other
    tags=["loadtest"],
    doc_md=__doc__,
) as dag:
    run_load_test = RunScenarioOperator(
        task_id="run_load_test",
        scenario_id=SCENARIO_ID,
        workspace_id=WORKSPACE_ID,  # where the template is looked up, and the report link's workspace
        template_name=TEMPLATE_NAME,  # exact match first, then ignoring case; none or two fail early
        test_name="nightly {{ dag_run.run_after | ds }}",
        fail_on_alarm_severity="CRITICAL",  # a CRITICAL threshold alarm fails the night
        timeout=timedelta(hours=2),  # past it the run is stopped (no runaway bill) and the task fails
        # Saved before the task's verdict, so the JUnit XML exists for a failed night too.
        junit_destination=NIGHT_FOLDER + "/junit.xml",
        # A retry re-attaches to the run the failed try started (Airflow 3.3+): it waits on it, or keeps
        # its verdict if it FINISHED (then only saves the files again). A run that ended in ERROR or
        # ABORTED is not started again unless restart_failed_runs=True.
        retries=2,
        retry_delay=timedelta(minutes=2),
    )

    # The PDF as its own task: rendering can take minutes and can be retried on its own without
    # touching the load test. It runs after a successful night; to get the PDF of a failed night
    # too, set report_pdf_destination on run_load_test instead (saved before its verdict).
    save_report_pdf = DownloadReportOperator(
        task_id="save_report_pdf",
        run=run_load_test.output,  # the run's report id and bench result id: the download needs both
        destination=NIGHT_FOLDER + "/load-test-report.pdf",
        export_config={"pageFormat": "A4", "orientation": "LANDSCAPE"},  # wide charts read better
        pdf_timeout=timedelta(minutes=15),  # a long report can take a while to render
        retries=2,
        retry_delay=timedelta(minutes=1),
    )

    # The run's files for machines and for digging: JUnit XML and the JMeter log. Per-agent logs are
    # skipped (one per load generator, large); pass include_agent_logs=True to keep them.
    save_run_files = DownloadRunFilesOperator(
        task_id="save_run_files",
        run=run_load_test.output,
        destination=NIGHT_FOLDER + "/files",
        include=["*.xml", "*.log", "*.log.gz"],
    )

    run_load_test >> [save_report_pdf, save_run_files]
