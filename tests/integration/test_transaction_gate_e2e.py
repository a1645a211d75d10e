"""Gates per transaction end to end: ``loadtest_transaction_gate`` (``baseline="history"``) in one real
Airflow home, against the simulator's ``checkout-scenario``, whose runs list one gzipped JTL file per
load generator: every transaction varies from run to run with the night and on its own; its first run is
a busy night (every transaction 15 % slower together), and from its second Checkout alone is slower.

A season of passing nights stands in for the weeks before (``devtools.demo.transaction_season``: the
simulator's own samples of the runs before it started, read by the operator's JTL reader and judged by
the gate's code), left in XCom as the task would have. Then:

1. the busy night passes: every row of the run and of each transaction, the night effect says what
   every transaction moved together, and the log says what the budget buys; judged series by series
   (``replay_history``, the rule before one budget for the gate), a row would have failed that night;
2. the next night (waiting in the triggerer this time, so the JTL files are read by the worker that
   resumes the task) fails on Checkout alone, as its own regression "beyond the night's shared movement",
   before its budget, while the night effect, the other transactions and the run's own figures pass:
   failed without a retry, and the log names the slowest transactions with Checkout first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate import REGRESSION, GateHistory, GateRow
from airflow_provider_loadtest.decisions.history import HISTORY_XCOM_KEY
from airflow_provider_loadtest.simulator import run_simulator
from devtools.demo import NIGHTS, SEASON_DATE, TRANSACTION_BOUNDS, alone_verdicts, transaction_season
from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "loadtest_transaction_gate"
TASK_ID = "run_load_test"
SCENARIO = "checkout-scenario"
P95 = "RESPONSE_TIME_PERCENTILE_95"
LABELS = {
    "Checkout", "api/items", "api/cart", "Home", "Search products", "Product page", "Add to cart", "Login",
}  # fmt: skip


def _rows(result: DagRunResult) -> dict[tuple[str | None, str], GateRow]:
    return {
        (row["transaction"], row["metric"]): GateRow.from_xcom(row)
        for row in result.xcom(DAG_ID, TASK_ID)["gate"]
    }


def test_a_busy_night_passes_and_checkout_fails_alone_as_its_own_regression(tmp_path: Path) -> None:
    history, season = transaction_season(SCENARIO, TRANSACTION_BOUNDS)
    home = AirflowHome(tmp_path / "home", [ROOT / "example_dags"])
    left = home.leave_xcom(DAG_ID, TASK_ID, HISTORY_XCOM_KEY, history, SEASON_DATE)
    assert left.succeeded, left.output[-6000:]
    with run_simulator(run_seconds=2.0) as sim:
        env: dict[str, Any] = {
            **connection_env(sim.url, sim.api_key),
            "AIRFLOW_VAR_LOADTEST_TRANSACTION_GATE_SCENARIO_ID": SCENARIO,
        }

        # 1. the busy night: every transaction slower together, the night effect explains it
        busy = home.dags_test(DAG_ID, env, logical_date=NIGHTS[0])
        assert busy.succeeded, busy.output[-6000:]
        rows = _rows(busy)
        assert all(row.passed for row in rows.values()), rows
        bounded = {key: row for key, row in rows.items() if row.max_regression_pct is not None}
        assert {label for label, _ in bounded} == LABELS and {m for _, m in bounded} == {P95}
        assert all(row.history_n and row.history_n >= 20 for row in bounded.values())
        assert all(row.own_sd is not None and row.night_sd is not None for row in bounded.values())
        moved = sorted(row.change_pct or 0 for row in bounded.values())
        assert moved[len(moved) // 2] > 8  # the median transaction about 10 % slower than its usual
        night = busy.xcom(DAG_ID, TASK_ID)["night_effect"]
        assert night["passed"] and night["series"] == len(LABELS) and night["shift_sd"] > 1, night
        assert "Night effect: the 8 series moved +" in busy.output
        assert "Budget: at most 1 red clean night in 100 for the whole gate" in busy.output
        assert "; with 8 series judged together" in busy.output
        alone = alone_verdicts(season, busy.xcom(DAG_ID, TASK_ID)["gate"])
        assert set(alone) == set(bounded)
        assert REGRESSION in alone.values(), alone  # judged each alone, the busy night would have failed
        after = GateHistory.from_xcom(busy.xcom(DAG_ID, TASK_ID, HISTORY_XCOM_KEY))
        assert after.night is not None and len(after.night.values) + len(after.night.recent) >= 20

        # 2. Checkout slower alone: its own regression; deferred, judged by the resuming worker
        slow = home.dags_test(
            DAG_ID, {**env, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}, logical_date=NIGHTS[1]
        )
        assert not slow.succeeded
        assert "Deferring: the triggerer watches run" in slow.output
        assert slow.task_states(DAG_ID)[TASK_ID] == ("failed", 1)  # the verdict is final: no retry
        rows = _rows(slow)
        failing = {key for key, row in rows.items() if not row.passed}
        assert failing == {("Checkout", P95)}, {k: rows[k].reason for k in failing}
        checkout = rows[("Checkout", P95)]
        assert checkout.status == REGRESSION and checkout.value is not None and checkout.centre is not None
        assert checkout.value > 1.3 * checkout.centre and checkout.value < 2500  # before its budget
        assert "beyond the night's shared movement" in (checkout.reason or "")
        assert checkout.own_sd is not None and checkout.own_sd == max(r.own_sd or 0 for r in rows.values())
        assert all(row.passed for (label, _), row in rows.items() if label is None)  # the run's figures
        assert slow.xcom(DAG_ID, TASK_ID)["night_effect"]["passed"]
        assert f"Quality gate failed: {P95} of 'Checkout'" in slow.output
        slowest = slow.output[slow.output.index("Slowest transactions by p95 response time") :]
        assert slowest.splitlines()[2].split()[0] == "Checkout"

        assert len(sim.starts(SCENARIO)) == 2
        print(slow.output[slow.output.index("Quality gate of run") :][:3000])
