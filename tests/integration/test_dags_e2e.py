"""Every example DAG, and the run lifecycle, in a real Airflow against the local simulator.

Each test runs ``airflow dags test`` in a subprocess (a real scheduler loop, task runner and, for
deferrable tasks, triggerer) with the connection pointing at a simulator served on 127.0.0.1, then
asserts the DAG run's outcome and what the simulator received.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

pytestmark = pytest.mark.integration

RUN_SECONDS = 3.0
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = sorted(p.stem for p in (ROOT / "example_dags").glob("*.py"))


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    return AirflowHome(
        tmp_path_factory.mktemp("airflow-home"), [ROOT / "example_dags", Path(__file__).with_name("dags")]
    )


@pytest.fixture
def sim() -> Iterator[SimulatorHandle]:
    with run_simulator(run_seconds=RUN_SECONDS) as handle:
        yield handle


def _run(
    airflow_home: AirflowHome, sim: SimulatorHandle, dag_id: str, tmp_path: Path, **env: str
) -> DagRunResult:
    extra = connection_env(sim.url, sim.api_key)
    extra["AIRFLOW_VAR_LOADTEST_REPORT_ROOT"] = str(tmp_path / "reports")
    extra.update(env)
    return airflow_home.dags_test(dag_id, extra)


def _assert_every_call_authenticated(sim: SimulatorHandle) -> None:
    assert sim.requests
    assert all(r.authorized for r in sim.requests), [r for r in sim.requests if not r.authorized]


def _dag_id(example: str) -> str:
    return example  # example files are named after their dag_id


@pytest.mark.parametrize("example", EXAMPLE_DAGS)
def test_example_dag_runs_end_to_end(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, example: str
) -> None:
    result = _run(airflow_home, sim, _dag_id(example), tmp_path)
    assert result.succeeded, result.output[-6000:]
    (start,) = sim.starts()
    assert start.query.get("templateId") == "tpl-nightly"
    (run,) = sim.runs()
    assert run.state(sim.state.now()) == "FINISHED"
    _assert_every_call_authenticated(sim)
    returned = result.xcom(_dag_id(example), "run_load_test")
    assert returned["template_id"] == "tpl-nightly"
    assert returned["state"] == "FINISHED"
    assert returned["report_url"].endswith(
        "/ui/workspace/demo-workspace/project/demo-project/analysis/report/" + returned["report_id"]
    )


@pytest.mark.parametrize("deferrable", ["0", "1"], ids=["sync", "deferrable"])
def test_finished_run_succeeds_in_both_modes(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, deferrable: str
) -> None:
    result = _run(airflow_home, sim, "loadtest_e2e_lifecycle", tmp_path, LOADTEST_E2E_DEFERRABLE=deferrable)
    assert result.succeeded, result.output[-6000:]
    assert len(sim.starts()) == 1
    returned = result.xcom("loadtest_e2e_lifecycle", "run_load_test")
    assert returned["state"] == "FINISHED"
    assert returned["alarms"] and all(a["severity"] == "PASSED" for a in returned["alarms"])
    assert (
        result.xcom("loadtest_e2e_lifecycle", "run_load_test", "_link_LoadTestReportLink")
        == returned["report_url"]
    )
    if deferrable == "1":
        assert "Deferring: the triggerer watches run" in result.output
    _assert_every_call_authenticated(sim)


@pytest.mark.parametrize("deferrable", ["0", "1"], ids=["sync", "deferrable"])
def test_run_ending_in_error_fails_the_task(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, deferrable: str
) -> None:
    result = _run(
        airflow_home,
        sim,
        "loadtest_e2e_lifecycle",
        tmp_path,
        LOADTEST_E2E_SCENARIO="failing-scenario",
        LOADTEST_E2E_DEFERRABLE=deferrable,
    )
    assert not result.succeeded
    assert result.task_states("loadtest_e2e_lifecycle")["run_load_test"][0] == "failed"
    assert "failed in the service (state ERROR)" in result.output
    assert len(sim.starts()) == 1


@pytest.mark.parametrize("deferrable", ["0", "1"], ids=["sync", "deferrable"])
def test_critical_alarm_breaks_the_gate(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, deferrable: str
) -> None:
    result = _run(
        airflow_home,
        sim,
        "loadtest_e2e_lifecycle",
        tmp_path,
        LOADTEST_E2E_SCENARIO="critical-scenario",
        LOADTEST_E2E_GATE="CRITICAL",
        LOADTEST_E2E_DEFERRABLE=deferrable,
    )
    assert not result.succeeded
    assert "broke the quality gate (CRITICAL)" in result.output
    returned = result.xcom("loadtest_e2e_lifecycle", "run_load_test")
    assert {a["severity"] for a in returned["alarms"]} >= {"CRITICAL", "PASSED"}


@pytest.mark.parametrize("deferrable", ["0", "1"], ids=["sync", "deferrable"])
def test_retry_reattaches_after_first_try_lost_the_run(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, deferrable: str
) -> None:
    """The first try dies while the test runs (its status call fails, in the worker or in the
    triggerer); the retry must re-attach to the run, not start another."""
    sim.set_fault("error", route="get_bench_result", status=500, count=5)  # the read's 5 attempts
    result = _run(
        airflow_home,
        sim,
        "loadtest_e2e_lifecycle",
        tmp_path,
        LOADTEST_E2E_RETRIES="1",
        LOADTEST_E2E_DEFERRABLE=deferrable,
    )
    assert result.succeeded, result.output[-6000:]
    assert result.task_states("loadtest_e2e_lifecycle")["run_load_test"] == ("success", 2)
    assert len(sim.starts()) == 1
    if deferrable == "1":  # the first try lost the run in the triggerer; the second took its verdict
        assert "watching it in the triggerer failed" in result.output
        assert "of an earlier try already ended FINISHED: taking its verdict" in result.output


def test_timed_out_try_stops_its_run_and_is_not_retried(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path
) -> None:
    """execution_timeout ends the wait: the run is stopped and the verdict is final, even with
    retries and restart_failed_runs (which only covers runs ending ERROR/ABORTED in the service)."""
    result = _run(
        airflow_home,
        sim,
        "loadtest_e2e_lifecycle",
        tmp_path,
        LOADTEST_E2E_SCENARIO="slow-scenario",
        LOADTEST_E2E_EXECUTION_TIMEOUT="6",
        LOADTEST_E2E_RETRIES="1",
        LOADTEST_E2E_RESTART="1",
    )
    assert not result.succeeded
    assert result.task_states("loadtest_e2e_lifecycle")["run_load_test"] == ("failed", 1)
    (run,) = sim.runs()
    stopped = {r.path.rsplit("/", 1)[-1] for r in sim.requests if r.route == "stop_run"}
    assert run.id in stopped
    assert "Stopping run" in result.output


def test_task_failing_before_a_run_starts_logs_no_second_error(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path
) -> None:
    """No run, so no report link: and no "[error] XCom not found" line that reads like a second failure."""
    result = _run(
        airflow_home, sim, "loadtest_e2e_lifecycle", tmp_path, LOADTEST_E2E_SCENARIO="no-such-scenario"
    )
    assert not result.succeeded
    assert result.task_states("loadtest_e2e_lifecycle")["run_load_test"][0] == "failed"
    assert [r.status for r in sim.starts()] == [404]  # the service refused: no run
    assert "XCom not found" not in result.output
    assert not result.xcom("loadtest_e2e_lifecycle", "run_load_test", "_link_LoadTestReportLink")


@pytest.mark.parametrize("deferrable", ["0", "1"], ids=["sync", "deferrable"])
def test_start_answer_dropped_fails_for_good_with_one_run_billed(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, deferrable: str
) -> None:
    """The service accepts the start, then the answer is lost: retries=1 must not start a second run
    (a deferrable task starts in the worker too, before it defers)."""
    sim.set_fault("accept_then_drop", route="run_scenario", count=1)
    result = _run(
        airflow_home,
        sim,
        "loadtest_e2e_lifecycle",
        tmp_path,
        LOADTEST_E2E_RETRIES="1",
        LOADTEST_E2E_DEFERRABLE=deferrable,
    )
    assert not result.succeeded
    assert result.task_states("loadtest_e2e_lifecycle")["run_load_test"] == ("failed", 1)
    assert "outcome is unknown" in result.output
    assert len(sim.starts()) == 1
    assert len(sim.runs()) == 1


def test_deferred_wait_with_a_connection_stored_in_the_database(tmp_path: Path, sim: SimulatorHandle) -> None:
    """Issue 20, point 3: with the connection added by ``airflow connections add`` (not an environment
    variable), ``airflow dags test`` started the run and then the wait failed in the triggerer ("The
    conn_id `loadtest_default` isn't defined"), leaving the run unwatched. Wherever the triggerer cannot
    read the connection, the wait is handed back to the worker and the run gets its verdict."""
    home = AirflowHome(tmp_path / "home", [Path(__file__).with_name("dags")])
    added = home._run(
        [
            str(Path(__file__).parents[2] / ".venv" / "bin" / "airflow")
            if not Path(sys.executable).with_name("airflow").exists()
            else str(Path(sys.executable).with_name("airflow")),
            "connections",
            "add",
            "loadtest_default",
            "--conn-type",
            "loadtest",
            "--conn-host",
            sim.url,
            "--conn-password",
            sim.api_key,
        ],
        {},
        timeout=120,
    )
    assert added.returncode == 0, added.stdout + added.stderr
    result = home.dags_test("loadtest_e2e_lifecycle", {"LOADTEST_E2E_DEFERRABLE": "1"})
    assert result.succeeded, result.output[-6000:]
    assert result.task_states("loadtest_e2e_lifecycle")["run_load_test"][0] == "success"
    assert len(sim.starts()) == 1
    assert not [r for r in sim.requests if r.route == "stop_run"]
    print("\n".join(line for line in result.output.splitlines() if "triggerer" in line.lower())[-3000:])
