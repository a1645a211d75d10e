"""Adversarial review of issue 17 in a real Airflow 3.3.2 (LocalExecutor, SQLite), bounded, on 127.0.0.1.

Reuses ``test_crash``'s ``Cluster``. Two cases, both about the task instance's id, which Airflow changes
under a running task (``TaskInstance.prepare_db_for_next_try``: ``self.id = uuid7()``) on a clear and when
a scheduler resets an orphaned task; the task state store is addressed by that id
(``/execution/state-store/{task_instance_id}/{key}``), so the try being ended can no longer write to it.

* a person clears the running task: the try's ``on_kill`` decides "clear"; recording the decision fails
  (404: the task instance id it knows no longer exists), and the run is stopped anyway (the decision
  stands); the next try recognises the clear (``max_tries``, or the DAG run's ``clear_number`` under
  Celery, where nothing raises ``max_tries``) and starts exactly one new run.
* a scheduler is killed (SIGKILL, its LocalExecutor task keeps running) and a new one starts: it resets
  the orphaned running task instance (new id, state None). That is infrastructure: the run is neither
  stopped nor blamed on a person (a state of None on the worker is never read as a clear).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_loadtest.simulator import run_simulator
from devtools.airflow_cluster import wait_for
from tests.integration.test_crash import (
    STARTUP_TIMEOUT_S,
    Cluster,
    _finish,
    _runs,
    _seed,
    _stopped,
    _task_process_polling,
)

pytestmark = pytest.mark.integration

DAG_FILE = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

for dag_id, scenario in [("review_clear", "review-clear"), ("review_orphan", "review-orphan")]:
    with DAG(dag_id, schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
        RunScenarioOperator(
            task_id="load_test",
            scenario_id=scenario,
            workspace_id="demo-workspace",
            check_interval=1,
            timeout=180,
            retries=1,
            retry_delay=timedelta(seconds=1),
        )
    globals()[dag_id] = dag
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    seed = _seed()
    seed["scenarios"] += [
        {"id": "review-clear", "projectId": "demo-project", "name": "Review clear", "durationSeconds": 40},
        {"id": "review-orphan", "projectId": "demo-project", "name": "Review orphan", "durationSeconds": 60},
    ]
    with run_simulator(seed) as sim:
        airflow = Cluster(tmp_path_factory.mktemp("review-home"), sim)
        (airflow.home / "dags" / "crash_dags.py").unlink()
        (airflow.home / "dags" / "review_dags.py").write_text(DAG_FILE)
        # A dead scheduler is noticed after 10 s, and orphans are looked for every 5 s (defaults 30/300).
        airflow.env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD"] = "10"
        airflow.env["AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL"] = "5"
        orphans: list[int] = []
        airflow.orphans = orphans  # type: ignore[attr-defined]
        try:
            airflow.start("api-server")
            airflow.start("scheduler")
            airflow.start("dag-processor")
            wait_for(
                "the DAGs to be parsed",
                lambda: len(airflow.query("select dag_id from dag where dag_id like 'review_%'")) == 2,
                STARTUP_TIMEOUT_S,
                every=2,
            )
            yield airflow
        finally:
            airflow.stop_all()
            for pgid in orphans:  # the killed scheduler's process group (its task processes), ours
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)


def _try_log(cluster: Cluster, dag_id: str, attempt: int, scenario_id: str) -> str:
    """The task log of one try, which must show that try starting the scenario's run: the checks
    that a line is *absent* from it would pass on an empty or missing log."""
    logs = list(Path(cluster.home / "logs").glob(f"dag_id={dag_id}/**/attempt={attempt}.log"))
    assert logs, f"no log of try {attempt} of {dag_id} under {cluster.home / 'logs'}"
    text = "".join(log.read_text(errors="replace") for log in logs)
    assert f"Started a load test of scenario '{scenario_id}'" in text, (
        f"the log of try {attempt} of {dag_id} does not show its start:\n{text[-2000:]}"
    )
    return text


def test_the_try_a_person_cleared_records_the_clear_and_stops_its_run(cluster: Cluster) -> None:
    cluster.run(["dags", "trigger", "review_clear"])
    _task_process_polling(cluster, "review-clear")
    time.sleep(2)
    cluster.run(["tasks", "clear", "review_clear", "--task-regex", "load_test", "--yes"])
    state = _finish(cluster, "review_clear")
    runs, stopped = _runs(cluster.sim, "review-clear"), _stopped(cluster.sim, "review-clear")
    first = _try_log(cluster, "review_clear", 1, "review-clear")
    print(f"review_clear: {state}, task {cluster.task('review_clear')}, runs {runs}, stopped {stopped}")
    print("\n".join(line for line in first.splitlines() if "run" in line.lower())[-3000:])
    assert "Not stopping run" not in first, "the cleared try could not record its decision (see the log)"
    assert "was stopped" not in first or "Stopped run" in first, "the cleared try says it stopped the run"
    assert (len(runs), stopped) == (2, runs[:1])


def test_a_scheduler_restart_neither_stops_the_run_nor_blames_a_person(cluster: Cluster) -> None:
    cluster.run(["dags", "trigger", "review_orphan"])
    _task_process_polling(cluster, "review-orphan")
    old = cluster.procs.pop("scheduler")
    cluster.orphans.append(old.pid)  # type: ignore[attr-defined]
    os.kill(old.pid, signal.SIGKILL)  # the scheduler only: its LocalExecutor task keeps running
    old.wait(10)
    cluster.start("scheduler")
    state = _finish(cluster, "review_orphan")
    runs, stopped = _runs(cluster.sim, "review-orphan"), _stopped(cluster.sim, "review-orphan")
    first = _try_log(cluster, "review_orphan", 1, "review-orphan")
    print(f"review_orphan: {state}, task {cluster.task('review_orphan')}, runs {runs}, stopped {stopped}")
    print("\n".join(line for line in first.splitlines() if "run" in line.lower())[-3000:])
    assert (len(runs), stopped) == (1, []), f"runs {runs}, stopped {stopped}"
    assert "a person cleared the task" not in first, "a scheduler restart was taken for a person's clear"
