"""What the provider's small waiting triggers share: drive a sans-I/O wait with the async client, and
turn the resulting event back into a result or the right exception on the worker.

Imported only when a task defers or the triggerer runs a trigger; the worker side imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NoReturn

#: Error classes whose failure no retry can fix: the task fails at once (``AirflowFailException``).
_FATAL_ERRORS = frozenset({"AmbiguousTemplateError", "ValueError"})


async def drive_to_event(
    loadtest_conn_id: str, make_steps: Callable[[str], Generator[Any, Any, Any]], logger: Any
) -> dict[str, Any]:
    """Run ``make_steps(api_key)`` with the async client; ``{"status": "done", "value": ...}`` or an error.

    The generator is built here (it receives the API key, to blank it out of quoted service text).
    An error event carries the exception's class name, message (built without the key) and whether
    a retry could ever succeed, so ``raise_for_event`` fails the task the way the sync path would.
    """
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
