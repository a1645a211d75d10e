"""A wait in the triggerer never fires its event within ``EVENT_SETTLE_S`` of starting.

Found by the crash cluster under load: a wait handed back at once raced the executor's news that the
deferring workload had exited, and Airflow 3.3's scheduler failed the resumed try (see
``triggers.common.EVENT_SETTLE_S``). These tests hold the floor of that delay, and that a cancel (a
person ending the task) is not held by it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from airflow_provider_loadtest.hooks import async_client
from airflow_provider_loadtest.triggers import common
from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger
from airflow_provider_loadtest.triggers.template import TemplateTrigger

SETTLE_S = 0.4


@pytest.fixture(autouse=True)
def settle_and_unreadable_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "EVENT_SETTLE_S", SETTLE_S)

    async def unreadable(conn_id: str) -> Any:
        raise LookupError(f"The conn_id `{conn_id}` isn't defined")

    monkeypatch.setattr(async_client, "settings_for", unreadable)


def _run_trigger() -> LoadTestRunTrigger:
    return LoadTestRunTrigger(
        loadtest_conn_id="loadtest_default",
        run_record={"bench_result_id": "br-1"},
        options={},
        started_at=0.0,
    )


def _template_trigger() -> TemplateTrigger:
    return TemplateTrigger(
        loadtest_conn_id="loadtest_default",
        workspace_id="ws-1",
        template_name="Nightly",
        template_id=None,
        poke_interval=5.0,
        deadline=time.time() + 60,
    )


async def _first_event(trigger: Any) -> tuple[dict[str, Any], float]:
    began = time.monotonic()
    async for event in trigger.run():
        return event.payload, time.monotonic() - began
    raise AssertionError("the trigger fired no event")


@pytest.mark.parametrize(
    ("make", "status"), [(_run_trigger, "handback"), (_template_trigger, "error")], ids=["run", "template"]
)
def test_a_wait_that_ends_at_once_fires_only_after_the_settling_time(make: Any, status: str) -> None:
    event, took = asyncio.run(_first_event(make()))
    assert event["status"] == status
    assert took >= SETTLE_S


HELD_S = 5.0  # a settle long enough that a held cancel could not hide in a loaded machine's noise


async def _cancel_once(ready: threading.Event) -> float:
    """Start a run trigger, cancel it once ``ready`` is set; how long the cancel took to land."""
    task = asyncio.ensure_future(_first_event(_run_trigger()))
    for _ in range(500):  # bounded: 5 s at most
        if ready.is_set():
            break
        await asyncio.sleep(0.01)
    assert ready.is_set(), "the trigger never reached the point to cancel at"
    began = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return time.monotonic() - began


def test_a_cancel_while_settling_is_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """A person ends the task after the wait has its event, while it is held: the cancel lands at once."""
    monkeypatch.setattr(common, "EVENT_SETTLE_S", HELD_S)
    handed_back = threading.Event()
    handback = LoadTestRunTrigger._handback

    def spy(self: LoadTestRunTrigger, why: str) -> Any:
        handed_back.set()
        return handback(self, why)

    monkeypatch.setattr(LoadTestRunTrigger, "_handback", spy)
    assert asyncio.run(_cancel_once(handed_back)) < HELD_S / 2


def test_a_cancel_while_waiting_is_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """A person ends the task while the run is watched (the usual case): no settling time after it."""
    monkeypatch.setattr(common, "EVENT_SETTLE_S", HELD_S)
    waiting = threading.Event()

    async def never_answers(conn_id: str) -> Any:
        waiting.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(async_client, "settings_for", never_answers)
    assert asyncio.run(_cancel_once(waiting)) < HELD_S / 2
