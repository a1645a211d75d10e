"""Transaction gate: budgets and regression bounds per transaction, read from the run's own samples.

A release rarely slows everything: it slows checkout, or one API call. A checkout that went from 1.6 s
to 4.8 s hides inside a healthy whole-run p95, so ``loadtest_transaction_gate`` gates each transaction
(each JMeter sampler or transaction controller label) too. Once the run ended, the task reads the run's
JMeter results (one JTL file per load generator, streamed, never held in memory) and judges:

- the whole run: p95 at most 1.5 s, under 1 % errors (``metric_budgets``, the service's own figures);
- ``Checkout``: p95 at most 2.5 s and under 1 % errors; every ``api/...`` call: p95 at most 800 ms
  (``transaction_budgets``; a pattern applies to each label it matches);
- every transaction's p95: at most 10 % slower than its usual, beyond the night's shared movement and
  beyond its own noise (``transaction_max_regression_pct`` with ``baseline="history"``).

Why the history rather than last night: a gate of many transactions fails when any one fails, so judged
each against one earlier night (or each alone against its own noise) an ordinary noisy night fails some
row; with ``baseline="history"`` every series of the gate is judged together, under one false-alarm
budget for the whole gate (at most 1 red clean night in 100), each against its own noise, and the
night's shared movement (a busy environment slows every transaction) is judged once, as the whole run's
(docs/gate_quality.md, "Many series"). The first nights are judged by the bound alone while the history
fills (4 nights); the history lives in XCom, nothing to set up.

A transaction's p95 is a measurement from 400 samples on (20 beyond the percentile): below that its
row is judged against its budget only and says how many samples it would need. With the bundled
simulator the rarest label, Checkout, has 3 % of a run's samples: 2,160 in a run of its default
profile, 720 in ``checkout-scenario``'s, enough for every label's p95.

The log shows one row per (transaction, metric) beside the run's rows, ranked by how far each moved
beyond its noise, the night effect's line and what the budget buys, then the five slowest transactions
by p95 with their hits and errors, gated or not: the first thing a person asks after a failed gate. A
transaction the run never sampled (a renamed controller, a typo) fails, naming the labels the run did
sample; so does a run whose JTL files are missing or do not read: an unmeasured gate never passes.

Copy this file into your DAGs folder and point the ``loadtest_default`` connection at the service. With
the bundled simulator (``python -m airflow_provider_loadtest.simulator``) the defaults pass; set this
DAG's Variable ``loadtest_transaction_gate_scenario_id`` to ``checkout-scenario`` (a busy night that
every transaction shares, then Checkout slower on its own) to watch the busy night pass and the next
fail on Checkout alone; ``make demo`` shows it, after a history left in XCom.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

# Rendered when the task runs, so changing a Variable needs no code change.
WORKSPACE_ID = "{{ var.value.get('loadtest_workspace_id', 'demo-workspace') }}"
# This DAG's own Variable: pointing another example DAG at another scenario leaves this one alone.
SCENARIO_ID = "{{ var.value.get('loadtest_transaction_gate_scenario_id', 'demo-scenario') }}"
TEMPLATE_NAME = "{{ var.value.get('loadtest_template_name', 'Nightly SLA report') }}"

with DAG(
    dag_id="loadtest_transaction_gate",
    description="Nightly load test gated per transaction, from the run's JMeter results",
    schedule="0 3 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,  # two load tests at once would measure each other
    tags=["loadtest"],
    doc_md=__doc__,
):
    RunScenarioOperator(
        task_id="run_load_test",
        scenario_id=SCENARIO_ID,
        template_name=TEMPLATE_NAME,
        workspace_id=WORKSPACE_ID,
        test_name="transaction gate {{ dag_run.run_after | ds }}",
        # The whole run (the service's figures, metric ids of its API, section 2.5).
        metric_budgets={"RESPONSE_TIME_PERCENTILE_95": "<= 1500", "ERRORS_PERCENT": "< 1"},
        # Per transaction: JTL labels, or patterns (fnmatch, case-sensitive like JMeter's labels). An
        # unknown metric id, or one a JTL cannot give (an Apdex score), fails when the DAG is parsed.
        transaction_budgets={
            "Checkout": {"RESPONSE_TIME_PERCENTILE_95": "<= 2500", "ERRORS_PERCENT": "< 1"},
            "api/*": {"RESPONSE_TIME_PERCENTILE_95": "<= 800"},
        },
        # Every transaction against its own noise over the last passing nights (kept in XCom), all of
        # them judged together: one false-alarm budget for the gate, the night's shared movement apart.
        baseline="history",
        transaction_max_regression_pct={"*": {"RESPONSE_TIME_PERCENTILE_95": 10}},
        timeout=timedelta(hours=2),
        retries=2,  # a retry re-attaches to the run, it never starts a second billed load test
        retry_delay=timedelta(minutes=2),
    )
