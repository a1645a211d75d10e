"""The async twin of ``LoadTestHook.call``, for triggers running in the triggerer's event loop.

Same call descriptions, same retry policy, same answer decoding; only the transport differs: aiohttp,
through a session shared by the waits of the event loop with the same connection settings
(``hooks.transport.Channel``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_provider_loadtest.api.endpoints import (
    ACCEPT_ENCODING,
    AnswerBody,
    ApiRequest,
    decode_answer,
    timed_out_detail,
)
from airflow_provider_loadtest.api.errors import LoadTestApiError, trim_service_text
from airflow_provider_loadtest.api.retry import Attempts, LoggerLike, NoAnswer, RetryPolicy
from airflow_provider_loadtest.decisions.watch import Log, Sleep
from airflow_provider_loadtest.hooks import transport
from airflow_provider_loadtest.hooks.settings import ConnectionSettings, failure_at, settings_from_connection

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger(__name__)


async def _sleep(seconds: float) -> None:
    """Indirection so tests can check the waits without spending them."""
    await asyncio.sleep(seconds)


async def settings_for(conn_id: str) -> ConnectionSettings:
    """Read the connection with Airflow's async API (a sync lookup fails inside the triggerer)."""
    from airflow.sdk import BaseHook

    conn = await BaseHook.aget_connection(conn_id)
    return settings_from_connection(conn)


class _Exchanger(Protocol):
    async def exchange(
        self, request: ApiRequest[Any], budget_s: float
    ) -> tuple[int, Mapping[str, str], bytes]: ...

    async def aclose(self) -> None: ...


class AsyncLoadTestClient:
    """``async with AsyncLoadTestClient(settings) as client: await client.call(request)``.

    ``transport`` is for tests: an ``httpx`` transport (``httpx.MockTransport``) answering in place of
    the network, through the same retry rules, size bounds and decoding.
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        retry_policy: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.retry_policy = retry_policy or RetryPolicy()
        self._transport = transport
        self._channel: _Exchanger | None = None

    async def __aenter__(self) -> AsyncLoadTestClient:
        # Real network: the session shared by the waits of this event loop with the same settings.
        if self._transport is None:
            self._channel = transport.acquire(self.settings)
        else:
            self._channel = _MockChannel(self._transport, self.settings)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        channel, self._channel = self._channel, None
        if isinstance(channel, transport.Channel):
            await transport.release(channel)
        elif channel is not None:
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
                status, headers, body = await channel.exchange(request, budget)
            except NoAnswer as failure:
                delay = tries.after(failure)
            else:
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


class _MockChannel:
    """Tries through an ``httpx`` transport (tests): the requests the real channel would send, and its
    failures told apart the same way."""

    def __init__(self, mock: httpx.AsyncBaseTransport, settings: ConnectionSettings) -> None:
        self.mock = mock
        self.settings = settings

    async def exchange(
        self, request: ApiRequest[Any], budget_s: float
    ) -> tuple[int, Mapping[str, str], bytes]:
        import httpx

        url = self.settings.url(request.path)
        headers = {
            "Authorization": f"Bearer {self.settings.api_key}",
            "Accept": request.accept,
            "Accept-Encoding": ACCEPT_ENCODING,
            "User-Agent": "airflow-provider-loadtest (test transport)",
        }
        try:
            async with asyncio.timeout(budget_s):
                sent = httpx.Request(
                    request.method,
                    url,
                    params=dict(request.params) or None,
                    json=request.json_body,
                    headers=headers,
                )
                response = await self.mock.handle_async_request(sent)
                body = AnswerBody(request, response.status_code)
                body.add(await response.aread())  # a mock's answer, its content coding undone by httpx
                return response.status_code, response.headers, body.content
        except TimeoutError:
            raise NoAnswer(timed_out_detail(budget_s)) from None
        except httpx.HTTPError as exc:
            detail = trim_service_text(str(exc), self.settings.api_key, limit=200)
            if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError):
                tls = "SSL" in detail
                failure = failure_at(url, f"could not connect: {detail}", tls_failed=tls)
                raise NoAnswer(failure, never_opened=True, final=tls) from None
            raise NoAnswer(
                failure_at(url, f"the connection failed ({type(exc).__name__}: {detail})")
            ) from None

    async def aclose(self) -> None:
        await self.mock.aclose()
