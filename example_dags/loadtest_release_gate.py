"""Release gate: a nightly load test with budgets and a regression bound judged against the run-to-run
noise of the last passing nights, and a deployment DAG that runs on its verdict.

``loadtest_release_gate`` runs the scenario every night and fails when the run breaks a budget (p95 over
1 s, 1 % errors or more, under 99 % successful hits) or regresses: more than 10 % worse than the history
of the last passing nights *and* more than that history's night-to-night noise explains
(``baseline="history"``: kept in Airflow's own XCom, nothing else to set up). A night that is only
noisy passes ("noise" in the log); a change too small to tell on one night is "suspected", and fails
once the next nights confirm it. Until the task has 4 nights of history it says so and judges by the
10 % bound alone against the nights so far (the first night: budgets only).

A failing night never becomes the new normal by itself. When a slowdown is intended (a new feature, a
bigger data set), accept it: trigger the DAG with the ``loadtest_accept_change`` box ticked (or the conf
``{"loadtest_accept_change": true}``); that night passes (its budgets still apply) and the history
restarts from it.

When it passes, it updates the ``loadtest_release_verdict`` asset, and ``loadtest_release_deploy``,
scheduled on that asset, reads the verdict (each metric's value, the history's centre and noise band,
the judgement) from the asset event.

Copy this file into your DAGs folder and point the ``loadtest_default`` connection at the service
(host: the API base URL, empty for the SaaS; password: your API key). With the bundled simulator
(``python -m airflow_provider_loadtest.simulator``) the defaults below work; set this DAG's Variable
``loadtest_release_gate_scenario_id`` to ``slower-scenario`` (a few percent of noise, 20 % slower at
every run) to watch the second night fail the regression bound; ``make demo`` shows a night judged
noise against a season of history, then a regression.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, Param, task

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

# Rendered when the task runs, so changing a Variable needs no code change.
WORKSPACE_ID = "{{ var.value.get('loadtest_workspace_id', 'demo-workspace') }}"
# This DAG's own Variable: pointing another example DAG at another scenario leaves this one alone.
SCENARIO_ID = "{{ var.value.get('loadtest_release_gate_scenario_id', 'demo-scenario') }}"
TEMPLATE_NAME = "{{ var.value.get('loadtest_template_name', 'Nightly SLA report') }}"

#: Updated each time a nightly run passes the gate; its event's ``extra`` carries the verdict.
VERDICT = Asset("loadtest_release_verdict")

with DAG(
    dag_id="loadtest_release_gate",
    description="Nightly load test gated on budgets and on regression beyond the noise of the last nights",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,  # two load tests at once would measure each other
    tags=["loadtest"],
    doc_md=__doc__,
    # A checkbox in the trigger form: read by the gate from the DAG run (unticked on scheduled nights).
    params={
        "loadtest_accept_change": Param(
            False,
            type="boolean",
            description="Accept tonight's change of the gated metrics as the new normal: the run passes "
            "its regression bound (not its budgets) and the history restarts from it.",
        )
    },
):
    RunScenarioOperator(
        task_id="run_load_test",
        scenario_id=SCENARIO_ID,
        template_name=TEMPLATE_NAME,
        workspace_id=WORKSPACE_ID,
        test_name="release gate {{ dag_run.run_after | ds }}",
        # Metric ids of the service's API (section 2.5). Each condition is an operator and a number;
        # a typo in a metric id fails when the DAG is parsed, naming the closest ids.
        metric_budgets={
            "RESPONSE_TIME_PERCENTILE_95": "<= 1000",  # milliseconds
            "ERRORS_PERCENT": "< 1",  # 0 to 100
            "HITS_SUCCESSFUL_PERCENT": ">= 99",
        },
        # Judged against the last passing nights (up to 30): their median and their noise. A metric
        # fails when it is worse than the median by more than its percentage (the smallest change
        # that matters) and by more than the noise explains. "Worse" follows the metric: slower
        # times are worse, and so would be a lower throughput.
        baseline="history",
        max_regression_pct={"RESPONSE_TIME_PERCENTILE_95": 10, "RESPONSE_TIME_AVG": 10},
        # Emitted only when the task succeeds: a failing night does not trigger the deployment.
        outlets=[VERDICT],
        timeout=timedelta(hours=2),
        retries=2,  # a retry re-attaches to the run, it never starts a second billed load test
        retry_delay=timedelta(minutes=2),
    )


with DAG(
    dag_id="loadtest_release_deploy",
    description="Deploy once the nightly load test passed its gate",
    schedule=[VERDICT],
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["loadtest"],
):

    @task
    def read_verdict(triggering_asset_events: Any = None) -> dict[str, Any]:
        """The gate's verdict, from the asset event that triggered this run."""
        (event, *_) = triggering_asset_events[VERDICT]
        verdict = dict(event.extra)
        if not verdict.get("passed"):
            raise ValueError(f"run {verdict.get('bench_result_id')} did not pass its gate: not deploying")
        print(
            f"Run {verdict['bench_result_id']} of scenario {verdict['scenario_id']} passed its gate "
            f"({verdict['state']}); report: {verdict['report_url']}"
        )
        for row in verdict["gate"]:  # status: pass, noise or suspected on a night that passed
            centre = f", history centre {row['centre']}" if row.get("centre") is not None else ""
            print(f"{row['metric']}: {row['value']} ({row['status']}{centre})")
        return verdict

    @task
    def deploy(verdict: dict[str, Any]) -> None:
        """Your deployment goes here."""
        print(f"Deploying: p95 {verdict['metrics'].get('RESPONSE_TIME_PERCENTILE_95')} ms")

    deploy(read_verdict())
