"""Adversarial review of issue 17: attacks that HELD on main at 7664afa, kept as regression tests.

Each plays an ordering Airflow 3.3.2 produces (real signals where the ordering depends on them) and
asserts the promise; they passed when written. The findings are in ``test_review_issue17.py``.
"""

from __future__ import annotations

import copy
import os
import pickle
import signal
import time
from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.lifecycle import support as run_lifecycle  # where on_kill asks
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
from tests.unit.test_run_lifecycle import (
    RUN_URL,
    STOP_URL,
    FakeStateStore,
    _context,
    _op,
    _posts,
    _service,
)


@pytest.fixture
def real_sigterm(request: pytest.FixtureRequest) -> Any:
    """Install Airflow's ``_on_term`` equivalent (SIGTERM -> ``task.on_kill()``) for ``op``."""
    holder: dict[str, Any] = {}
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: holder["op"].on_kill())
    yield holder
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize(("state", "stops", "final"), [("running", 0, False), ("failed", 1, True)])
def test_a_second_sigterm_during_the_bounded_query_acts_once(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    real_sigterm: dict[str, Any],
    state: str,
    stops: int,
    final: bool,
) -> None:
    """A worker restart signals the task twice (its process group, then the supervisor's forward). The
    second SIGTERM lands while the first ``on_kill`` waits for its query thread: ``on_kill`` re-enters
    (``_kill`` is still None), decides, raises ``WorkerLeaving`` out of the outer ``join``; one decision,
    at most one stop."""
    calls: list[int] = []

    def ti_state(ti: Any) -> tuple[bool, str]:
        calls.append(1)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # the second signal, while the first query is out
            time.sleep(0.3)
        return True, state

    monkeypatch.setattr(run_lifecycle, "task_instance_state", ti_state)
    _service(requests_mock, ["RUNNING"] * 5)
    op = _op(check_interval=10)
    real_sigterm["op"] = op
    sleeps = [0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds
        sleeps[0] += 1
        if sleeps[0] == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(hook_module, "_sleep", sleep)
    with pytest.raises(AirflowException) as caught:
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert isinstance(caught.value, AirflowFailException) is final
    assert len(calls) == 2  # the nested on_kill asked again
    assert _posts(requests_mock, STOP_URL) == stops


def test_a_worker_restart_while_the_files_of_a_finished_run_are_saved_keeps_the_verdict(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """SIGTERM (state running) while ``_finish`` saves the JUnit file: not watching, so ``on_kill``
    only notes it; the save and the verdict go on, nothing is stopped."""
    from tests.conftest import BASE_URL

    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (True, "running"))
    _service(requests_mock, ["RUNNING", "FINISHED"])
    op = _op(check_interval=10, junit_destination=str(tmp_path / "junit.xml"))

    def junit(request: Any, context: Any) -> str:
        op.on_kill()
        return "<testsuites/>"

    requests_mock.get(f"{BASE_URL}/analysis/junit-reports/br-1", text=junit)
    result = op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, STOP_URL) == 0


def test_an_operator_and_a_sensor_copy_and_pickle_after_a_kill(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow deep-copies operators (``prepare_for_execution``, unmapping); the new attributes (a set,
    a frozen ``_Kill``) must copy and pickle."""
    from airflow_provider_loadtest.sensors.run import LoadTestRunSensor

    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (True, "running"))
    op = _op()
    op.on_kill()
    op._stopped.add("br-1")
    sensor = LoadTestRunSensor(task_id="wait", bench_result_id="br-1")
    sensor.on_kill()
    for task in (op, sensor):
        clone = copy.deepcopy(task)
        assert clone._kill == task._kill and clone._stopped == task._stopped
        pickle.loads(pickle.dumps(clone._kill))


def test_the_key_never_appears_in_what_the_kill_paths_say(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every new message of the stop rule (left going, stopped, failed stop, record) without the key."""
    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

    key = LoadTestHook(loadtest_conn_id=loadtest_conn).settings.api_key
    for state in ("running", "failed"):
        monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti, s=state: (True, s))
        _service(requests_mock, ["RUNNING"] * 5)
        requests_mock.post(STOP_URL, status_code=500, text=f"echo {key}")
        store = FakeStateStore()
        op = _op(check_interval=10)
        sleeps = [0]

        def sleep(seconds: float, op: Any = op, sleeps: list[int] = sleeps) -> None:
            clock[0] += seconds
            sleeps[0] += 1
            if sleeps[0] == 2:
                op.on_kill()

        monkeypatch.setattr(hook_module, "_sleep", sleep)
        with pytest.raises(AirflowException) as caught:
            op.execute(_context(store))  # type: ignore[arg-type]
        assert key not in str(caught.value)
        assert key not in repr(store.data[RUN_RECORD_KEY])
    out = capsys.readouterr()
    assert key not in out.out + out.err
    assert _posts(requests_mock, RUN_URL) >= 1
