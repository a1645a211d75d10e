"""A test DAG for the end-to-end lifecycle tests: every knob comes from the environment.

Not an example to copy (see example_dags/): the tests set LOADTEST_E2E_* before ``airflow dags test``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

_env = os.environ.get
_execution_timeout = _env("LOADTEST_E2E_EXECUTION_TIMEOUT")

with DAG(
    dag_id="loadtest_e2e_lifecycle",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
):
    RunScenarioOperator(
        task_id="run_load_test",
        scenario_id=_env("LOADTEST_E2E_SCENARIO", "demo-scenario"),
        workspace_id="demo-workspace",
        template_name="Nightly SLA report",
        check_interval=float(_env("LOADTEST_E2E_CHECK_INTERVAL", "1")),
        fail_on_alarm_severity=_env("LOADTEST_E2E_GATE") or None,
        stop_on_alarm=_env("LOADTEST_E2E_STOP_ON_ALARM") == "1",
        deferrable=_env("LOADTEST_E2E_DEFERRABLE") == "1",
        restart_failed_runs=_env("LOADTEST_E2E_RESTART") == "1",
        retries=int(_env("LOADTEST_E2E_RETRIES", "0")),
        retry_delay=timedelta(seconds=0),
        execution_timeout=timedelta(seconds=float(_execution_timeout)) if _execution_timeout else None,
    )
