"""RunScenarioOperator's wait, verdict, stop and re-attach, against requests-mock and a fake clock."""

from __future__ import annotations

import asyncio
import json
import re
from importlib import import_module
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import (
    AirflowException,
    AirflowFailException,
    TaskDeferred,
)
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.links.report import REPORT_URL_XCOM_KEY, LoadTestReportLink
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY, RunScenarioOperator
from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger
from tests.aio_service import answer_with
from tests.airflow_context import TaskStateStore, mock_ti, task_context
from tests.conftest import BASE_URL
from tests.unit.test_hook import BENCH_REPORT, RUN_URL, TEMPLATES_URL

STATE_URL = f"{BASE_URL}/runtime/bench-results/br-1"
STOP_URL = f"{BASE_URL}/runtime/bench-results/stop/br-1"
ALARMS_URL = f"{BASE_URL}/analysis/threshold-alarms"
METRICS_URL = f"{BASE_URL}/analysis/metrics/global/br-1"
PROGRESS_URL = f"{BASE_URL}/runtime/bench-results/progress/br-1"
#: The run's files: none by default (a gated task lists them for the JTL results).
FILES_URL = f"{BASE_URL}/analysis/logs/list/br-1"


#: Airflow 3.3's task state store (``tests.airflow_context``): survives retries and clears of the same
#: task instance. ``fail_get`` makes every read raise; ``fail_sets`` lists which writes (1 = the first) raise.
FakeStateStore = TaskStateStore


def _plain(text: str) -> str:
    """The log as written, without the colours some Airflow releases (3.1) add around its fields."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _context(
    store: TaskStateStore | None = None,
    *,
    max_tries: int = 0,
    try_number: int = 1,
    clear_number: int = 0,
    conf: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What Airflow gives one try of the task (``tests.airflow_context``): a ``ti`` whose XCom calls can
    be read back, its DAG run (not cleared unless ``clear_number`` says so), the store when given."""
    ti = mock_ti(try_number=try_number, max_tries=max_tries)
    return task_context(ti, store, clear_number=clear_number, conf=conf)


def _pushed(context: dict[str, Any]) -> dict[str, Any]:
    return {c.kwargs["key"]: c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list}


def _service(requests_mock: rm.Mocker, states: list[str], alarms: list[dict[str, Any]] | None = None) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    requests_mock.get(STATE_URL, [{"json": {"id": "br-1", "state": s}} for s in states])
    requests_mock.post(ALARMS_URL, json=alarms or [])
    requests_mock.get(METRICS_URL, json={"metrics": [{"name": "Hits", "value": 9, "unit": ""}]})
    requests_mock.get(PROGRESS_URL, json={"value": 50})
    requests_mock.post(STOP_URL, text="")
    requests_mock.get(FILES_URL, json=[])


def _posts(requests_mock: rm.Mocker, url: str) -> int:
    return sum(1 for r in requests_mock.request_history if r.method == "POST" and r.url.split("?")[0] == url)


#: Every test's operator gives up waiting after this long on the fake clock (seconds): a broken guard that
#: starts a run the test expected refused then fails in a moment, never waits on a service answering
#: RUNNING forever. Far beyond any wait a test means (its fake service ends runs within minutes).
TEST_TIMEOUT_S = 6 * 3600


def _op(**kwargs: Any) -> RunScenarioOperator:
    kwargs.setdefault("deferrable", False)
    kwargs.setdefault("timeout", TEST_TIMEOUT_S)
    return RunScenarioOperator(
        task_id="run", scenario_id="sc-1", workspace_id="ws-1", template_id="t-1", **kwargs
    )


def test_waits_and_returns_state_duration_alarms_metrics(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["PENDING", "RUNNING", "FINISHED"], alarms=[{"id": "a", "severity": "PASSED"}])
    store = FakeStateStore()
    result = _op(check_interval=10).execute(_context(store))  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert result["duration_s"] == 20.0
    assert result["alarms"] == [{"id": "a", "severity": "PASSED"}]
    assert result["metrics"] == {"Hits": {"value": 9, "unit": ""}}
    assert result["bench_result_id"] == "br-1"
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"  # kept: a retry takes it
    assert _posts(requests_mock, RUN_URL) == 1


@pytest.mark.parametrize("state", ["ERROR", "ABORTED"])
def test_error_or_aborted_fails_with_id_state_and_link(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], state: str
) -> None:
    _service(requests_mock, ["PREPARING", state])
    context = _context(FakeStateStore())
    with pytest.raises(AirflowException) as caught:
        _op().execute(context)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "br-1" in message and state in message
    assert f"{BASE_URL}/ui/workspace/ws-1/project/proj-1/analysis/report/rep-1" in message
    assert _pushed(context)["return_value"]["state"] == state


@pytest.mark.parametrize(
    ("gate", "severity", "fails"),
    [
        (None, "CRITICAL", False),
        ("CRITICAL", "WARNING", False),
        ("CRITICAL", "CRITICAL", True),
        ("WARNING", "WARNING", True),
    ],
)
def test_quality_gate(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    gate: str | None,
    severity: str,
    fails: bool,
) -> None:
    alarms = [{"id": "a", "severity": severity, "name": "Average response time"}]
    _service(requests_mock, ["RUNNING", "FINISHED"], alarms=alarms)
    context = _context()
    op = _op(fail_on_alarm_severity=gate)
    if fails:
        with pytest.raises(AirflowException, match="Average response time"):
            op.execute(context)  # type: ignore[arg-type]
        assert _pushed(context)["return_value"]["alarms"] == alarms
    else:
        assert op.execute(context)["alarms"] == alarms  # type: ignore[arg-type]


def test_gate_while_running_stops_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"] * 5 + ["FINISHED"], alarms=[{"id": "a", "severity": "CRITICAL"}])
    with pytest.raises(AirflowException, match="stopped"):
        _op(fail_on_alarm_severity="CRITICAL", stop_on_alarm=True).execute(_context())  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1


def test_timeout_stops_the_run_then_fails(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"] * 50)
    with pytest.raises(AirflowException, match="timeout"):
        _op(check_interval=10, timeout=45).execute(_context())  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1


def test_execution_timeout_interrupting_the_wait_stops_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_loadtest.compat import AirflowTaskTimeout

    _service(requests_mock, ["RUNNING"] * 50)

    def interrupted(_: float) -> None:
        raise AirflowTaskTimeout("Timeout, PID: 1")

    monkeypatch.setattr(hook_module, "_sleep", interrupted)
    store = FakeStateStore()
    # The timeout is the task's own decision: the run is stopped once, the record says why, and the
    # failure is final (a retry could only judge the run it stopped, or bill another).
    with pytest.raises(AirflowFailException, match="execution_timeout passed; it was stopped"):
        _op().execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1
    assert store.data[RUN_RECORD_KEY]["stopped"]["by"] == "timeout"
    with pytest.raises(AirflowFailException, match="execution_timeout passed; it was stopped"):
        _op().execute(_context())  # no state store: the same, stopped once more by its own try
    assert _posts(requests_mock, STOP_URL) == 2


def test_api_outage_while_polling_leaves_the_run_for_a_retry(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"])
    requests_mock.get(
        STATE_URL, [{"json": {"id": "br-1", "state": "RUNNING"}}, {"status_code": 500, "text": "down"}]
    )
    store = FakeStateStore()
    with pytest.raises(AirflowException, match="HTTP 500"):
        _op().execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 0
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"


def test_on_kill_stops_the_active_run_when_a_person_ended_the_task(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_loadtest.lifecycle import support as run_lifecycle  # where on_kill asks

    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (True, "failed"))
    _service(requests_mock, ["RUNNING"])
    op = _op(wait_for_completion=False)
    op.on_kill()  # nothing started yet: nothing to stop
    assert _posts(requests_mock, STOP_URL) == 0
    op = _op(wait_for_completion=False)
    context = _context()
    op._ti = context["ti"]
    op._adopt(context, op.start_run(context))  # what execute does before waiting
    op.on_kill()
    op.on_kill()  # a second signal: one stop per decision
    assert _posts(requests_mock, STOP_URL) == 1


def _saved_record() -> dict[str, Any]:
    return {
        "scenario_id": "sc-1",
        "report_id": "rep-1",
        "bench_result_id": "br-1",
        "project_id": "proj-1",
        "template_id": "t-1",
        "workspace_id": "ws-1",
        "test_name": None,
        "report_url": f"{BASE_URL}/ui/workspace/ws-1/project/proj-1/analysis/report/rep-1",
        "started_at": 999_990.0,
    }


@pytest.mark.parametrize("first_state", ["RUNNING", "PENDING", "SOMETHING_NEW"])
def test_retry_reattaches_to_an_active_run_with_zero_new_posts(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], first_state: str
) -> None:
    _service(requests_mock, [first_state, "RUNNING", "FINISHED"])
    store = FakeStateStore({RUN_RECORD_KEY: _saved_record()})
    context = _context(store)
    result = _op().execute(context)  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, RUN_URL) == 0
    assert _pushed(context)[REPORT_URL_XCOM_KEY] == _saved_record()["report_url"]


def test_retry_after_finished_run_succeeds_without_starting(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["FINISHED"])
    result = _op().execute(_context(FakeStateStore({RUN_RECORD_KEY: _saved_record()})))  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, RUN_URL) == 0


def test_retry_after_failed_run_starts_a_new_one(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["ERROR", "RUNNING", "FINISHED"])
    store = FakeStateStore({RUN_RECORD_KEY: _saved_record()})
    assert _op(restart_failed_runs=True).execute(_context(store))["state"] == "FINISHED"  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 1


def test_retry_after_failed_run_can_be_told_not_to_restart(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["ABORTED", "ABORTED"])
    with pytest.raises(AirflowException, match="ABORTED"):
        _op(restart_failed_runs=False).execute(_context(FakeStateStore({RUN_RECORD_KEY: _saved_record()})))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 0


def test_run_is_recorded_before_waiting(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"])
    store = FakeStateStore()
    with pytest.raises(TaskDeferred):
        _op(deferrable=True).execute(_context(store))  # type: ignore[arg-type]
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"


def test_deferrable_defers_with_json_safe_trigger_and_link_already_published(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"])
    context = _context()
    op = _op(deferrable=True, timeout=600, fail_on_alarm_severity="WARNING")
    with pytest.raises(TaskDeferred) as caught:
        op.execute(context)  # type: ignore[arg-type]
    deferred = caught.value
    assert deferred.method_name == "execute_complete"
    assert deferred.timeout is None  # our own deadline, so execute_complete always runs
    trigger = deferred.trigger
    assert isinstance(trigger, LoadTestRunTrigger)
    path, kwargs = trigger.serialize()
    json.dumps(kwargs)
    module, _, name = path.rpartition(".")
    assert getattr(import_module(module), name)(**kwargs).serialize() == (path, kwargs)
    assert kwargs["options"]["deadline"] == clock[0] + 600
    assert kwargs["options"]["fail_on_alarm_severity"] == "WARNING"
    assert _pushed(context)[REPORT_URL_XCOM_KEY].endswith(
        "/analysis/report/rep-1"
    )  # the link, before the end


def test_execution_timeout_becomes_the_deferred_deadline(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    from datetime import timedelta

    _service(requests_mock, ["RUNNING"])
    with pytest.raises(TaskDeferred) as caught:
        _op(deferrable=True, timeout=3600, execution_timeout=timedelta(minutes=5)).execute(_context())  # type: ignore[arg-type]
    assert caught.value.trigger.serialize()[1]["options"]["deadline"] == clock[0] + 300


def _outcome(**overrides: Any) -> dict[str, Any]:
    outcome = {
        "bench_result_id": "br-1",
        "state": "FINISHED",
        "reason": "finished",
        "succeeded": True,
        "message": "Run br-1 FINISHED",
        "duration_s": 12.5,
        "stopped": False,
        "alarms": [],
        "breaking": [],
        "metrics": {},
    }
    return {**outcome, **overrides}


def test_execute_complete_success_and_failure(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(FILES_URL, json=[])  # the failed run's JMeter log is looked for (lifecycle.explaining)
    store = FakeStateStore({RUN_RECORD_KEY: _saved_record()})
    op = _op(deferrable=True)
    result = op.execute_complete(
        _context(store), {"status": "done", "run": _saved_record(), "outcome": _outcome()}
    )  # type: ignore[arg-type]
    assert result["state"] == "FINISHED" and result["duration_s"] == 12.5
    assert store.data[RUN_RECORD_KEY] == _saved_record()  # kept: a retry takes this verdict
    failed = _outcome(
        state="ERROR", reason="ended", succeeded=False, message="Run br-1 failed in the service (state ERROR)"
    )
    with pytest.raises(AirflowException, match=r"state ERROR\)\. Report: https://"):
        op.execute_complete(_context(), {"status": "done", "run": _saved_record(), "outcome": failed})  # type: ignore[arg-type]
    with pytest.raises(AirflowException, match="in the triggerer failed: LoadTestApiError: boom"):
        op.execute_complete(
            _context(), {"status": "error", "run": _saved_record(), "message": "LoadTestApiError: boom"}
        )  # type: ignore[arg-type]


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="fail_on_alarm_severity"):
        _op(fail_on_alarm_severity="PASSED")
    with pytest.raises(ValueError, match="stop_on_alarm needs"):
        _op(stop_on_alarm=True)
    with pytest.raises(ValueError, match="check_interval"):
        _op(check_interval=0)
    with pytest.raises(ValueError, match="timeout"):
        _op(timeout=-5)


def test_resumed_task_keeps_its_report_link(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    """After deferral a new process computes the link at task end: it comes from the trigger's run record."""
    requests_mock.get(FILES_URL, json=[])  # the failed run's JMeter log is looked for
    op = _op(deferrable=True)
    link = LoadTestReportLink()
    assert link.get_link(op, ti_key=mock.sentinel.key) == ""  # type: ignore[arg-type]
    context = {**_context(), "task": op}
    failed = _outcome(state="ERROR", reason="ended", succeeded=False, message="Run br-1 failed")
    with pytest.raises(AirflowException):
        op.execute_complete(context, {"status": "done", "run": _saved_record(), "outcome": failed})  # type: ignore[arg-type]
    assert link.get_link(op, ti_key=mock.sentinel.key) == _saved_record()["report_url"]  # type: ignore[arg-type]


# --- the start-once rules (issue 10) ------------------------------------------------------------

STORE_DOWN = "state store: API server answered 503"


def _record(run: dict[str, Any] | None = None, *, max_tries: int | None = 0) -> dict[str, Any]:
    """A stored record: a start sent at 2026-11-23 13:00:00 UTC, with its run once answered."""
    return {
        "version": 1,
        "scenario_id": "sc-1",
        "start_sent_at": 1795438800.0,
        "max_tries": max_tries,
        "run": run,
    }


def _defer_and_resume(
    op: RunScenarioOperator,
    context: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    handler: Any,
    clock: list[float],
) -> dict[str, Any]:
    """The deferrable path: execute defers, the trigger runs against ``handler``, execute_complete.
    The trigger's pauses move the fake clock instead of waiting."""

    async def no_sleep(seconds: float) -> None:
        clock[0] += seconds

    _plug_async_service(monkeypatch, handler, no_sleep)
    with pytest.raises(TaskDeferred) as caught:
        op.execute(context)  # type: ignore[arg-type]
    return op.execute_complete(context, _first_event(caught.value.trigger))  # type: ignore[arg-type]


def _plug_async_service(monkeypatch: pytest.MonkeyPatch, handler: Any, sleep: Any) -> None:
    """Every request of the async client (on aiohttp's own session) is answered by ``handler``
    (``tests.aio_service``); its pauses call ``sleep``."""
    from airflow_provider_loadtest.hooks import async_client

    monkeypatch.setattr(async_client, "_sleep", sleep)
    answer_with(handler)


def _plug_answering_run(monkeypatch: pytest.MonkeyPatch, run_state: str = "RUNNING") -> list[str]:
    """Every AsyncLoadTestClient finds run br-1 in ``run_state`` and never pauses; the HTTP methods it
    sent, in order (what a trigger's ``on_kill`` asked of the service)."""
    import httpx

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        return httpx.Response(200, json={"id": "br-1", "state": run_state})

    async def no_sleep(seconds: float) -> None:
        return None

    _plug_async_service(monkeypatch, handler, no_sleep)
    return seen


def _first_event(trigger: Any) -> dict[str, Any]:
    async def first_event() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger fired no event")

    return asyncio.run(first_event())


def _wait_on_failing_status_api(
    op: RunScenarioOperator,
    context: dict[str, Any],
    status: int,
    *,
    requests_mock: rm.Mocker,
    monkeypatch: pytest.MonkeyPatch,
    clock: list[float],
) -> None:
    """Start, then wait (sync or deferred, as ``op`` says) while every status read answers ``status``."""
    import httpx

    _service(requests_mock, ["RUNNING"])
    requests_mock.get(STATE_URL, status_code=status, text="down")
    if op.deferrable:
        _defer_and_resume(op, context, monkeypatch, lambda r: httpx.Response(status, text="down"), clock)
    else:
        op.execute(context)  # type: ignore[arg-type]


def test_start_in_flight_is_recorded_before_the_start_request(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    store = FakeStateStore()
    seen: list[Any] = []

    def start(request: Any, context: Any) -> dict[str, Any]:
        seen.append(json.loads(json.dumps(store.data.get(RUN_RECORD_KEY))))
        return BENCH_REPORT

    _service(requests_mock, ["RUNNING"])
    requests_mock.post(RUN_URL, json=start)
    _op(wait_for_completion=False).execute(_context(store, max_tries=2))  # type: ignore[arg-type]
    assert seen == [
        {
            "version": 1,
            "scenario_id": "sc-1",
            "start_sent_at": clock[0],
            "max_tries": 2,
            "run": None,
            "stopped": None,
            "clear_number": 0,  # the DAG run's, as Airflow gives it: a later clear raises it
            "try_number": 1,  # the try that sent the start: a retry names it (issue 34)
        }
    ]
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"
    assert store.data[RUN_RECORD_KEY]["max_tries"] == 2


@pytest.mark.parametrize(
    "answer",
    [
        {"exc": __import__("requests").exceptions.ReadTimeout("read timed out")},
        {"exc": __import__("requests").exceptions.ConnectionError("Connection aborted: RemoteDisconnected")},
        {"status_code": 502, "text": "bad gateway"},
        {"status_code": 200, "text": "<html>not json</html>"},
        {"status_code": 200, "json": {"id": "rep-1", "benchResultIds": []}},
    ],
    ids=["read-timeout", "dropped", "5xx", "unreadable-2xx", "2xx-without-ids"],
)
def test_unknown_start_outcome_fails_for_good_and_the_retry_starts_nothing(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], answer: dict[str, Any]
) -> None:
    """The start is sent by ``execute`` before any wait, the same code whether the task then waits on
    a worker or defers (so one mode is tested; ``test_the_start_comes_before_the_deferral`` holds it)."""
    requests_mock.post(RUN_URL, **answer)
    store = FakeStateStore()
    with pytest.raises(AirflowFailException) as caught:
        _op().execute(_context(store))  # type: ignore[arg-type]
    message = str(caught.value)
    assert "'sc-1'" in message and "outcome is unknown" in message
    assert "Check the scenario's runs in the service" in message and " UTC" in message
    assert store.data[RUN_RECORD_KEY]["run"] is None  # still in flight: the retry must see it
    with pytest.raises(AirflowFailException, match="outcome is unknown"):  # had Airflow retried anyway
        _op().execute(_context(store, try_number=2))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 1


def test_the_start_comes_before_the_deferral(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """A deferrable task starts (and records) its run in ``execute``, before it defers: the start-once
    rules above hold for it as they are, and its trigger only waits."""
    _service(requests_mock, ["RUNNING"])
    store = FakeStateStore()
    with pytest.raises(TaskDeferred) as caught:
        _op(deferrable=True).execute(_context(store))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 1
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"
    assert caught.value.trigger.serialize()[1]["run_record"]["bench_result_id"] == "br-1"


def test_a_retry_finding_a_start_in_flight_does_not_start(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """The worker died during the start request: the record says in flight, no run."""
    _service(requests_mock, ["RUNNING"])
    store = FakeStateStore({RUN_RECORD_KEY: _record()})
    with pytest.raises(AirflowFailException) as caught:
        _op().execute(_context(store, try_number=2))  # type: ignore[arg-type]
    assert "A start of scenario 'sc-1' was sent at 2026-11-23 13:00:00 UTC" in str(caught.value)
    assert "Clear this task to start a new run" in str(caught.value)
    assert requests_mock.call_count == 0


def test_a_start_refused_with_a_4xx_started_nothing_and_may_be_retried(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    from airflow_provider_loadtest.api.errors import LoadTestApiError

    _service(requests_mock, ["FINISHED"])
    requests_mock.post(RUN_URL, [{"status_code": 409, "text": "a run is going"}, {"json": BENCH_REPORT}])
    store = FakeStateStore()
    with pytest.raises(LoadTestApiError) as caught:
        _op().execute(_context(store))  # type: ignore[arg-type]
    assert not isinstance(caught.value, AirflowFailException)
    assert RUN_RECORD_KEY not in store.data
    assert _op().execute(_context(store, try_number=2))["state"] == "FINISHED"  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 2


@pytest.mark.parametrize(
    ("states", "alarms", "kwargs", "match"),
    [
        (["FINISHED"], [{"id": "a", "severity": "CRITICAL"}], {"fail_on_alarm_severity": "CRITICAL"}, "gate"),
        (["RUNNING"] * 20, [], {"timeout": 25}, "timeout"),
        (["ERROR"], [], {}, "state ERROR"),
        (["ABORTED"], [], {}, "state ABORTED"),
    ],
    ids=["gate", "timeout", "error", "aborted"],
)
@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_verdict_is_final_and_the_record_survives_it(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    states: list[str],
    alarms: list[dict[str, Any]],
    kwargs: dict[str, Any],
    match: str,
    deferrable: bool,
) -> None:
    import httpx

    _service(requests_mock, states, alarms=alarms)
    store = FakeStateStore()
    op = _op(deferrable=deferrable, check_interval=10, **kwargs)
    polls = iter(states)

    def service(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/br-1") and request.method == "GET":
            return httpx.Response(200, json={"id": "br-1", "state": next(polls, states[-1])})
        if "threshold-alarms" in request.url.path:
            return httpx.Response(200, json=alarms)
        return httpx.Response(200, json={})

    with pytest.raises(AirflowFailException, match=match):
        if deferrable:
            _defer_and_resume(op, _context(store), monkeypatch, service, clock)
        else:
            op.execute(_context(store))  # type: ignore[arg-type]
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"
    assert _posts(requests_mock, RUN_URL) == 1


@pytest.mark.parametrize("state", ["ERROR", "ABORTED"])
def test_restart_failed_runs_lets_airflow_retry_into_a_new_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], state: str
) -> None:
    _service(requests_mock, [state, state, "RUNNING", "FINISHED"])
    store = FakeStateStore()
    with pytest.raises(AirflowException, match=f"state {state}") as caught:
        _op(restart_failed_runs=True).execute(_context(store))  # type: ignore[arg-type]
    assert not isinstance(caught.value, AirflowFailException)  # the opt-in: retries allowed
    assert _op(restart_failed_runs=True).execute(_context(store, try_number=2))["state"] == "FINISHED"  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 2


def test_a_retry_finding_its_run_finished_takes_its_verdict_with_the_gate(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["FINISHED"], alarms=[{"id": "a", "severity": "CRITICAL", "name": "p95"}])
    store = FakeStateStore({RUN_RECORD_KEY: _record(_saved_record())})
    with pytest.raises(AirflowFailException, match="broke the quality gate"):
        _op(fail_on_alarm_severity="CRITICAL").execute(_context(store, try_number=2))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 0


@pytest.mark.parametrize("earlier", [_saved_record(), None], ids=["after-a-verdict", "after-uncertain-start"])
def test_a_persons_clear_starts_afresh_and_says_so(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    capsys: pytest.CaptureFixture[str],
    earlier: dict[str, Any] | None,
) -> None:
    # The run of before the clear still goes (read first), then the new run is watched to its end.
    _service(requests_mock, ["RUNNING", "FINISHED"] if earlier else ["FINISHED"])
    store = FakeStateStore({RUN_RECORD_KEY: _record(earlier, max_tries=1)})
    result = _op().execute(_context(store, max_tries=3, try_number=3))  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _posts(requests_mock, RUN_URL) == 1
    out = _plain(capsys.readouterr().out)
    assert "The task was cleared (max_tries went from 1 to 3)" in out
    # A clear is a person's decision: the old run, still going, is stopped once (and said why).
    assert _posts(requests_mock, STOP_URL) == (1 if earlier else 0)
    if earlier:
        assert "Stopping run br-1: a person cleared the task" in out
    assert store.data[RUN_RECORD_KEY]["max_tries"] == 3
    assert store.data[RUN_RECORD_KEY]["stopped"] is None  # the new run's record


def _cleared_after_a_run(requests_mock: rm.Mocker, first_read: dict[str, Any]) -> tuple[FakeStateStore, Any]:
    """A clear (max_tries 1 -> 3) of a task whose run br-1 was recorded; the first state read (the run of
    before the clear) answers ``first_read``, then the new run goes RUNNING, FINISHED."""
    _service(requests_mock, ["RUNNING", "FINISHED"])
    requests_mock.get(
        STATE_URL,
        [
            first_read,
            {"json": {"id": "br-1", "state": "RUNNING"}},
            {"json": {"id": "br-1", "state": "FINISHED"}},
        ],
    )
    return FakeStateStore({RUN_RECORD_KEY: _record(_saved_record(), max_tries=1)}), _op()


def test_a_clear_after_the_run_ended_stops_nothing(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """The run of before the clear already ended: nothing to stop, the new run starts."""
    store, op = _cleared_after_a_run(requests_mock, {"json": {"id": "br-1", "state": "FINISHED"}})
    assert op.execute(_context(store, max_tries=3, try_number=3))["state"] == "FINISHED"  # type: ignore[arg-type]
    assert (_posts(requests_mock, STOP_URL), _posts(requests_mock, RUN_URL)) == (0, 1)
    assert requests_mock.request_history[0].url == STATE_URL  # its state was read, by its id


def test_a_clear_whose_old_run_cannot_be_read_stops_it_and_records_why(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The state of the run of before the clear cannot be read: it may still go, so it is stopped (the
    clear asked for a new run), the record saying a person's clear decided it, then the new run starts."""
    store, op = _cleared_after_a_run(requests_mock, {"status_code": 404, "text": "no such run"})
    recorded: list[tuple[Any, float]] = []

    def stop(request: Any, context: Any) -> str:
        recorded.append((store.data[RUN_RECORD_KEY], clock[0]))
        return ""

    requests_mock.post(STOP_URL, text=stop)
    assert op.execute(_context(store, max_tries=3, try_number=3))["state"] == "FINISHED"  # type: ignore[arg-type]
    assert (_posts(requests_mock, STOP_URL), _posts(requests_mock, RUN_URL)) == (1, 1)
    out = _plain(capsys.readouterr().out)
    assert re.search(r"\] Could not read the state of run br-1 of before the clear: .*404", out), out
    record, when = recorded[0]
    stopped = record["stopped"]
    assert (stopped["bench_result_id"], stopped["by"], stopped["at"]) == ("br-1", "clear", when)


def test_a_start_refused_whose_record_cannot_be_cleared_says_a_retry_will_refuse(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    """A 4xx start started nothing, but the "start in flight" record could not be deleted: the log says
    the retry will refuse to start (and why), rather than leave a person to guess."""

    class Undeletable(FakeStateStore):
        def delete(self, key: str) -> None:
            raise RuntimeError("state store: API server answered 503")

    from airflow_provider_loadtest.api.errors import LoadTestApiError

    requests_mock.post(RUN_URL, status_code=409, text="a run is going")
    with pytest.raises(LoadTestApiError):
        _op().execute(_context(Undeletable()))  # type: ignore[arg-type]
    out = _plain(capsys.readouterr().out)
    said = (
        "] Could not clear the start-in-flight record (a retry will refuse to start): state store: API "
        "server answered 503"
    )
    assert said in out, out  # the line as written (the level's bracket, then the message)


def test_a_retry_is_not_a_clear(loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]) -> None:
    _service(requests_mock, ["FINISHED"])
    store = FakeStateStore({RUN_RECORD_KEY: _record(_saved_record(), max_tries=1)})
    _op().execute(_context(store, max_tries=1, try_number=2))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 0


@pytest.mark.parametrize(
    ("store", "why"),
    [
        (None, "there is no task state store (Airflow < 3.3)"),
        (FakeStateStore(fail_get=True), "the task state store could not be read"),  # on the first try
    ],
    ids=["no-store", "store-unreadable"],
)
def test_without_a_working_store_every_failure_after_the_start_is_final_and_said_once(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    capsys: pytest.CaptureFixture[str],
    store: FakeStateStore | None,
    why: str,
) -> None:
    _service(requests_mock, ["RUNNING"])
    requests_mock.get(STATE_URL, status_code=500, text="down")
    with pytest.raises(AirflowFailException, match=r"may still be going.*a retry could not find this run"):
        _op().execute(_context(store, try_number=1))  # type: ignore[arg-type]
    assert _plain(capsys.readouterr().out).count(f"No working task state store: {why}") == 1
    assert _posts(requests_mock, RUN_URL) == 1
    _service(requests_mock, ["ERROR"])
    with pytest.raises(AirflowFailException, match="state ERROR"):  # even with the restart opt-in
        _op(restart_failed_runs=True).execute(_context(store))  # type: ignore[arg-type]


def test_a_failing_store_read_on_a_retry_starts_nothing(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """With the guard broken the try would start and then wait on a run that goes forever: the task's
    ``timeout`` (on the fake clock) ends that wait at once, so the test fails instead of hanging."""
    _service(requests_mock, ["RUNNING"])
    with pytest.raises(AirflowException, match="an earlier try may have started a load test"):
        _op(timeout=60).execute(_context(FakeStateStore(fail_get=True), try_number=2))  # type: ignore[arg-type]
    assert requests_mock.call_count == 0


@pytest.mark.parametrize(
    ("states", "restart", "clear_number", "said"),
    [
        (
            ["RUNNING", "FINISHED"],
            False,
            0,
            "Re-attaching to run br-1 that an earlier try started (state RUNNING)",
        ),
        (
            ["FINISHED"],
            False,
            0,
            "Run br-1 of an earlier try already ended FINISHED: taking its verdict, not starting another",
        ),
        (
            ["ERROR", "RUNNING", "FINISHED"],
            True,
            0,
            "Run br-1 of an earlier try ended ERROR: starting a new run (restart_failed_runs=True)",
        ),
        (
            ["ABORTED", "RUNNING", "FINISHED"],
            False,
            1,
            "The DAG run was cleared after run br-1 started, and the run ended ABORTED: the clear of this "
            "task stopped it. Starting the new run the clear asked for",
        ),
    ],
    ids=["attach", "judge", "restart", "cleared"],
)
def test_what_a_retry_does_with_its_recorded_run_is_said_in_the_log(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    capsys: pytest.CaptureFixture[str],
    states: list[str],
    restart: bool,
    clear_number: int,
    said: str,
) -> None:
    """A person reading the retry's log learns which run it watches and why: each way out of the
    recorded run has its line (and starts a run only where it says so)."""
    _service(requests_mock, states)
    store = FakeStateStore({RUN_RECORD_KEY: {**_record(_saved_record()), "clear_number": 0}})
    context = _context(store, try_number=2, clear_number=clear_number)
    assert _op(restart_failed_runs=restart).execute(context)["state"] == "FINISHED"  # type: ignore[arg-type]
    assert said in _plain(capsys.readouterr().out)
    assert _posts(requests_mock, RUN_URL) == (1 if "new run" in said else 0)


@pytest.mark.parametrize("state", ["ABORTED", "ERROR"])
def test_a_plain_retry_finding_its_run_ended_badly_starts_no_second_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], state: str
) -> None:
    """Issue 30's first mutant: a retry (same DAG run, not cleared: its ``clear_number`` is the one the
    record holds) that finds its run ABORTED (stopped in the service's UI) or ERROR, without
    ``restart_failed_runs``, takes that verdict: no second billed load test."""
    _service(requests_mock, [state])
    store = FakeStateStore({RUN_RECORD_KEY: {**_record(_saved_record()), "clear_number": 2}})
    with pytest.raises(AirflowFailException, match=f"state {state}"):
        _op(restart_failed_runs=False).execute(_context(store, try_number=2, clear_number=2))  # type: ignore[arg-type]
    assert _posts(requests_mock, RUN_URL) == 0


def test_a_failing_store_write_before_the_start_starts_nothing(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"])
    with pytest.raises(AirflowException, match="Nothing was started") as caught:
        _op().execute(_context(FakeStateStore(fail_sets=(1,))))  # type: ignore[arg-type]
    assert not isinstance(caught.value, AirflowFailException)  # nothing billed: a retry may try again
    assert _posts(requests_mock, RUN_URL) == 0


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_failing_store_write_after_the_start_makes_failures_final(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    deferrable: bool,
) -> None:
    store = FakeStateStore(fail_sets=(2,))
    op = _op(deferrable=deferrable)
    with pytest.raises(AirflowFailException, match="may still be going"):
        _wait_on_failing_status_api(
            op,
            _context(store),
            500,
            requests_mock=requests_mock,
            monkeypatch=monkeypatch,
            clock=clock,
        )
    assert store.data[RUN_RECORD_KEY]["run"] is None  # what a retry would find: it refuses to start


@pytest.mark.parametrize("status", [401, 403, 404])
def test_what_cannot_succeed_is_not_retried(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], status: int
) -> None:
    requests_mock.post(RUN_URL, status_code=status, text="no")
    store = FakeStateStore()
    with pytest.raises(AirflowFailException, match=f"HTTP {status}"):
        _op().execute(_context(store))  # type: ignore[arg-type]
    assert RUN_RECORD_KEY not in store.data  # nothing started
    requests_mock.get(TEMPLATES_URL, status_code=status, text="no")
    with pytest.raises(AirflowFailException, match=f"HTTP {status}"):
        RunScenarioOperator(
            task_id="run", scenario_id="sc-1", workspace_id="ws-1", template_name="x", deferrable=False
        ).execute(_context(store))  # type: ignore[arg-type]


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_refused_key_while_waiting_fails_for_good_and_says_how_to_stop(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    deferrable: bool,
) -> None:
    op = _op(deferrable=deferrable)
    with pytest.raises(AirflowFailException, match="a retry would get the same answer") as caught:
        _wait_on_failing_status_api(
            op,
            _context(FakeStateStore()),
            401,
            requests_mock=requests_mock,
            monkeypatch=monkeypatch,
            clock=clock,
        )
    assert 'LoadTestHook("loadtest_default").stop_run("br-1")' in str(caught.value)


@pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
def test_a_wait_without_verdict_says_the_run_may_still_bill_and_how_to_stop_it(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    clock: list[float],
    monkeypatch: pytest.MonkeyPatch,
    deferrable: bool,
) -> None:
    store = FakeStateStore()
    op = _op(deferrable=deferrable)
    with pytest.raises(AirflowException) as caught:
        _wait_on_failing_status_api(
            op,
            _context(store),
            503,
            requests_mock=requests_mock,
            monkeypatch=monkeypatch,
            clock=clock,
        )
    message = str(caught.value)
    assert not isinstance(caught.value, AirflowFailException)  # the retry re-attaches
    assert "Run br-1 may still be going and billing" in message
    assert "/analysis/report/rep-1" in message
    assert 'To stop it, use the web UI or LoadTestHook("loadtest_default").stop_run("br-1")' in message
    assert "A retry of this task re-attaches to it" in message


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0])
@pytest.mark.parametrize("name", ["check_interval", "timeout"])
def test_numbers_must_be_finite_and_positive(name: str, bad: float) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a finite, positive number"):
        _op(**{name: bad})


def test_a_template_id_rendering_empty_is_refused_like_a_literal_one(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    with pytest.raises(ValueError, match="template_id"):
        RunScenarioOperator(task_id="run", scenario_id="sc-1", template_id="")
    op = RunScenarioOperator(task_id="run", scenario_id="sc-1", template_id="{{ var.value.template }}")
    op.template_id = ""  # what rendering gave
    with pytest.raises(AirflowFailException, match="template_id"):
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert requests_mock.call_count == 0


def test_the_trigger_puts_off_its_first_poll_by_its_runs_share_of_the_interval(
    loadtest_conn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waits resumed together by a triggerer restart must not poll in step: the first pause is the
    run's own fraction of the interval, before any call."""
    import httpx

    from airflow_provider_loadtest.decisions.watch import first_poll_delay

    events: list[str] = []

    async def no_sleep(seconds: float) -> None:
        events.append(f"sleep {seconds}")

    def handler(request: httpx.Request) -> httpx.Response:
        events.append(f"{request.method} {request.url.path}")
        if request.url.path == "/runtime/bench-results/br-1":
            return httpx.Response(200, json={"id": "br-1", "state": "FINISHED"})
        return httpx.Response(200, json=[] if "alarms" in request.url.path else {"metrics": []})

    _plug_async_service(monkeypatch, handler, no_sleep)
    trigger = LoadTestRunTrigger(
        loadtest_conn_id="loadtest_default",
        run_record=_saved_record(),
        options={"check_interval_s": 30.0},
        started_at=0,
    )
    assert _first_event(trigger)["status"] == "done"
    delay = first_poll_delay("br-1", 30.0)
    assert 0 < delay < 30.0
    assert events[:2] == [f"sleep {delay}", "GET /runtime/bench-results/br-1"]
