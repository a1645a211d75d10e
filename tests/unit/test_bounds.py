"""Every wait has a bound (issue 10): whole-request deadlines, back-off cut at the watch deadline,
the deadline stops the run whatever the wait was doing, reads retried on 500 within those bounds."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest
import requests_mock as rm
from airflow.models import Connection

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api import retry as retry_module
from airflow_provider_loadtest.api.errors import LoadTestApiError, trim_service_text
from airflow_provider_loadtest.api.retry import Attempts, RetryPolicy
from airflow_provider_loadtest.api.validation import validate_file_name, validate_path_id
from airflow_provider_loadtest.decisions.report_pdf import export_report_pdf
from airflow_provider_loadtest.decisions.runs import breaking_alarms, is_terminal
from airflow_provider_loadtest.decisions.watch import STOP_GRACE_S, Log, WatchOptions, watch_run
from airflow_provider_loadtest.hooks import async_client
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.hooks.settings import ConnectionSettings, settings_from_connection
from airflow_provider_loadtest.models import BenchResult, ThresholdAlarm
from tests.aio_service import answer_with
from tests.conftest import API_KEY, BASE_URL, connection_json

log = logging.getLogger(__name__)
BENCH_URL = f"{BASE_URL}/runtime/bench-results/br-1"
RUN_URL = f"{BASE_URL}/runtime/scenarios/run/sc-1"
#: A valid answer the trickling server sends one byte per second: whole, it would take 40 s.
TRICKLED = b'{"id": "br-1", "state": "RUNNING"}'.ljust(40)


class Trickle:
    """A tiny HTTP server on 127.0.0.1 that sends its headers at once, then one body byte per second.

    Bounded: it sends at most ``len(TRICKLED)`` bytes per connection and stops as soon as the client
    hangs up; ``sent`` records how many body bytes each connection got.
    """

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.sent: list[int] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        index = len(self.sent)
        self.sent.append(0)
        with conn:
            conn.recv(65536)
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(TRICKLED)}\r\n\r\n"
            )
            try:
                conn.sendall(head.encode())
                for byte in TRICKLED:
                    if self.closing.wait(1.0):
                        return
                    conn.sendall(bytes([byte]))
                    self.sent[index] += 1
            except OSError:  # the client hung up: what the test wants
                return

    def __enter__(self) -> Trickle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.thread.join(timeout=5)
        self.listener.close()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    with Trickle() as server:
        yield server


def _trickled_start() -> endpoints.ApiRequest[Any]:
    # The start is never resent once it may have reached the service: one try, one connection.
    return endpoints.run_scenario("sc-1")


def test_sync_call_has_a_whole_request_deadline(trickle: Trickle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LOADTEST_DEFAULT",
        connection_json(host=f"http://127.0.0.1:{trickle.port}", read_timeout=2),
    )
    hook = LoadTestHook()
    with pytest.raises(LoadTestApiError, match="whole-request bound") as caught:
        hook.call(_trickled_start())
    assert caught.value.outcome_unknown
    assert trickle.sent and trickle.sent[0] < len(TRICKLED)


def test_async_call_has_a_whole_request_deadline(trickle: Trickle) -> None:
    settings = ConnectionSettings(
        base_url=f"http://127.0.0.1:{trickle.port}", api_key=API_KEY, ui_url="x", read_timeout_s=2
    )

    async def go() -> Any:
        async with AsyncLoadTestClient(settings) as client:
            return await client.call(_trickled_start())

    with pytest.raises(LoadTestApiError, match="whole-request bound") as caught:
        asyncio.run(go())
    assert caught.value.outcome_unknown
    assert trickle.sent and trickle.sent[0] < len(TRICKLED)


class Clock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t


def test_back_off_is_cut_at_the_request_deadline_and_no_try_follows() -> None:
    clock = Clock()
    request = replace(endpoints.get_bench_result("br-1"), deadline=clock.t + 3)
    tries = Attempts(request, RetryPolicy(), log, now=clock)
    assert tries.budget(60.0) == 3.0  # one try never outlives the deadline
    delay = tries.after_answer(503, "30")
    assert delay == 3.0  # not the 30 s the service asked for
    clock.t += delay
    with pytest.raises(LoadTestApiError, match="deadline passed"):
        tries.budget(60.0)


def test_a_retry_after_does_not_keep_a_sync_call_past_its_deadline(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock(time.time())
    waits: list[float] = []

    def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.t += seconds

    monkeypatch.setattr(hook_module, "_sleep", fake_sleep)
    monkeypatch.setattr(retry_module, "_now", clock)
    requests_mock.get(BENCH_URL, status_code=503, headers={"Retry-After": "30"})
    request = replace(endpoints.get_bench_result("br-1"), deadline=clock.t + 3)
    with pytest.raises(LoadTestApiError):
        LoadTestHook().call(request)
    assert sum(waits) <= 3.0


def test_reads_retry_on_500_but_the_start_does_not(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook_module, "_sleep", lambda _s: None)
    requests_mock.get(BENCH_URL, [{"status_code": 500}, {"json": {"id": "br-1", "state": "RUNNING"}}])
    requests_mock.post(RUN_URL, status_code=500)
    hook = LoadTestHook()
    assert hook.get_bench_result("br-1").state == "RUNNING"
    with pytest.raises(LoadTestApiError) as caught:
        hook.run_scenario("sc-1")
    assert caught.value.outcome_unknown
    assert [r.method for r in requests_mock.request_history].count("POST") == 1


def test_async_reads_retry_on_500(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_sleep(_seconds: float) -> None:
        return None

    monkeypatch.setattr(async_client, "_sleep", no_sleep)
    answers = iter([httpx.Response(500), httpx.Response(200, json={"id": "br-1", "state": "RUNNING"})])
    settings = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url="x")

    async def go() -> Any:
        answer_with(lambda _r: next(answers))
        async with AsyncLoadTestClient(settings) as client:
            return await client.call(endpoints.get_bench_result("br-1"))

    assert asyncio.run(go()).state == "RUNNING"


def test_the_watch_deadline_reaches_every_read() -> None:
    steps = watch_run("br-1", WatchOptions(deadline=2000.0), started_at=1000.0, now=Clock())
    first = next(steps)
    assert first.deadline == 2000.0


def test_a_wait_ending_on_api_failures_past_the_deadline_still_stops_the_run() -> None:
    clock = Clock()
    steps = watch_run("br-1", WatchOptions(deadline=1010.0), started_at=1000.0, now=clock)
    next(steps)  # the status read
    clock.t = 1011.0  # its tries failed until past the deadline
    failure = endpoints.get_bench_result("br-1").error(503, "unavailable")
    action = steps.throw(failure)
    while isinstance(action, Log):
        action = next(steps)
    assert action.operation == endpoints.stop_run("br-1").operation
    assert action.deadline is not None  # the stop is bounded too
    with pytest.raises(StopIteration) as done:
        steps.send(None)
    outcome = done.value.value
    assert (outcome.reason, outcome.stopped, outcome.succeeded) == ("timeout", True, False)


def test_api_failures_before_the_deadline_still_raise() -> None:
    clock = Clock()
    steps = watch_run("br-1", WatchOptions(deadline=1010.0), started_at=1000.0, now=clock)
    next(steps)
    failure = endpoints.get_bench_result("br-1").error(503, "unavailable")
    with pytest.raises(LoadTestApiError):
        steps.throw(failure)


# --- the gate fails closed (issue 10, point 7) -----------------------------------------------------


def test_severities_compare_in_any_case_and_unknown_ones_break_an_active_gate() -> None:
    assert breaking_alarms([{"id": "a", "severity": "critical"}], "CRITICAL") == [
        {"id": "a", "severity": "critical"}
    ]
    unknown = [{"id": "b", "severity": "ERROR"}]
    assert breaking_alarms(unknown, "WARNING") == unknown
    assert breaking_alarms([{"id": "c"}], "CRITICAL") == [{"id": "c"}]
    assert breaking_alarms([{"id": "d", "severity": "passed"}], "WARNING") == []
    assert breaking_alarms([{"id": "e", "severity": "ERROR"}], None) == []


def test_a_lower_case_error_state_ends_the_wait() -> None:
    assert is_terminal("error")
    steps = watch_run("br-1", WatchOptions(), started_at=1000.0, now=Clock())
    next(steps)
    action = steps.send(BenchResult(id="br-1", state="error"))  # type: ignore[arg-type]
    assert action.operation == endpoints.get_threshold_alarms("br-1").operation


def test_an_unknown_severity_is_logged_and_fails_the_gate() -> None:
    steps = watch_run("br-1", WatchOptions(fail_on_alarm_severity="WARNING"), started_at=1000.0, now=Clock())
    next(steps)
    steps.send(BenchResult(id="br-1", state="FINISHED"))  # the alarms read
    steps.send([ThresholdAlarm(id="a", severity="ERROR")])  # the metrics read
    logs: list[str] = []
    action = steps.send(None)
    with pytest.raises(StopIteration) as done:
        while True:
            if isinstance(action, Log):
                logs.append(action.message)
            action = steps.send(None)
    assert any("does not know" in line for line in logs)
    assert (done.value.value.reason, done.value.value.succeeded) == ("alarm", False)


# --- no redirects (issue 10, point 10) --------------------------------------------------------------


def test_the_sync_hook_does_not_follow_a_redirect(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, status_code=307, headers={"Location": "https://elsewhere.example.test/run"})
    requests_mock.post("https://elsewhere.example.test/run", json={"id": "rep-2", "benchResultIds": ["x"]})
    with pytest.raises(LoadTestApiError, match=r"redirect to host 'elsewhere\.example\.test'") as caught:
        LoadTestHook().run_scenario("sc-1")
    assert not caught.value.outcome_unknown
    assert [r.url for r in requests_mock.request_history] == [RUN_URL]


def test_the_async_client_names_the_redirect_host() -> None:
    settings = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url="x")

    async def go() -> Any:
        answer_with(lambda _r: httpx.Response(302, headers={"Location": "https://other.example.test/x"}))
        async with AsyncLoadTestClient(settings) as client:
            return await client.call(endpoints.get_bench_result("br-1"))

    with pytest.raises(LoadTestApiError, match=r"redirect to host 'other\.example\.test'"):
        asyncio.run(go())


# --- a key that cannot go into a header (issue 10, point 9) ----------------------------------------


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("s3cret-key\n", "line break"),
        ("s3cret\r\nX-Evil: 1", "line break"),
        ("s3cret\x00key", "control character"),
        ("s3cret-кey", "Latin-1"),
        (" s3cret-key", "spaces"),
    ],
)
def test_a_key_that_cannot_go_into_a_header_is_refused_when_the_connection_is_read(
    key: str, problem: str
) -> None:
    conn = Connection(conn_id="x", conn_type="loadtest", host=BASE_URL, password=key)
    with pytest.raises(ValueError, match=problem) as caught:
        settings_from_connection(conn)
    assert "s3cret" not in str(caught.value)


# --- ids (issue 10, points 9 and 10) --------------------------------------------------------------


@pytest.mark.parametrize("bad", ["br\x85one", "br\x9b1", "br\u200b1", "br\u202e1", "\ufeffbr1"])
def test_c1_controls_and_format_characters_are_refused_in_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid id"):
        validate_path_id("run", bad)
    with pytest.raises(ValueError, match="not a valid file name"):
        validate_file_name("filename", bad)


def test_a_giant_id_is_refused_early_with_a_short_message() -> None:
    with pytest.raises(ValueError, match="longer than 256 characters") as caught:
        validate_path_id("run", "a" * 200_000)
    assert len(str(caught.value)) < 200
    with pytest.raises(ValueError, match="longer than 256"):
        endpoints.get_bench_result("a" * 200_000)


# --- redaction before truncation (issue 10, point 8) -----------------------------------------------

SECRET = "ab+cd/ef gh%ij&kl=mn?op"


@pytest.mark.parametrize("echo", [SECRET, quote(SECRET, safe=""), quote(SECRET), quote_plus(SECRET)])
def test_the_key_is_redacted_before_truncation_also_percent_encoded(echo: str) -> None:
    text = "x" * 40 + f"Authorization: Bearer {echo} and more"
    for limit in (50, 60, 70, 500):
        trimmed = trim_service_text(text, SECRET, limit=limit)
        assert echo[:6] not in trimmed
    assert "***" in trim_service_text(text, SECRET)
    assert "***" in trim_service_text(text.replace(echo, echo.lower()), SECRET)


def test_the_pdf_check_does_not_leak_part_of_the_key() -> None:
    steps = export_report_pdf("rep-1", "br-1", secret=API_KEY)
    echo = ("<html>" + "y" * 40 + f"Bearer {API_KEY}</html>").encode()
    answers: dict[str, Any] = {
        "/analysis/logs/list/br-1": [],
        "/tasks": "task-1",
        "/tasks/task-1/result": {"@type": "PrintReportTaskResult", "filename": "rep-1.pdf"},
        "/analysis/logs/br-1": echo,
    }
    reply: Any = None
    with pytest.raises(LoadTestApiError) as caught:
        for _ in range(20):  # bounded: the print task finishes at its first poll
            action = steps.send(reply)
            reply = None
            if isinstance(action, endpoints.ApiRequest):
                reply = action.parse(answers[action.path])
    assert API_KEY[:6] not in str(caught.value)


# --- pathological answers (issue 10, point 9) -------------------------------------------------------

DEEP = b"[" * 200_000 + b"]" * 200_000


def _async_answer(body: bytes) -> Any:
    settings = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url="x")

    async def go() -> Any:
        answer_with(lambda _r: httpx.Response(200, content=body))
        async with AsyncLoadTestClient(settings) as client:
            return await client.call(endpoints.get_bench_result("br-1"))

    return asyncio.run(go())


def test_deeply_nested_json_is_the_packages_error(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(BENCH_URL, content=DEEP)
    with pytest.raises(LoadTestApiError, match=r"Read the state.*nested too deeply"):
        LoadTestHook().get_bench_result("br-1")
    with pytest.raises(LoadTestApiError, match=r"Read the state.*nested too deeply"):
        _async_answer(DEEP)


def test_an_answer_over_the_size_bound_is_the_packages_error(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(endpoints, "MAX_ANSWER_BYTES", 1024)
    big = b'{"id": "br-1", "x": "' + b"y" * 200_000 + b'"}'
    requests_mock.get(BENCH_URL, content=big)
    with pytest.raises(LoadTestApiError, match=r"Read the state.*larger than 1024 bytes"):
        LoadTestHook().get_bench_result("br-1")
    with pytest.raises(LoadTestApiError, match=r"Read the state.*larger than 1024 bytes"):
        _async_answer(big)


def test_the_size_bound_is_32_mib_and_downloads_have_their_own() -> None:
    assert endpoints.MAX_ANSWER_BYTES == 32 * 2**20
    assert endpoints.AnswerBody(endpoints.get_bench_result("br-1"), 200).limit == endpoints.MAX_ANSWER_BYTES
    download = endpoints.AnswerBody(endpoints.download_run_file("br-1", "a.log"), 200)
    assert download.limit == endpoints.MAX_DOWNLOAD_BYTES > endpoints.MAX_ANSWER_BYTES


def test_reads_after_the_run_ended_are_bounded_too() -> None:
    clock = Clock()
    steps = watch_run("br-1", WatchOptions(deadline=1010.0), started_at=1000.0, now=clock)
    next(steps)
    clock.t = 1012.0
    alarms_read = steps.send(BenchResult(id="br-1", state="FINISHED"))
    assert alarms_read.deadline == 1012.0 + STOP_GRACE_S


def test_a_5xx_on_the_start_keeps_what_the_service_said_in_both_clients(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    requests_mock.post(RUN_URL, status_code=503, text="maintenance until 16:00")
    with pytest.raises(LoadTestApiError, match="maintenance until 16:00"):
        LoadTestHook().run_scenario("sc-1")
    settings = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url="x")

    async def go() -> Any:
        answer_with(lambda _r: httpx.Response(503, text="maintenance until 16:00"))
        async with AsyncLoadTestClient(settings) as client:
            return await client.call(endpoints.run_scenario("sc-1"))

    with pytest.raises(LoadTestApiError, match="maintenance until 16:00"):
        asyncio.run(go())
