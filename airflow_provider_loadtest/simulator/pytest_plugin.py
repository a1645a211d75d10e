"""pytest fixtures for the simulator (entry point ``pytest11``).

Importing this module costs nothing beyond pytest: the simulator loads when a fixture is used.

``loadtest_simulator``       a running simulator (function scope; short runs: ``run_seconds=2``)
``loadtest_connection_env``  sets ``AIRFLOW_CONN_LOADTEST_DEFAULT`` to a connection pointing at it
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from airflow_provider_loadtest.simulator.server import SimulatorHandle

DEFAULT_TEST_RUN_SECONDS = 2.0


@pytest.fixture
def loadtest_simulator() -> Iterator[SimulatorHandle]:
    """A simulator on a free loopback port, with the default seed and 2-second runs."""
    from airflow_provider_loadtest.simulator.server import run_simulator

    with run_simulator(run_seconds=DEFAULT_TEST_RUN_SECONDS) as sim:
        yield sim


@pytest.fixture
def loadtest_connection_env(
    loadtest_simulator: SimulatorHandle, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SimulatorHandle]:
    """The ``loadtest_default`` Airflow connection (as an environment variable) aimed at the simulator."""
    value = {"conn_type": "loadtest", "host": loadtest_simulator.url, "password": loadtest_simulator.api_key}
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", json.dumps(value))
    yield loadtest_simulator
