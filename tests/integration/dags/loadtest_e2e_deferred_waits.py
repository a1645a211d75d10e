"""A test DAG for the deferrable sensor and PDF download: both wait in the triggerer.

Not an example to copy (see example_dags/): the test sets LOADTEST_E2E_* before ``airflow dags test``
and adds the awaited template to the simulator only after the sensor's first look.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.report import DownloadReportOperator
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from airflow_provider_loadtest.sensors.template import TemplateSensor

_env = os.environ.get

with DAG(
    dag_id="loadtest_e2e_deferred_waits",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
):
    wait_for_template = TemplateSensor(
        task_id="wait_for_template",
        workspace_id="demo-workspace",
        template_name=_env("LOADTEST_E2E_TEMPLATE", "Late template"),
        poke_interval=1,
        timeout=120,
        deferrable=True,
    )
    run_load_test = RunScenarioOperator(
        task_id="run_load_test",
        scenario_id="demo-scenario",
        workspace_id="demo-workspace",
        template_id=wait_for_template.output,
        check_interval=1,
    )
    save_report_pdf = DownloadReportOperator(
        task_id="save_report_pdf",
        run=run_load_test.output,
        destination=_env("LOADTEST_E2E_PDF", "/tmp/loadtest-e2e.pdf"),
        check_interval=1,
        deferrable=True,
    )
    wait_for_template >> run_load_test >> save_report_pdf
