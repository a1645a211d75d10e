"""The quality gate end to end: nights of ``loadtest_release_gate`` (``baseline="history"``) in one real
Airflow home, each night reading the history the night before left in XCom.

A season of 20 passing nights stands in for the weeks before (``devtools.demo.earlier_season``: the
simulator's own figures and noise, judged by the gate's own code, left in XCom on the DAG run of the
day before). Then, with a scenario whose runs vary by a few percent:

1. an ordinary night is judged noise against that history and passes, and its asset event carries the
   history's centre and noise band;
2. the system under test gets 25 % slower (the simulator's scenario is 25 % slower from its second run
   on): a regression, failed without a retry, waiting in the triggerer this time; the night is
   remembered in the history but does not join the values judged against;
3. a person triggers the next night with ``{"loadtest_accept_change": true}``, from a DAG run without a
   logical date (``airflow dags trigger --conf``, the REST API: dated by when it was triggered, after
   every logical date below): it passes, and the history restarts from it (issue 33: on PostgreSQL the
   chain of histories it replaces froze on that run, on SQLite it lost the acceptance);
4. the night after (whose logical date lies before the manual run's date) is judged against the
   restarted history (too short yet: the bound alone) and passes; run again (a clear), it is counted
   once;
5. the shipped nightly example runs without a logical date (its templates rendered ``{{ ds }}``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY, NightRecord
from airflow_provider_loadtest.decisions.history import ACCEPT_CHANGE, HISTORY_XCOM_KEY, GateHistory
from airflow_provider_loadtest.simulator import run_simulator
from airflow_provider_loadtest.simulator.seed import load_seed
from devtools.dag_test import NO_LOGICAL_DATE
from devtools.demo import GATE_BOUNDS, earlier_season
from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "loadtest_release_gate"
TASK_ID = "run_load_test"
P95 = "RESPONSE_TIME_PERCENTILE_95"
AVG = "RESPONSE_TIME_AVG"
SCENARIO = "release-1"


def _seed() -> dict[str, Any]:
    """The default seed, plus the system under test: from its second run on, 25 % slower (a release
    that slowed every response). The same scenario throughout: the gate remembers per scenario."""
    seed = load_seed().model_dump(mode="json", by_alias=True)
    seed["scenarios"].append(
        {
            "id": SCENARIO,
            "projectId": "demo-project",
            "name": SCENARIO,
            "metrics": {"avgResponseTimeMs": 360, "noisePct": 3},  # p95: 1.95 x the average
            "busyRuns": {str(run): 0.25 for run in range(2, 7)},
        }
    )
    return seed


def _asset_events(home: Path, name: str) -> list[dict[str, Any]]:
    with sqlite3.connect(home / "airflow.db") as db:
        rows = db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
            "WHERE a.name = ? ORDER BY e.id",
            (name,),
        ).fetchall()
    return [json.loads(extra) if isinstance(extra, str | bytes) else extra for (extra,) in rows]


def _bounded(result: DagRunResult) -> dict[str, dict[str, Any]]:
    """The gate rows of the metrics judged against the history, by metric."""
    rows = result.xcom(DAG_ID, TASK_ID)["gate"]
    return {row["metric"]: row for row in rows if row["metric"] in GATE_BOUNDS}


def _history(result: DagRunResult) -> GateHistory:
    return GateHistory.from_xcom(result.xcom(DAG_ID, TASK_ID, HISTORY_XCOM_KEY))


def test_a_noisy_night_passes_a_step_fails_and_an_accepted_change_restarts_the_history(
    tmp_path: Path,
) -> None:
    seed = _seed()
    home = AirflowHome(tmp_path / "home", [ROOT / "example_dags"])
    season = home.leave_xcom(
        DAG_ID, TASK_ID, HISTORY_XCOM_KEY, earlier_season(SCENARIO, GATE_BOUNDS, seed=seed), "2026-10-31"
    )
    assert season.succeeded, season.output[-6000:]
    with run_simulator(seed=seed, run_seconds=2.0) as sim:
        env = connection_env(sim.url, sim.api_key)
        release_1 = release_2 = {**env, "AIRFLOW_VAR_LOADTEST_RELEASE_GATE_SCENARIO_ID": SCENARIO}

        # 1. an ordinary night: noise
        first = home.dags_test(DAG_ID, release_1, logical_date="2026-11-01")
        assert first.succeeded, first.output[-6000:]
        rows = _bounded(first)
        for row in rows.values():
            assert row["passed"] and row["status"] == "noise", row
            assert row["history_n"] == 18  # 20 nights: the last two wait for the nights after them
            assert row["band_low"] < row["value"] < row["band_high"]
        assert rows[P95]["centre"] == pytest.approx(1.95 * 360, rel=0.03)
        assert 0.01 < rows[P95]["noise"] / rows[P95]["centre"] < 0.06  # about the scenario's 3 %
        assert "against the history of the last passing runs" in first.output and "noise band" in first.output
        night1 = first.xcom(DAG_ID, TASK_ID)
        (event,) = [
            e
            for e in _asset_events(home.path, "loadtest_release_verdict")
            if e.get("bench_result_id") == night1["bench_result_id"]
        ]
        assert event["passed"] is True and event["gate"] == night1["gate"]
        assert {r["status"] for r in event["gate"] if r["metric"] in GATE_BOUNDS} == {"noise"}

        # 2. a step: a regression, in the triggerer this time, not retried, and kept out of the history
        second = home.dags_test(
            DAG_ID, {**release_2, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}, logical_date="2026-11-02"
        )
        assert not second.succeeded
        assert "Deferring: the triggerer watches run" in second.output
        assert second.task_states(DAG_ID)[TASK_ID] == ("failed", 1)
        rows = _bounded(second)
        for row in rows.values():
            assert not row["passed"] and row["status"] == "regression", row
            assert row["change_pct"] > 15
        assert f"Quality gate failed: {P95}" in second.output and "vs history centre" in second.output
        remembered = _history(second).series[(None, P95)]
        assert rows[P95]["value"] not in remembered.values
        assert remembered.recent[-1][0] == rows[P95]["value"]
        assert not [e for e in _asset_events(home.path, "loadtest_release_verdict") if not e.get("passed")]

        # 3. a person accepts the change from a run without a logical date: the night passes and the
        #    history restarts from it
        third = home.dags_test(DAG_ID, release_2, logical_date=NO_LOGICAL_DATE, conf={ACCEPT_CHANGE: True})
        assert third.succeeded, third.output[-6000:]
        rows = _bounded(third)
        for row in rows.values():
            assert row["passed"] and row["status"] == "pass" and "accepted" in row["note"], row
        restarted = _history(third).series
        assert {metric: restarted[(None, metric)].values for metric in GATE_BOUNDS} == {
            metric: (row["value"],) for metric, row in rows.items()
        }
        assert "accepts the change of RESPONSE_TIME_AVG, RESPONSE_TIME_PERCENTILE_95" in third.output
        record = NightRecord.from_xcom(third.xcom(DAG_ID, TASK_ID, NIGHT_XCOM_KEY))
        assert record.logical_date is None and set(GATE_BOUNDS) <= record.accepted
        assert record.bench_result_id == third.xcom(DAG_ID, TASK_ID)["bench_result_id"] and record.chain

        _after_the_acceptance(home, release_2, env, accepted=rows)

        assert len(sim.starts(SCENARIO)) == 5
        print(second.output[second.output.index("Quality gate of run") :][:1200])


def _after_the_acceptance(
    home: AirflowHome, gated: dict[str, str], env: dict[str, str], *, accepted: dict[str, dict[str, Any]]
) -> None:
    """4. the night after (its logical date before the manual run's date): judged against the restarted
    history (the bound alone until 4 nights), and counted once when run again; 5. the nightly example
    without a logical date."""
    fourth = home.dags_test(DAG_ID, gated, logical_date="2026-11-04")
    assert fourth.succeeded, fourth.output[-6000:]
    for metric, row in _bounded(fourth).items():
        assert row["passed"] and row["history_n"] == 1 and row["baseline"] == accepted[metric]["value"]
        assert "1 night of history, 4 needed" in row["note"]
    again = home.dags_test(DAG_ID, gated, logical_date="2026-11-04")  # the night run again (a clear)
    assert again.succeeded, again.output[-6000:]
    assert {row["history_n"] for row in _bounded(again).values()} == {1}  # counted once
    nightly = home.dags_test("loadtest_nightly", env, logical_date=NO_LOGICAL_DATE)
    assert nightly.succeeded, nightly.output[-6000:]
