"""Shared HTTP clients for the triggerer: per connection settings and event loop, in small pools.

A triggerer runs hundreds or thousands of waits in one event loop, each sending one small GET every
few seconds. An ``httpx.AsyncClient`` of its own per wait costs about 850 KiB (its TLS context loads the
CA bundle, even for ``http://``) and ~20 ms of CPU that blocks the loop; one client per poll is worse.
So waits that use the same connection settings share clients: one TLS context per process, and pooled
clients of ``SHARD_SIZE`` waits each, created on first use and closed when their last wait lets go.
The settings are the key, API key included: a rotated key or any other change of the connection
gives a new client, never a stale key.

Pool limits are sized for that load: httpx's default (one pool of 100 connections, 5 s pool timeout)
made polls fail at 1,000 waits, and an unbounded pool spends its CPU scanning its own connections.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from airflow_provider_loadtest import __version__

if TYPE_CHECKING:
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings

#: Waits served by one pooled client. httpx's pool scans its connections (and, for idle ones, all of
#: them again) on every request, so one pool for a thousand waits costs O(waits^2) CPU per poll and
#: stalls; small pools keep that scan cheap, and the TLS context they share keeps them small.
SHARD_SIZE = 16
#: How long an idle connection is kept before closing it; below the usual 10 s check interval would
#: reconnect on every poll, far above it would hold sockets the service may already have dropped.
KEEPALIVE_EXPIRY_S = 30.0


@functools.cache
def ssl_context(verify: bool | str) -> ssl.SSLContext:
    """One TLS context per verification setting and process: loading the CA bundle costs ~20 ms of
    CPU (blocking the event loop) and ~830 KiB, so no client builds its own."""
    return httpx.create_ssl_context(verify=verify)


def new_client(
    settings: ConnectionSettings, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """An async client carrying the connection's key, timeouts and TLS setting (redirects not followed).

    Each wait has at most one request in flight, so a pool of ``SHARD_SIZE`` connections never makes
    a poll queue for a slot (no pool timeout needed).
    """
    return httpx.AsyncClient(
        headers={
            "Authorization": f"Bearer {settings.api_key}",
            "Accept": "application/json",
            "User-Agent": f"airflow-provider-loadtest/{__version__} httpx/{httpx.__version__}",
        },
        timeout=httpx.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s, pool=None),
        limits=httpx.Limits(
            max_connections=SHARD_SIZE,
            max_keepalive_connections=SHARD_SIZE,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        ),
        verify=ssl_context(settings.verify_ssl),
        follow_redirects=False,
        transport=transport,
    )


@dataclass(eq=False)
class _Shard:
    client: httpx.AsyncClient
    users: int = 0


#: Per running event loop: the shards of clients by connection settings. Weak on the loop, so a loop
#: that is gone (tests run many) takes its bookkeeping with it.
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ConnectionSettings, list[_Shard]]] = (
    weakref.WeakKeyDictionary()
)


def _shards(settings: ConnectionSettings) -> list[_Shard]:
    return _by_loop.setdefault(asyncio.get_running_loop(), {}).setdefault(settings, [])


def acquire(settings: ConnectionSettings) -> httpx.AsyncClient:
    """A shared client for ``settings`` in the running loop (made when all are full); pair with
    ``release``."""
    shards = _shards(settings)
    shard = next((s for s in shards if s.users < SHARD_SIZE and not s.client.is_closed), None)
    if shard is None:
        shard = _Shard(new_client(settings))
        shards.append(shard)
    shard.users += 1
    return shard.client


async def release(settings: ConnectionSettings, client: httpx.AsyncClient) -> None:
    """Let go of ``client``; the last user of a shard closes it (its sockets with it)."""
    shards = _shards(settings)
    shard = next((s for s in shards if s.client is client), None)
    if shard is None:
        return
    shard.users -= 1
    if shard.users <= 0:
        shards.remove(shard)
        if not shards:
            _by_loop.get(asyncio.get_running_loop(), {}).pop(settings, None)
        await client.aclose()


def users(settings: ConnectionSettings) -> list[int]:
    """The users of each shard for ``settings`` in the running loop (for tests and benchmarks)."""
    shards = _by_loop.get(asyncio.get_running_loop(), {}).get(settings, [])
    return [s.users for s in shards]
