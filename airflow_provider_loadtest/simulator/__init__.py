"""A local, deterministic stand-in for the load-testing service, for tests, demos and CI.

``with run_simulator(run_seconds=2) as sim:`` serves the service's API on a free loopback port; ``sim.url``
and ``sim.api_key`` are what a connection needs. ``python -m airflow_provider_loadtest.simulator`` does the
same from a shell. Importing this package is cheap: FastAPI and uvicorn load only when a server starts,
and the simulator never imports Airflow.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_loadtest.simulator.faults import FaultSpec
    from airflow_provider_loadtest.simulator.recorder import RecordedRequest
    from airflow_provider_loadtest.simulator.seed import Seed, load_seed
    from airflow_provider_loadtest.simulator.server import SimulatorHandle, run_simulator
    from airflow_provider_loadtest.simulator.state import FakeClock, SimulatorState, SystemClock

# The names load on first use (PEP 562): the pytest plugin lives in this package and is imported by every
# pytest run of every user who installs the package, so importing the package itself must cost nothing.
_HOMES = {
    "FakeClock": "state",
    "FaultSpec": "faults",
    "RecordedRequest": "recorder",
    "Seed": "seed",
    "SimulatorHandle": "server",
    "SimulatorState": "state",
    "SystemClock": "state",
    "load_seed": "seed",
    "run_simulator": "server",
}

__all__ = [
    "FakeClock",
    "FaultSpec",
    "RecordedRequest",
    "Seed",
    "SimulatorHandle",
    "SimulatorState",
    "SystemClock",
    "load_seed",
    "run_simulator",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value
