"""A local, deterministic stand-in for the load-testing service, for tests, demos and CI.

``with run_simulator(run_seconds=2) as sim:`` serves the service's API on a free loopback port; ``sim.url``
and ``sim.api_key`` are what a connection needs. ``python -m airflow_provider_loadtest.simulator`` does the
same from a shell. Importing this package is cheap: FastAPI and uvicorn load only when a server starts,
and the simulator never imports Airflow.
"""

from __future__ import annotations

from airflow_provider_loadtest.simulator.faults import FaultSpec
from airflow_provider_loadtest.simulator.recorder import RecordedRequest
from airflow_provider_loadtest.simulator.seed import Seed, load_seed
from airflow_provider_loadtest.simulator.server import SimulatorHandle, run_simulator
from airflow_provider_loadtest.simulator.state import FakeClock, SimulatorState, SystemClock

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
