"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_loadtest.hooks import loadtest as hook_module
from tests import aio_service

#: pytest-timeout's ceiling for one unit test (setup, call, teardown), in seconds. The slowest unit test
#: takes a few seconds on 2 busy cores: a guard that loops forever (a fake service that answers RUNNING
#: on a fake clock) fails here in two minutes, not at CI's own limit. pyproject's ``timeout`` (900 s) is
#: for the suites that start a real Airflow.
UNIT_TIMEOUT_S = 120


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hold every unit test without a ``timeout`` mark of its own to ``UNIT_TIMEOUT_S``."""
    for item in items:
        if "tests/unit/" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake clock that the hook's sleeps move forward."""
    now = [1_000_000.0]
    monkeypatch.setattr(hook_module, "_sleep", lambda s: now.__setitem__(0, now[0] + s))
    monkeypatch.setattr("airflow_provider_loadtest.decisions.watch.time.time", lambda: now[0])
    monkeypatch.setattr("airflow_provider_loadtest.operators.run_scenario.time.time", lambda: now[0])
    return now


@pytest.fixture(autouse=True)
def triggers_fire_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests drive triggers in-process, with no scheduler to race: no settling seconds
    (``tests/unit/test_trigger_settle.py`` tests them)."""
    monkeypatch.setattr("airflow_provider_loadtest.triggers.common.EVENT_SETTLE_S", 0.0)


@pytest.fixture(autouse=True)
def no_pending_stops(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Airflow's Variables, where a trigger leaves a stop nobody could confirm (issue 34), as a dict:
    empty unless a test puts one there (no Airflow Variable is read or written by the unit tests)."""
    from airflow_provider_loadtest.lifecycle import support

    pending: dict[str, Any] = {}
    monkeypatch.setattr(support, "read_pending_stop", pending.get)
    monkeypatch.setattr(support, "clear_pending_stop", lambda run: pending.pop(run, None))
    monkeypatch.setattr(
        support, "write_pending_stop", lambda stop: pending.__setitem__(stop.bench_result_id, stop)
    )
    return pending


@pytest.fixture(autouse=True)
def _aiohttp_gets_its_network_back() -> Iterator[None]:
    """A test that answered aiohttp's session (``tests.aio_service.answer_with``) leaves it as it was."""
    yield
    aio_service.stop_all()
