"""The attacks of issue 17, as data: what each does, when it strikes, and what every task instance must show.

Each attack runs in rounds (``repeat``); a round starts its task instances (one load test each, on a
scenario of its own), waits until they are where the attack aims (waiting on a run, or holding a start
in flight), strikes, and waits for every task instance's verdict. Per task instance the rig then counts,
from the simulator: the runs started, the runs that ended stopped and the stop calls; and from Airflow:
the final state, the cause named in its failure message, and the time from the strike to the verdict.
The rule (issue 17): a run is stopped only when someone decided it should end, never because the process
watching it went away; a clear gives exactly one new run and stops the old; a mark-failed stops the run.
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from devtools.airflow_cluster import wait_for
from tests.production.cluster import TRIGGERER_HEALTH_THRESHOLD_S, TRIGGERERS, WORKERS, ProdCluster

SYNC, DEFERRABLE = "sync", "deferrable"
DAG_OF = {SYNC: "prod_sync", DEFERRABLE: "prod_deferrable"}

#: How long a round may take past its runs' planned length before the rig gives up on it.
ROUND_SLACK_S = 420.0
#: The database outage of the issue (a failover, a restart of the host).
OUTAGE_S = 45.0
#: How long a person's stop may take to land after the task instance ended: the trigger's patience with
#: a slow API server (``triggers.run.STATE_READ_BUDGET_S``, 120 s) and the stop call, with a margin.
STOP_LANDS_S = 180.0
#: How long the simulator holds the answer of a start (``worker SIGKILL mid-start``).
START_HELD_S = 30.0

#: Causes read from a task instance's logs (the final try first), in this order: the first that matches.
CAUSES: tuple[tuple[str, str], ...] = (
    ("blamed outside", r"was aborted from outside"),
    ("start outcome unknown", r"its outcome is unknown"),
    ("no verdict", r"ended without a verdict"),
    ("failed in the service", r"failed in the service"),
    ("gate", r"broke the quality gate"),
    ("timeout", r"did not end within|timed out"),
    ("person marked failed", r"a person marked the task failed|ended by a person \(state failed\)"),
    ("person cleared", r"a person cleared the task|The task was cleared"),
    ("server said stop", r"shouldn't be running anymore"),
    ("heartbeats lost", r"Too many failed heartbeats"),
)


@dataclass(frozen=True)
class Expect:
    """What every task instance of an attack must show.

    ``cause``: the failure's cause (see ``CAUSES``); ``None``: not checked (success has none).
    ``stopped``: runs that ended stopped; ``max_stop_calls``: stop requests allowed (one per decision).
    ``wrong_causes``: causes a message must never name: nobody stops a run in the service during the
    rig, so a run "aborted from outside" is always the task blaming others for its own stop.
    """

    state: str
    starts: int = 1
    stopped: int = 0
    max_stop_calls: int = 0
    cause: str | None = None
    max_verdict_s: float = 300.0
    wrong_causes: tuple[str, ...] = ("blamed outside",)


@dataclass
class Ti:
    """One task instance of a round: a DAG run of ``prod_sync`` or ``prod_deferrable``."""

    attack: str
    round: int
    index: int
    mode: str

    @property
    def scenario(self) -> str:
        return f"rig-{self.attack}-{self.round}-{self.index}"

    @property
    def dag_id(self) -> str:
        return DAG_OF[self.mode]

    @property
    def run_id(self) -> str:
        return f"{self.scenario}-{self.mode}"


@dataclass
class Round:
    attack: Attack
    number: int
    tis: list[Ti]
    struck_at: float = 0.0
    struck_mono: float = 0.0  # the same moment on the simulator's (monotonic) clock
    notes: list[str] = field(default_factory=list)
    victims: set[str] = field(default_factory=set)  # run ids of the task instances hit directly


Strike = Callable[[ProdCluster, Round], None]


@dataclass(frozen=True)
class Attack:
    name: str
    what: str
    modes: tuple[str, ...]  # one task instance per entry
    duration_s: float  # the runs' planned length
    strike: Strike
    expect: Expect
    phase: str = "waiting"  # "waiting": on a run; "starting": a start in flight
    start_held_s: float = 0.0

    def plan(self, number: int) -> Round:
        return Round(self, number, [Ti(self.name, number, i, m) for i, m in enumerate(self.modes)])


@dataclass
class TiResult:
    attack: str
    round: int
    mode: str
    run_id: str
    victim: bool
    state: str | None
    tries: int
    starts: int
    stopped: int
    stop_calls: int
    cause: str | None
    message: str
    verdict_s: float | None
    stopped_s: float | None = None  # from the strike to the run's stop in the service (the last stopped)
    stop_lines: list[str] = field(default_factory=list)  # what the logs say about stopping the run
    logs: str = ""  # the folder of the task instance's logs
    broken: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- the strikes ------------------------------------------------------------------------------------


def _holders(cluster: ProdCluster, rnd: Round, column: str) -> dict[str, list[Ti]]:
    """Component name -> the round's task instances it holds (``hostname``: worker; ``triggerer``)."""
    held: dict[str, list[Ti]] = {}
    for ti in rnd.tis:
        row = cluster.task_instance(ti.dag_id, ti.run_id) or {}
        if row.get(column):
            held.setdefault(str(row[column]), []).append(ti)
    return held


def _busiest_triggerer(cluster: ProdCluster, rnd: Round) -> tuple[str, list[Ti]]:
    held = _holders(cluster, rnd, "triggerer")
    name = max(TRIGGERERS, key=lambda t: len(held.get(t, [])))
    victims = held.get(name, [])
    rnd.victims.update(ti.run_id for ti in victims)
    rnd.notes.append(f"{name} held {len(victims)} of {len(rnd.tis)} triggers")
    return name, victims


def _taken_over(cluster: ProdCluster, victims: list[Ti], lost: str) -> bool:
    """Every victim's trigger is held by another triggerer (or its task left the deferred state)."""
    for ti in victims:
        row = cluster.task_instance(ti.dag_id, ti.run_id)
        if row is None:
            return False
        if row["state"] == "deferred" and row["triggerer"] in (None, lost):
            return False
    return True


def triggerer_sigstop(cluster: ProdCluster, rnd: Round) -> None:
    """A triggerer stalls (GC pause, frozen VM) past the health threshold, then wakes up."""
    name, victims = _busiest_triggerer(cluster, rnd)
    with cluster.held(name):
        cluster.send(name, signal.SIGSTOP)
        began = time.monotonic()
        try:
            wait_for(
                "the other triggerer to take the triggers over",
                lambda: _taken_over(cluster, victims, name),
                TRIGGERER_HEALTH_THRESHOLD_S * 6,
                1,
            )
            time.sleep(3)
        except AssertionError as exc:
            rnd.notes.append(str(exc))
        finally:
            cluster.send(name, signal.SIGCONT)
        rnd.notes.append(f"{name} stopped for {time.monotonic() - began:.0f} s")


def triggerer_sigkill(cluster: ProdCluster, rnd: Round) -> None:
    """A triggerer dies (OOM killer, host lost); it is started again once the other took over."""
    name, victims = _busiest_triggerer(cluster, rnd)
    with cluster.held(name):
        cluster.stop_service(name, signal.SIGKILL, timeout=10)
        try:
            wait_for(
                "the other triggerer to take the triggers over",
                lambda: _taken_over(cluster, victims, name),
                TRIGGERER_HEALTH_THRESHOLD_S * 6,
                1,
            )
        except AssertionError as exc:
            rnd.notes.append(str(exc))


def _workers_holding(cluster: ProdCluster, rnd: Round) -> list[str]:
    held = _holders(cluster, rnd, "hostname")
    names = [w for w in WORKERS if held.get(w)]
    for w in names:
        rnd.victims.update(ti.run_id for ti in held[w] if ti.mode == SYNC)
    rnd.notes.append("workers hit: " + ", ".join(f"{w} ({len(held[w])} TIs)" for w in names))
    return names


def worker_sigterm(cluster: ProdCluster, rnd: Round) -> None:
    """``systemctl restart`` of the workers running the round's tasks: SIGTERM to every process of the
    service, up to 90 s to exit (``TimeoutStopSec``), SIGKILL for what is left, then started again."""
    names = _workers_holding(cluster, rnd)
    with cluster.held(*names):
        for name in names:
            began = time.monotonic()
            cluster.stop_service(name, signal.SIGTERM, timeout=90)
            rnd.notes.append(f"{name} stopped in {time.monotonic() - began:.0f} s")


def worker_sigkill(cluster: ProdCluster, rnd: Round) -> None:
    """The workers running the round's tasks die at once (host lost), and come back."""
    if rnd.attack.phase == "starting":
        port = int(cluster.sim.url.rsplit(":", 1)[1])
        names = [w for w in WORKERS if cluster.processes_talking_to(port, [w])]
        rnd.victims.update(ti.run_id for ti in rnd.tis)
        rnd.notes.append(f"workers hit while the starts were in flight: {', '.join(names)}")
    else:
        names = _workers_holding(cluster, rnd)
    with cluster.held(*names):
        for name in names:
            cluster.stop_service(name, signal.SIGKILL, timeout=10)
        time.sleep(5)


def scheduler_restart(cluster: ProdCluster, rnd: Round) -> None:
    """The scheduler is restarted (an upgrade, a config change)."""
    rnd.victims.update(ti.run_id for ti in rnd.tis)
    with cluster.held("scheduler"):
        cluster.stop_service("scheduler", signal.SIGTERM, timeout=90)


def postgres_restart(cluster: ProdCluster, rnd: Round) -> None:
    """The metadata database restarts (every connection cut, back within a second or two)."""
    rnd.victims.update(ti.run_id for ti in rnd.tis)
    cluster.pg.restart()


def postgres_outage(cluster: ProdCluster, rnd: Round) -> None:
    """The metadata database is gone for ``OUTAGE_S`` (a failover, a host reboot)."""
    rnd.victims.update(ti.run_id for ti in rnd.tis)
    cluster.pg.stop()
    try:
        time.sleep(OUTAGE_S)
    finally:
        cluster.pg.start()


def clear_running(cluster: ProdCluster, rnd: Round) -> None:
    """A person clears the running task instance (UI "Clear", here through the REST API)."""
    for ti in rnd.tis:
        rnd.victims.add(ti.run_id)
        cluster.clear(ti.dag_id, ti.run_id)


def mark_failed(cluster: ProdCluster, rnd: Round) -> None:
    """A person marks the running task instance failed (UI "Mark as failed", REST API)."""
    for ti in rnd.tis:
        rnd.victims.add(ti.run_id)
        cluster.mark_failed(ti.dag_id, ti.run_id)


# --- the table of attacks -----------------------------------------------------------------------------

HEALTHY = Expect(state="success", starts=1, stopped=0, max_stop_calls=0)

ATTACKS: dict[str, Attack] = {
    a.name: a
    for a in [
        Attack(
            "triggerer-sigstop",
            "triggerer SIGSTOP past the health threshold, then SIGCONT",
            (DEFERRABLE,) * 4,
            45,
            triggerer_sigstop,
            HEALTHY,
        ),
        Attack("triggerer-sigkill", "triggerer SIGKILL", (DEFERRABLE,) * 4, 45, triggerer_sigkill, HEALTHY),
        Attack(
            "worker-sigterm",
            "worker SIGTERM to the whole service (systemctl restart)",
            (SYNC,) * 2,
            30,
            worker_sigterm,
            HEALTHY,
        ),
        Attack(
            "worker-sigkill-start",
            "worker SIGKILL while the start is in flight",
            (SYNC,) * 2,
            20,
            worker_sigkill,
            # The start's outcome cannot be known: the retry refuses to start another (issue 10's rule).
            Expect(state="failed", starts=1, cause="start outcome unknown"),
            phase="starting",
            start_held_s=START_HELD_S,
        ),
        Attack(
            "worker-sigkill-wait", "worker SIGKILL while waiting", (SYNC,) * 2, 30, worker_sigkill, HEALTHY
        ),
        Attack("scheduler-restart", "scheduler restart", (SYNC, DEFERRABLE), 30, scheduler_restart, HEALTHY),
        Attack("postgres-restart", "PostgreSQL restart", (SYNC, DEFERRABLE), 30, postgres_restart, HEALTHY),
        Attack(
            "postgres-outage-45s",
            f"PostgreSQL down {OUTAGE_S:g} s",
            (SYNC, SYNC, DEFERRABLE),
            90,
            postgres_outage,
            HEALTHY,
        ),
        Attack(
            "clear-sync",
            "clear while running (sync)",
            (SYNC,) * 2,
            20,
            clear_running,
            Expect(state="success", starts=2, stopped=1, max_stop_calls=1),
        ),
        Attack(
            "clear-deferrable",
            "clear while running (deferrable)",
            (DEFERRABLE,) * 2,
            20,
            clear_running,
            Expect(state="success", starts=2, stopped=1, max_stop_calls=1),
        ),
        Attack(
            "mark-failed",
            "mark failed while running",
            (SYNC, DEFERRABLE),
            # Long enough that a stop behind a slow state read (``production_rig(loaded=True)``: 6-20 s,
            # queued behind the triggerer's other reads) still finds the run going: a 30 s run ended by
            # itself first. The task instances end at the mark, so the round is no longer for it.
            120,
            mark_failed,
            Expect(state="failed", starts=1, stopped=1, max_stop_calls=1),
        ),
    ]
}

#: The slice CI runs (``tests/production/test_production_slice.py``): the two attacks every deployment
#: meets, a worker restart (each deploy) and a triggerer failover, both of which stopped every healthy
#: run they touched before issue 17; and a person's mark-failed, sync and deferred (a short round), the
#: one stop that must happen.
CI_SLICE = ("worker-sigterm", "triggerer-sigstop", "mark-failed")


# --- running a round ----------------------------------------------------------------------------------


def seed_scenarios(attacks: Sequence[Attack], repeat: int) -> list[dict[str, Any]]:
    """One simulator scenario per task instance the run will start."""
    return [
        {
            "id": ti.scenario,
            "projectId": "demo-project",
            "name": f"Rig {ti.scenario}",
            "durationSeconds": attack.duration_s,
        }
        for attack in attacks
        for number in range(1, repeat + 1)
        for ti in attack.plan(number).tis
    ]


def _runs(cluster: ProdCluster, ti: Ti) -> list[Any]:
    return cluster.sim.runs(ti.scenario)


def _polls(cluster: ProdCluster, ti: Ti) -> int:
    ids = {run.id for run in _runs(cluster, ti)}
    return sum(
        1
        for r in cluster.sim.requests
        if r.route == "get_bench_result" and r.path_params.get("bench_result_id") in ids
    )


def _in_phase(cluster: ProdCluster, rnd: Round, marks: dict[str, int]) -> bool:
    """Every task instance of the round is where the attack aims."""
    if rnd.attack.phase == "starting":
        port = int(cluster.sim.url.rsplit(":", 1)[1])
        talking = cluster.processes_talking_to(port, WORKERS)
        return len(talking) >= len(rnd.tis) and not any(_runs(cluster, ti) for ti in rnd.tis)
    for ti in rnd.tis:
        row = cluster.task_instance(ti.dag_id, ti.run_id)
        if row is None or not _runs(cluster, ti):
            return False
        if ti.mode == SYNC and (row["state"] != "running" or _polls(cluster, ti) < 2):
            return False
        if ti.mode == DEFERRABLE:
            if row["state"] != "deferred" or row["triggerer"] is None:
                return False
            # a poll from the triggerer: one more than when the deferral was first seen
            seen = marks.setdefault(ti.run_id, _polls(cluster, ti))
            if _polls(cluster, ti) <= seen:
                return False
    return True


def _ended(cluster: ProdCluster, ti: Ti) -> bool:
    return cluster.dag_run_state(ti.dag_id, ti.run_id) in ("success", "failed")


def _stops_landed(cluster: ProdCluster, ti: Ti, expected: int) -> bool:
    """``expected`` of the task instance's runs ended stopped, or every one of them ended (by itself:
    a stop too late, which ``check`` then reports)."""
    from airflow_provider_loadtest.simulator.state import TERMINAL_STATES

    runs = _runs(cluster, ti)
    now = cluster.sim.state.clock.now()
    stopped = sum(run.stopped_at is not None for run in runs)
    return stopped >= expected or all(run.state(now) in TERMINAL_STATES for run in runs)


def run_round(cluster: ProdCluster, rnd: Round, log: Callable[[str], None]) -> list[TiResult]:
    attack = rnd.attack
    from airflow_provider_loadtest.simulator.faults import FaultSpec

    if attack.start_held_s:
        for ti in rnd.tis:
            cluster.sim.state.add_fault(
                FaultSpec(
                    kind="delay",
                    route="run_scenario",
                    scenario_id=ti.scenario,
                    delay_seconds=attack.start_held_s,
                    count=1,
                )
            )
    for ti in rnd.tis:
        cluster.trigger(ti.dag_id, ti.run_id, {"scenario": ti.scenario})
    marks: dict[str, int] = {}
    try:
        wait_for(
            f"{attack.name} round {rnd.number} to reach its phase",
            lambda: _in_phase(cluster, rnd, marks),
            300,
            1,
        )
    except AssertionError as exc:
        rnd.notes.append(f"never reached the phase: {exc}")
        log(f"  {attack.name} #{rnd.number}: {exc}")
    rnd.struck_at = time.time()
    rnd.struck_mono = time.monotonic()
    restarts_before = len(cluster.restarts)
    attack.strike(cluster, rnd)
    log(f"  {attack.name} #{rnd.number}: struck ({'; '.join(rnd.notes)})")
    bound = attack.duration_s + attack.start_held_s + ROUND_SLACK_S
    try:
        wait_for(
            f"every task instance of {attack.name} round {rnd.number} to end",
            lambda: all(_ended(cluster, ti) for ti in rnd.tis),
            bound,
            2,
        )
    except AssertionError as exc:
        rnd.notes.append(str(exc))
    if attack.expect.stopped:
        # A person's stop may land well after the task instance ended: a deferred task is failed at
        # once, and its trigger's on_kill asks the task's state of an API server that may be slow
        # (``production_rig(loaded=True)``: 6-20 s) before it stops the run. Wait for it, bounded.
        try:
            wait_for(
                f"the runs of {attack.name} round {rnd.number} to be stopped",
                lambda: all(_stops_landed(cluster, ti, attack.expect.stopped) for ti in rnd.tis),
                STOP_LANDS_S,
                1,
            )
        except AssertionError as exc:
            rnd.notes.append(str(exc))
    # A stop sent by a process that outlived its task (a woken triggerer) lands a little later.
    time.sleep(5)
    for when, name, code in cluster.restarts[restarts_before:]:
        rnd.notes.append(f"{name} exited (code {code}) and was restarted at +{when - rnd.struck_at:.0f} s")
    return [collect(cluster, rnd, ti) for ti in rnd.tis]


def log_messages(logs: dict[str, str]) -> list[tuple[str, str]]:
    """(file, message) of every line of a task instance's logs, tries in order, each try's triggerer
    logs after it; a JSON line gives its event and its exceptions' values."""

    def order(name: str) -> tuple[int, str]:
        number = re.search(r"attempt=(\d+)", name)
        return (int(number.group(1)) if number else 0, name)

    found = []
    for name in sorted(logs, key=order):
        for line in logs[name].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if not isinstance(entry, dict):
                found.append((name, line))
                continue
            parts = [str(entry.get("event", ""))]
            parts += [
                str(e.get("exc_value", "")) for e in entry.get("error_detail") or [] if isinstance(e, dict)
            ]
            found.append((name, ": ".join(p for p in parts if p)))
    return found


def classify(messages: list[tuple[str, str]]) -> tuple[str | None, str]:
    """The cause the last failure names (the latest try's logs first), and its message."""
    for _name, text in reversed(messages):
        for cause, pattern in CAUSES:
            if re.search(pattern, text):
                return cause, text[:400]
    return None, ""


#: Log lines that say a run is being, or was, stopped (by the task, a trigger or Airflow).
STOP_LINE = re.compile(r"[Ss]topping run|Stopped run|[Aa]sked to stop run|stopped by a user")


def collect(cluster: ProdCluster, rnd: Round, ti: Ti) -> TiResult:
    runs = _runs(cluster, ti)
    ids = {run.id for run in runs}
    stop_calls = sum(
        1
        for r in cluster.sim.requests
        if r.route == "stop_run" and r.path_params.get("bench_result_id") in ids
    )
    row = cluster.task_instance(ti.dag_id, ti.run_id) or {}
    end = row.get("end_date")
    verdict_s = end.timestamp() - rnd.struck_at if isinstance(end, datetime) else None
    state = row.get("state")
    stops = [run.stopped_at for run in runs if run.stopped_at is not None]
    stopped_s = max(stops) - rnd.struck_mono if stops and rnd.struck_mono else None
    messages = log_messages(cluster.task_logs(ti.dag_id, ti.run_id))
    cause, message = classify(messages) if state != "success" else (None, "")
    result = TiResult(
        attack=rnd.attack.name,
        round=rnd.number,
        mode=ti.mode,
        run_id=ti.run_id,
        victim=ti.run_id in rnd.victims,
        state=state,
        tries=int(row.get("try_number") or 0),
        starts=len(runs),
        stopped=sum(1 for run in runs if run.stopped_at is not None),
        stop_calls=stop_calls,
        cause=cause,
        message=message,
        verdict_s=verdict_s,
        stopped_s=stopped_s,
        stop_lines=[f"{name}: {text[:300]}" for name, text in messages if STOP_LINE.search(text)],
        logs=str(cluster.task_log_folder(ti.dag_id, ti.run_id)),
    )
    result.broken = check(result, rnd.attack.expect)
    return result


def check(result: TiResult, expect: Expect) -> list[str]:
    """The rules this task instance broke, one line each."""
    broken = []
    wrong_cause = (expect.cause is not None and result.cause != expect.cause) or (
        result.cause in expect.wrong_causes
    )
    if result.state != expect.state or wrong_cause:
        broken.append(
            f"verdict: {result.state} ({result.cause or 'no cause found'}), expected {expect.state}"
            + (f" ({expect.cause})" if expect.cause else "")
        )
    if result.starts != expect.starts:
        broken.append(f"starts: {result.starts} runs started, expected {expect.starts}")
    if result.stopped != expect.stopped:
        broken.append(f"stops: {result.stopped} runs ended stopped, expected {expect.stopped}")
    if result.stop_calls > expect.max_stop_calls:
        broken.append(f"stop calls: {result.stop_calls}, at most {expect.max_stop_calls} expected")
    if result.verdict_s is None:
        broken.append("no verdict: the task instance did not end")
    elif result.verdict_s > expect.max_verdict_s + 0:
        broken.append(
            f"slow verdict: {result.verdict_s:.0f} s after the strike (> {expect.max_verdict_s:g} s)"
        )
    return broken


# --- the summary ----------------------------------------------------------------------------------------


def summary_rows(results: Sequence[TiResult]) -> list[dict[str, Any]]:
    rows = []
    for name, attack in ATTACKS.items():
        mine = [r for r in results if r.attack == name]
        if not mine:
            continue
        verdicts = [r.verdict_s for r in mine if r.verdict_s is not None]
        expect = attack.expect
        rows.append(
            {
                "attack": attack.what,
                "TIs": len(mine),
                "victims": sum(r.victim for r in mine),
                "starts": sum(r.starts for r in mine),
                "stopped": sum(r.stopped for r in mine),
                "stop calls": sum(r.stop_calls for r in mine),
                "wrong verdicts": sum(1 for r in mine if any(b.startswith("verdict") for b in r.broken)),
                "healthy runs stopped": sum(max(0, r.stopped - expect.stopped) for r in mine),
                "rules broken": sum(1 for r in mine if r.broken),
                "verdict s (median/max)": (
                    f"{statistics.median(verdicts):.0f}/{max(verdicts):.0f}" if verdicts else "-"
                ),
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no task instances)"
    headers = list(rows[0])
    widths = {h: max(len(h), *(len(str(r[h])) for r in rows)) for h in headers}
    lines = [" | ".join(h.ljust(widths[h]) for h in headers)]
    lines.append("-|-".join("-" * widths[h] for h in headers))
    for row in rows:
        lines.append(" | ".join(str(row[h]).ljust(widths[h]) for h in headers))
    return "\n".join(lines)
