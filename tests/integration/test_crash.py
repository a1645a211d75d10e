"""Crash tests in a real Airflow: a worker killed mid-start and mid-poll, a triggerer restarted mid-wait.

A throwaway AIRFLOW_HOME (SQLite, LocalExecutor) runs the real components as separate processes: API
server (the execution API the task processes talk to), scheduler, DAG processor and triggerer. The
simulator runs in this process on 127.0.0.1. Each case asserts the headline promise: one run billed.

* kill during the start: the simulator holds the start's answer (a ``delay`` fault, the run is created
  when it ends); the task process holding the connection is SIGKILLed; Airflow retries.
* kill during polling: the run goes; the task process is SIGKILLed between two polls; Airflow retries.
* triggerer restarted: the deferred wait is in the triggerer; it is stopped (SIGTERM) and a new one
  started, which takes the trigger over.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from airflow_provider_loadtest.simulator.faults import FaultSpec
from devtools.airflow_cluster import AirflowProcesses, clean_environ, free_port, wait_for
from tests.chaos.runner import default_seed
from tests.load import cpu_hog
from tests.production.hostname import SLOW_STATE_ENV

pytestmark = pytest.mark.integration

START_HELD_S = 25.0  # how long the simulator holds the first start's answer
CASE_TIMEOUT_S = 240.0
STARTUP_TIMEOUT_S = 180.0
#: The triggerer's own environment: a connection the workers have and it cannot read (a secrets backend
#: configured on workers only, a variable missing from its deployment).
#: And a slow control plane (issue 34): its task-instance state reads (a trigger's ``on_kill``) answered
#: after 6-20 s, as a busy API server does (``tests.production.hostname``).
TRIGGERER_ENV = {
    "AIRFLOW_CONN_LOADTEST_WORKERS_ONLY": "not a connection",
    "AIRFLOW__CORE__HOSTNAME_CALLABLE": "tests.production.hostname.from_env",
    SLOW_STATE_ENV: "6,20",
}

DAG_FILE = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

for dag_id, scenario, deferrable in [
    ("crash_start", "crash-start", False),
    ("crash_poll", "crash-poll", False),
    ("crash_trigger", "crash-trigger", True),
    ("crash_clear", "crash-clear", False),
    ("crash_sigterm", "crash-sigterm", False),
    ("crash_markfailed", "crash-markfailed", False),
    ("crash_clearrun", "crash-clearrun", False),
    ("crash_handback", "crash-handback", True),
]:
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
        RunScenarioOperator(
            task_id="load_test",
            scenario_id=scenario,
            workspace_id="demo-workspace",
            check_interval=1,
            # the triggerer cannot read this connection (see TRIGGERER_ENV): its waits are handed back
            loadtest_conn_id="loadtest_workers_only" if dag_id == "crash_handback" else "loadtest_default",
            timeout=180,
            deferrable=deferrable,
            retries=1,
            retry_delay=timedelta(seconds=1),
        )
    globals()[dag_id] = dag
"""


def _seed() -> dict[str, Any]:
    seed = default_seed()
    seed["scenarios"] += [
        {"id": "crash-start", "projectId": "demo-project", "name": "Crash start", "durationSeconds": 15},
        {"id": "crash-poll", "projectId": "demo-project", "name": "Crash poll", "durationSeconds": 40},
        {"id": "crash-trigger", "projectId": "demo-project", "name": "Crash trigger", "durationSeconds": 60},
        {"id": "crash-clear", "projectId": "demo-project", "name": "Crash clear", "durationSeconds": 3},
        {"id": "crash-sigterm", "projectId": "demo-project", "name": "Crash sigterm", "durationSeconds": 40},
        {"id": "crash-markfailed", "projectId": "demo-project", "name": "Mark failed", "durationSeconds": 60},
        {"id": "crash-clearrun", "projectId": "demo-project", "name": "Clear running", "durationSeconds": 30},
        {"id": "crash-handback", "projectId": "demo-project", "name": "Handback", "durationSeconds": 8},
    ]
    return seed


class Cluster(AirflowProcesses):
    """The Airflow components of one home (SQLite, LocalExecutor), as process groups we always stop."""

    def __init__(self, home: Path, sim: SimulatorHandle) -> None:
        self.port = free_port()
        self.sim = sim
        env = clean_environ()
        env.update(
            AIRFLOW_HOME=str(home),
            AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__EXECUTOR="LocalExecutor",
            AIRFLOW__CORE__PARALLELISM="4",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{self.port}/execution/",
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__PORT=str(self.port),
            AIRFLOW__API_AUTH__JWT_SECRET="crash-test-secret-not-for-production-0123456789",
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT="20",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL="2",
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC="1",
            AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD="6",
            AIRFLOW_CONN_LOADTEST_DEFAULT=json.dumps(
                {"conn_type": "loadtest", "host": sim.url, "password": sim.api_key}
            ),
            AIRFLOW_CONN_LOADTEST_WORKERS_ONLY=json.dumps(
                {"conn_type": "loadtest", "host": sim.url, "password": sim.api_key}
            ),
        )
        super().__init__(home, env)
        (home / "dags").mkdir(parents=True)
        (home / "dags" / "crash_dags.py").write_text(DAG_FILE)
        self.run(["db", "migrate"], timeout=300)

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.home / "airflow.db", timeout=10)) as db:
            return db.execute(sql, args).fetchall()

    def query_write(self, sql: str, *args: Any) -> None:
        """What a person's action does to a task instance's row (the UI's "mark failed" writes the same)."""
        with closing(sqlite3.connect(self.home / "airflow.db", timeout=10)) as db:
            db.execute(sql, args)
            db.commit()

    def dag_run_state(self, dag_id: str) -> str | None:
        rows = self.query("select state from dag_run where dag_id = ? order by id desc limit 1", dag_id)
        return str(rows[0][0]) if rows else None

    def task(self, dag_id: str) -> tuple[str, int] | None:
        rows = self.query("select state, try_number from task_instance where dag_id = ?", dag_id)
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def process_talking_to_simulator(self) -> psutil.Process | None:
        """The task process with a connection open to the simulator (the one making the call)."""
        port = int(self.sim.url.rsplit(":", 1)[1])
        found = self.processes_talking_to(port, ["scheduler"])
        return found[0] if found else None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # On a loaded machine (issue 34): the cores busy beside the cluster for the whole module.
    with cpu_hog(), run_simulator(_seed()) as sim:
        airflow = Cluster(tmp_path_factory.mktemp("crash-home"), sim)
        try:
            airflow.start("api-server")
            airflow.start("scheduler")
            airflow.start("dag-processor")
            airflow.start("triggerer", env=TRIGGERER_ENV)
            try:
                wait_for(
                    "the DAGs to be parsed",
                    lambda: len(airflow.query("select dag_id from dag where dag_id like 'crash_%'")) == 8,
                    STARTUP_TIMEOUT_S,
                    every=2,
                )
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{airflow.log_tail()}") from None
            yield airflow
        finally:
            airflow.stop_all()


def _runs(sim: SimulatorHandle, scenario: str) -> list[str]:
    return [run.id for run in sim.runs(scenario)]


def _stopped(sim: SimulatorHandle, scenario: str) -> list[str]:
    """The runs of ``scenario`` that received a stop call."""
    return [run.id for run in sim.runs(scenario) if run.stopped_at is not None]


def _task_process_polling(cluster: Cluster, scenario: str) -> psutil.Process:
    """The task process of ``scenario``'s running task, once its run is RUNNING and polled."""
    wait_for("the run to start", lambda: _runs(cluster.sim, scenario), 120)
    return wait_for("the task process polling", cluster.process_talking_to_simulator, 60, every=0.2)


def _finish(cluster: Cluster, dag_id: str) -> str:
    try:
        state = wait_for(
            f"{dag_id} to end",
            lambda: (s := cluster.dag_run_state(dag_id)) in ("success", "failed") and s,
            CASE_TIMEOUT_S,
            every=2,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; task {cluster.task(dag_id)}\n{cluster.log_tail()}") from None
    return str(state)


def test_worker_killed_during_the_start_then_the_retry_bills_one_run(cluster: Cluster) -> None:
    sim = cluster.sim
    sim.state.add_fault(
        FaultSpec(
            kind="delay", route="run_scenario", scenario_id="crash-start", delay_seconds=START_HELD_S, count=1
        )
    )
    cluster.run(["dags", "trigger", "crash_start"])
    victim = wait_for("the start request", cluster.process_talking_to_simulator, 120)
    assert _runs(sim, "crash-start") == []  # the answer is held: the start is in flight
    killed_at = time.monotonic()
    victim.send_signal(signal.SIGKILL)
    state = _finish(cluster, "crash_start")
    time.sleep(max(0.0, killed_at + START_HELD_S + 2 - time.monotonic()))  # the held start lands
    runs = _runs(sim, "crash-start")
    print(f"crash_start: DAG run {state}, task {cluster.task('crash_start')}, runs billed {runs}")
    assert len(runs) == 1, f"{len(runs)} runs billed after a kill during the start: {runs}"


def test_worker_killed_during_polling_then_the_retry_bills_one_run(cluster: Cluster) -> None:
    sim = cluster.sim
    cluster.run(["dags", "trigger", "crash_poll"])
    wait_for("the run to start", lambda: _runs(sim, "crash-poll"), 120)
    run_id = _runs(sim, "crash-poll")[0]
    wait_for(
        "two polls",
        lambda: sum(1 for r in sim.requests if r.path.endswith(f"/bench-results/{run_id}")) >= 2,
        60,
    )
    victim = wait_for("the polling task process", cluster.process_talking_to_simulator, 30, every=0.2)
    victim.send_signal(signal.SIGKILL)
    state = _finish(cluster, "crash_poll")
    runs = _runs(sim, "crash-poll")
    print(f"crash_poll: DAG run {state}, task {cluster.task('crash_poll')}, runs billed {runs}")
    assert len(runs) == 1, f"{len(runs)} runs billed after a kill during polling: {runs}"
    assert state == "success"


def test_triggerer_restarted_mid_wait_bills_one_run(cluster: Cluster) -> None:
    sim = cluster.sim
    cluster.run(["dags", "trigger", "crash_trigger"])
    wait_for("the task to defer", lambda: (cluster.task("crash_trigger") or ("",))[0] == "deferred", 120)
    run_id = wait_for("the run", lambda: _runs(sim, "crash-trigger"), 30)[0]
    wait_for(
        "the triggerer to poll",
        lambda: any(r.path.endswith(f"/bench-results/{run_id}") for r in sim.requests),
        60,
    )
    cluster.stop("triggerer")
    polls_before = len(sim.requests)
    cluster.start("triggerer", env=TRIGGERER_ENV)
    wait_for("the new triggerer to poll", lambda: len(sim.requests) > polls_before, 120)
    state = _finish(cluster, "crash_trigger")
    runs = _runs(sim, "crash-trigger")
    print(f"crash_trigger: DAG run {state}, task {cluster.task('crash_trigger')}, runs billed {runs}")
    assert len(runs) == 1, f"{len(runs)} runs billed after a triggerer restart: {runs}"
    assert state == "success"


def test_a_persons_clear_starts_a_new_run_a_retry_never_does(cluster: Cluster) -> None:
    """A clear raises the task instance's max_tries in the same DAG run (whose task state store still
    holds the first run's record): that is a person asking for a new load test, so exactly one more
    run is billed, where a retry would have taken the first run's verdict."""
    sim = cluster.sim
    cluster.run(["dags", "trigger", "crash_clear"])
    assert _finish(cluster, "crash_clear") == "success"
    assert len(_runs(sim, "crash-clear")) == 1
    cluster.run(["tasks", "clear", "crash_clear", "--task-regex", "load_test", "--yes"])
    wait_for(
        "the cleared task to run again and succeed",
        lambda: cluster.task("crash_clear") == ("success", 2),
        CASE_TIMEOUT_S,
        every=2,
    )
    runs = _runs(sim, "crash-clear")
    print(f"crash_clear: task {cluster.task('crash_clear')}, runs billed {runs}")
    assert len(runs) == 2, f"a clear should start exactly one new run, billed: {runs}"


def test_the_release_gate_example_triggers_its_deployment_dag_through_the_asset(cluster: Cluster) -> None:
    """``loadtest_release_gate`` as a user deploys it: scheduled by the scheduler (its cron's latest
    interval), its passing verdict updates the asset, and the scheduler then runs
    ``loadtest_release_deploy``, whose tasks read the verdict from the triggering asset event.
    ``dags test`` cannot show this (it has no asset-triggered runs). Last in this module: the gate's
    task would otherwise be one more process talking to the simulator while a crash case looks for
    its victim."""
    sim = cluster.sim
    source = Path(__file__).resolve().parents[2] / "example_dags" / "loadtest_release_gate.py"
    (cluster.home / "dags" / source.name).write_text(source.read_text())
    gate_state = _finish(cluster, "loadtest_release_gate")
    assert gate_state == "success", f"gate {cluster.task('loadtest_release_gate')}\n{cluster.log_tail()}"
    deploy_state = _finish(cluster, "loadtest_release_deploy")
    assert deploy_state == "success", cluster.log_tail()
    (run,) = sim.runs("demo-scenario")
    logs = "".join(
        log.read_text(errors="replace")
        for log in (cluster.home / "logs").glob("dag_id=loadtest_release_deploy/**/*.log")
    )
    assert f"Run {run.id} of scenario demo-scenario passed its gate (FINISHED)" in logs
    assert "Deploying: p95" in logs


def test_a_worker_restart_mid_wait_leaves_the_run_going_and_the_retry_reattaches(cluster: Cluster) -> None:
    """Issue 17, point 2: SIGTERM to the worker's processes (``systemctl restart``) reached ``on_kill``,
    which stopped a healthy run; the same try judged it ABORTED and failed for good."""
    cluster.run(["dags", "trigger", "crash_sigterm"])
    task = _task_process_polling(cluster, "crash-sigterm")
    supervisor = task.parent()
    time.sleep(2)
    for proc in (supervisor, task):  # the process group's signal: the supervisor forwards it again
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
    state = _finish(cluster, "crash_sigterm")
    runs, stopped = _runs(cluster.sim, "crash-sigterm"), _stopped(cluster.sim, "crash-sigterm")
    print(f"crash_sigterm: task {cluster.task('crash_sigterm')}, runs {runs}, stopped {stopped}")
    assert (len(runs), stopped) == (1, []), f"runs {runs}, stopped {stopped}\n{cluster.log_tail()}"
    assert state == "success", cluster.log_tail()
    assert cluster.task("crash_sigterm") == ("success", 2)  # the retry re-attached and judged it


def test_marking_a_running_task_failed_stops_its_run(cluster: Cluster) -> None:
    """A person's decision: Airflow's heartbeat answer tells the task's supervisor, which ends the task;
    ``on_kill`` reads the state and stops the run, once."""
    cluster.run(["dags", "trigger", "crash_markfailed"])
    _task_process_polling(cluster, "crash-markfailed")
    cluster.query_write("update task_instance set state = 'failed' where dag_id = ?", "crash_markfailed")
    wait_for(
        "the run to be stopped",
        lambda: _stopped(cluster.sim, "crash-markfailed"),
        60,
    )
    runs, stopped = _runs(cluster.sim, "crash-markfailed"), _stopped(cluster.sim, "crash-markfailed")
    stops = [r for r in cluster.sim.requests if r.route == "stop_run"]
    print(f"crash_markfailed: runs {runs}, stopped {stopped}, stop calls {len(stops)}")
    assert (len(runs), len(stopped)) == (1, 1)


def test_clearing_a_running_task_stops_its_run_and_starts_exactly_one_new(cluster: Cluster) -> None:
    """Issue 17, point 4: a clear of a running task must give exactly one new run, whatever order the
    scheduler and the next try see it in; the old run is stopped (a person asked for a new one)."""
    cluster.run(["dags", "trigger", "crash_clearrun"])
    _task_process_polling(cluster, "crash-clearrun")
    cluster.run(["tasks", "clear", "crash_clearrun", "--task-regex", "load_test", "--yes"])
    cleared_by = cluster.sim.state.clock.now()  # the clear is in Airflow's database by then
    assert _finish(cluster, "crash_clearrun") == "success", cluster.log_tail()
    runs, stopped = _runs(cluster.sim, "crash-clearrun"), _stopped(cluster.sim, "crash-clearrun")
    print(f"crash_clearrun: task {cluster.task('crash_clearrun')}, runs {runs}, stopped {stopped}")
    assert len(runs) == 2, f"a clear should start exactly one new run: {runs}\n{cluster.log_tail()}"
    first = cluster.sim.runs("crash-clearrun")[0]
    if first.started_at + first.duration < cleared_by:
        # A busy machine: the CLI took longer than the run's 30 s, so the run may have ended on its own
        # before the clear came, and then nothing was left to stop. Only a run still going is judged.
        assert stopped in ([], runs[:1])
    else:
        assert stopped == runs[:1], "the run of before the clear went on"


def test_a_wait_the_triggerer_cannot_do_is_handed_back_to_a_worker(cluster: Cluster) -> None:
    """Issue 20, point 3, with a real triggerer: the deferred wait cannot read its connection there; it is
    handed back, and a worker watches the run to its verdict (before, the task failed, the run unwatched)."""
    cluster.run(["dags", "trigger", "crash_handback"])
    state = _finish(cluster, "crash_handback")
    runs, stopped = _runs(cluster.sim, "crash-handback"), _stopped(cluster.sim, "crash-handback")
    print(f"crash_handback: task {cluster.task('crash_handback')}, runs {runs}, stopped {stopped}")
    assert state == "success", cluster.log_tail()
    assert (len(runs), stopped) == (1, [])
    assert cluster.task("crash_handback") == ("success", 1)  # no retry was needed
