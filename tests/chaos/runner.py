"""Chaos run: many RunScenarioOperator task instances, with retries, against a faulty simulator.

Usable from pytest (``run_chaos``) and from the command line (``make chaos``)::

    python -m tests.chaos.runner --task-instances 240 --seed 7

What it emulates, faithfully enough to test the package's promises:

* **Airflow's retry loop.** Each task instance (TI) has ``max_tries`` (its ``retries``) and one task state
  store shared by all its tries (Airflow 3.3's ``TaskStateStoreAccessor``: ``get(key, default)``,
  ``set(key, value, *, retention=None)`` refusing ``None``, ``delete``, ``clear``; values go through JSON,
  and the store is cleared when the task succeeds). Every try gets a fresh operator (the DAG is parsed again)
  and the context Airflow gives a try (``tests.airflow_context``, the same helper as the unit tests'): a
  ``ti`` with ``try_number``/``max_tries`` and the ``dag_run``, never cleared here (``clear_number`` 0).
  ``AirflowFailException`` ends the TI; any other exception retries while ``try_number <= max_tries``.
* **Deferral.** A try that raises ``TaskDeferred`` has its trigger serialized and rebuilt (as the triggerer
  does), its ``run()`` driven with asyncio until the first event, then ``execute_complete`` is called on a
  fresh operator within the same try.
* **The service.** One simulator on 127.0.0.1 with one scenario per TI (so every start is billed to exactly
  one TI) and a fault plan per TI drawn from a seeded RNG: faults on every route the operator uses (start,
  state, progress, alarms, metrics, stop), including accept-then-drop, an unreadable 200, a slow trickling
  answer and a hang on the start.

Per TI it checks the rules of issue 10: at most one run billed (unless ``restart_failed_runs`` after
ERROR/ABORTED), the right final state, no try longer than its bound plus a margin, every run past its
deadline stopped. Rules that break are listed; the summary gives the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# An isolated Airflow home before anything imports Airflow (the pytest conftest does the same).
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="loadtest-chaos-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
if __name__ == "__main__":  # `make chaos`: the figures, not thousands of task log lines
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "CRITICAL")

from airflow_provider_loadtest.decisions.watch import STOP_GRACE_S
from airflow_provider_loadtest.simulator.faults import PROCESSING_KINDS, FaultSpec
from tests.airflow_context import DAG_ID, RUN_ID, TASK_ID, TaskStateStore, task_context

CONN_ID = "loadtest_chaos"
READ_TIMEOUT_S = 2.0
#: A try may take its ``timeout`` plus this much: the stop after the deadline is bounded to
#: ``STOP_GRACE_S`` past it (a slow or refusing service gets that long), plus a little to end the try.
TRY_MARGIN_S = STOP_GRACE_S + 5.0
#: A run past its deadline must be stopped within this many seconds of it.
STOP_MARGIN_S = STOP_GRACE_S + 5.0
#: Past ``timeout + HANG_AFTER_S`` a try is declared hung and abandoned (the harness itself stays bounded).
HANG_AFTER_S = 60.0
#: Server-side bound of ``trickle`` and ``hang`` faults: long enough to outlast any sane client bound.
FAULT_LIMIT_S = 30.0

#: Faults a start may meet, and whether the service then has the run (the client cannot know it).
START_FAULTS: dict[str, dict[str, Any]] = {
    "accept_then_drop": {"kind": "accept_then_drop"},
    "garbage": {"kind": "garbage"},
    "trickle": {"kind": "trickle", "intervalSeconds": 1.0, "limitSeconds": FAULT_LIMIT_S},
    "hang": {"kind": "hang", "limitSeconds": FAULT_LIMIT_S},
    "drop": {"kind": "drop"},
    "error500": {"kind": "error", "status": 500},
    "error502": {"kind": "error", "status": 502},
    "unavailable": {"kind": "unavailable", "retryAfter": 30},
    "rate_limit": {"kind": "rate_limit", "retryAfter": 1},
    "delay": {"kind": "delay", "delaySeconds": 0.5},
}
#: Start faults after which the outcome of the start is unknown to the client (rule: fail at once).
UNKNOWN_START = frozenset(START_FAULTS) - {"rate_limit", "delay"}
#: Faults on the reads and the stop (count: consecutive matching calls hit).
READ_FAULTS: dict[str, dict[str, Any]] = {
    "error500": {"kind": "error", "status": 500},
    "error503": {"kind": "error", "status": 503},
    "unavailable": {"kind": "unavailable", "retryAfter": 30},
    "rate_limit": {"kind": "rate_limit", "retryAfter": 1},
    "drop": {"kind": "drop"},
    "garbage": {"kind": "garbage"},
    "trickle": {"kind": "trickle", "intervalSeconds": 1.0, "limitSeconds": FAULT_LIMIT_S},
    "hang": {"kind": "hang", "limitSeconds": FAULT_LIMIT_S},
    "delay": {"kind": "delay", "delaySeconds": 0.5},
}
READ_ROUTES = ("get_bench_result", "get_progress", "threshold_alarms", "global_metrics", "stop_run")
SEVERITY_RANK = {"PASSED": 0, "WARNING": 1, "CRITICAL": 2}


# --- the plan ---------------------------------------------------------------------------------------


@dataclass
class TiPlan:
    """One task instance: its operator arguments, its scenario and the faults it meets."""

    index: int
    deferrable: bool
    retries: int
    duration_s: float
    timeout_s: float
    outcome: str  # how the scenario's runs end: FINISHED, ERROR, ABORTED
    severity: str  # the worst alarm the runs raise
    gate: str | None
    restart_failed_runs: bool
    store: str  # "ok", "none" (Airflow < 3.3), "failing_set"
    faults: list[dict[str, Any]] = field(default_factory=list)
    start_fault: str | None = None

    @property
    def scenario_id(self) -> str:
        return f"chaos-{self.index}"

    @property
    def times_out(self) -> bool:
        return self.timeout_s < self.duration_s

    @property
    def verdict_succeeds(self) -> bool:
        """Whether the run, watched without trouble, passes (FINISHED in time, gate not broken)."""
        if self.outcome != "FINISHED" or self.times_out:
            return False
        return self.gate is None or SEVERITY_RANK[self.severity] < SEVERITY_RANK[self.gate]

    @property
    def max_billed(self) -> int:
        """Runs this TI may bill: one, or one per try when failed runs are restarted by choice."""
        if self.restart_failed_runs and self.outcome in ("ERROR", "ABORTED") and not self.times_out:
            return 1 + self.retries
        return 1


def make_plan(count: int, seed: int) -> list[TiPlan]:
    """``count`` task instances drawn from ``seed``: the same seed gives the same plan and faults."""
    rng = random.Random(seed)
    plans = []
    for index in range(count):
        # Runs either end well within their timeout or are cut by it, never a close race.
        duration, timeout = (rng.choice([1.0, 1.5, 2.0]), 8.0) if rng.random() < 0.8 else (3.0, 1.0)
        plan = TiPlan(
            index=index,
            deferrable=rng.random() < 0.5,
            retries=rng.choice([0, 1, 1, 2, 2, 3]),
            duration_s=duration,
            timeout_s=timeout,
            # a run cut by its timeout would have FINISHED: no race between an early ERROR and the timeout
            outcome=rng.choices(["FINISHED", "ERROR", "ABORTED"], weights=[8, 1, 1])[0]
            if timeout > duration
            else "FINISHED",
            severity=rng.choices(["PASSED", "WARNING", "CRITICAL"], weights=[6, 2, 2])[0],
            gate=rng.choice([None, "WARNING", "CRITICAL"]),
            restart_failed_runs=rng.random() < 0.5,
            store=rng.choices(["ok", "none", "failing_set"], weights=[16, 2, 2])[0],
        )
        if rng.random() < 0.35:
            plan.start_fault = rng.choice(sorted(START_FAULTS))
            plan.faults.append({**START_FAULTS[plan.start_fault], "route": "run_scenario", "count": 1})
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            name = rng.choice(sorted(READ_FAULTS))
            plan.faults.append(
                {**READ_FAULTS[name], "route": rng.choice(READ_ROUTES), "count": rng.choice([1, 1, 2, 3])}
            )
        for rule in plan.faults:
            rule["scenarioId"] = plan.scenario_id
        plans.append(plan)
    return plans


def default_seed() -> dict[str, Any]:
    """The simulator's default seed as JSON, without its faults (tests add their own)."""
    from importlib import resources

    text = resources.files("airflow_provider_loadtest.simulator").joinpath("default_seed.json").read_text()
    seed: dict[str, Any] = json.loads(text)
    seed["faults"] = []
    return seed


def make_seed(plans: list[TiPlan]) -> dict[str, Any]:
    """The default seed plus one scenario per TI, and no seeded faults (each TI has its own)."""
    seed = default_seed()
    project = seed["projects"][0]["id"]
    seed["scenarios"] = [
        {
            "id": p.scenario_id,
            "projectId": project,
            "name": f"Chaos scenario {p.index}",
            "durationSeconds": p.duration_s,
            "outcome": p.outcome,
            "alarms": [
                {"id": "alarm-chaos", "name": "Chaos alarm", "severity": p.severity, "fromProgress": 0}
            ],
        }
        for p in plans
    ]
    return seed


# --- Airflow's side: the task state store, the ti, the retry loop -----------------------------------


class FakeTi:
    """What the operator uses of ``context["ti"]``: Airflow's names and values (``tests.airflow_context``),
    with the XComs it pushes kept as they would be stored (through JSON)."""

    def __init__(self, try_number: int, max_tries: int, task_id: str = TASK_ID) -> None:
        self.dag_id = DAG_ID
        self.task_id = task_id
        self.run_id = RUN_ID
        self.map_index = -1
        self.try_number = try_number
        self.max_tries = max_tries
        self.start_date = datetime.now(UTC)
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any, **_: Any) -> None:
        self.xcom[key] = json.loads(json.dumps(value))

    def xcom_pull(self, *_: Any, **__: Any) -> Any:
        return None  # one DAG run per TI here: no earlier night to read


@dataclass
class TryResult:
    number: int
    seconds: float
    outcome: str  # "success", "fail" (AirflowFailException), "error" (retryable), "hung"
    error: str = ""
    deferred: bool = False


@dataclass
class TiResult:
    plan: TiPlan
    tries: list[TryResult] = field(default_factory=list)
    state: str = "none"  # "success", "failed", "hung"


def _operator(plan: TiPlan) -> Any:
    from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

    return RunScenarioOperator(
        task_id=f"chaos_{plan.index}",
        scenario_id=plan.scenario_id,
        workspace_id="demo-workspace",
        check_interval=0.25,
        timeout=plan.timeout_s,
        fail_on_alarm_severity=plan.gate,
        deferrable=plan.deferrable,
        restart_failed_runs=plan.restart_failed_runs,
        retries=plan.retries,
        loadtest_conn_id=CONN_ID,
    )


def _one_try(plan: TiPlan, store: TaskStateStore | None, ti: FakeTi) -> tuple[str, str, bool]:
    """One try as Airflow runs it: execute, and when deferred, the trigger then execute_complete."""
    from airflow_provider_loadtest.compat import AirflowFailException, TaskDeferred

    # A TI's tries share its DAG run, never cleared here: clear_number stays 0, as Airflow keeps it.
    context = task_context(ti, store, clear_number=0)
    deferred = False
    try:
        try:
            _operator(plan).execute(context)
        except TaskDeferred as deferral:
            deferred = True
            _classpath, kwargs = deferral.trigger.serialize()
            trigger = type(deferral.trigger)(**kwargs)
            event = asyncio.run(_first_event(trigger))
            method = getattr(_operator(plan), deferral.method_name)
            method(context, event=event)
    except AirflowFailException as exc:
        return "fail", f"{type(exc).__name__}: {exc}", deferred
    except Exception as exc:
        return "error", f"{type(exc).__name__}: {exc}", deferred
    return "success", "", deferred


async def _first_event(trigger: Any) -> Any:
    async for event in trigger.run():
        return event.payload
    raise RuntimeError("the trigger ended without an event")


def run_ti(plan: TiPlan) -> TiResult:
    """All tries of one TI, with Airflow's retry rules; a try past its hard bound is abandoned."""
    result = TiResult(plan)
    store = None if plan.store == "none" else TaskStateStore(fail_every_set=plan.store == "failing_set")
    for number in range(1, plan.retries + 2):
        ti = FakeTi(number, plan.retries, task_id=f"chaos_{plan.index}")
        box: list[tuple[str, str, bool]] = []
        began = time.monotonic()
        worker = threading.Thread(
            target=lambda box=box, ti=ti: box.append(_one_try(plan, store, ti)),
            name=f"chaos-ti-{plan.index}",
            daemon=True,
        )
        worker.start()
        worker.join(plan.timeout_s + HANG_AFTER_S)
        seconds = time.monotonic() - began
        if not box:
            result.tries.append(TryResult(number, seconds, "hung"))
            result.state = "hung"
            return result
        outcome, error, deferred = box[0]
        result.tries.append(TryResult(number, seconds, outcome, error, deferred))
        if outcome == "success":
            if store is not None:
                store.clear()  # Airflow clears the task's store when it succeeds
            result.state = "success"
            return result
        if outcome == "fail" or number > plan.retries:
            result.state = "failed"
            return result
    return result


# --- the checks -------------------------------------------------------------------------------------


@dataclass
class Report:
    results: list[TiResult]
    runs: dict[str, list[Any]]  # scenario id -> simulator runs
    faults_injected: int
    breaches: list[str]
    wall_s: float

    def figures(self) -> dict[str, Any]:
        billed = sum(len(r) for r in self.runs.values())
        duplicates = sum(
            1 for r in self.results if len(self.runs.get(r.plan.scenario_id, [])) > r.plan.max_billed
        )
        over = [t.seconds - r.plan.timeout_s for r in self.results for t in r.tries]
        return {
            "task instances": len(self.results),
            "deferrable": sum(r.plan.deferrable for r in self.results),
            "tries": sum(len(r.tries) for r in self.results),
            "faults injected": self.faults_injected,
            "runs billed": billed,
            "TIs over their billing limit (duplicates)": duplicates,
            "extra runs billed": sum(
                max(0, len(self.runs.get(r.plan.scenario_id, [])) - r.plan.max_billed) for r in self.results
            ),
            "hangs (try abandoned)": sum(r.state == "hung" for r in self.results),
            "tries over bound (timeout + margin)": sum(1 for s in over if s > TRY_MARGIN_S),
            "longest try over its timeout (s)": round(max(over, default=0.0), 1),
            "wrong final state": sum(1 for b in self.breaches if b.startswith("state")),
            "runs past deadline not stopped": sum(1 for b in self.breaches if b.startswith("unstopped")),
            "runs the client never heard of (start answer lost)": sum(
                1
                for r in self.results
                if r.plan.start_fault in PROCESSING_KINDS and self.runs[r.plan.scenario_id]
            ),
            "final states": dict(Counter(r.state for r in self.results)),
            "wall time (s)": round(self.wall_s, 1),
        }

    def table(self) -> str:
        rows = self.figures()
        width = max(len(k) for k in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows.items())


def check(result: TiResult, runs: list[Any], now: float) -> list[str]:
    """The rules of issue 10 for one TI, as ``"<rule> <ti>: detail"`` lines."""
    plan = result.plan
    tag = f"TI {plan.index} ({'deferrable' if plan.deferrable else 'sync'}, retries={plan.retries}, "
    tag += f"{plan.outcome}/{plan.severity} gate={plan.gate} "
    tag += f"run {plan.duration_s:g} s timeout {plan.timeout_s:g} s, "
    tag += f"restart={plan.restart_failed_runs}, start fault={plan.start_fault}, store={plan.store}, "
    tag += f"{len(plan.faults)} faults)"
    found: list[str] = []
    if len(runs) > plan.max_billed:
        found.append(f"billing {tag}: {len(runs)} runs billed, at most {plan.max_billed} allowed")
    if result.state == "hung":
        found.append(f"hang {tag}: a try did not end within timeout + {HANG_AFTER_S:g} s")
    for t in result.tries:
        if t.seconds > plan.timeout_s + TRY_MARGIN_S and t.outcome != "hung":
            found.append(f"bound {tag}: try {t.number} took {t.seconds:.1f} s, timeout {plan.timeout_s:g} s")
    expected = _expected_states(plan)
    if result.state not in expected:
        last = result.tries[-1].error if result.tries else ""
        found.append(f"state {tag}: ended {result.state}, expected {sorted(expected)} ({last[:160]})")
    for run in runs[1:] if plan.start_fault in PROCESSING_KINDS else runs:
        # (a run whose start answer never reached the client cannot be stopped by it: counted apart)
        deadline = run.started_at + plan.timeout_s
        natural_end = run.started_at + run.duration
        if natural_end <= deadline + 1.0 or now < deadline + STOP_MARGIN_S:
            continue
        if run.stopped_at is None or run.stopped_at > deadline + STOP_MARGIN_S:
            if _stop_refused(plan):
                found.append(f"refused {tag}: the service refused every stop of run {run.id} in time")
            else:
                found.append(f"unstopped {tag}: run {run.id} went past its deadline without a stop")
    return found


def _stop_refused(plan: TiPlan) -> bool:
    """Whether the plan's faults refuse the stop for the whole grace: answered with an error on two or
    more tries in a row (with a back-off between them), or never answered within it. A stop is best
    effort: such a run is counted apart ("refused"), not as a broken rule."""
    stop_faults = [rule for rule in plan.faults if rule["route"] == "stop_run"]
    for rule in stop_faults:
        never_answered = rule["kind"] in ("hang", "trickle")
        if never_answered and rule.get("limitSeconds", FAULT_LIMIT_S) >= STOP_GRACE_S:
            return True
    return sum(rule.get("count", 1) for rule in stop_faults) >= 2


def _expected_states(plan: TiPlan) -> set[str]:
    """Final states the rules allow. Faults on reads may turn a success into a failure (a wait cut at
    its deadline), never a failure into a success; an unknown start outcome fails at once."""
    if plan.start_fault in UNKNOWN_START:
        return {"failed"}
    if not plan.verdict_succeeds:
        return {"failed"}
    read_faults = [rule for rule in plan.faults if rule["route"] != "run_scenario"]
    # A store that cannot record the start in flight may refuse to start at all (safe: nothing billed).
    return {"success", "failed"} if read_faults or plan.store == "failing_set" else {"success"}


# --- running it -------------------------------------------------------------------------------------


def run_chaos(count: int, seed: int = 7, workers: int = 24, log: Any = print) -> Report:
    """Run ``count`` task instances against a fresh simulator and check every rule."""

    quiet = [logging.getLogger(name) for name in ("airflow", "airflow_provider_loadtest")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:  # hundreds of tries log a lot; put back as it was (pytest runs other tests next)
        logger.setLevel(logging.ERROR)
    try:
        return _run_chaos(count, seed, workers, log)
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)


def _run_chaos(count: int, seed: int, workers: int, log: Any) -> Report:
    from airflow_provider_loadtest.simulator import run_simulator

    plans = make_plan(count, seed)
    began = time.monotonic()
    with run_simulator(make_seed(plans)) as sim:
        os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
            {
                "conn_type": "loadtest",
                "host": sim.url,
                "password": sim.api_key,
                "extra": {"read_timeout": READ_TIMEOUT_S, "connect_timeout": READ_TIMEOUT_S},
            }
        )
        for plan in plans:
            for rule in plan.faults:
                sim.state.add_fault(FaultSpec.model_validate(rule))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chaos") as pool:
            results = list(pool.map(run_ti, plans))
        now = time.monotonic()
        runs = {p.scenario_id: sim.runs(p.scenario_id) for p in plans}
        faults = sum(1 for r in sim.requests if r.fault)
    found = [b for r in results for b in check(r, runs[r.plan.scenario_id], now)]
    refused = [b for b in found if b.startswith("refused")]
    breaches = [b for b in found if not b.startswith("refused")]
    report = Report(results, runs, faults, breaches, time.monotonic() - began)
    log(report.table())
    log(f"{'stops the service refused for the whole grace':<51} {len(refused)}")
    for line in refused:
        log("NOTE " + line)
    for line in breaches:
        log("BROKEN " + line)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task-instances", type=int, default=240)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=24)
    args = parser.parse_args(argv)
    report = run_chaos(args.task_instances, args.seed, args.workers)
    return 1 if report.breaches else 0


if __name__ == "__main__":
    sys.exit(main())
