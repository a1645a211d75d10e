"""Who may stop a load test (issue 17): a person, the task's timeout or the gate, never the watcher leaving.

Each case plays what Airflow does in production, at the operator's and the trigger's boundary:
``on_kill`` called from the SIGTERM handler while the wait sleeps (a worker restart, a person's mark
failed or clear, a lost heartbeat), the triggerer cancelling a wait it no longer holds, the next try
reading the run record. The task instance's state "as the API server sees it" is what
``lifecycle.support.task_instance_state`` answers; the tests set it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import (
    AIRFLOW_V_3_3_PLUS,
    AirflowException,
    AirflowFailException,
    TaskDeferred,
)
from airflow_provider_loadtest.decisions import stops
from airflow_provider_loadtest.decisions.run_record import RunRecord, plan_try
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.lifecycle import support as run_lifecycle  # where on_kill asks
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY, RunScenarioOperator
from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger
from tests.unit.test_run_lifecycle import (
    RUN_URL,
    STOP_URL,
    FakeStateStore,
    _context,
    _op,
    _plug_answering_run,
    _posts,
    _record,
    _saved_record,
    _service,
)

# --- the rule, sans I/O ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "readable", "cause"),
    [
        ("running", True, None),  # a worker shutdown or restart: the task is still running for Airflow
        ("up_for_retry", True, None),  # Airflow gave up on a lost heartbeat and will retry
        ("queued", True, None),
        ("scheduled", True, None),
        (None, False, None),  # the API server cannot be reached (a database outage)
        ("failed", False, None),  # whatever it says, unreadable means unknown
        ("restarting", True, "clear"),  # a person cleared the running task
        (None, True, None),  # a restarted scheduler resetting a task it cannot adopt: infrastructure
        ("failed", True, "marked_failed"),
        ("success", True, "marked_success"),
        ("FAILED", True, "marked_failed"),  # the enum's value, any case
    ],
)
def test_cause_on_worker(state: Any, readable: bool, cause: str | None) -> None:
    assert stops.cause_on_worker(state, readable=readable) == cause


@pytest.mark.parametrize(
    ("state", "readable", "cause"),
    [
        ("deferred", True, None),  # another triggerer took the wait over
        ("scheduled", True, None),  # the event fired (elsewhere): the task resumes on a worker
        ("running", True, None),
        ("up_for_retry", True, None),
        (None, True, None),  # a clear: the next try stops the old run and records why
        ("restarting", True, None),
        ("failed", False, None),
        ("failed", True, "marked_failed"),
        ("success", True, "marked_success"),
    ],
)
def test_cause_in_triggerer(state: Any, readable: bool, cause: str | None) -> None:
    assert stops.cause_in_triggerer(state, readable=readable) == cause


def test_a_recorded_clear_starts_a_new_run_whatever_max_tries_says() -> None:
    """Issue 17, point 4: Airflow raises max_tries after a running task's clear only when the scheduler
    handles the executor event first; the record of the try that saw the clear decides instead."""
    run = _saved_record()
    clear = stops.decision("br-1", "clear", 1_000.0, "task instance state restarting")
    record = RunRecord("sc-1", 900.0, 2, run, clear)
    assert plan_try(record, max_tries=2).action == "start"
    assert plan_try(RunRecord("sc-1", 900.0, 2, run), max_tries=2).action == "check_run"
    timeout = stops.decision("br-1", "timeout", 1_000.0)
    assert plan_try(RunRecord("sc-1", 900.0, 2, run, timeout), max_tries=2).action == "check_run"


def test_a_stop_decision_round_trips_and_belongs_to_its_run() -> None:
    stop = stops.decision("br-1", "marked_failed", 1_000.0, "task instance state failed")
    record = RunRecord("sc-1", 900.0, 2, _saved_record(), stop)
    assert RunRecord.from_store(record.to_store()) == record
    other = {**record.to_store(), "stopped": {**stop.to_store(), "bench_result_id": "br-2"}}
    assert RunRecord.from_store(other).stopped is None  # type: ignore[union-attr]
    assert RunRecord.from_store({**record.to_store(), "stopped": {"by": "nonsense"}}).stopped is None  # type: ignore[union-attr]


# --- the worker: on_kill from the SIGTERM handler, mid-wait -----------------------------------------


@pytest.fixture
def ti_state(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the API server answers for the task instance's state: ``[readable, state]``."""
    answer: list[Any] = [True, "running"]
    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: tuple(answer))
    return answer


def _killed_during_the_wait(
    monkeypatch: pytest.MonkeyPatch,
    op: RunScenarioOperator,
    clock: list[float],
    *,
    at_sleep: int = 2,
    times: int = 1,
) -> None:
    """SIGTERM arrives while the wait sleeps (``times`` signals: a worker restart signals the process
    group and the supervisor forwards it again): Airflow's handler calls ``on_kill``."""
    sleeps = [0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds
        sleeps[0] += 1
        if sleeps[0] == at_sleep:
            for _ in range(times - 1):
                op.on_kill()  # a signal while not watching: remembered, nothing raised
            op._watching = True  # the last one interrupts the wait
            op.on_kill()

    monkeypatch.setattr(hook_module, "_sleep", sleep)


def test_a_worker_restart_leaves_the_run_going_and_the_retry_reattaches(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 17, point 2: SIGTERM to the worker's process group (systemctl restart) reached on_kill twice;
    the run was stopped, judged ABORTED "from outside" and failed for good with retries unused."""
    _service(requests_mock, ["RUNNING"] * 3 + ["RUNNING", "FINISHED"])
    store = FakeStateStore()
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock, times=2)
    with pytest.raises(
        AirflowException, match="It was not stopped: a retry of this task re-attaches"
    ) as caught:
        op.execute(_context(store))  # type: ignore[arg-type]
    assert not isinstance(caught.value, AirflowFailException)  # retries are used
    assert _posts(requests_mock, STOP_URL) == 0
    assert store.data[RUN_RECORD_KEY]["stopped"] is None
    monkeypatch.setattr(hook_module, "_sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    retried = _op(check_interval=10).execute(_context(store, try_number=2))  # type: ignore[arg-type]
    assert retried["state"] == "FINISHED"
    assert (_posts(requests_mock, RUN_URL), _posts(requests_mock, STOP_URL)) == (1, 0)


def test_a_lost_heartbeat_with_the_api_server_unreachable_leaves_the_run_going(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 17, point 3: a metadata-database outage; the supervisor kills the task after failed
    heartbeats, and the state cannot be read: in doubt, re-attach rather than stop."""
    ti_state[:] = [False, "ServerResponseError: 500"]
    _service(requests_mock, ["RUNNING"] * 5)
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowException, match="its state could not be read") as caught:
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert not isinstance(caught.value, AirflowFailException)
    assert _posts(requests_mock, STOP_URL) == 0


def test_a_query_that_hangs_is_bounded_and_leaves_the_run_going(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor's channel may be held by the interrupted main thread: the question is asked from a
    thread of its own and given up after ``KILL_QUERY_S``."""
    import threading

    blocked = threading.Event()
    monkeypatch.setattr(run_lifecycle, "KILL_QUERY_S", 0.2)
    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (blocked.wait(5), "never"))
    _service(requests_mock, ["RUNNING"] * 5)
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowException, match=r"no answer within 0\.2 s"):
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    blocked.set()
    assert _posts(requests_mock, STOP_URL) == 0


@pytest.mark.parametrize(("state", "by"), [("failed", "marked_failed"), ("success", "marked_success")])
def test_a_person_ending_the_task_stops_the_run_once_and_records_why(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    state: str,
    by: str,
) -> None:
    ti_state[:] = [True, state]
    _service(requests_mock, ["RUNNING"] * 5)
    store = FakeStateStore()
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock, times=2)
    with pytest.raises(AirflowFailException, match=r"a person marked the task .*run br-1: it was stopped"):
        op.execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1
    assert store.data[RUN_RECORD_KEY]["stopped"]["by"] == by


def test_a_clear_while_running_stops_the_run_and_the_next_try_starts_one_with_the_old_max_tries(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 17, point 4: the next try started before the scheduler raised max_tries; it judged the
    stopped run ABORTED and failed. The record of the clear makes it start the new run."""
    ti_state[:] = [True, "restarting"]
    _service(requests_mock, ["RUNNING"] * 3 + ["ABORTED", "RUNNING", "FINISHED"])
    store = FakeStateStore()
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowFailException, match="a person cleared the task"):
        op.execute(_context(store, max_tries=2))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1
    assert store.data[RUN_RECORD_KEY]["stopped"]["by"] == "clear"
    monkeypatch.setattr(hook_module, "_sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    _service(requests_mock, ["RUNNING", "FINISHED"])
    result = _op(check_interval=10).execute(_context(store, max_tries=2, try_number=2))  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, RUN_URL) == 2  # the first try's run and the new one
    assert _posts(requests_mock, STOP_URL) == 1  # the old run is not stopped twice
    assert "The task was cleared while run br-1 went" in capsys.readouterr().out


def test_a_kill_during_the_start_is_acted_on_once_the_run_is_known(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
) -> None:
    """SIGTERM while the start request is in flight: nothing to stop yet, the start must not be broken
    (its outcome would be unknown); the wait that follows acts on the kill."""
    _service(requests_mock, ["RUNNING"] * 3)
    store = FakeStateStore()
    op = _op(check_interval=10)

    def start(request: Any, context: Any) -> dict[str, Any]:
        op.on_kill()  # the signal arrives while the start's answer is on its way
        from tests.unit.test_hook import BENCH_REPORT

        return BENCH_REPORT

    requests_mock.post(RUN_URL, json=start)
    with pytest.raises(AirflowException, match="It was not stopped") as caught:
        op.execute(_context(store))  # type: ignore[arg-type]
    assert not isinstance(caught.value, AirflowFailException)
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"  # the retry re-attaches
    assert _posts(requests_mock, STOP_URL) == 0
    ti_state[:] = [True, "failed"]
    op2 = _op(check_interval=10)
    requests_mock.post(RUN_URL, json=lambda r, c: (op2.on_kill(), start(r, c))[1])
    with pytest.raises(AirflowFailException, match="a person marked the task failed"):
        op2.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1


def test_an_unrecordable_decision_still_stops_the_run(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A person's decision stands even when the record cannot be written (a clear of a running task
    gives it a new id, and the store, addressed by id, answers 404): the next try recognises the clear
    by the DAG run's clear_number instead."""
    ti_state[:] = [True, "restarting"]
    _service(requests_mock, ["RUNNING"] * 5)
    store = FakeStateStore(fail_sets=(3,))  # in flight, the run, then the decision's write fails
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowFailException, match="it was stopped"):
        op.execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1


def test_a_retry_names_the_timeout_that_stopped_its_run_not_outside(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """A stop this task decided (its timeout) is never blamed on "outside" by the try that finds it."""
    stop = stops.decision("br-1", "timeout", 1_000_000.0, "execution_timeout")
    record = {**_record(_saved_record()), "stopped": stop.to_store()}
    _service(requests_mock, ["ABORTED", "ABORTED"])
    with pytest.raises(AirflowFailException) as caught:
        _op(restart_failed_runs=True).execute(
            _context(FakeStateStore({RUN_RECORD_KEY: record}), try_number=2)
        )  # type: ignore[arg-type]
    message = str(caught.value)
    assert "because the task's timeout passed (execution_timeout)" in message
    assert "outside" not in message
    assert _posts(requests_mock, RUN_URL) == 0  # restart_failed_runs does not restart a run it stopped


def test_a_timeout_in_the_watch_is_recorded(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"] * 10)
    store = FakeStateStore()
    with pytest.raises(AirflowFailException, match="timeout passed; it was stopped"):
        _op(check_interval=10, timeout=25).execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1
    assert store.data[RUN_RECORD_KEY]["stopped"]["by"] == "timeout"


def test_a_clear_of_a_deferred_task_stops_the_old_run_before_starting_the_new(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """A deferred task's clear raises max_tries at once; the trigger leaves the run (it cannot record
    why), so the next try stops it, recording the clear, then starts the new one."""
    store = FakeStateStore({RUN_RECORD_KEY: _record(_saved_record(), max_tries=1)})
    _service(requests_mock, ["RUNNING", "FINISHED"])
    result = _op().execute(_context(store, max_tries=3, try_number=3))  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert (_posts(requests_mock, STOP_URL), _posts(requests_mock, RUN_URL)) == (1, 1)


# --- the triggerer --------------------------------------------------------------------------------


def _trigger() -> LoadTestRunTrigger:
    from types import SimpleNamespace

    trigger = LoadTestRunTrigger(
        loadtest_conn_id="loadtest_default", run_record=_saved_record(), options={}, started_at=0
    )
    trigger.task_instance = SimpleNamespace(  # type: ignore[assignment]
        dag_id="d", run_id="r", task_id="run", map_index=-1, try_number=1
    )
    return trigger


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="Airflow calls BaseTrigger.on_kill from 3.3 on")
@pytest.mark.parametrize(
    ("readable", "state", "run_state", "calls"),
    [
        (True, "deferred", "RUNNING", []),  # the failover: another triggerer holds the wait
        (True, "scheduled", "RUNNING", []),  # the event fired elsewhere
        (True, None, "RUNNING", []),  # a clear: the next try stops it
        (False, "unreachable", "RUNNING", []),
        (True, "failed", "RUNNING", ["GET", "POST"]),  # marked failed: read the run, then stop it
        (True, "success", "FINISHED", ["GET"]),  # already ended: nothing to stop
    ],
)
def test_trigger_on_kill_stops_only_for_a_person(
    loadtest_conn: str,
    monkeypatch: pytest.MonkeyPatch,
    readable: bool,
    state: Any,
    run_state: str,
    calls: list[str],
) -> None:
    """Issue 17, point 1: a triggerer that stalled past its health threshold lost its waits to the other
    triggerer; on waking it cancelled them, Airflow called on_kill, and every run was stopped."""
    from tests.unit.test_stop_pending import quick_asks

    quick_asks(monkeypatch, budget_s=5.0 if readable else 0.3)  # an unreadable state: the budget runs out
    seen = _plug_answering_run(monkeypatch, run_state)
    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (readable, state))
    asyncio.run(_trigger().on_kill())
    assert seen == calls


def test_a_trigger_that_cannot_read_its_connection_hands_the_wait_back(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20, point 3: the triggerer could not read a connection the worker could; the run went on
    unwatched. The wait now goes on on the worker, to the run's verdict."""
    from airflow_provider_loadtest.hooks import async_client

    async def unreadable(conn_id: str) -> Any:
        raise LookupError(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(async_client, "settings_for", unreadable)
    _service(requests_mock, ["RUNNING", "RUNNING", "FINISHED"])
    store = FakeStateStore()
    context = _context(store)
    op = _op(deferrable=True)
    with pytest.raises(TaskDeferred) as caught:
        op.execute(context)  # type: ignore[arg-type]

    async def first_event() -> Any:
        async for event in caught.value.trigger.run():
            return event.payload
        return None

    event = asyncio.run(first_event())
    assert event["status"] == "handback"
    assert "isn't defined" in event["message"]
    result = op.execute_complete(context, event)  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, STOP_URL) == 0


def test_a_trigger_that_failed_to_load_in_the_triggerer_is_taken_back_by_the_worker(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """Airflow resumes a task whose trigger crashed (or could not be imported) only to fail it
    (``__fail__``); the run this task recorded is watched on the worker instead."""
    from unittest import mock

    _service(requests_mock, ["RUNNING", "FINISHED"])
    context = _context(FakeStateStore({RUN_RECORD_KEY: _record(_saved_record())}))
    context["ti"].xcom_pull = mock.MagicMock(return_value=_saved_record())
    op = _op(deferrable=True)
    result = op.resume_execution(
        "__fail__", {"error": "Trigger failure", "traceback": ["ImportError"]}, context
    )  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, RUN_URL) == 0
    # Airflow's own deferral timeout is not a handback: the task fails as Airflow says.
    from airflow_provider_loadtest.compat import TaskDeferralTimeout

    with pytest.raises(TaskDeferralTimeout):
        _op(deferrable=True).resume_execution("__fail__", {"error": "Trigger timeout"}, context)  # type: ignore[arg-type]


def _cleared_dag_run(context: dict[str, Any], clear_number: int) -> dict[str, Any]:
    from types import SimpleNamespace

    context["dag_run"] = SimpleNamespace(clear_number=clear_number, run_id="r", conf={})
    return context


@pytest.mark.parametrize(
    ("old_run", "runs", "stops"),
    [
        (["RUNNING", "RUNNING", "ABORTED"], 2, 0),  # the cleared try's stop lands while we look: new run
        (["RUNNING"] * 20, 1, 0),  # still going after the settle time: not stopped by a clear, re-attach
        (["FINISHED"], 1, 0),  # it finished: its verdict
    ],
    ids=["stopped-by-the-clear", "another-task-was-cleared", "finished"],
)
def test_a_grown_clear_number_is_read_with_the_run_it_left(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    old_run: list[str],
    runs: int,
    stops: int,
) -> None:
    """A clear of the DAG run since the run was recorded, with nothing else to tell: a run that turns
    ABORTED within the settle time was stopped by the clear of this task (a new run starts); a run still
    going was not (another task of the DAG run was cleared while this one was being retried): re-attach,
    never a second run beside it."""
    from airflow_provider_loadtest.operators import run_scenario

    monkeypatch.setattr(run_scenario, "_pause", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(run_scenario.time, "monotonic", lambda: clock[0])
    record = {**_record(_saved_record(), max_tries=1), "clear_number": 0}
    store = FakeStateStore({RUN_RECORD_KEY: record})
    _service(requests_mock, [*old_run, "RUNNING", "FINISHED"])
    context = _cleared_dag_run(_context(store, max_tries=1, try_number=2), clear_number=1)
    _op(check_interval=10).execute(context)  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == runs - 1  # the old run was started before this test
    assert _posts(requests_mock, STOP_URL) == stops


def test_the_clear_number_is_recorded_with_the_start(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["FINISHED"])
    store = FakeStateStore()
    _op().execute(_cleared_dag_run(_context(store), clear_number=3))  # type: ignore[arg-type]
    assert store.data[RUN_RECORD_KEY]["clear_number"] == 3


def test_the_trigger_carries_who_may_stop_the_run() -> None:
    """A sensor's deferred wait never stops the run on a person's action; triggers stored by earlier
    versions (no field) were the operator's."""
    trigger = LoadTestRunTrigger(
        loadtest_conn_id="c", run_record=_saved_record(), options={}, started_at=0, stops_on_kill=False
    )
    _, kwargs = trigger.serialize()
    assert kwargs["stops_on_kill"] is False
    del kwargs["stops_on_kill"]
    assert LoadTestRunTrigger(**kwargs).stops_on_kill is True


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="Airflow calls BaseTrigger.on_kill from 3.3 on")
def test_the_triggers_stop_survives_the_triggerers_repeated_cancels(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the production rig: Airflow 3.3.2's triggerer cancels a cancelled trigger again at each
    sync (about every second) while ``on_kill`` runs, and swallows the CancelledError; the state read
    alone took 3 s there, so a person's mark-failed never reached the service. The work is shielded."""
    import time as _time

    seen = _plug_answering_run(monkeypatch)

    def slow_state(ti: Any) -> tuple[bool, Any]:
        _time.sleep(0.3)  # the supervisor's answer takes longer than the triggerer's next cancel
        return True, "failed"

    monkeypatch.setattr(run_lifecycle, "task_instance_state", slow_state)

    async def play() -> None:
        killing = asyncio.ensure_future(_trigger().on_kill())
        for _ in range(3):  # the triggerer's syncs, each cancelling the trigger's task again
            await asyncio.sleep(0.05)
            killing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await killing
        for _ in range(100):  # the shielded stop goes on in the loop
            if "POST" in seen:
                return
            await asyncio.sleep(0.02)

    asyncio.run(play())
    assert seen == ["GET", "POST"]


def test_a_stop_from_the_triggerer_is_accepted_by_a_strict_server() -> None:
    """Found by the production rig: aiohttp labels a body-less POST ``application/octet-stream``, which
    a Spring server (and the simulator) refuses with HTTP 415, so no deferred stop ever landed."""
    import requests
    from airflow.sdk import Connection

    from airflow_provider_loadtest.api import endpoints
    from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
    from airflow_provider_loadtest.hooks.settings import settings_from_connection
    from airflow_provider_loadtest.simulator import run_simulator

    with run_simulator(run_seconds=30) as sim:
        started = requests.post(
            f"{sim.url}/runtime/scenarios/run/demo-scenario",
            headers={"Authorization": f"Bearer {sim.api_key}"},
            timeout=10,
        )
        run_id = started.json()["benchResultIds"][0]
        settings = settings_from_connection(
            Connection(conn_id="strict", conn_type="loadtest", host=sim.url, password=sim.api_key)
        )

        async def stop() -> Any:
            async with AsyncLoadTestClient(settings) as client:
                return await client.call(endpoints.stop_run(run_id))

        assert str(asyncio.run(stop()).state) in ("ABORTED", "BenchResultState.ABORTED")
        assert [r.status for r in sim.requests if r.route == "stop_run"] == [200]
