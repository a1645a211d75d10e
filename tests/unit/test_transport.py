"""The triggerer's HTTP sessions: one per connection settings and event loop, never a stale key; what
each request carries; the environment's proxy and CA bundle, read as the sync hook reads them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.hooks import transport
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.settings import ConnectionSettings
from tests.conftest import API_KEY, BASE_URL
from tests.unit.wire import Server, call, no_proxy_environment, ok

__all__ = ["no_proxy_environment"]  # a fixture, used by name

SETTINGS = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url=BASE_URL + "/ui")


def test_waits_with_the_same_settings_share_a_session_until_the_last_lets_go() -> None:
    async def scenario() -> None:
        first, second = AsyncLoadTestClient(SETTINGS), AsyncLoadTestClient(SETTINGS)
        async with first, second:
            assert first._channel is second._channel
            assert transport.users(SETTINGS) == 2
            shared = first._channel
            assert isinstance(shared, transport.Channel) and not shared.session.closed
        assert transport.users(SETTINGS) == 0
        assert shared.closed and shared.session.closed  # its connections closed once, at the end
        async with AsyncLoadTestClient(SETTINGS) as again:
            assert again._channel is not shared  # a new session, not the closed one

    asyncio.run(scenario())


def test_a_rotated_key_gets_a_new_session_with_the_new_key() -> None:
    rotated = dataclasses.replace(SETTINGS, api_key="a-new-key-0123456789")

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as old, AsyncLoadTestClient(rotated) as new:
            assert isinstance(new._channel, transport.Channel)
            assert old._channel is not new._channel
            assert new._channel.session.headers["Authorization"] == "Bearer a-new-key-0123456789"

    asyncio.run(scenario())


def test_each_event_loop_has_its_own_session() -> None:
    seen: list[Any] = []

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as client:
            seen.append(client._channel)

    asyncio.run(scenario())
    asyncio.run(scenario())
    assert seen[0] is not seen[1]


def test_every_request_carries_the_key_user_agent_and_the_calls_accept() -> None:
    with Server([ok(b"[]"), ok(b"<xml/>")]).running() as server:
        call("async", server.url, endpoints.get_threshold_alarms("br-1"))
        call("async", server.url, endpoints.get_junit_report("br-1"))
    alarms, junit = (request.decode() for request in server.requests)
    head, _, body = alarms.partition("\r\n\r\n")
    lines = head.split("\r\n")
    assert lines[0] == "POST /analysis/threshold-alarms HTTP/1.1"
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines[1:])}
    assert headers["authorization"] == f"Bearer {API_KEY}"
    assert headers["accept"] == "application/json"
    assert headers["accept-encoding"] == "gzip, deflate"
    assert headers["user-agent"].startswith("airflow-provider-loadtest/")
    assert headers["host"] == f"127.0.0.1:{server.port}"
    assert headers["content-type"] == "application/json"
    assert "cookie" not in headers
    assert json.loads(body)["metric"]["benchResultId"] == "br-1"
    assert "\r\nAccept: application/xml, text/xml, */*\r\n" in junit


def test_query_parameters_are_sent() -> None:
    with Server([ok(b"x", b"Content-Type: application/octet-stream")]).running() as server:
        call("async", server.url, endpoints.download_run_file("br-1", "my results.jtl"))
    assert server.requests[0].startswith(b"GET /analysis/logs/br-1?filename=my+results.jtl HTTP/1.1\r\n")


def test_redirects_are_not_followed() -> None:
    redirect = ok(b"", b"Location: https://elsewhere.example.test/login", status=b"302 Found")
    with Server([redirect]).running() as server, pytest.raises(LoadTestApiError, match="elsewhere"):
        call("async", server.url, endpoints.get_bench_result("br-1"))
    assert len(server.requests) == 1


def test_the_proxy_comes_from_the_environment_for_the_connections_host(
    no_proxy_environment: pytest.MonkeyPatch,
) -> None:
    env = no_proxy_environment
    assert transport.environment_proxy(BASE_URL) is None
    env.setenv("HTTPS_PROXY", "http://proxy.corp.test:3128")
    assert transport.environment_proxy(BASE_URL) == "http://proxy.corp.test:3128"
    assert transport.environment_proxy("http://127.0.0.1:8090") is None
    env.setenv("ALL_PROXY", "http://all.corp.test:3128")
    assert transport.environment_proxy("http://127.0.0.1:8090") == "http://all.corp.test:3128"
    env.setenv("NO_PROXY", "example.test")
    assert transport.environment_proxy(BASE_URL) is None
    env.setenv("NO_PROXY", "10.0.0.0/8")  # requests' rules: CIDR ranges (urllib's and aiohttp's have none)
    assert transport.environment_proxy("http://10.1.2.3:8090") is None


def test_a_session_takes_the_environments_proxy_once(no_proxy_environment: pytest.MonkeyPatch) -> None:
    no_proxy_environment.setenv("HTTPS_PROXY", "http://proxy.corp.test:3128")

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as client:
            assert isinstance(client._channel, transport.Channel)
            assert str(client._channel.proxy) == "http://proxy.corp.test:3128"

    asyncio.run(scenario())  # the requests themselves: tests/unit/test_wire.py (test_hole_*proxy*)


def test_the_environments_ca_bundle_is_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool | str] = []
    real = transport.ssl_context

    def recording(verify: bool | str) -> Any:
        seen.append(verify)
        return real(True)

    monkeypatch.setattr(transport, "ssl_context", recording)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/corp/ca.pem")

    async def scenario() -> None:
        for settings in (SETTINGS, dataclasses.replace(SETTINGS, verify_ssl="/etc/own/ca.pem")):
            async with AsyncLoadTestClient(settings):
                pass

    asyncio.run(scenario())
    assert seen == ["/etc/corp/ca.pem", "/etc/own/ca.pem"]


def test_one_tls_context_per_ca_bundle_and_process(tmp_path: Any) -> None:
    from tests.unit.wire import certificate

    ca = certificate(tmp_path).ca_file
    assert transport.ssl_context(ca) is transport.ssl_context(ca)
    assert transport.ssl_context(True) is True and transport.ssl_context(False) is False  # aiohttp's own


def test_urls_keep_the_base_urls_path_prefix_and_the_quoted_path() -> None:
    on_premise = dataclasses.replace(SETTINGS, base_url="https://onprem.example.test:8443/api")

    async def scenario() -> None:
        async with AsyncLoadTestClient(on_premise) as client:
            assert isinstance(client._channel, transport.Channel)
            url = client._channel.url("/runtime/bench-results/br%2F1")  # quoted by api.endpoints
            assert str(url) == "https://onprem.example.test:8443/api/runtime/bench-results/br%2F1"

    asyncio.run(scenario())
