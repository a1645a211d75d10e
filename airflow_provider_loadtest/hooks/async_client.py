"""The async twin of ``LoadTestHook.call``, for triggers running in the triggerer's event loop.

Same call descriptions, same retry policy, same answer decoding; only the transport differs (httpx,
which Airflow already depends on). Waits with the same connection settings share a pooled transport
per event loop (``hooks.transport.Channel``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from airflow_provider_loadtest.api.endpoints import AnswerBody, ApiRequest, decode_answer, timed_out_detail
from airflow_provider_loadtest.api.errors import LoadTestApiError, trim_service_text
from airflow_provider_loadtest.api.retry import Attempts, LoggerLike, RetryPolicy
from airflow_provider_loadtest.decisions.watch import Log, Sleep
from airflow_provider_loadtest.hooks import transport
from airflow_provider_loadtest.hooks.settings import ConnectionSettings, failure_at, settings_from_connection
from airflow_provider_loadtest.hooks.transport import Channel

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger(__name__)


async def _sleep(seconds: float) -> None:
    """Indirection so tests can check the waits without spending them."""
    await asyncio.sleep(seconds)


def describe_httpx_failure(exc: httpx.HTTPError, secret: str | None = None) -> tuple[str, bool]:
    """A key-free account of a failure with no HTTP answer, and whether nothing was sent.

    What the transport saw (a proxy refusing the tunnel, an answer that is not HTTP) follows, with
    ``secret`` blanked out: it may quote bytes a server or proxy sent.
    """
    detail = trim_service_text(str(exc), secret, limit=200)
    if isinstance(exc, httpx.ConnectTimeout):
        return "could not connect in time", True
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect (connection refused or host name not resolved): {detail}", True
    if isinstance(exc, httpx.ReadTimeout):
        return "the service did not answer in time (read timeout)", False
    return f"the connection failed before an answer arrived ({type(exc).__name__}: {detail})", False


def _is_tls(exc: httpx.HTTPError) -> bool:
    """Whether the failure was the TLS handshake (httpx wraps the ``ssl`` error in a ConnectError)."""
    import ssl

    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, ssl.SSLError) or "SSL" in str(exc)


async def settings_for(conn_id: str) -> ConnectionSettings:
    """Read the connection with Airflow's async API (a sync lookup fails inside the triggerer)."""
    from airflow.sdk import BaseHook

    conn = await BaseHook.aget_connection(conn_id)
    return settings_from_connection(conn)


class AsyncLoadTestClient:
    """``async with AsyncLoadTestClient(settings) as client: await client.call(request)``."""

    def __init__(
        self,
        settings: ConnectionSettings,
        retry_policy: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.retry_policy = retry_policy or RetryPolicy()
        self._transport = transport  # tests plug in httpx.MockTransport; None = real network
        self._channel: Channel | None = None
        #: Parsed URLs by API path: a wait asks the same few paths again and again.
        self._urls: dict[str, httpx.URL] = {}

    async def __aenter__(self) -> AsyncLoadTestClient:
        # Real network: the channel shared by the waits of this event loop with the same settings.
        # A test's transport gets a channel of its own.
        if self._transport is None:
            self._channel = transport.acquire(self.settings)
        else:
            self._channel = Channel(self._transport, self.settings)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        channel, self._channel = self._channel, None
        if channel is None:
            return
        if self._transport is None:
            await transport.release(channel)
        else:
            await channel.aclose()

    async def call(self, request: ApiRequest[T]) -> T:
        """Send ``request`` with the same retry rules as ``LoadTestHook.call``."""
        channel = self._channel
        if channel is None:
            raise RuntimeError("use AsyncLoadTestClient as an async context manager")
        tries = Attempts(request, self.retry_policy, log)
        delay: float | None
        while True:
            budget = tries.budget(self.settings.read_timeout_s)
            try:
                async with asyncio.timeout(budget):  # the whole try, however slowly bytes arrive
                    answer = await self._send(channel, request)
            except TimeoutError:
                delay = tries.after_no_answer(timed_out_detail(budget), never_opened=False)
            except httpx.HTTPError as exc:
                failure, never_opened = describe_httpx_failure(exc, self.settings.api_key)
                failure = failure_at(self.settings.url(request.path), failure, tls_failed=_is_tls(exc))
                delay = tries.after_no_answer(failure, never_opened=never_opened)
            else:
                status, headers, body = answer
                delay = tries.after_answer(status, headers.get("Retry-After"))
                if delay is None:
                    return decode_answer(
                        request,
                        status,
                        headers.get("Content-Type"),
                        body,
                        self.settings.api_key,
                        location=headers.get("Location"),
                    )
            await _sleep(delay)

    def _url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= 16:  # a wait uses four paths; never let this grow
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self.settings.url(path))
        return url

    async def _send(self, channel: Channel, request: ApiRequest[Any]) -> tuple[int, Mapping[str, str], bytes]:
        """One try: the answer's status, headers and body (read in chunks against the size bound)."""
        response = await channel.send(
            request.method,
            self._url(request.path),
            accept=request.accept,
            params=dict(request.params) or None,
            json=request.json_body,
        )
        try:
            body = AnswerBody(request, response.status_code)
            async for chunk in response.aiter_bytes():
                body.add(chunk)
            return response.status_code, response.headers, body.content
        finally:
            await response.aclose()

    async def drive(self, steps: Generator[Any, Any, R], logger: LoggerLike) -> R:
        """Run a ``watch`` generator with async I/O (the twin of ``LoadTestHook.drive``)."""
        send: Any = None
        error: LoadTestApiError | None = None
        while True:
            try:
                action = steps.throw(error) if error is not None else steps.send(send)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            send, error = None, None
            if isinstance(action, Sleep):
                await _sleep(action.seconds)
            elif isinstance(action, Log):
                logger.log(action.level, action.message)
            else:
                try:
                    send = await self.call(action)
                except LoadTestApiError as exc:
                    error = exc
