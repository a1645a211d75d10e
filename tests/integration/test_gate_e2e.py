"""The quality gate end to end: two nights of ``loadtest_release_gate`` in one real Airflow home.

The simulator's ``slower-scenario`` gets 20 % slower at every run. The first night has no baseline
yet (budgets only) and passes, leaving its values in XCom and an asset event carrying its verdict;
the second night, a day later, finds that run through Airflow's XCom of prior dates and fails the
10 % regression bound. The first night waits on the worker, the second in the triggerer: one verdict.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.simulator import run_simulator
from devtools.local_airflow import AirflowHome, connection_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "loadtest_release_gate"
P95 = "RESPONSE_TIME_PERCENTILE_95"


def _asset_events(home: Path, name: str) -> list[dict[str, Any]]:
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.name = ? ORDER BY e.id",
            (name,),
        ).fetchall()
    return [json.loads(extra) if isinstance(extra, str | bytes) else extra for (extra,) in rows]


def test_second_night_fails_the_regression_bound_and_the_first_one_s_asset_event_carries_its_verdict(
    tmp_path: Path,
) -> None:
    home = AirflowHome(tmp_path / "home", [ROOT / "example_dags"])
    with run_simulator(run_seconds=2.0) as sim:
        env = connection_env(sim.url, sim.api_key)
        env["AIRFLOW_VAR_LOADTEST_SCENARIO_ID"] = "slower-scenario"

        first = home.dags_test(DAG_ID, env, logical_date="2026-11-01")
        assert first.succeeded, first.output[-6000:]
        night1 = first.xcom(DAG_ID, "run_load_test")
        assert (
            "no baseline yet (no earlier run of this task passed), so budgets only were checked"
            in first.output
        )
        assert all(row["passed"] and row["baseline"] is None for row in night1["gate"])
        (event,) = _asset_events(home.path, "loadtest_release_verdict")
        assert event["passed"] is True
        assert event["bench_result_id"] == night1["bench_result_id"]
        assert event["scenario_id"] == "slower-scenario" and event["state"] == "FINISHED"
        assert event["report_url"] == night1["report_url"]
        assert event["metrics"] == {row["metric"]: row["value"] for row in night1["gate"]}

        second = home.dags_test(
            DAG_ID, {**env, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}, logical_date="2026-11-02"
        )
        assert not second.succeeded
        assert "Deferring: the triggerer watches run" in second.output
        assert second.task_states(DAG_ID)["run_load_test"] == ("failed", 1)  # never retried
        night2 = second.xcom(DAG_ID, "run_load_test")
        assert len(sim.starts("slower-scenario")) == 2
        rows = {row["metric"]: row for row in night2["gate"]}
        assert rows[P95]["baseline"] == next(r["value"] for r in night1["gate"] if r["metric"] == P95)
        assert rows[P95]["change_pct"] == pytest.approx(20.0, abs=0.5)
        assert not rows[P95]["passed"] and not rows["RESPONSE_TIME_AVG"]["passed"]
        assert rows["ERRORS_PERCENT"]["passed"]
        assert f"against baseline run {night1['bench_result_id']}" in second.output
        assert f"Quality gate failed (baseline run {night1['bench_result_id']}): {P95}" in second.output
        # a failed task emits no asset event: the deployment DAG is not triggered
        assert len(_asset_events(home.path, "loadtest_release_verdict")) == 1
        print(second.output[second.output.index("Quality gate of run") :][:1200])
