"""Shared HTTP transports for the triggerer: per connection settings and event loop, in small pools.

A triggerer runs hundreds or thousands of waits in one event loop, each sending one small GET every
few seconds. An ``httpx.AsyncClient`` of its own per wait costs about 850 KiB (its TLS context loads the
CA bundle, even for ``http://``) and ~20 ms of CPU that blocks the loop; one client per poll is worse.
So waits that use the same connection settings share a ``Channel``: one TLS context per process, and
pooled transports of ``SHARD_SIZE`` waits each, created on first use and closed when their last wait
lets go. The settings are the key, API key included: a rotated key or any other change of the
connection gives a new channel, never a stale key.

A channel sends through the transport itself (``handle_async_request``, httpx's public transport API)
with its headers and timeouts built once, not through ``AsyncClient``: the client's per-request work
(merging URL, headers and cookies, the auth and redirect machinery, cookie extraction) cost about a
third of a poll's CPU, and this package uses none of it (the key is a fixed header, redirects are
never followed, the service sets no cookies that matter). The environment an ``AsyncClient`` would
read (proxies, ``NO_PROXY``, a CA bundle) is read once per channel instead, for the connection's host.

Pool limits are sized for that load: httpx's default (one pool of 100 connections, 5 s pool timeout)
made polls fail at 1,000 waits, and an unbounded pool spends its CPU scanning its own connections.
"""

from __future__ import annotations

import asyncio
import functools
import json as json_module
import os
import ssl
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.hooks.http11 import Answer, LeanAsyncTransport
from airflow_provider_loadtest.hooks.settings import environment_verify

if TYPE_CHECKING:
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings

#: Waits served by one pooled transport. httpcore's pool scans its connections (and, for idle ones,
#: asks the socket whether the server closed it) on every request and every answer's end, so one pool
#: for a thousand waits costs O(waits) CPU per poll when they poll in step; small pools keep that scan
#: cheap, and the TLS context they share keeps them small.
SHARD_SIZE = 16
#: How long an idle connection is kept before closing it; below the usual 10 s check interval would
#: reconnect on every poll, far above it would hold sockets the service may already have dropped.
KEEPALIVE_EXPIRY_S = 30.0
#: Only encodings every httpx can decode (``Response.aiter_bytes`` undoes them).
ACCEPT_ENCODING = "gzip, deflate"


@functools.cache
def ssl_context(verify: bool | str) -> ssl.SSLContext:
    """One TLS context per verification setting and process: loading the CA bundle costs ~20 ms of
    CPU (blocking the event loop) and ~830 KiB, so no transport builds its own. A CA bundle path (a
    file, or a directory of hashed certificates) replaces the default trust store."""
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    return httpx.create_ssl_context(verify=verify)


def environment_proxy(base_url: str) -> str | None:
    """The proxy the environment gives ``base_url`` (``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``, with
    ``NO_PROXY`` honoured), read by ``requests``' own rules so the worker's hook and the triggerer agree:
    urllib's ``proxy_bypass`` knows no CIDR (``10.0.0.0/8``) nor ``host:port`` entries. Once per channel,
    so importing ``requests`` here costs nothing per poll."""
    import requests.utils  # the sync hook's dependency, needed only here

    proxy: str | None = requests.utils.select_proxy(base_url, requests.utils.get_environ_proxies(base_url))
    return proxy


def pooled_transport(settings: ConnectionSettings) -> httpx.AsyncBaseTransport:
    """A connection pool for ``settings``: the shared TLS context, the environment's proxy, and
    ``hooks.http11``'s lean HTTP/1.1 (httpcore's machinery was most of a poll's CPU).

    Each wait has at most one request in flight, so the pool never makes a poll queue for a slot; it
    keeps up to ``SHARD_SIZE`` idle connections. Its reads have no timeout of their own: the caller
    bounds each whole try (``AsyncLoadTestClient.call``), which is tighter.
    """
    return LeanAsyncTransport(
        ssl_context=ssl_context(environment_verify(settings.verify_ssl)),
        proxy=environment_proxy(settings.base_url),
        max_idle=SHARD_SIZE,
        keepalive_expiry=KEEPALIVE_EXPIRY_S,
        connect_timeout=settings.connect_timeout_s,
    )


def _json_bytes(document: Any) -> bytes:
    """A JSON body as httpx encodes one (compact, UTF-8, no NaN)."""
    return json_module.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@dataclass(eq=False)
class Channel:
    """Sends one connection's requests through ``transport``: the key, User-Agent and timeouts are
    built once here, so a poll builds only its request (redirects are never followed)."""

    transport: httpx.AsyncBaseTransport
    settings: ConnectionSettings
    users: int = 0
    closed: bool = False
    _headers: dict[str, httpx.Headers] = field(default_factory=dict, repr=False)
    _encoded: dict[tuple[str, bytes], list[bytes]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        connect, read = self.settings.connect_timeout_s, self.settings.read_timeout_s
        self.timeouts: dict[str, Any] = {"connect": connect, "read": read, "write": read, "pool": None}

    def headers(self, accept: str) -> httpx.Headers:
        """The headers of every request of this channel accepting ``accept`` (a handful of values)."""
        headers = self._headers.get(accept)
        if headers is None:
            headers = self._headers[accept] = httpx.Headers(
                {
                    "Authorization": f"Bearer {self.settings.api_key}",
                    "Accept": accept,
                    "Accept-Encoding": ACCEPT_ENCODING,
                    "User-Agent": f"airflow-provider-loadtest/{__version__} httpx/{httpx.__version__}",
                }
            )
        return headers

    async def send(
        self,
        method: str,
        url: httpx.URL,
        *,
        accept: str,
        params: dict[str, str] | None = None,
        json: Any = None,
    ) -> httpx.Response | Answer:
        """Send one request; the caller reads the answer's stream and closes it (``aclose``)."""
        if params:
            url = url.copy_merge_params(params)
        if isinstance(self.transport, LeanAsyncTransport):
            lines = self._lines(accept, url)
            body = b""
            if json is not None:
                body = _json_bytes(json)
                lines = [*lines, b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
            return await self.transport.send(method, url, lines, body)
        request = httpx.Request(
            method, url, json=json, headers=self.headers(accept), extensions={"timeout": self.timeouts}
        )
        return await self.transport.handle_async_request(request)

    def _lines(self, accept: str, url: httpx.URL) -> list[bytes]:
        """The header lines of a request to ``url``'s host accepting ``accept``, encoded once."""
        key = (accept, url.netloc)
        lines = self._encoded.get(key)
        if lines is None:
            lines = self._encoded[key] = [b"Host: " + url.netloc] + [
                name + b": " + value for name, value in self.headers(accept).raw
            ]
        return lines

    async def aclose(self) -> None:
        self.closed = True
        await self.transport.aclose()


#: Per running event loop: the channels by connection settings. Weak on the loop, so a loop that is
#: gone (tests run many) takes its bookkeeping with it.
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ConnectionSettings, list[Channel]]] = (
    weakref.WeakKeyDictionary()
)


def _channels(settings: ConnectionSettings) -> list[Channel]:
    return _by_loop.setdefault(asyncio.get_running_loop(), {}).setdefault(settings, [])


def acquire(settings: ConnectionSettings) -> Channel:
    """A shared channel for ``settings`` in the running loop (a new one when all are full); pair with
    ``release``."""
    channels = _channels(settings)
    channel = next((c for c in channels if c.users < SHARD_SIZE and not c.closed), None)
    if channel is None:
        channel = Channel(pooled_transport(settings), settings)
        channels.append(channel)
    channel.users += 1
    return channel


async def release(channel: Channel) -> None:
    """Let go of ``channel``; its last user closes it (its sockets with it)."""
    channels = _by_loop.get(asyncio.get_running_loop(), {}).get(channel.settings, [])
    if channel not in channels:
        return
    channel.users -= 1
    if channel.users <= 0:
        channels.remove(channel)
        if not channels:
            _by_loop.get(asyncio.get_running_loop(), {}).pop(channel.settings, None)
        await channel.aclose()


def users(settings: ConnectionSettings) -> list[int]:
    """The users of each channel for ``settings`` in the running loop (for tests and benchmarks)."""
    channels = _by_loop.get(asyncio.get_running_loop(), {}).get(settings, [])
    return [c.users for c in channels]
