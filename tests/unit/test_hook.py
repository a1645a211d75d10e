from __future__ import annotations

import logging
from typing import Any

import pytest
import requests
import requests_mock as rm
from urllib3.exceptions import NewConnectionError

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.api.errors import AmbiguousTemplateError, LoadTestApiError
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from tests.conftest import API_KEY, BASE_URL, connection_json

RUN_URL = f"{BASE_URL}/runtime/scenarios/run/sc-1"
TEMPLATES_URL = f"{BASE_URL}/analysis/bench-report-templates/by-workspace/ws-1"
BENCH_REPORT = {
    "id": "rep-1",
    "projectId": "proj-1",
    "name": "nightly",
    "benchResultIds": ["br-1"],
    "configs": [],
    "items": [],
}
TEMPLATES = [
    {"id": "t-1", "workspaceId": "ws-1", "name": "Nightly SLA"},
    {"id": "t-2", "workspaceId": "ws-1", "name": "nightly sla"},
    {"id": "t-3", "workspaceId": "ws-1", "name": "Smoke"},
    {"id": "t-4", "workspaceId": "ws-1", "name": "Dup"},
    {"id": "t-5", "workspaceId": "ws-1", "name": "dup"},
    {"id": "t-6", "workspaceId": "ws-1", "name": "dup"},
]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the backoff waits instead of spending them."""
    waited: list[float] = []
    monkeypatch.setattr(hook_module, "_sleep", waited.append)
    return waited


@pytest.fixture
def hook(loadtest_conn: str) -> LoadTestHook:
    return LoadTestHook(loadtest_conn_id=loadtest_conn)


def test_every_call_carries_bearer_key_and_user_agent(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    hook.list_templates("ws-1")
    sent = requests_mock.last_request
    assert sent.headers["Authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["User-Agent"].startswith(f"airflow-provider-loadtest/{__version__}")


def test_one_session_is_reused(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    hook.list_templates("ws-1")
    first = hook.session
    hook.list_templates("ws-1")
    assert hook.session is first


def test_timeouts_come_from_the_connection(monkeypatch: pytest.MonkeyPatch, requests_mock: rm.Mocker) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(connect_timeout=2, read_timeout=7))
    requests_mock.get(TEMPLATES_URL, json=[])
    LoadTestHook().list_templates("ws-1")
    assert requests_mock.last_request.timeout == (2.0, 7.0)


def test_base_url_with_path_prefix(monkeypatch: pytest.MonkeyPatch, requests_mock: rm.Mocker) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host="http://onprem.test:8090/api/"))
    requests_mock.get("http://onprem.test:8090/api/analysis/bench-report-templates/by-workspace/w", json=[])
    assert LoadTestHook().list_templates("w") == []


def test_run_scenario_sends_query_and_properties(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    report = hook.run_scenario(
        "sc-1", template_id="t-1", name="nightly 2026-01-01", properties={"USERS": "50"}
    )
    sent = requests_mock.last_request
    assert sent.qs == {"templateid": ["t-1"], "name": ["nightly 2026-01-01"]}
    assert sent.json() == {"map": {"USERS": "50"}}
    assert report.id == "rep-1"
    assert report.bench_result_id == "br-1"


def test_run_scenario_without_options_sends_no_body(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    hook.run_scenario("sc-1")
    assert requests_mock.last_request.body is None
    assert requests_mock.last_request.qs == {}


def test_query_values_are_encoded_not_concatenated(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    hook.run_scenario("sc-1", name="a&templateId=evil b")
    assert requests_mock.last_request.qs == {"name": ["a&templateid=evil b"]}


@pytest.mark.parametrize("bad", ["", " ", "a/b", "..", "a?b", "a#b", "a b", "a%2F", "a\\b", "a\x01"])
def test_bad_ids_fail_before_any_http_call(hook: LoadTestHook, requests_mock: rm.Mocker, bad: str) -> None:
    calls = [
        lambda: hook.run_scenario(bad),
        lambda: hook.run_scenario("sc-1", template_id=bad),
        lambda: hook.list_templates(bad),
        lambda: hook.find_template(bad, name="x"),
        lambda: hook.get_bench_result(bad),
        lambda: hook.get_progress(bad),
        lambda: hook.get_global_metrics(bad),
        lambda: hook.get_threshold_alarms(bad),
        lambda: hook.get_junit_report(bad),
        lambda: hook.stop_run(bad),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"_id"):
            call()
    assert requests_mock.call_count == 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Smoke", "t-3"), ("smoke", "t-3"), ("Nightly SLA", "t-1"), ("nightly sla", "t-2"), ("Missing", None)],
)
def test_find_template_exact_then_case_insensitive(
    hook: LoadTestHook, requests_mock: rm.Mocker, name: str, expected: str | None
) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    found = hook.find_template("ws-1", name=name)
    assert (found.id if found else None) == expected


def test_find_template_ambiguity_is_an_error(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    assert hook.find_template("ws-1", name="Dup").id == "t-4"  # type: ignore[union-attr]
    with pytest.raises(
        AmbiguousTemplateError, match=r"2 report templates of workspace 'ws-1' .*'t-5', 't-6'"
    ):
        hook.find_template("ws-1", name="dup")
    with pytest.raises(AmbiguousTemplateError):
        hook.find_template("ws-1", name="DUP")


def test_find_template_by_id(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    assert hook.find_template("ws-1", template_id="t-3").name == "Smoke"  # type: ignore[union-attr]
    assert hook.find_template("ws-1", template_id="t-404") is None


def _error(hook: LoadTestHook, requests_mock: rm.Mocker, **response: Any) -> LoadTestApiError:
    requests_mock.get(TEMPLATES_URL, **response)
    with pytest.raises(LoadTestApiError) as caught:
        hook.list_templates("ws-1")
    return caught.value


def test_401_says_the_key_is_wrong(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    error = _error(hook, requests_mock, status_code=401, text="Invalid token")
    assert error.status == 401
    assert "wrong or expired" in str(error)
    assert "Invalid token" in str(error)
    assert "GET /analysis/bench-report-templates/by-workspace/ws-1" in str(error)
    assert "List the report templates of workspace 'ws-1'" in str(error)


def test_404_names_call_status_and_message(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    error = _error(hook, requests_mock, status_code=404, text="Workspace not found")
    assert (error.method, error.path, error.status) == (
        "GET",
        "/analysis/bench-report-templates/by-workspace/ws-1",
        404,
    )
    assert "HTTP 404" in str(error)
    assert "Workspace not found" in str(error)


def test_500_with_html_body_is_trimmed(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    html = "<html><body><h1>Internal Server Error</h1>" + "x" * 5000 + "</body></html>"
    error = _error(hook, requests_mock, status_code=500, text=html, headers={"Content-Type": "text/html"})
    assert "HTTP 500" in str(error)
    assert "Internal Server Error" in str(error)
    assert len(str(error)) < 900


def test_html_page_with_200_says_not_json(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    error = _error(
        hook,
        requests_mock,
        status_code=200,
        text="<!doctype html><title>Login</title>",
        headers={"Content-Type": "text/html"},
    )
    assert "not JSON (text/html)" in str(error)
    assert "<title>Login" in str(error)


def test_empty_answer_is_explained(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    error = _error(hook, requests_mock, status_code=200, text="")
    assert "empty body" in str(error)
    assert "17.0.0" in str(error)


def test_unexpected_shape_is_an_api_error(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    error = _error(hook, requests_mock, status_code=200, json={"not": "a list"})
    assert "expected shape" in str(error)


def test_key_never_in_errors_or_logs(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    requests_mock.get(TEMPLATES_URL, [{"status_code": 503}] * 10)
    requests_mock.post(RUN_URL, status_code=401, text=f"bad key {API_KEY}")
    errors = []
    for call in (lambda: hook.list_templates("ws-1"), lambda: hook.run_scenario("sc-1")):
        with pytest.raises(LoadTestApiError) as caught:
            call()
        errors.append(caught.value)
    assert "bad key ***" in str(errors[1])
    for text in [*map(str, errors), *map(repr, errors), caplog.text, repr(hook), repr(hook.settings)]:
        assert API_KEY not in text


def test_get_retries_on_429_honouring_retry_after(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float]
) -> None:
    requests_mock.get(
        TEMPLATES_URL,
        [
            {"status_code": 429, "headers": {"Retry-After": "3"}},
            {"status_code": 503},
            {"json": TEMPLATES, "status_code": 200},
        ],
    )
    assert len(hook.list_templates("ws-1")) == len(TEMPLATES)
    assert requests_mock.call_count == 3
    assert sleeps[0] == 3.0
    assert 1.0 <= sleeps[1] <= 2.0  # second backoff step, jittered


@pytest.mark.parametrize("status", [502, 503, 504])
def test_get_retries_are_bounded(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float], status: int
) -> None:
    requests_mock.get(TEMPLATES_URL, status_code=status)
    with pytest.raises(LoadTestApiError, match=f"HTTP {status}"):
        hook.list_templates("ws-1")
    assert requests_mock.call_count == LoadTestHook.retry_policy.max_attempts
    assert sum(sleeps) <= LoadTestHook.retry_policy.max_total_wait_s


def test_get_retries_on_connection_errors(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float]
) -> None:
    requests_mock.get(TEMPLATES_URL, [{"exc": requests.ConnectionError("reset")}, {"json": []}])
    assert hook.list_templates("ws-1") == []
    assert len(sleeps) == 1


def test_get_does_not_retry_client_errors(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float]
) -> None:
    requests_mock.get(TEMPLATES_URL, status_code=400, text="bad")
    with pytest.raises(LoadTestApiError):
        hook.list_templates("ws-1")
    assert requests_mock.call_count == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "failure",
    [
        {"exc": requests.ReadTimeout("read timed out")},
        {"exc": requests.ConnectionError("Connection aborted: RemoteDisconnected")},
        {"status_code": 502},
        {"status_code": 503, "headers": {"Retry-After": "1"}},
        {"status_code": 504},
        {"status_code": 429, "headers": {"Retry-After": "1"}},
        {"status_code": 500},
    ],
)
def test_start_post_is_never_retried_once_it_may_have_arrived(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float], failure: dict[str, Any]
) -> None:
    requests_mock.post(RUN_URL, [failure, {"json": BENCH_REPORT}])
    with pytest.raises(LoadTestApiError) as caught:
        hook.run_scenario("sc-1")
    assert requests_mock.call_count == 1
    assert sleeps == []
    if "exc" in failure:
        assert "not sent again" in str(caught.value)


def _refused() -> requests.ConnectionError:
    reason = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]
    return requests.ConnectionError(type("MaxRetryError", (), {"reason": reason})())


@pytest.mark.parametrize("failure", [_refused(), requests.ConnectTimeout("connect timed out")])
def test_start_post_is_retried_when_nothing_was_sent(
    hook: LoadTestHook, requests_mock: rm.Mocker, sleeps: list[float], failure: Exception
) -> None:
    requests_mock.post(RUN_URL, [{"exc": failure}, {"json": BENCH_REPORT}])
    assert hook.run_scenario("sc-1").bench_result_id == "br-1"
    assert requests_mock.call_count == 2
    assert len(sleeps) == 1


def test_real_refused_connection_is_recognised(monkeypatch: pytest.MonkeyPatch, sleeps: list[float]) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=f"http://127.0.0.1:{port}"))
    with pytest.raises(LoadTestApiError, match="could not connect"):
        LoadTestHook().run_scenario("sc-1")
    assert len(sleeps) == LoadTestHook.retry_policy.max_attempts - 1


def test_connection_test_button(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(f"{BASE_URL}/workspaces/member-of", json=[{"id": "w1", "name": "A"}, {"id": "w2"}])
    ok, message = hook.test_connection()
    assert ok
    assert "2 workspace(s)" in message


def test_connection_test_button_bad_key(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(f"{BASE_URL}/workspaces/member-of", status_code=401, text="Unauthorized")
    ok, message = hook.test_connection()
    assert not ok
    assert "wrong or expired" in message
    assert API_KEY not in message


def test_state_progress_metrics_alarms_junit_stop(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(f"{BASE_URL}/runtime/bench-results/br-1", json={"id": "br-1", "state": "RUNNING"})
    requests_mock.get(f"{BASE_URL}/runtime/bench-results/progress/br-1", json={"value": 42})
    requests_mock.get(
        f"{BASE_URL}/analysis/metrics/global/br-1",
        json={"metrics": [{"name": "Hits", "value": 10, "unit": ""}]},
    )
    requests_mock.post(f"{BASE_URL}/analysis/threshold-alarms", json=[{"id": "a1", "severity": "WARNING"}])
    requests_mock.get(f"{BASE_URL}/analysis/junit-reports/br-1", text="<testsuites/>")
    requests_mock.post(f"{BASE_URL}/runtime/bench-results/stop/br-1", text="")
    assert hook.get_bench_result("br-1").state == "RUNNING"
    assert hook.get_progress("br-1").percent == 42
    assert hook.get_global_metrics("br-1").metrics[0].name == "Hits"  # type: ignore[index]
    alarms = hook.get_threshold_alarms("br-1")
    assert alarms[0].severity == "WARNING"
    body = requests_mock.request_history[-1].json()
    assert body["@type"] == "ThresholdAlarmReportItem"
    assert body["metric"]["benchResultId"] == "br-1"
    assert hook.get_junit_report("br-1") == "<testsuites/>"
    hook.stop_run("br-1")
    assert requests_mock.last_request.method == "POST"


def test_ui_field_behaviour_relabels_host_and_password() -> None:
    behaviour = LoadTestHook.get_ui_field_behaviour()
    assert behaviour["relabeling"] == {"host": "API base URL", "password": "API key"}
    assert "login" in behaviour["hidden_fields"]
