"""Run the simulator in a background thread: ``with run_simulator() as sim: ...``.

FastAPI and uvicorn are imported here only when a server starts, never at package import.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.simulator.faults import FaultKind, FaultSpec
from airflow_provider_loadtest.simulator.recorder import RecordedRequest
from airflow_provider_loadtest.simulator.seed import Seed
from airflow_provider_loadtest.simulator.state import Clock, Run, SimulatorState

if TYPE_CHECKING:
    import uvicorn

STARTUP_TIMEOUT_SECONDS = 10.0
SHUTDOWN_TIMEOUT_SECONDS = 5.0


class SimulatorHandle:
    """A running simulator: where it listens, what it received, and knobs to turn."""

    def __init__(self, url: str, state: SimulatorState) -> None:
        self.url = url
        self.state = state
        self.api_key = state.seed.api_keys[0]

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every API request received so far (admin routes excluded), oldest first."""
        return self.state.recorder.requests

    def starts(self, scenario_id: str | None = None) -> list[RecordedRequest]:
        """Start requests received (every attempt, faulted ones included)."""
        return self.state.recorder.starts(scenario_id)

    def runs(self, scenario_id: str | None = None) -> list[Run]:
        """Runs actually created, oldest first."""
        return [r for r in self.state.runs.values() if scenario_id is None or r.scenario.id == scenario_id]

    def set_fault(
        self,
        kind: FaultKind,
        *,
        route: str | None = None,
        path_prefix: str | None = None,
        method: str | None = None,
        scenario_id: str | None = None,
        status: int | None = None,
        retry_after: int = 1,
        delay_seconds: float = 1.0,
        probability: float | None = None,
        count: int | None = None,
    ) -> FaultSpec:
        """Add a fault rule (see :mod:`airflow_provider_loadtest.simulator.faults`)."""
        rule = FaultSpec(
            kind=kind,
            route=route,
            path_prefix=path_prefix,
            method=method,
            scenario_id=scenario_id,
            status=status,
            retry_after=retry_after,
            delay_seconds=delay_seconds,
            probability=probability,
            count=count,
        )
        return self.state.add_fault(rule)

    def clear_faults(self) -> None:
        self.state.faults.clear()

    def reset(self) -> None:
        """Back to the seed: no runs, tasks, recorded requests or added faults."""
        self.state.reset()

    def headers(self) -> dict[str, str]:
        """The Authorization header of a valid key."""
        return {"Authorization": f"Bearer {self.api_key}"}


def check_host(host: str, allow_non_loopback: bool = False) -> None:
    """Refuse to listen beyond this machine unless explicitly allowed."""
    if allow_non_loopback or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"refusing to listen on {host!r}: the simulator accepts a well-known API key, so it binds to a "
            "loopback address only (pass allow_non_loopback / --allow-non-loopback to override)"
        )


@contextmanager
def run_simulator(
    seed: Seed | dict[str, Any] | str | Path | None = None,
    run_seconds: float | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    clock: Clock | None = None,
    allow_non_loopback: bool = False,
    log_level: str = "warning",
) -> Iterator[SimulatorHandle]:
    """Serve the simulator on ``host:port`` (0: a free port) in a daemon thread for the ``with`` block."""
    check_host(host, allow_non_loopback)
    import uvicorn

    from airflow_provider_loadtest.simulator.app import create_app

    state = SimulatorState(
        str(seed) if isinstance(seed, Path) else seed, clock=clock, run_seconds=run_seconds
    )
    config = uvicorn.Config(
        create_app(state),
        host=host,
        port=port,
        log_level=log_level,
        lifespan="off",
        proxy_headers=False,
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="loadtest-simulator", daemon=True)
    thread.start()
    try:
        bound_port = _await_startup(server, thread)
        shown_host = f"[{host}]" if ":" in host else host
        yield SimulatorHandle(f"http://{shown_host}:{bound_port}", state)
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_TIMEOUT_SECONDS)
        if thread.is_alive():
            server.force_exit = True
            thread.join(SHUTDOWN_TIMEOUT_SECONDS)


def _await_startup(server: uvicorn.Server, thread: threading.Thread) -> int:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if server.started:
            for listener in getattr(server, "servers", []):
                for sock in listener.sockets:
                    return int(sock.getsockname()[1])
            raise RuntimeError("the simulator started but has no listening socket")
        if not thread.is_alive():
            raise RuntimeError("the simulator failed to start (is the port in use? see the log above)")
        time.sleep(0.01)
    server.should_exit = True
    raise RuntimeError(f"the simulator did not start within {STARTUP_TIMEOUT_SECONDS:g} s")
