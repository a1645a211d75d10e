"""A person's stop always stops, on a busy control plane too (issue 34).

When a person marks a deferred task failed, the triggerer cancels its wait and calls ``on_kill``, which
asks Airflow's API server for the task instance's state to tell a person's decision from the wait merely
moving elsewhere. A busy API server answers that in more than 5 s routinely: the ask is kept waiting,
asked again after a failure with a growing pause, for ``STATE_READ_BUDGET_S``; a state that never
answers is said at ERROR (the run, its report, how to stop it) and left as a pending stop that the next
try of the task reads (``decisions.stops.PendingStop``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from airflow_provider_loadtest.compat import AIRFLOW_V_3_3_PLUS
from airflow_provider_loadtest.decisions import stops
from airflow_provider_loadtest.lifecycle import support
from airflow_provider_loadtest.lifecycle.support import describe_error
from airflow_provider_loadtest.triggers import run as trigger_module
from tests.unit.test_run_lifecycle import _plug_answering_run, _saved_record

needs_trigger_on_kill = pytest.mark.skipif(
    not AIRFLOW_V_3_3_PLUS, reason="Airflow calls BaseTrigger.on_kill from 3.3 on"
)


def quick_asks(monkeypatch: pytest.MonkeyPatch, budget_s: float = 5.0) -> list[stops.PendingStop]:
    """Shrink the trigger's patience to test time; the pending stops it leaves, in order. The default
    budget is far above what an answering test needs (it returns at the answer), so a loaded machine
    cannot run it out; the tests of a state that never answers give a small one."""
    monkeypatch.setattr(trigger_module, "STATE_READ_BUDGET_S", budget_s)
    monkeypatch.setattr(trigger_module, "STATE_QUERY_TIMEOUT_S", 0.05)
    monkeypatch.setattr(trigger_module, "STATE_RETRY_PAUSE_S", 0.01)
    monkeypatch.setattr(trigger_module, "STATE_RETRY_PAUSE_MAX_S", 0.04)
    left: list[stops.PendingStop] = []
    monkeypatch.setattr(support, "write_pending_stop", left.append)
    return left


def _trigger() -> Any:
    from tests.unit.test_stops import _trigger as make

    return make()


def _answers(*answers: Any, delay_s: float = 0.0) -> tuple[list[float], Any]:
    """A ``task_instance_state`` giving ``answers`` in turn (an exception is raised), the last one again;
    and the times it was asked."""
    asked: list[float] = []

    def state(ti: Any) -> tuple[bool, Any]:
        asked.append(time.monotonic())
        answer = answers[min(len(asked), len(answers)) - 1]
        if delay_s:
            time.sleep(delay_s)
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[no-any-return]

    return asked, state


@needs_trigger_on_kill
@pytest.mark.parametrize(
    "failures",
    [
        [(False, "TimeoutError ()")],  # what the supervisor channel says when the API server is slow
        [TimeoutError(), (False, "the task instance was not found")],
        [(False, "ServerResponseError: 503"), (False, "ServerResponseError: 503"), TimeoutError()],
    ],
)
def test_a_person_is_heard_when_the_state_answers_only_on_a_later_ask(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch, failures: list[Any]
) -> None:
    """The production symptom: the one state read timed out, and a deferred run marked failed billed to its
    end. A failed ask is asked again (a growing pause between), and the person's decision stands."""
    left = quick_asks(monkeypatch)
    seen = _plug_answering_run(monkeypatch)
    asked, state = _answers(*failures, (True, "failed"))
    monkeypatch.setattr(support, "task_instance_state", state)
    asyncio.run(_trigger().on_kill())
    assert seen == ["GET", "POST"]  # the run read, then stopped
    assert len(asked) == len(failures) + 1
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    assert all(gap >= 0.009 for gap in gaps), gaps  # never asked again at once
    assert left == []


@needs_trigger_on_kill
def test_a_slow_answer_is_waited_for_not_abandoned(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state read that takes longer than the old 5 s bound (here 10x the per-ask notice) still decides;
    the same ask is waited on, not sent again to a server already slow."""
    quick_asks(monkeypatch)
    seen = _plug_answering_run(monkeypatch)
    asked, state = _answers((True, "failed"), delay_s=0.3)
    monkeypatch.setattr(support, "task_instance_state", state)
    asyncio.run(_trigger().on_kill())
    out = capsys.readouterr().out
    assert seen == ["GET", "POST"]
    assert len(asked) == 1
    assert "still asking" in out


@needs_trigger_on_kill
@pytest.mark.parametrize("moved", ["deferred", "running", "up_for_retry", "scheduled", "queued", None])
def test_a_state_that_says_the_wait_moved_on_leaves_the_run_going_after_a_slow_read(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch, moved: Any
) -> None:
    """Patience never turns a failover into a stop: once the state answers that the wait went elsewhere
    (or the task resumes, or a clear's next try will act), the run is left going and nothing is pending."""
    left = quick_asks(monkeypatch)
    seen = _plug_answering_run(monkeypatch)
    _, state = _answers(TimeoutError(), (True, moved), delay_s=0.1)
    monkeypatch.setattr(support, "task_instance_state", state)
    asyncio.run(_trigger().on_kill())
    assert seen == []
    assert left == []


@needs_trigger_on_kill
def test_a_state_that_never_answers_is_said_at_error_and_left_pending(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run is not stopped on a guess (it may be a failover), but it is not left billing unseen: an
    ERROR names the run, its report and how to stop it, and a pending stop is left for the next try."""
    left = quick_asks(monkeypatch, budget_s=0.3)
    seen = _plug_answering_run(monkeypatch)
    asked, state = _answers(TimeoutError())
    monkeypatch.setattr(support, "task_instance_state", state)
    began = time.monotonic()
    asyncio.run(_trigger().on_kill())
    out = capsys.readouterr().out
    assert time.monotonic() - began < 5.0  # bounded by the budget
    assert seen == []
    assert len(asked) >= 3
    errors = [line for line in out.splitlines() if "[error" in line]
    assert errors, out
    text = errors[0]
    assert "br-1" in text and "was NOT stopped" in text
    assert _saved_record()["report_url"] in text
    assert 'LoadTestHook("loadtest_default").stop_run("br-1")' in text
    assert "TimeoutError (TimeoutError())" in text  # never an empty "TimeoutError: "
    assert [p.bench_result_id for p in left] == ["br-1"]
    assert left[0].try_number == 1 and left[0].report_url == _saved_record()["report_url"]
    assert "Left a pending stop of run br-1" in out


@needs_trigger_on_kill
def test_a_hung_state_read_is_bounded(loadtest_conn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ask that never returns (a wedged supervisor channel) ends at the budget, and its thread does
    not hold up the event loop's shutdown."""
    import threading

    left = quick_asks(monkeypatch, budget_s=0.3)
    _plug_answering_run(monkeypatch)
    never = threading.Event()
    monkeypatch.setattr(support, "task_instance_state", lambda ti: (never.wait(30), "never"))
    began = time.monotonic()
    asyncio.run(_trigger().on_kill())
    assert time.monotonic() - began < 5.0
    assert len(left) == 1 and "no answer" in left[0].why
    never.set()


@needs_trigger_on_kill
def test_a_pending_stop_that_cannot_be_left_is_said(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    quick_asks(monkeypatch, budget_s=0.1)
    _plug_answering_run(monkeypatch)
    monkeypatch.setattr(support, "task_instance_state", lambda ti: (False, "unreachable"))

    def refuse(pending: Any) -> None:
        raise ConnectionError()

    monkeypatch.setattr(support, "write_pending_stop", refuse)
    asyncio.run(_trigger().on_kill())
    out = capsys.readouterr().out
    assert "Could not leave the pending stop of run br-1" in out
    assert "ConnectionError (ConnectionError())" in out


# --- sans I/O ------------------------------------------------------------------------------------------


def test_describe_error_never_leaves_an_empty_message() -> None:
    assert describe_error(TimeoutError()) == "TimeoutError (TimeoutError())"
    assert describe_error(ValueError("bad id")) == "ValueError: bad id"
    assert describe_error(OSError(" ")) == "OSError (OSError(' '))"


def test_a_pending_stop_round_trips_and_refuses_junk() -> None:
    pending = stops.PendingStop("br-1", 2, 1_000.0, "no answer", "https://x/report")
    import json

    assert stops.PendingStop.from_store(pending.to_store()) == pending
    assert stops.PendingStop.from_store(json.dumps(pending.to_store())) == pending
    for junk in (None, "", "{", [], {"bench_result_id": 3, "at": 1}, {"bench_result_id": "b", "at": True}):
        assert stops.PendingStop.from_store(junk) is None
    assert stops.pending_stop_key("br-1") == "loadtest_pending_stop.br-1"
    assert "try 2" in pending.describe() and "br-1" in pending.describe()


def test_only_a_clear_acts_on_a_pending_stop() -> None:
    """A person who marks a task failed or successful ends it for good: no retry follows. So a later try
    that is a retry proves the wait had moved (the run is healthy); a clear asks for the run to end."""
    assert stops.on_pending_stop(clear_seen=True) == "stop"
    assert stops.on_pending_stop(clear_seen=False) == "moot"


# --- the next try: the run's advice survives retries, and a pending stop is acted on --------------------


def _retry_context(store: Any, **kwargs: Any) -> Any:
    from tests.unit.test_run_lifecycle import _context

    return _context(store, **kwargs)


def test_the_start_records_which_try_sent_it_and_a_retry_says_it(
    loadtest_conn: str, requests_mock: Any, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    """``Re-attaching to run br-1 that try 1 started``: a person reading try 2's log knows which run it
    watches and where it came from."""
    from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
    from tests.unit.test_hook import RUN_URL
    from tests.unit.test_run_lifecycle import FakeStateStore, _op, _posts, _service

    _service(requests_mock, ["RUNNING", "RUNNING", "FINISHED"])
    store = FakeStateStore()
    with pytest.raises(__import__("airflow_provider_loadtest.compat").compat.TaskDeferred):
        _op(deferrable=True).execute(_retry_context(store))
    assert store.data[RUN_RECORD_KEY]["try_number"] == 1
    assert _op().execute(_retry_context(store, try_number=2))["state"] == "FINISHED"
    assert "Re-attaching to run br-1 that try 1 started (state RUNNING)" in capsys.readouterr().out
    assert _posts(requests_mock, RUN_URL) == 1


def test_a_retry_that_cannot_read_its_run_still_says_it_may_be_billing(
    loadtest_conn: str, requests_mock: Any, clock: list[float]
) -> None:
    """Try 1 said how to stop its run; the last try, re-attaching while the service does not answer,
    failed with the bare API error. It now says the same: the run, its report, how to stop it."""
    from airflow_provider_loadtest.compat import AirflowException
    from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
    from tests.unit.test_run_lifecycle import STATE_URL, FakeStateStore, _op, _record

    requests_mock.get(STATE_URL, status_code=503, text="busy")
    record = {**_record(_saved_record()), "try_number": 1}
    with pytest.raises(AirflowException) as caught:
        _op().execute(_retry_context(FakeStateStore({RUN_RECORD_KEY: record}), try_number=3))
    message = str(caught.value)
    assert "Run br-1 may still be going and billing" in message
    assert _saved_record()["report_url"] in message
    assert 'LoadTestHook("loadtest_default").stop_run("br-1")' in message
    assert "try 1 started it" in message and "HTTP 503" in message


def _pending(try_number: int = 1) -> stops.PendingStop:
    return stops.PendingStop("br-1", try_number, 1_795_438_900.0, "no answer to ask 4 within 120 s")


def test_a_retry_finding_a_pending_stop_knows_it_was_no_persons_and_re_attaches(
    loadtest_conn: str,
    requests_mock: Any,
    clock: list[float],
    capsys: pytest.CaptureFixture[str],
    no_pending_stops: dict[str, Any],
) -> None:
    """Airflow retries a task only after a failure of its own, never after a person marked it failed or
    successful: the trigger's unanswered question is answered, and the healthy run goes on."""
    from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
    from tests.unit.test_run_lifecycle import STOP_URL, FakeStateStore, _op, _posts, _record, _service

    _service(requests_mock, ["RUNNING", "RUNNING", "FINISHED"])
    no_pending_stops["br-1"] = _pending()
    record = {**_record(_saved_record()), "clear_number": 0, "try_number": 1}
    result = _op().execute(_retry_context(FakeStateStore({RUN_RECORD_KEY: record}), try_number=2))
    assert result["state"] == "FINISHED"
    out = capsys.readouterr().out
    assert "A stop was pending: the wait for run br-1 of try 1 of this task was ended" in out
    assert "nobody asked for run br-1 to end" in out
    assert _posts(requests_mock, STOP_URL) == 0
    assert no_pending_stops == {}  # acted on: removed


@pytest.mark.parametrize("how", ["max_tries", "clear_number"])
def test_a_clear_after_a_pending_stop_stops_the_run_and_says_why(
    loadtest_conn: str,
    requests_mock: Any,
    clock: list[float],
    capsys: pytest.CaptureFixture[str],
    no_pending_stops: dict[str, Any],
    how: str,
) -> None:
    """A person marked the deferred task failed, the trigger could not confirm it, then the person
    cleared the task: the try of the clear stops the old run, naming the pending stop, and starts anew."""
    from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
    from tests.unit.test_hook import RUN_URL
    from tests.unit.test_run_lifecycle import STOP_URL, FakeStateStore, _op, _posts, _record, _service

    _service(requests_mock, ["RUNNING", "RUNNING", "RUNNING", "FINISHED"])
    no_pending_stops["br-1"] = _pending()
    record = {**_record(_saved_record(), max_tries=0), "clear_number": 0, "try_number": 1}
    store = FakeStateStore({RUN_RECORD_KEY: record})
    context = (
        _retry_context(store, try_number=2, max_tries=1)
        if how == "max_tries"
        else _retry_context(store, try_number=2, clear_number=1)
    )
    assert _op().execute(context)["state"] == "FINISHED"
    out = capsys.readouterr().out
    assert "A stop was pending: the wait for run br-1 of try 1 of this task was ended" in out
    assert _posts(requests_mock, STOP_URL) == 1 and _posts(requests_mock, RUN_URL) == 1
    assert no_pending_stops == {}


def test_the_record_keeps_which_try_started_the_run() -> None:
    from airflow_provider_loadtest.decisions.run_record import RunRecord

    record = RunRecord("sc-1", 1.0, 0, run=_saved_record(), started_by_try=3)
    again = RunRecord.from_store(record.to_store())
    assert again is not None and again.started_by_try == 3 and again.started_by == "try 3"
    older = RunRecord.from_store({**record.to_store(), "try_number": None})
    assert older is not None and older.started_by == "an earlier try"


def test_a_worker_that_cannot_read_its_state_says_so_at_error_and_leaves_a_pending_stop(
    loadtest_conn: str,
    requests_mock: Any,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_pending_stops: dict[str, Any],
) -> None:
    """The worker's on_kill has seconds before Airflow's SIGKILL: it cannot wait out a slow API server.
    It still never stops on a guess, but it no longer says only "the next try re-attaches" (a person's
    mark-failed has no next try): an ERROR with how to stop the run, and a pending stop."""
    from airflow_provider_loadtest.compat import AirflowException
    from tests.unit.test_run_lifecycle import STOP_URL, FakeStateStore, _op, _posts, _service
    from tests.unit.test_stops import _killed_during_the_wait

    monkeypatch.setattr(support, "task_instance_state", lambda ti: (False, "TimeoutError (TimeoutError())"))
    _service(requests_mock, ["RUNNING"] * 5)
    op = _op(check_interval=10)
    _killed_during_the_wait(monkeypatch, op, clock)
    with pytest.raises(AirflowException, match="its state could not be read"):
        op.execute(_retry_context(FakeStateStore()))
    assert _posts(requests_mock, STOP_URL) == 0
    from tests.unit.test_run_lifecycle import _plain

    errors = [line for line in _plain(capsys.readouterr().out).splitlines() if "[error" in line]
    assert any("run br-1 was NOT stopped" in line and 'stop_run("br-1")' in line for line in errors), errors
    assert list(no_pending_stops) == ["br-1"] and no_pending_stops["br-1"].try_number == 1


def test_the_run_sensor_says_a_pending_stop_and_leaves_it(
    loadtest_conn: str,
    requests_mock: Any,
    capsys: pytest.CaptureFixture[str],
    no_pending_stops: dict[str, Any],
) -> None:
    """A sensor watching a run whose starting task was ended unconfirmed learns it: it says the stop is
    pending and how to stop the run; it never stops a run it did not start, and the pending stop stays
    for that task's next try."""
    from tests.unit.test_run_lifecycle import STOP_URL, _posts
    from tests.unit.test_run_sensor import _sensor, _states

    _states(requests_mock, ["RUNNING", "FINISHED"])
    no_pending_stops["br-1"] = _pending()
    assert _sensor().execute(_retry_context(None))["state"] == "FINISHED"
    out = capsys.readouterr().out
    assert "A stop of run br-1 is pending: the wait for run br-1 of try 1" in out
    assert 'stop_run("br-1")' in out
    assert _posts(requests_mock, STOP_URL) == 0
    assert "br-1" in no_pending_stops
