"""The triggerer's HTTP client: same retry rules and errors as the sync hook, on aiohttp's own session
(answered by ``tests.aio_service``; the bytes on the wire: ``test_transport.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp.client_reqrep import ConnectionKey

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.decisions.watch import WatchOptions, watch_run
from airflow_provider_loadtest.hooks import async_client
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.settings import ConnectionSettings
from tests.aio_service import answer_with
from tests.conftest import API_KEY, BASE_URL

SETTINGS = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url=BASE_URL + "/ui")


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(async_client, "_sleep", fake_sleep)
    return waited


def _call(handler: Callable[[httpx.Request], httpx.Response], request: endpoints.ApiRequest[Any]) -> Any:
    async def go() -> Any:
        answer_with(handler)
        async with AsyncLoadTestClient(SETTINGS) as client:
            return await client.call(request)

    return asyncio.run(go())


def test_bearer_key_and_json_answer(sleeps: list[float]) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"id": "br-1", "state": "RUNNING"})

    assert _call(handler, endpoints.get_bench_result("br-1")).state == "RUNNING"
    assert seen[0].headers["Authorization"] == f"Bearer {API_KEY}"
    assert str(seen[0].url) == f"{BASE_URL}/runtime/bench-results/br-1"


def test_get_retries_on_503_then_succeeds(sleeps: list[float]) -> None:
    answers = iter(
        [
            httpx.Response(503),
            httpx.Response(429, headers={"Retry-After": "2"}),
            httpx.Response(200, json={"value": 5}),
        ]
    )
    assert _call(lambda _: next(answers), endpoints.get_progress("br-1")).percent == 5
    assert sleeps[1] == 2.0
    assert len(sleeps) == 2


def test_get_retries_on_connect_error(sleeps: list[float]) -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise aiohttp.ServerDisconnectedError()  # the connection dropped before an answer
        return httpx.Response(200, json={"id": "br-1", "state": "FINISHED"})

    assert _call(handler, endpoints.get_bench_result("br-1")).state == "FINISHED"
    assert len(calls) == 2


def test_start_is_not_retried_after_read_timeout(sleeps: list[float]) -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise TimeoutError  # aiohttp's whole-request bound passed

    with pytest.raises(LoadTestApiError, match="not sent again"):
        _call(handler, endpoints.run_scenario("sc-1"))
    assert len(calls) == 1


def test_start_is_retried_when_connection_refused(sleeps: list[float]) -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise aiohttp.ClientConnectorError(
                ConnectionKey("loadtest.example.test", 443, True, True, None, None, None),
                ConnectionRefusedError(111, "Connection refused"),
            )
        return httpx.Response(200, json={"id": "r", "benchResultIds": ["b"]})

    assert _call(handler, endpoints.run_scenario("sc-1")).bench_result_id == "b"
    assert len(calls) == 2


def test_errors_name_the_call_and_hide_the_key(sleeps: list[float]) -> None:
    with pytest.raises(LoadTestApiError) as caught:
        _call(
            lambda _: httpx.Response(401, text=f"token {API_KEY} expired"), endpoints.get_bench_result("br-1")
        )
    assert caught.value.status == 401
    assert "wrong or expired" in str(caught.value)
    assert API_KEY not in str(caught.value)


def test_drive_runs_the_shared_watch(sleeps: list[float]) -> None:
    states = iter(["RUNNING", "FINISHED"])

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/runtime/bench-results/br-1":
            return httpx.Response(200, json={"id": "br-1", "state": next(states)})
        if path == "/analysis/threshold-alarms":
            assert json.loads(request.content)["metric"]["benchResultId"] == "br-1"
            return httpx.Response(200, json=[{"id": "a", "severity": "CRITICAL"}])
        if path.startswith("/runtime/bench-results/progress/"):
            return httpx.Response(200, json={"value": 50})
        return httpx.Response(200, json={"metrics": []})

    async def go() -> Any:
        answer_with(handler)
        async with AsyncLoadTestClient(SETTINGS) as client:
            steps = watch_run(
                "br-1", WatchOptions(check_interval_s=7, fail_on_alarm_severity="CRITICAL"), started_at=0
            )
            return await client.drive(steps, async_client.log)

    outcome = asyncio.run(go())
    assert not outcome.succeeded and outcome.reason == "alarm"
    assert sleeps == [7]
