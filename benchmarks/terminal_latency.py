"""How long after a load test ends does its Airflow task end? Both modes of RunScenarioOperator.

For each mode (``sync``: the worker polls every ``check_interval``; ``deferrable``: the trigger polls, then
the task resumes in ``execute_complete``) this runs the test DAG ``loadtest_e2e_lifecycle`` N times with
``airflow dags test`` in a throwaway AIRFLOW_HOME, against the local simulator served in this process,
and measures

    latency = task_instance.end_date (Airflow's metadata DB)  -  the instant the run became FINISHED

The terminal instant comes from the simulator's own state machine: a run is FINISHED from
``started_at + duration`` on (``Run.state``), on the simulator's monotonic clock, converted here to
wall-clock time. The latency is split at the first status poll that arrived after that instant (the
simulator records each request's arrival time): ``poll lag`` (waiting for the next poll: the phase of
the polling against the run's end) and ``poll->end`` (what follows: reading alarms and metrics, and in
deferrable mode firing the event and resuming the task).

``airflow dags test`` runs the trigger in-process, right after the task defers: there is no separate
triggerer, scheduler or executor, so a real deployment adds their pick-up delays to deferrable runs.

    .venv/bin/python benchmarks/terminal_latency.py [--runs 3] [--check-interval 10 ...] [--run-seconds 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from airflow_provider_loadtest.simulator.state import Run
from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

ROOT = Path(__file__).resolve().parents[1]
DAG_SOURCES = ROOT / "tests" / "integration" / "dags"
DAG_ID = "loadtest_e2e_lifecycle"
TASK_ID = "run_load_test"
MODES = {"sync": "0", "deferrable": "1"}


@dataclass(frozen=True)
class Sample:
    """One DAG run: seconds from the run's FINISHED instant to the task's end, and its two parts."""

    latency: float
    poll_lag: float
    poll_to_end: float
    dag_test_seconds: float


def monotonic_to_wall() -> float:
    """The offset to add to ``time.monotonic()`` readings to get epoch seconds (best of a few reads)."""
    best: tuple[float, float] | None = None
    for _ in range(20):
        before = time.monotonic()
        wall = time.time()
        after = time.monotonic()
        if best is None or after - before < best[0]:
            best = (after - before, wall - (before + after) / 2)
    assert best is not None
    return best[1]


def finished_at(run: Run) -> float:
    """Epoch seconds at which the simulator starts answering FINISHED for ``run`` (see ``Run.state``)."""
    return run.started_at + run.duration + monotonic_to_wall()


def task_end(result: DagRunResult) -> tuple[str, float]:
    """State and end (epoch seconds) of the task in the run, from the run's summary (``dag.test()``)."""
    state = result.task_states(DAG_ID)[TASK_ID][0]
    end = result.task_end(DAG_ID, TASK_ID)
    if end is None:
        raise RuntimeError(f"task {TASK_ID} never ended (state {state})")
    return state, end.timestamp()


def measure_once(
    home: AirflowHome, sim: SimulatorHandle, deferrable: str, check_interval: float, scratch: Path
) -> Sample:
    sim.reset()
    extra = connection_env(sim.url, sim.api_key)
    extra.update(
        AIRFLOW_VAR_LOADTEST_REPORT_ROOT=str(scratch),
        LOADTEST_E2E_DEFERRABLE=deferrable,
        LOADTEST_E2E_CHECK_INTERVAL=repr(check_interval),
    )
    result = home.dags_test(DAG_ID, extra)
    if not result.succeeded:
        raise RuntimeError(f"airflow dags test failed:\n{result.output[-6000:]}")
    if (deferrable == "1") != ("Deferring: the triggerer watches run" in result.output):
        raise RuntimeError(f"the task did not run in the expected mode:\n{result.output[-6000:]}")
    (run,) = sim.runs()
    if run.stopped_at is not None or sim.state.state_of(run) != "FINISHED":
        raise RuntimeError(f"run {run.id} did not finish normally")
    terminal = finished_at(run)
    state, end = task_end(result)
    if state != "success":
        raise RuntimeError(f"task ended {state}")
    polls = [r for r in sim.requests if r.route == "get_bench_result" and r.time >= terminal]
    if not polls:
        raise RuntimeError("no status poll arrived after the run finished")
    first = polls[0].time
    return Sample(end - terminal, first - terminal, end - first, result.seconds)


def fmt(values: list[float]) -> str:
    return " ".join(f"{v:6.2f}" for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="DAG runs per mode and interval (default 3)")
    parser.add_argument(
        "--check-interval",
        type=float,
        action="append",
        help="seconds between polls; repeat for several (default: 10, the operator's default)",
    )
    parser.add_argument(
        "--run-seconds", type=float, default=6.0, help="simulated load test duration (default 6)"
    )
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    intervals: list[float] = args.check_interval or [10.0]
    if args.runs < 1 or args.run_seconds <= 0 or any(i <= 0 for i in intervals):
        parser.error("--runs, --run-seconds and --check-interval must be positive")

    rows: list[tuple[str, float, list[Sample]]] = []
    with tempfile.TemporaryDirectory(prefix="loadtest-latency-") as tmp:
        print("migrating a throwaway AIRFLOW_HOME ...", file=sys.stderr, flush=True)
        home = AirflowHome(Path(tmp) / "home", [DAG_SOURCES])
        scratch = Path(tmp) / "reports"
        scratch.mkdir()
        with run_simulator(run_seconds=args.run_seconds) as sim:
            for interval in intervals:
                for mode in args.modes:
                    samples: list[Sample] = []
                    for i in range(args.runs):
                        sample = measure_once(home, sim, MODES[mode], interval, scratch)
                        print(
                            f"  {mode} check_interval={interval:g}s run {i + 1}/{args.runs}: "
                            f"latency {sample.latency:.2f}s (poll lag {sample.poll_lag:.2f}s, "
                            f"poll->end {sample.poll_to_end:.2f}s; dags test took "
                            f"{sample.dag_test_seconds:.1f}s)",
                            file=sys.stderr,
                            flush=True,
                        )
                        samples.append(sample)
                    rows.append((mode, interval, samples))

    print(
        f"Run FINISHED in the simulator -> task end_date in Airflow, {args.runs} DAG runs per row, "
        f"run duration {args.run_seconds:g} s, seconds"
    )
    print(
        "airflow dags test: task, trigger and resume all run in one process (no separate triggerer, "
        "scheduler or executor; a deployment adds their pick-up delays to deferrable runs)"
    )
    print()
    header = (
        f"{'mode':10s} {'check_interval':>14s} {'run s':>6s}  {'latencies':{7 * args.runs}s}"
        f" {'median':>7s}  {'poll lag med':>12s} {'poll->end med':>13s}"
    )
    print(header)
    print("-" * len(header))
    for mode, interval, samples in rows:
        latencies = [s.latency for s in samples]
        print(
            f"{mode:10s} {interval:14g} {args.run_seconds:6g}  {fmt(latencies):{7 * args.runs}s}"
            f" {statistics.median(latencies):7.2f}  {statistics.median(s.poll_lag for s in samples):12.2f}"
            f" {statistics.median(s.poll_to_end for s in samples):13.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
