"""Adversarial review of issue 17 (who may stop a run) and the LoadTestRunSensor of issue 20.

Every test here failed on main at 7664afa when it was written: each one plays an ordering or a state that
Airflow 3.3.2 produces (read from its task runner, supervisor, triggerer and sensor code) and asserts the
promise of the README / the issue. The fix belongs to the package, not to these tests.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import (
    AIRFLOW_V_3_3_PLUS,
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    AirflowTaskTimeout,
    TaskDeferred,
)
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.lifecycle import support as run_lifecycle  # where on_kill asks
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
from tests.unit.test_run_lifecycle import (
    RUN_URL,
    STATE_URL,
    STOP_URL,
    FakeStateStore,
    _context,
    _op,
    _plug_answering_run,
    _posts,
    _service,
)
from tests.unit.test_run_sensor import _sensor, _states


@pytest.fixture
def ti_state(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the API server answers for the task instance's state: ``[readable, state]``."""
    answer: list[Any] = [True, "running"]
    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: tuple(answer))
    return answer


def _kill_during_the_wait(
    monkeypatch: pytest.MonkeyPatch, op: Any, clock: list[float], at_sleep: int = 2
) -> None:
    """SIGTERM while the wait sleeps: Airflow's ``_on_term`` calls ``on_kill`` on the main thread."""
    sleeps = [0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds
        sleeps[0] += 1
        if sleeps[0] == at_sleep:
            op.on_kill()

    monkeypatch.setattr(hook_module, "_sleep", sleep)


# --- 1. the watch's own stop (timeout, gate) is sent before it is recorded ---------------------------


def test_the_watch_records_its_timeout_decision_before_the_stop_is_sent(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """Issue 17: "When the task does stop its own run, it records that in the run record ... before the
    stop" (stops.py, README). ``_stop_for`` does; the watch's own deadline and gate stops do not: the
    STOP goes out from inside ``watch_run`` and ``_remember_watch_stop`` writes the record only after
    the watch returned."""
    _service(requests_mock, ["RUNNING"] * 10)
    store = FakeStateStore()
    seen: list[Any] = []

    def stop(request: Any, context: Any) -> str:
        seen.append((store.data.get(RUN_RECORD_KEY) or {}).get("stopped"))
        return ""

    requests_mock.post(STOP_URL, text=stop)
    with pytest.raises(AirflowFailException, match="timeout passed; it was stopped"):
        _op(check_interval=10, timeout=25).execute(_context(store))  # type: ignore[arg-type]
    assert seen, "the watch sent no stop"
    assert seen[0] is not None and seen[0]["by"] == "timeout", (
        "when the STOP reached the service the run record did not say the task's timeout decided it"
    )


def test_a_worker_restart_during_the_watchs_timeout_stop_neither_lies_nor_restarts_the_run(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
) -> None:
    """The consequence of the above in production: the timeout's STOP is in flight (the service got it)
    when the worker is restarted (SIGTERM, state ``running``). The try says "It was not stopped: a retry
    re-attaches" (false), the record holds no decision, and the retry, with ``restart_failed_runs=True``,
    takes the self-inflicted ABORTED for a failure of the service and starts a second, billed load test
    after the task's own timeout decided the test should end."""
    _service(requests_mock, ["RUNNING"] * 10)
    store = FakeStateStore()
    op = _op(check_interval=10, timeout=25, restart_failed_runs=True)

    def stop(request: Any, context: Any) -> str:
        op.on_kill()  # SIGTERM arrives while the STOP's answer is on its way
        return ""

    requests_mock.post(STOP_URL, text=stop)
    with pytest.raises(AirflowException) as caught:
        op.execute(_context(store))  # type: ignore[arg-type]
    wrong = []
    if "It was not stopped" in str(caught.value):
        wrong.append(f"the try says: {caught.value}")
    if (store.data[RUN_RECORD_KEY].get("stopped") or {}).get("by") != "timeout":
        wrong.append(f"the record holds no decision: {store.data[RUN_RECORD_KEY].get('stopped')}")
    # The retry finds the run ABORTED (by the task's own timeout).
    _service(requests_mock, ["ABORTED"] * 4)
    try:
        _op(check_interval=10, timeout=25, restart_failed_runs=True).execute(
            _context(store, try_number=2)  # type: ignore[arg-type]
        )
    except AirflowException as exc:
        if "timeout" not in str(exc):
            wrong.append(f"the retry blames: {exc}")
    if _posts(requests_mock, RUN_URL) != 1:
        wrong.append("the retry started a second load test")
    assert not wrong, "\n".join(wrong)


def test_execution_timeout_during_the_watchs_own_timeout_stop_sends_one_stop(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """``_watch_options`` makes ``execution_timeout`` the watch's deadline from ``ti.start_date``, and
    Airflow arms its SIGALRM for the same length a little later (after the process started and parsed the
    DAG). The watch reaches its deadline first and sends its STOP; the alarm lands while that STOP (or
    the polls before it) is in flight; ``_watch_here`` then stops the run again, since ``_stopped`` only
    learns of the watch's stop after the watch returned. One decision, two stop calls."""
    from datetime import UTC, datetime

    _service(requests_mock, ["RUNNING"] * 10)
    calls = [0]

    def stop(request: Any, context: Any) -> str:
        calls[0] += 1
        if calls[0] == 1:
            raise AirflowTaskTimeout("Timeout, PID: 1")  # Airflow's SIGALRM handler
        return ""

    requests_mock.post(STOP_URL, text=stop)
    context = _context(FakeStateStore())
    context["ti"].start_date = datetime.fromtimestamp(clock[0], UTC)
    with pytest.raises(AirflowFailException, match="execution_timeout"):
        _op(check_interval=10, execution_timeout=timedelta(seconds=25)).execute(context)  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1


# --- 1b. a state of None on the worker is the scheduler resetting an orphan, not a person's clear -------


def test_a_scheduler_resetting_an_orphaned_running_task_neither_stops_nor_restarts_the_run(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``cause_on_worker`` reads a state of ``None`` as "a clear the scheduler already processed". On a
    *running* task Airflow 3.3.2 never produces that for a clear: ``clear_task_instances`` sets a running
    task instance to RESTARTING, and only the executor event after the process exited turns it into
    None. What does set a running task instance to None is infrastructure:
    ``SchedulerJobRunner.adopt_or_reset_orphaned_tasks`` (a scheduler that died or stalled past
    ``scheduler_health_check_threshold``, whose executor cannot adopt the task: LocalExecutor always,
    Celery when the task's external_executor_id was not recorded yet) sets ``ti.state = None`` without
    touching ``max_tries``. The task's next heartbeat gets 409, the supervisor sends SIGTERM, and
    ``on_kill`` stops a healthy run, records it as a person's clear, and the next try starts a second,
    billed load test."""
    ti_state[:] = [True, None]
    _service(requests_mock, ["RUNNING"] * 3 + ["RUNNING", "FINISHED"])
    store = FakeStateStore()
    op = _op(check_interval=10)
    _kill_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowException):
        op.execute(_context(store, max_tries=1))  # type: ignore[arg-type]
    stops_sent = _posts(requests_mock, STOP_URL)
    monkeypatch.setattr(hook_module, "_sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    # The reset's next try: same max_tries (only a clear raises it).
    _op(check_interval=10).execute(_context(store, max_tries=1, try_number=2))  # type: ignore[arg-type]
    assert (stops_sent, _posts(requests_mock, RUN_URL)) == (0, 1), (
        "a scheduler restart stopped the healthy run and the next try started a second one"
    )


# --- 2. the messages say the run was stopped when it was not -------------------------------------------


@pytest.mark.parametrize("how", ["stop refused", "decision not recorded"])
def test_a_failed_stop_is_not_reported_as_stopped(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    """A person marked the task failed; the stop could not be made (the service refused it, or
    ``_stop_for`` declined because the decision could not be recorded). ``_after_kill`` ignores
    ``_stop_for``'s answer and tells the user "run br-1 was stopped", with no hint that it is still
    billing or how to stop it."""
    ti_state[:] = [True, "failed"]
    _service(requests_mock, ["RUNNING"] * 5)
    if how == "stop refused":
        requests_mock.post(STOP_URL, status_code=403, json={"message": "forbidden"})
        store = FakeStateStore()
    else:
        store = FakeStateStore(fail_sets=(3,))  # in flight, the run, then the decision's write fails
    op = _op(check_interval=10)
    _kill_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowException) as caught:
        op.execute(_context(store))  # type: ignore[arg-type]
    message = str(caught.value)
    if how == "decision not recorded":
        # The lead's fix: a person's decision stands without its record (the next try has the DAG run's
        # clear_number), so the run is stopped, and the message says so truthfully.
        assert _posts(requests_mock, STOP_URL) == 1
        assert "it was stopped" in message, message
        return
    assert "was stopped" not in message, message
    assert "may still be going" in message, message


# --- 3. a person's decision that arrives before or during the start ------------------------------------


@pytest.mark.parametrize(
    ("state", "final", "said"),
    [
        (
            "failed",
            True,
            "The task was ended before its load test was started: a person marked the task failed.",
        ),
        (
            "restarting",
            True,
            "The task was ended before its load test was started: a person cleared the task.",
        ),
        # a worker shut down (its task instance still running): nothing started, a retry starts it
        ("running", False, "before its load test was started: nothing was started; a retry starts it."),
    ],
    ids=["marked-failed", "cleared", "worker-shutdown"],
)
def test_a_person_ending_the_task_before_the_start_is_sent_starts_nothing(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    state: str,
    final: bool,
    said: str,
) -> None:
    """SIGTERM (mark failed, or a clear) while the task records "start in flight", i.e. before the
    start request: ``on_kill`` notes the decision (no run yet), returns, and the task goes on to send
    the start: a billed load test started after the person ended the task, then stopped at once by
    ``_raise_if_killed``."""
    ti_state[:] = [True, state]
    _service(requests_mock, ["RUNNING"] * 3)
    op = _op(check_interval=10)

    class KilledWhileRecording(FakeStateStore):
        def set(self, key: str, value: Any) -> None:
            super().set(key, value)
            if self.sets == 1:
                op.on_kill()

    store = KilledWhileRecording()
    with pytest.raises(AirflowException) as caught:
        op.execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 0, "a load test was started after the task was ended"
    assert isinstance(caught.value, AirflowFailException) is final  # a person's decision is final
    assert said in str(caught.value) and "Nothing was started" in str(caught.value).replace(
        "nothing", "Nothing"
    )
    assert RUN_RECORD_KEY not in store.data  # no start in flight: a retry (or the clear's try) may start


def test_a_mark_failed_during_the_start_of_a_deferrable_task_stops_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], ti_state: list[Any]
) -> None:
    """The sync wait acts on a kill that came during the start (``_raise_if_killed``); the deferrable
    path defers anyway. Airflow then refuses the deferral of a FAILED task instance (no trigger is
    created), so the run is neither watched nor stopped. Issue 17's expectation: "a mark-failed always
    stops the run"."""
    from tests.unit.test_hook import BENCH_REPORT

    ti_state[:] = [True, "failed"]
    _service(requests_mock, ["RUNNING"] * 3)
    op = _op(check_interval=10, deferrable=True)

    def start(request: Any, context: Any) -> dict[str, Any]:
        op.on_kill()  # the person's mark failed reaches the task while the start's answer is on its way
        return BENCH_REPORT

    requests_mock.post(RUN_URL, json=start)
    with pytest.raises((AirflowFailException, TaskDeferred)) as caught:
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert not isinstance(caught.value, TaskDeferred), "deferred a wait for a task a person marked failed"
    assert _posts(requests_mock, STOP_URL) == 1


def test_a_mark_failed_during_the_start_stops_the_run_without_waiting_for_completion(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], ti_state: list[Any]
) -> None:
    """``wait_for_completion=False`` returns normally although ``on_kill`` decided to end the run."""
    from tests.unit.test_hook import BENCH_REPORT

    ti_state[:] = [True, "failed"]
    _service(requests_mock, ["RUNNING"] * 3)
    op = _op(check_interval=10, wait_for_completion=False)

    def start(request: Any, context: Any) -> dict[str, Any]:
        op.on_kill()
        return BENCH_REPORT

    requests_mock.post(RUN_URL, json=start)
    with contextlib.suppress(AirflowFailException):  # failing is fine; not stopping is not
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1


# --- 4. LoadTestRunSensor ------------------------------------------------------------------------------


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="Airflow calls BaseTrigger.on_kill from 3.3 on")
@pytest.mark.parametrize("state", ["failed", "success"])
def test_a_deferred_sensor_marked_failed_or_successful_never_stops_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    """Issue 20: the sensor "never starts or stops a run unless asked". On the worker it keeps that
    (``stops_runs`` is False, ``test_a_person_ending_the_sensor_never_stops_the_run``), but deferred it
    hands the wait to ``LoadTestRunTrigger``, whose ``on_kill`` stops any run whose task a person marked
    failed or successful: marking a sensor successful to let the DAG go on stops a load test that the
    service's scheduler or another pipeline started."""

    _states(requests_mock, ["RUNNING", "RUNNING"])
    with pytest.raises(TaskDeferred) as caught:
        _sensor(deferrable=True, timeout=600).execute(_context())  # type: ignore[arg-type]
    trigger = caught.value.trigger
    from types import SimpleNamespace

    trigger.task_instance = SimpleNamespace(
        dag_id="d", run_id="r", task_id="wait", map_index=-1, try_number=1
    )
    seen = _plug_answering_run(monkeypatch)
    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (True, state))
    asyncio.run(trigger.on_kill())
    assert "POST" not in seen, "the trigger stopped a run the sensor did not start"


def test_a_sensor_told_to_stop_on_timeout_stops_the_run_at_its_execution_timeout(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``stop_on_timeout``: "stop the run when the sensor's ``timeout`` or ``execution_timeout``
    passes". In poke mode the sensor spends its time in ``BaseSensorOperator.execute``'s
    ``time.sleep``; Airflow's SIGALRM raises ``AirflowTaskTimeout`` there, which
    ``LoadTestRunSensor.execute`` does not catch, and ``_run_execute_callable`` then calls ``on_kill``,
    which sees the state ``running`` ("nobody decided") and leaves the run going."""
    import time

    _states(requests_mock, ["RUNNING"] * 10)
    sensor = _sensor(stop_on_timeout=True, poke_interval=5, execution_timeout=timedelta(seconds=60))

    def alarm(seconds: float) -> None:
        raise AirflowTaskTimeout("Timeout, PID: 1")

    monkeypatch.setattr(time, "sleep", alarm)
    with pytest.raises(AirflowTaskTimeout):
        try:
            sensor.execute(_context())  # type: ignore[arg-type]
        except AirflowTaskTimeout:
            sensor.on_kill()  # what airflow.sdk.execution_time.task_runner._run_execute_callable does
            raise
    assert _posts(requests_mock, STOP_URL) == 1


def test_a_deferrable_sensor_with_soft_fail_skips_like_a_poking_one(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """``soft_fail=True``: a run found ERROR at the first look skips the poking sensor
    (``BaseSensorOperator.execute`` turns the ``AirflowFailException`` into a skip), but the deferrable
    sensor judges its first look outside that loop and fails."""
    _states(requests_mock, ["ERROR", "ERROR"])
    with pytest.raises(AirflowSkipException):
        _sensor(soft_fail=True).execute(_context())  # type: ignore[arg-type]
    _states(requests_mock, ["ERROR", "ERROR"])
    with pytest.raises(AirflowSkipException):
        _sensor(soft_fail=True, deferrable=True).execute(_context())  # type: ignore[arg-type]


def test_a_sensor_given_a_dict_without_a_start_time_fails_before_waiting_or_judges(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """``bench_result_id`` may be "the dict RunScenarioOperator returns"; a dict that lacks
    ``started_at`` (hand-written, or an older/other producer) is accepted, and the verdict of the
    ended run crashes with a ``TypeError`` (``ended_at - None``) instead of a verdict or a clear error."""
    _states(requests_mock, ["FINISHED", "FINISHED"])
    sensor = _sensor(bench_result_id={"bench_result_id": "br-1", "report_id": "rep-1"})
    try:
        result = sensor.execute(_context())  # type: ignore[arg-type]
    except (ValueError, AirflowFailException):
        return  # a clear refusal is fine too
    assert result["state"] == "FINISHED"


def test_a_rescheduling_sensor_reads_the_state_once_per_look(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """The docstring: "the poke and reschedule modes both work: each look is one call for the state".
    In reschedule mode every look is a new process that runs ``execute``: ``_resolve_run`` reads the
    state, then ``poke`` reads it again (two calls per look, for as long as the run goes)."""
    from airflow_provider_loadtest.compat import AirflowRescheduleException

    _states(requests_mock, ["RUNNING", "RUNNING"])
    context = _context()
    context["ti"].get_first_reschedule_date.return_value = None
    with pytest.raises(AirflowRescheduleException):
        _sensor(mode="reschedule", poke_interval=60).execute(context)  # type: ignore[arg-type]
    reads = sum(
        1 for r in requests_mock.request_history if r.method == "GET" and r.url.split("?")[0] == STATE_URL
    )
    assert reads == 1


def test_a_sensor_told_to_stop_on_timeout_is_not_thereby_told_to_stop_on_a_mark_success(
    loadtest_conn: str, requests_mock: rm.Mocker, ti_state: list[Any]
) -> None:
    """``stops_runs = stop_on_timeout``: opting in to "stop the run when the sensor's timeout passes"
    also makes a person's mark success (or failed) of the sensor stop a run the sensor did not start,
    which the class docstring says it never does unless asked (``stop_on_alarm``/``stop_on_timeout``)."""
    ti_state[:] = [True, "success"]
    _states(requests_mock, ["RUNNING"])
    sensor = _sensor(stop_on_timeout=True)
    context = _context()
    sensor._ti = context["ti"]
    sensor._adopt(context, sensor._resolve_run(context))
    sensor.on_kill()
    assert _posts(requests_mock, STOP_URL) == 0


def test_a_dagrun_timeout_is_not_blamed_on_a_person() -> None:
    """The scheduler's ``dagrun_timeout`` handling sets every unfinished task instance of the DAG run to
    SKIPPED; the running task's ``on_kill`` then stops the run (fair: a configured timeout decided) but
    the record and the message say "a person changed the task's state"."""
    from airflow_provider_loadtest.decisions import stops

    cause = stops.cause_on_worker("skipped", readable=True)
    assert cause is not None
    assert "person" not in stops.decision("br-1", cause, 0.0).why


# --- 5. execution_timeout outside the wait ------------------------------------------------------------


def test_an_execution_timeout_right_after_the_start_stops_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], ti_state: list[Any]
) -> None:
    """Airflow's SIGALRM raises ``AirflowTaskTimeout`` wherever the task is; only ``_watch_here``
    catches it. Raised between the start's answer and the wait (here: pushing the run to XCom in
    ``_adopt``; equally the workspace lookup after the start), it reaches
    ``_run_execute_callable``, which calls ``on_kill`` *inside its* ``except AirflowTaskTimeout``:
    ``on_kill`` sees the state ``running``, calls it infrastructure and leaves the run going; the retry
    re-attaches with a fresh ``execution_timeout`` window, so the run goes on past the bound the user
    set (README: "``execution_timeout`` ... run stopped, fails for good"). ``on_kill`` could tell:
    ``sys.exc_info()`` there is the ``AirflowTaskTimeout`` being handled."""
    _service(requests_mock, ["RUNNING"] * 5)
    store = FakeStateStore()
    context = _context(store)
    op = _op(check_interval=10, execution_timeout=timedelta(seconds=60))

    def push(key: str, value: Any, **kwargs: Any) -> None:
        if key == RUN_RECORD_KEY:
            raise AirflowTaskTimeout("Timeout, PID: 1")

    context["ti"].xcom_push.side_effect = push
    with pytest.raises(AirflowTaskTimeout):
        try:
            op.execute(context)  # type: ignore[arg-type]
        except AirflowTaskTimeout:
            op.on_kill()  # airflow.sdk.execution_time.task_runner._run_execute_callable
            raise
    assert _posts(requests_mock, STOP_URL) == 1
    assert (store.data[RUN_RECORD_KEY].get("stopped") or {}).get("by") == "timeout"


# --- 6. a clear recognised by max_tries only when retries did not shrink -------------------------------


def test_a_clear_after_retries_were_lowered_is_still_a_clear() -> None:
    """A deferred task's clear is recognised only by a grown ``max_tries`` (the trigger records
    nothing). ``clear_task_instances`` sets ``max_tries = try_number + task.retries`` from the DAG as it
    is now: a DAG whose ``retries`` went from 3 to 0 after the start gives 1 < 3, and the next try
    re-attaches to the run of before the clear instead of starting the new run the person asked for."""
    from airflow_provider_loadtest.decisions.run_record import RunRecord, plan_try
    from tests.unit.test_run_lifecycle import _saved_record

    record = RunRecord("sc-1", 900.0, 3, _saved_record())  # started on try 1 with retries=3
    assert plan_try(record, max_tries=1).action == "start"  # cleared on try 1, retries now 0


# --- 7. a clear of a running task, as Airflow 3.3.2 really does it --------------------------------------


def test_a_clear_of_a_running_task_gives_one_new_run_although_the_cleared_try_cannot_write_the_store(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    ti_state: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``clear_task_instances`` gives the task instance a new id (``prepare_db_for_next_try``) before it
    sets RESTARTING; the task state store is addressed by id, so the cleared try's write of its decision
    gets 404 (seen in a real Airflow: ``tests/integration/test_review_issue17.py``). ``_stop_for`` then
    declines to stop, and the next try is back to issue 17's point 4: with Celery the failed process's
    executor event is FAILURE, the scheduler does not raise ``max_tries``, and the next try re-attaches
    to the old run instead of starting the one the person asked for. What Airflow does give every try:
    the DAG run's ``clear_number`` (raised by every clear, in 3.1 too)."""
    from types import SimpleNamespace

    ti_state[:] = [True, "restarting"]
    _service(requests_mock, ["RUNNING"] * 3 + ["RUNNING", "RUNNING", "FINISHED"])
    store = FakeStateStore(fail_sets=(3,))  # in flight, the run, then the decision's write: 404
    op = _op(check_interval=10)
    _kill_during_the_wait(monkeypatch, op, clock)
    first = _context(store, max_tries=1)
    first["dag_run"] = SimpleNamespace(clear_number=0, run_id="r")
    with pytest.raises(AirflowException):
        op.execute(first)  # type: ignore[arg-type]
    monkeypatch.setattr(hook_module, "_sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    # The cleared try's stop reached the service (the lead's fix stops without the record): the old run
    # reads ABORTED; then the new run goes and finishes.
    _service(requests_mock, ["ABORTED", "RUNNING", "FINISHED"])
    second = _context(store, max_tries=1, try_number=2)  # Celery: max_tries not raised
    second["dag_run"] = SimpleNamespace(clear_number=1, run_id="r")
    _op(check_interval=10).execute(second)  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 2, "the clear gave no new run: the next try re-attached"
    assert _posts(requests_mock, STOP_URL) == 1, "the run of before the clear was not stopped once"
