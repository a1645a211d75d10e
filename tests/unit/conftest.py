"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.hooks import loadtest as hook_module


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
