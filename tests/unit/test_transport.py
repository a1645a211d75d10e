"""The triggerer's shared HTTP clients: shared per settings and loop, sharded, never a stale key."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx

from airflow_provider_loadtest.hooks import transport
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.settings import ConnectionSettings
from tests.conftest import API_KEY, BASE_URL

SETTINGS = ConnectionSettings(base_url=BASE_URL, api_key=API_KEY, ui_url=BASE_URL + "/ui")


def test_waits_with_the_same_settings_share_a_client_until_the_last_lets_go() -> None:
    async def scenario() -> None:
        first, second = AsyncLoadTestClient(SETTINGS), AsyncLoadTestClient(SETTINGS)
        async with first, second:
            assert first._client is second._client
            assert transport.users(SETTINGS) == [2]
            shared = first._client
        assert transport.users(SETTINGS) == []
        assert shared is not None and shared.is_closed

    asyncio.run(scenario())


def test_a_rotated_key_gets_a_new_client_with_the_new_key() -> None:
    rotated = dataclasses.replace(SETTINGS, api_key="a-new-key-0123456789")

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as old, AsyncLoadTestClient(rotated) as new:
            assert old._client is not new._client
            assert new._client is not None
            assert new._client.headers["Authorization"] == "Bearer a-new-key-0123456789"

    asyncio.run(scenario())


def test_clients_are_sharded_and_share_one_tls_context() -> None:
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


def test_each_event_loop_has_its_own_clients() -> None:
    seen: list[httpx.AsyncClient | None] = []

    async def scenario() -> None:
        async with AsyncLoadTestClient(SETTINGS) as client:
            seen.append(client._client)

    asyncio.run(scenario())
    asyncio.run(scenario())
    assert seen[0] is not seen[1]


def test_redirects_are_not_followed() -> None:
    assert transport.new_client(SETTINGS).follow_redirects is False
