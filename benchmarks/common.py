"""What every benchmark here shares: simulators in their own processes, medians with their spread.

Each figure in ``benchmarks/`` is a ratio or a delta against a baseline measured in the same run,
variants interleaved so that drift (other processes, CPU frequency) hits all of them alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

#: The simulator's default API key (seed ``default_seed.json``).
SIM_KEY_ENV = "LOADTEST_SIMULATOR_API_KEY"
SIM_URL_ENV = "LOADTEST_SIMULATOR_URL"


@dataclass(frozen=True)
class Simulator:
    url: str
    api_key: str
    process: subprocess.Popen[str]


@contextlib.contextmanager
def simulators(count: int = 1, run_seconds: float = 3600.0) -> Iterator[list[Simulator]]:
    """``count`` simulator processes on 127.0.0.1 (each on a free port), stopped on exit."""
    started: list[Simulator] = []
    try:
        for _ in range(count):
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "airflow_provider_loadtest.simulator",
                    "--run-seconds",
                    str(run_seconds),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert process.stdout is not None
            found: dict[str, str] = {}
            for _line in range(20):  # bounded: the two lines come first
                line = process.stdout.readline()
                if not line:
                    break
                key, _, value = line.strip().partition("=")
                found[key] = value
                if SIM_URL_ENV in found and SIM_KEY_ENV in found:
                    break
            if SIM_URL_ENV not in found:
                process.kill()
                raise RuntimeError("the simulator did not start")
            started.append(Simulator(found[SIM_URL_ENV], found[SIM_KEY_ENV], process))
        yield started
    finally:
        for sim in started:
            sim.process.send_signal(signal.SIGTERM)
        for sim in started:
            try:
                sim.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sim.process.kill()


def connection_env(sim: Simulator) -> dict[str, str]:
    """Environment giving Airflow a ``loadtest_default`` connection to ``sim`` (no database needed)."""
    connection = {"conn_type": "loadtest", "host": sim.url, "password": sim.api_key}
    return {"AIRFLOW_CONN_LOADTEST_DEFAULT": json.dumps(connection)}


def spread(values: Sequence[float]) -> str:
    """``median [min-max]`` of ``values``."""
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(pct / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def rss_kib() -> int:
    """This process's resident memory, KiB (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_sockets() -> int:
    """How many sockets this process holds open (Linux)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
    return count


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A Markdown table (the same text goes to the terminal and to docs/performance.md)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, rule, *body])
