"""Fixtures shared by the unit tests of the run lifecycle."""

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
