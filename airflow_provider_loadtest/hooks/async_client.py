"""The async twin of ``LoadTestHook.call``, for triggers running in the triggerer's event loop.

Same call descriptions, same retry policy, same answer decoding; only the transport differs: aiohttp,
through a session shared by the waits of the event loop with the same connection settings
(``hooks.transport.Channel``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator
from types import TracebackType
from typing import Any, TypeVar

from airflow_provider_loadtest.api.endpoints import ApiRequest, decode_answer
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import Attempts, LoggerLike, NoAnswer, RetryPolicy
from airflow_provider_loadtest.decisions.watch import Log, Sleep
from airflow_provider_loadtest.hooks import transport
from airflow_provider_loadtest.hooks.settings import ConnectionSettings, settings_from_connection

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


class AsyncLoadTestClient:
    """``async with AsyncLoadTestClient(settings) as client: await client.call(request)``.

    Always on the network, through aiohttp: the unit tests answer it on aiohttp's own session
    (``tests/aio_service.py``), so what they check is what production runs.
    """

    def __init__(self, settings: ConnectionSettings, retry_policy: RetryPolicy | None = None) -> None:
        self.settings = settings
        self.retry_policy = retry_policy or RetryPolicy()
        self._channel: transport.Channel | None = None

    async def __aenter__(self) -> AsyncLoadTestClient:
        # The session shared by the waits of this event loop with the same settings.
        self._channel = transport.acquire(self.settings)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await transport.release(channel)

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
                        conn_id=self.settings.conn_id,
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
