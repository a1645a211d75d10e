"""Gates per transaction end to end: two nights of ``loadtest_transaction_gate`` in one real Airflow home,
against the simulator's ``slower-scenario`` (each run 20 % slower than the one before, most of it on
Checkout), whose runs list one gzipped JTL file per load generator.

1. the first night passes: every row of the run and of each transaction, and the night's transaction
   values are left in XCom as the next night's baseline;
2. the second night (waiting in the triggerer this time, so the JTL files are read by the worker that
   resumes the task) fails on Checkout alone, its budget and its regression bound against the first
   night, while the run's own figures, about 20 % slower, pass: failed without a retry, and the log
   names the slowest transactions with Checkout first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, GateRow
from airflow_provider_loadtest.simulator import run_simulator
from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "loadtest_transaction_gate"
TASK_ID = "run_load_test"
P95 = "RESPONSE_TIME_PERCENTILE_95"


def _rows(result: DagRunResult) -> dict[tuple[str | None, str], GateRow]:
    return {
        (row["transaction"], row["metric"]): GateRow.from_xcom(row)
        for row in result.xcom(DAG_ID, TASK_ID)["gate"]
    }


def test_a_transaction_budget_fails_a_run_whose_global_figures_pass(tmp_path: Path) -> None:
    home = AirflowHome(tmp_path / "home", [ROOT / "example_dags"])
    with run_simulator(run_seconds=2.0) as sim:
        env: dict[str, Any] = {
            **connection_env(sim.url, sim.api_key),
            "AIRFLOW_VAR_LOADTEST_TRANSACTION_GATE_SCENARIO_ID": "slower-scenario",
        }

        # 1. the first night: everything passes, the transactions' values become the next baseline
        first = home.dags_test(DAG_ID, env, logical_date="2026-11-01")
        assert first.succeeded, first.output[-6000:]
        rows = _rows(first)
        assert all(row.passed for row in rows.values()), rows
        labels = {label for label, _ in rows if label is not None}
        assert labels == {
            "Checkout", "api/items", "api/cart", "Home", "Search products", "Product page", "Add to cart",
            "Login",
        }  # fmt: skip
        assert rows[("Checkout", P95)].baseline is None  # no earlier passing night: budgets only
        baseline = first.xcom(DAG_ID, TASK_ID, BASELINE_XCOM_KEY)
        checkout_before = baseline["transactions"]["Checkout"][P95]
        run_before = baseline["metrics"][P95]
        assert checkout_before == rows[("Checkout", P95)].value < 2500
        assert "Read " in first.output and "JTL file(s) of run" in first.output

        # 2. the second night: Checkout fails, the run passes; deferred, judged by the resuming worker
        second = home.dags_test(
            DAG_ID, {**env, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}, logical_date="2026-11-02"
        )
        assert not second.succeeded
        assert "Deferring: the triggerer watches run" in second.output
        assert second.task_states(DAG_ID)[TASK_ID] == ("failed", 1)  # the verdict is final: no retry
        rows = _rows(second)
        failing = {key for key, row in rows.items() if not row.passed}
        assert failing == {("Checkout", P95)}, {k: rows[k].reason for k in failing}
        checkout = rows[("Checkout", P95)]
        assert checkout.value is not None and checkout.value > 2.5 * checkout_before
        assert checkout.baseline == checkout_before and checkout.status == "regression"
        reason = checkout.reason or ""
        assert "budget <= 2500" in reason and "more than 50 % worse" in reason
        run = rows[(None, P95)]
        assert run.passed and run.value is not None and 1.1 < run.value / run_before < 1.45
        first_run = first.xcom(DAG_ID, TASK_ID)["bench_result_id"]
        assert f"Quality gate failed (baseline run {first_run}): {P95} of 'Checkout'" in second.output
        slowest = second.output[second.output.index("Slowest transactions by p95 response time") :]
        assert slowest.splitlines()[2].split()[0] == "Checkout"

        assert len(sim.starts("slower-scenario")) == 2
        print(second.output[second.output.index("Quality gate of run") :][:2500])
