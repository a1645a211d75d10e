"""The triggerer's shared HTTP transports: shared per settings and loop, sharded, never a stale key."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
from typing import Any

import httpx
import pytest

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.hooks import transport
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.settings import ConnectionSettings
from tests.conftest import API_KEY, BASE_URL

SETTINGS = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url=BASE_URL + "/ui")


def test_waits_with_the_same_settings_share_a_channel_until_the_last_lets_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    closed: list[httpx.AsyncBaseTransport] = []
    real_aclose = httpx.AsyncHTTPTransport.aclose

    async def recording_aclose(self: httpx.AsyncHTTPTransport) -> None:
        closed.append(self)
        await real_aclose(self)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "aclose", recording_aclose)

    async def scenario() -> None:
        first, second = AsyncLoadTestClient(SETTINGS), AsyncLoadTestClient(SETTINGS)
        async with first, second:
            assert first._channel is second._channel
            assert transport.users(SETTINGS) == [2]
            shared = first._channel
        assert transport.users(SETTINGS) == []
        assert shared is not None and shared.closed
        assert closed == [shared.transport]  # its connection pool (and sockets) closed once, at the end

    asyncio.run(scenario())


def test_a_rotated_key_gets_a_new_channel_with_the_new_key() -> None:
    rotated = dataclasses.replace(SETTINGS, api_key="a-new-key-0123456789")

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as old, AsyncLoadTestClient(rotated) as new:
            assert old._channel is not new._channel
            assert new._channel is not None
            headers = new._channel.headers("application/json")
            assert headers["Authorization"] == "Bearer a-new-key-0123456789"

    asyncio.run(scenario())


def test_channels_are_sharded_and_share_one_tls_context() -> None:
    async def scenario() -> None:
        clients = [AsyncLoadTestClient(SETTINGS) for _ in range(transport.SHARD_SIZE + 1)]
        for client in clients:
            await client.__aenter__()
        assert transport.users(SETTINGS) == [transport.SHARD_SIZE, 1]
        for client in clients:
            await client.__aexit__(None, None, None)
        assert transport.users(SETTINGS) == []

    asyncio.run(scenario())
    assert transport.ssl_context(True) is transport.ssl_context(True)


def test_a_freed_place_in_a_shard_is_taken_before_a_new_shard_is_made() -> None:
    async def scenario() -> None:
        clients = [AsyncLoadTestClient(SETTINGS) for _ in range(transport.SHARD_SIZE + 1)]
        for client in clients:
            await client.__aenter__()
        first = clients[0]._channel
        await clients[0].__aexit__(None, None, None)
        again = AsyncLoadTestClient(SETTINGS)
        await again.__aenter__()
        assert again._channel is first
        assert transport.users(SETTINGS) == [transport.SHARD_SIZE, 1]
        for client in [*clients[1:], again]:
            await client.__aexit__(None, None, None)

    asyncio.run(scenario())


def test_the_pool_of_a_shard_holds_at_most_one_connection_per_wait() -> None:
    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as client:
            assert client._channel is not None
            pool: Any = client._channel.transport._pool  # type: ignore[attr-defined]
            assert pool._max_connections == transport.SHARD_SIZE
            assert pool._max_keepalive_connections == transport.SHARD_SIZE
            assert pool._keepalive_expiry == transport.KEEPALIVE_EXPIRY_S

    asyncio.run(scenario())


def test_each_event_loop_has_its_own_channels() -> None:
    seen: list[transport.Channel | None] = []

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as client:
            seen.append(client._channel)

    asyncio.run(scenario())
    asyncio.run(scenario())
    assert seen[0] is not seen[1]


def _through(handler: Any, request: endpoints.ApiRequest[Any]) -> Any:
    async def go() -> Any:
        async with AsyncLoadTestClient(SETTINGS, transport=httpx.MockTransport(handler)) as client:
            return await client.call(request)

    return asyncio.run(go())


def test_every_request_carries_the_key_user_agent_and_the_calls_accept() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=[])

    _through(handler, endpoints.get_threshold_alarms("br-1"))
    headers = seen[0].headers
    assert headers["Authorization"] == f"Bearer {API_KEY}"
    assert headers["Accept"] == "application/json"
    assert headers["User-Agent"].startswith("airflow-provider-loadtest/")
    assert headers["Host"] == "loadtest.example.test"
    assert "Cookie" not in headers


def test_redirects_are_not_followed() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"Location": "https://elsewhere.example.test/login"})

    with pytest.raises(LoadTestApiError):
        _through(handler, endpoints.get_bench_result("br-1"))
    assert all("elsewhere" not in url for url in seen)


def test_a_compressed_answer_is_decoded() -> None:
    import gzip

    def handler(request: httpx.Request) -> httpx.Response:
        assert "gzip" in request.headers["Accept-Encoding"]
        body = gzip.compress(b'{"id": "br-1", "state": "RUNNING"}')
        return httpx.Response(
            200, content=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    assert _through(handler, endpoints.get_bench_result("br-1")).state == "RUNNING"


def test_the_proxy_comes_from_the_environment_for_the_connections_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("https_proxy", "http_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert transport.environment_proxy(BASE_URL) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp.test:3128")
    assert transport.environment_proxy(BASE_URL) == "http://proxy.corp.test:3128"
    assert transport.environment_proxy("http://127.0.0.1:8090") is None
    monkeypatch.setenv("ALL_PROXY", "http://all.corp.test:3128")
    assert transport.environment_proxy("http://127.0.0.1:8090") == "http://all.corp.test:3128"
    monkeypatch.setenv("NO_PROXY", "example.test")
    assert transport.environment_proxy(BASE_URL) is None


def test_a_proxied_channel_sends_through_the_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp.test:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    pool: Any = transport.pooled_transport(SETTINGS)._pool
    assert type(pool).__name__ == "AsyncHTTPProxy"
    assert pool._proxy_url.host == b"proxy.corp.test"


def test_the_environments_ca_bundle_is_trusted(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    seen: list[bool | str] = []
    real = transport.ssl_context

    def recording(verify: bool | str) -> ssl.SSLContext:
        seen.append(verify)
        return real(True)

    monkeypatch.setattr(transport, "ssl_context", recording)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/corp/ca.pem")
    transport.pooled_transport(SETTINGS)
    transport.pooled_transport(dataclasses.replace(SETTINGS, verify_ssl="/etc/own/ca.pem"))
    assert seen == ["/etc/corp/ca.pem", "/etc/own/ca.pem"]
