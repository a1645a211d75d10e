"""The demo's wall time, split: Airflow's own start-up and work, and the provider's share.

``make demo`` (``devtools/demo.py``) starts the simulator, migrates a throwaway Airflow, then runs
``airflow dags test`` for ``loadtest_nightly``, ``loadtest_nightly_report`` and two nights of
``loadtest_release_gate``. This runs those same steps with the same driver (``simulator_process``,
``AirflowHome``), once with the example DAGs and once with their controls (each of our operators an
``EmptyOperator``: same task ids and edges), interleaved repetition by repetition. The control's time is
what Airflow costs anyway (starting, parsing, scheduling, the execution API); ours minus the control,
paired by repetition, is the provider's share.

The share is then explained from the simulator's request log: how long each load test runs (its
simulated duration: the floor no provider can beat), how long past its end the operator saw it end (the
check interval's rounding), and how long the PDF print task was polled (its pending polls times the poll
interval); what is left is the provider's own work (API calls, reading alarms and metrics, the files).

    .venv/bin/python benchmarks/demo_split.py [--repetitions 3] [--steps 4] [--variants ours control]
        [--json out.json]

``--smoke`` (CI): the first step only, one repetition of the control variant (so the driver, the control
DAGs and the floor are checked; the provider's share is not measured: that needs our DAGs' 10 s waits).
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import airflow_env, check_same_shape, table, write_control_dags
from devtools.demo import _simulator_requests, simulator_process
from devtools.local_airflow import AirflowHome, connection_env

ROOT = Path(__file__).resolve().parents[1]
#: As ``make demo`` runs it (devtools/demo.py: ``--run-seconds`` default, the gate's scenario and nights).
RUN_SECONDS = 6.0
GATE = {"AIRFLOW_VAR_LOADTEST_RELEASE_GATE_SCENARIO_ID": "slower-scenario"}
CHECKOUT = {"AIRFLOW_VAR_LOADTEST_TRANSACTION_GATE_SCENARIO_ID": "checkout-scenario"}


@dataclass(frozen=True)
class Step:
    label: str
    dag_id: str
    env: dict[str, str] = field(default_factory=dict)
    logical_date: str | None = None
    succeeds: bool = True  # with our DAGs (the control's EmptyOperators always succeed)


STEPS = [
    Step("dags test loadtest_nightly", "loadtest_nightly"),
    Step("dags test loadtest_nightly_report", "loadtest_nightly_report"),
    Step("dags test loadtest_release_gate, night 1", "loadtest_release_gate", GATE, "2026-11-01"),
    Step(
        "dags test loadtest_release_gate, night 2 (fails its gate)",
        "loadtest_release_gate",
        GATE,
        "2026-11-02",
        succeeds=False,
    ),
    Step(
        "dags test loadtest_transaction_gate, busy night",
        "loadtest_transaction_gate",
        CHECKOUT,
        "2026-11-01",
    ),
    Step(
        "dags test loadtest_transaction_gate, night 2 (fails on Checkout)",
        "loadtest_transaction_gate",
        CHECKOUT,
        "2026-11-02",
        succeeds=False,
    ),
]
VARIANTS = ("ours", "control")
SIMULATOR, MIGRATE, TOTAL = "simulator start", "airflow db migrate", "total (the demo's wall time)"


def demo_once(dags: Path, steps: list[Step], scratch: Path, expect_ours: bool) -> dict[str, Any]:
    """One demo: seconds per step, and (for our DAGs) the simulator's request log."""
    seconds: dict[str, float] = {}
    began = time.monotonic()
    home_dir = Path(tempfile.mkdtemp(prefix="loadtest-demo-split-", dir=scratch))
    try:
        with simulator_process(RUN_SECONDS) as (url, api_key):
            seconds[SIMULATOR] = time.monotonic() - began
            mark = time.monotonic()
            home = AirflowHome(home_dir, [dags])
            seconds[MIGRATE] = time.monotonic() - mark
            env = {**connection_env(url, api_key), "AIRFLOW_VAR_LOADTEST_REPORT_ROOT": str(home_dir / "out")}
            for step in steps:
                result = home.dags_test(step.dag_id, {**env, **step.env}, logical_date=step.logical_date)
                expected = step.succeeds or not expect_ours
                if result.succeeded != expected:
                    raise RuntimeError(
                        f"{step.label} ({'ours' if expect_ours else 'control'}) "
                        f"{'failed' if expected else 'succeeded'}, unlike the demo:\n{result.output[-3000:]}"
                    )
                seconds[step.label] = result.seconds
            log = _simulator_requests(url) if expect_ours else []
        seconds[TOTAL] = time.monotonic() - began
    finally:
        shutil.rmtree(home_dir, ignore_errors=True)
    return {"seconds": seconds, "requests": log}


# --- the provider's share, explained from the simulator's request log -------------------------------


def defaults() -> dict[str, float]:
    """The simulated durations and the provider's polling pace, read from their sources."""
    from airflow_provider_loadtest.decisions.report_pdf import DEFAULT_PDF_POLL_INTERVAL_S
    from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
    from airflow_provider_loadtest.simulator.seed import load_seed

    seed = load_seed()
    check = inspect.signature(RunScenarioOperator.__init__).parameters["check_interval"].default
    return {
        "check_interval_s": float(check),
        "pdf_poll_interval_s": DEFAULT_PDF_POLL_INTERVAL_S,
        "pdf_pending_polls": float(seed.settings.task_pending_polls),
        **{f"duration_s:{s.id}": RUN_SECONDS * s.duration_factor for s in seed.scenarios},
    }


def waits(requests: list[dict[str, Any]], pace: dict[str, float]) -> dict[str, float]:
    """Seconds spent waiting, from the request log (arrival times, wall clock): each run from its start
    to the first status poll past its simulated end, and each print task from its creation to its last
    poll; beside the floor (the simulated durations) and what the default pace predicts."""
    found = {"runs": 0.0, "run floor": 0.0, "run predicted": 0.0, "pdf": 0.0, "pdf predicted": 0.0}
    ordered = sorted(requests, key=lambda r: float(r["time"]))
    for index, start in enumerate(ordered):
        route, t0 = start.get("route"), float(start["time"])
        later = ordered[index + 1 :]
        if route == "run_scenario":
            duration = pace[f"duration_s:{start['path_params']['scenario_id']}"]
            polls = [r for r in later if r.get("route") == "get_bench_result"]
            run_id = polls[0]["path_params"]["bench_result_id"]
            ended = next(
                float(r["time"])
                for r in polls
                if r["path_params"]["bench_result_id"] == run_id and float(r["time"]) >= t0 + duration
            )
            found["runs"] += ended - t0
            found["run floor"] += duration
            found["run predicted"] += (
                math.ceil(duration / pace["check_interval_s"]) * pace["check_interval_s"]
            )
        elif route == "create_task":
            print_polls = [float(r["time"]) for r in later if r.get("route") == "task_result"]
            done = print_polls[: int(pace["pdf_pending_polls"]) + 1][-1]
            found["pdf"] += done - t0
            found["pdf predicted"] += pace["pdf_pending_polls"] * pace["pdf_poll_interval_s"]
    return found


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(measured: dict[str, Any]) -> dict[str, Any]:
    """Per step: ours, control and the provider's share (paired by repetition); the share explained."""
    seconds: dict[str, list[dict[str, float]]] = measured["seconds"]
    ours, control = seconds.get("ours", []), seconds.get("control", [])
    labels = list((ours or control)[0])
    steps: list[dict[str, Any]] = [
        {
            "step": label,
            "ours": _summary([run[label] for run in ours]),
            "control": _summary([run[label] for run in control]),
            "share": _summary([o[label] - c[label] for o, c in zip(ours, control, strict=False)]),
        }
        for label in labels
    ]
    found: list[dict[str, float]] = measured["waits"]
    explained = None
    if found:
        part = {key: statistics.median(w[key] for w in found) for key in found[0]}
        share: dict[str, float] | None = steps[-1]["share"]
        explained = {
            "share_s": share["median"] if share else None,
            "floor_s": part["run floor"],
            "past_end_s": part["runs"] - part["run floor"],
            "past_end_predicted_s": part["run predicted"] - part["run floor"],
            "pdf_s": part["pdf"],
            "pdf_predicted_s": part["pdf predicted"],
            "rest_s": share["median"] - part["runs"] - part["pdf"] if share else None,
        }
    return {
        "repetitions": measured["repetitions"],
        "pace": measured["pace"],
        "steps": steps,
        "explained": explained,
    }


def _fmt(figure: dict[str, float] | None, sign: str = "") -> str:
    if figure is None:
        return "not measured"
    return f"{figure['median']:{sign}.1f} [{figure['min']:.1f} to {figure['max']:.1f}]"


def report(figures: dict[str, Any]) -> str:
    rows = [[s["step"], _fmt(s["ours"]), _fmt(s["control"]), _fmt(s["share"], "+")] for s in figures["steps"]]
    lines = [
        f"`make demo`'s steps, seconds, median [min to max] of {figures['repetitions']} repetition(s), "
        "variants interleaved; control: the same DAGs with EmptyOperators (Airflow's own cost):",
        table(rows, ["step", "ours", "control", "provider's share"]),
    ]
    explained, pace = figures["explained"], figures["pace"]
    if explained:

        def num(key: str) -> str:
            value = explained[key]
            return "not measured" if value is None else f"{value:.1f}"

        parts = [
            ["the load tests running (their simulated durations: the floor)", num("floor_s"), ""],
            [
                "seeing each run end: the first status check after its end",
                num("past_end_s"),
                f"predicted {num('past_end_predicted_s')}: check_interval {pace['check_interval_s']:g} s, "
                "first check at the start",
            ],
            [
                "the PDF print task's pending polls",
                num("pdf_s"),
                f"predicted {num('pdf_predicted_s')}: {pace['pdf_pending_polls']:g} pending poll(s) "
                f"{pace['pdf_poll_interval_s']:g} s apart",
            ],
            [
                "the rest: API calls, alarms, metrics, files, task and trigger work",
                num("rest_s"),
                "the share minus the waits above",
            ],
        ]
        lines += [
            "",
            f"Where the provider's share ({num('share_s')} s) goes, seconds, medians:",
            table(parts, ["part", "seconds", "note"]),
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--steps", type=int, default=len(STEPS), help="the demo's first N DAG runs")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--smoke", action="store_true", help="first step, control only, once")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.smoke:
        args.repetitions, args.steps, args.variants = 1, 1, ["control"]
    steps = STEPS[: args.steps]
    pace = defaults()
    result: dict[str, Any] = {"repetitions": args.repetitions, "pace": pace, "waits": [], "seconds": {}}
    with tempfile.TemporaryDirectory(prefix="loadtest-demo-split-") as scratch_dir:
        scratch = Path(scratch_dir)
        ours = sorted((ROOT / "example_dags").glob("*.py"))
        controls = write_control_dags(ours, scratch / "control_dags")
        check_same_shape(ours, controls, airflow_env(scratch))
        folders = {"ours": ROOT / "example_dags", "control": scratch / "control_dags"}
        for repetition in range(args.repetitions):
            for variant in args.variants:
                print(f"  demo {repetition + 1}/{args.repetitions}: {variant}", file=sys.stderr, flush=True)
                done = demo_once(folders[variant], steps, scratch, expect_ours=variant == "ours")
                result["seconds"].setdefault(variant, []).append(done["seconds"])
                if variant == "ours":
                    result["waits"].append(waits(done["requests"], pace))
    figures = summarise(result)
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
