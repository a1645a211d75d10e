"""RunScenarioOperator's wait, verdict, stop and re-attach, against requests-mock and a fake clock."""

from __future__ import annotations

import asyncio
import json
from importlib import import_module
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred

from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.links.report import REPORT_URL_XCOM_KEY
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY, RunScenarioOperator
from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger
from tests.conftest import BASE_URL
from tests.unit.test_hook import BENCH_REPORT, RUN_URL

STATE_URL = f"{BASE_URL}/runtime/bench-results/br-1"
STOP_URL = f"{BASE_URL}/runtime/bench-results/stop/br-1"
ALARMS_URL = f"{BASE_URL}/analysis/threshold-alarms"
METRICS_URL = f"{BASE_URL}/analysis/metrics/global/br-1"
PROGRESS_URL = f"{BASE_URL}/runtime/bench-results/progress/br-1"


class FakeStateStore:
    """Airflow 3.3's task_state_store: survives retries (and clears) of the same task instance.

    ``fail_get`` makes every read raise; ``fail_sets`` lists which writes (1 = the first) raise.
    """

    def __init__(
        self, data: dict[str, Any] | None = None, *, fail_get: bool = False, fail_sets: tuple[int, ...] = ()
    ) -> None:
        self.data = dict(data or {})
        self.fail_get = fail_get
        self.fail_sets = fail_sets
        self.sets = 0

    def get(self, key: str, default: Any = None) -> Any:
        if self.fail_get:
            raise RuntimeError("state store: API server answered 503")
        return self.data.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.sets += 1
        if self.sets in self.fail_sets:
            raise RuntimeError("state store: API server answered 503")
        json.dumps(value)  # must be JSON-safe
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake clock that the hook's sleeps move forward."""
    now = [1_000_000.0]
    monkeypatch.setattr(hook_module, "_sleep", lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr("airflow_provider_loadtest.decisions.watch.time.time", lambda: now[0])
    monkeypatch.setattr("airflow_provider_loadtest.operators.run_scenario.time.time", lambda: now[0])
    return now


def _context(
    store: FakeStateStore | None = None, *, max_tries: int = 0, try_number: int = 1
) -> dict[str, Any]:
    ti = mock.MagicMock(name="ti", start_date=None, max_tries=max_tries, try_number=try_number)
    context: dict[str, Any] = {"ti": ti}
    if store is not None:
        context["task_state_store"] = store
    return context


def _pushed(context: dict[str, Any]) -> dict[str, Any]:
    return {c.kwargs["key"]: c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list}


def _service(requests_mock: rm.Mocker, states: list[str], alarms: list[dict[str, Any]] | None = None) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    requests_mock.get(STATE_URL, [{"json": {"id": "br-1", "state": s}} for s in states])
    requests_mock.post(ALARMS_URL, json=alarms or [])
    requests_mock.get(METRICS_URL, json={"metrics": [{"name": "Hits", "value": 9, "unit": ""}]})
    requests_mock.get(PROGRESS_URL, json={"value": 50})
    requests_mock.post(STOP_URL, text="")


def _posts(requests_mock: rm.Mocker, url: str) -> int:
    return sum(1 for r in requests_mock.request_history if r.method == "POST" and r.url.split("?")[0] == url)


def _op(**kwargs: Any) -> RunScenarioOperator:
    kwargs.setdefault("deferrable", False)
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
    from airflow.sdk.exceptions import AirflowTaskTimeout

    _service(requests_mock, ["RUNNING"] * 50)

    def interrupted(_: float) -> None:
        raise AirflowTaskTimeout("Timeout, PID: 1")

    monkeypatch.setattr(hook_module, "_sleep", interrupted)
    with pytest.raises(AirflowTaskTimeout):
        _op().execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == 1
    with pytest.raises(AirflowFailException, match="would start a second load test"):
        _op().execute(_context())  # no state store: the retry could not find the stopped run
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


def test_on_kill_stops_the_active_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["RUNNING"])
    op = _op(wait_for_completion=False)
    op.on_kill()  # nothing started yet: nothing to stop
    assert _posts(requests_mock, STOP_URL) == 0
    op._adopt(_context(), op.start_run(_context()))  # what execute does before waiting
    op.on_kill()
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


def test_execute_complete_success_and_failure(loadtest_conn: str) -> None:
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


def test_trigger_on_kill_stops_the_run(loadtest_conn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx

    from airflow_provider_loadtest.hooks import async_client

    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        return httpx.Response(200)

    real = async_client.AsyncLoadTestClient
    monkeypatch.setattr(
        async_client,
        "AsyncLoadTestClient",
        lambda settings: real(settings, transport=httpx.MockTransport(handler)),
    )
    trigger = LoadTestRunTrigger(
        loadtest_conn_id="loadtest_default", run_record=_saved_record(), options={}, started_at=0
    )
    asyncio.run(trigger.on_kill())
    assert calls == ["POST /runtime/bench-results/stop/br-1"]


def test_argument_checks() -> None:
    with pytest.raises(ValueError, match="fail_on_alarm_severity"):
        _op(fail_on_alarm_severity="PASSED")
    with pytest.raises(ValueError, match="stop_on_alarm needs"):
        _op(stop_on_alarm=True)
    with pytest.raises(ValueError, match="check_interval"):
        _op(check_interval=0)
    with pytest.raises(ValueError, match="timeout"):
        _op(timeout=-5)
