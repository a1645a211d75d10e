"""What the provider's waiting triggers share: no event within seconds of deferring; for the small
ones, drive a sans-I/O wait with the async client and turn the resulting event back into a result or
the right exception on the worker.

Imported only when a task defers or the triggerer runs a trigger; the worker side imports nothing heavy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import asynccontextmanager
from typing import Any, NoReturn

#: No event sooner than this after a wait started in the triggerer. Airflow 3.3's scheduler fails a
#: resumed try ("finished with state success, but the task instance's state attribute is running") when
#: it learns that the workload which deferred has exited only after the resumed workload runs: both carry
#: the same try, so the late news reads as the running try's end. A wait that ends at once (handed back,
#: a run already over) raced that news on a loaded machine (the executor reported the deferring workload
#: 5.7 s after it deferred) and cost a retry, or the task with ``retries=0``. A load test lasts minutes:
#: waiting out these seconds costs nothing. Airflow's bug: apache/airflow#72716 (open; the guards of
#: #66374 and #67287 cover a resumed try still scheduled or queued, not running).
EVENT_SETTLE_S = 8.0
#: Error classes whose failure no retry can fix: the task fails at once (``AirflowFailException``).
_FATAL_ERRORS = frozenset({"AmbiguousTemplateError", "ValueError"})


@asynccontextmanager
async def settled() -> AsyncIterator[None]:
    """Around a trigger's wait (which turns every failure into an event): once it has its event, sleep
    until ``EVENT_SETTLE_S`` after it began. A cancel passes through at once."""
    began = time.monotonic()
    yield
    await asyncio.sleep(max(0.0, EVENT_SETTLE_S - (time.monotonic() - began)))


async def drive_to_event(
    loadtest_conn_id: str, make_steps: Callable[[str], Generator[Any, Any, Any]], logger: Any
) -> dict[str, Any]:
    """Run ``make_steps(api_key)`` with the async client; ``{"status": "done", "value": ...}`` or an error.

    The generator is built here (it receives the API key, to blank it out of quoted service text).
    An error event carries the exception's class name, message (built without the key) and whether
    a retry could ever succeed, so ``raise_for_event`` fails the task the way the sync path would.
    """
    async with settled():
        event = await _drive(loadtest_conn_id, make_steps, logger)
    return event


async def _drive(
    loadtest_conn_id: str, make_steps: Callable[[str], Generator[Any, Any, Any]], logger: Any
) -> dict[str, Any]:
    from airflow_provider_loadtest.api.errors import LoadTestApiError
    from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient, settings_for

    try:
        settings = await settings_for(loadtest_conn_id)
        async with AsyncLoadTestClient(settings) as client:
            value = await client.drive(make_steps(settings.api_key), logger)
    except Exception as exc:
        never = isinstance(exc, LoadTestApiError) and exc.never_succeeds
        return {
            "status": "error",
            "error": type(exc).__name__,
            "message": str(exc),
            "never_succeeds": never or type(exc).__name__ in _FATAL_ERRORS,
        }
    return {"status": "done", "value": value}


def raise_for_event(event: dict[str, Any], what: str) -> NoReturn:
    """Fail the resumed task with the trigger's error: without retries when none could succeed."""
    from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

    message = f"{what} failed in the triggerer: {event.get('error', 'error')}: {event.get('message')}"
    if event.get("never_succeeds"):
        raise AirflowFailException(message)
    raise AirflowException(message)
