"""Which load test a task instance started, and whether a try may start one: the start-once rules.

A load test is billed, so a start is sent at most once per task instance across all its tries. The
operator keeps a record in Airflow's task state store (3.3+; scoped to the DAG run, it survives retries,
worker crashes and a person's clear). Before the start request it writes "start in flight"; once the
service answered it adds the run. The rules, decided here without I/O and applied by the operator:

- a try that finds a start in flight with no run recorded does not start again (the earlier start may
  have been accepted): it fails for good, saying when that start was sent and what to look for;
- a start whose outcome is unknown (read timeout, dropped answer, 5xx, unreadable 2xx) fails the same way;
- a recorded run still going is re-attached to; one that ended is judged (its verdict is final), and only
  ``restart_failed_runs=True`` lets a retry start a new run after ERROR or ABORTED;
- a person's clear is a request for a new run: the try that was running when it came records it
  (``decisions.stops``) and stops the run; when that try could not (a deferred task, a killed worker),
  the record's ``max_tries`` tells, since Airflow raises it on a clear, and the next try stops the run of
  before the clear (if still going) before it starts the new one;
- when the task stopped its own run, the record says who decided, why and when, so a retry takes the
  stop for what it was (a timeout, the gate, a person), never for an abort "from outside";
- without a working store nothing after the start may lead to a retry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from airflow_provider_loadtest.decisions.runs import FAILED_STATES, FINISHED
from airflow_provider_loadtest.decisions.stops import StopDecision, utc_text

#: Key in Airflow's task state store (3.3+) and XCom under which the run is recorded.
RUN_RECORD_KEY = "loadtest_run"
_VERSION = 1


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_max_tries(ti: Any) -> int | None:
    """The task instance's ``max_tries`` (Airflow 3 task SDK), or ``None`` when it is not known."""
    return _whole(getattr(ti, "max_tries", None))


def read_clear_number(context: Any) -> int | None:
    """The DAG run's ``clear_number`` (raised by Airflow on every clear of the DAG run or its tasks)."""
    dag_run = context.get("dag_run") if hasattr(context, "get") else None
    return _whole(getattr(dag_run, "clear_number", None))


def read_try_number(ti: Any) -> int | None:
    """The task instance's ``try_number`` (1 on its first try ever: it keeps counting across clears)."""
    return _whole(getattr(ti, "try_number", None))


@dataclass(frozen=True)
class RunRecord:
    """What the task state store holds for one task instance.

    ``run`` is ``None`` while the start is in flight (sent, no answer read yet), then the
    ``StartedRun`` dict. ``stopped`` is set once this package decided to stop that run, before the stop
    is sent.
    """

    scenario_id: str
    start_sent_at: float
    max_tries: int | None
    run: dict[str, Any] | None = None
    stopped: StopDecision | None = None
    #: The DAG run's ``clear_number`` when the start was recorded: Airflow raises it on every clear.
    clear_number: int | None = None
    #: The ``try_number`` of the try that sent the start (``None`` in records of earlier versions).
    started_by_try: int | None = None

    def to_store(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "scenario_id": self.scenario_id,
            "start_sent_at": self.start_sent_at,
            "max_tries": self.max_tries,
            "run": self.run,
            "stopped": self.stopped.to_store() if self.stopped is not None else None,
            "clear_number": self.clear_number,
            "try_number": self.started_by_try,
        }

    @property
    def bench_result_id(self) -> str | None:
        return str(self.run["bench_result_id"]) if self.run else None

    @classmethod
    def from_store(cls, value: Any) -> RunRecord | None:
        """Read a stored record; ``None`` for nothing (or something unreadable: no run to re-attach to)."""
        if not isinstance(value, dict):
            return None
        if "version" not in value and value.get("bench_result_id"):
            # Written by earlier versions: the bare run dict, without max_tries.
            started = value.get("started_at")
            return cls(
                scenario_id=str(value.get("scenario_id")),
                start_sent_at=float(started) if isinstance(started, (int, float)) else 0.0,
                max_tries=None,
                run=value,
            )
        sent = value.get("start_sent_at")
        if not isinstance(sent, (int, float)) or "scenario_id" not in value:
            return None
        run = value.get("run")
        run = run if isinstance(run, dict) and run.get("bench_result_id") else None
        stopped = StopDecision.from_store(value.get("stopped"))
        if stopped is not None and (run is None or stopped.bench_result_id != run.get("bench_result_id")):
            stopped = None  # a decision about another run than the one recorded: not this run's
        return cls(
            scenario_id=str(value["scenario_id"]),
            start_sent_at=float(sent),
            max_tries=_whole(value.get("max_tries")),
            run=run,
            stopped=stopped,
            clear_number=_whole(value.get("clear_number")),
            started_by_try=_whole(value.get("try_number")),
        )

    @property
    def started_by(self) -> str:
        """Which try sent the start, in words: ``try 1``, or ``an earlier try`` when not recorded."""
        return f"try {self.started_by_try}" if self.started_by_try is not None else "an earlier try"

    def with_run(self, run: dict[str, Any]) -> RunRecord:
        return replace(self, run=run, stopped=None)

    def with_stop(self, stop: StopDecision) -> RunRecord:
        return replace(self, stopped=stop)


@dataclass(frozen=True)
class TryPlan:
    """What a try does first: ``start`` a run, ``check_run`` (the recorded one), or ``refuse``.

    ``message`` is a log line for ``start`` (why a new run although there is a record) and the failure
    message for ``refuse``. ``stop_first``: the run of before a clear, which the try stops (if it is still
    going, recording why) before it starts the new one.
    """

    action: Literal["start", "check_run", "refuse"]
    message: str | None = None
    stop_first: dict[str, Any] | None = None
    #: The DAG run was cleared since the run was recorded (its ``clear_number`` grew), and no record
    #: says whether this task was: a run found ABORTED was stopped by the clear (see ``on_recorded_run``).
    clear_seen: bool = False


def plan_try(record: RunRecord | None, *, max_tries: int | None, clear_number: int | None = None) -> TryPlan:
    """Decide from the stored record what this try of the task instance may do.

    A clear is recognised three ways, whichever Airflow gave: the record of the try that was running
    when it came (``stopped.by == "clear"``); a changed ``max_tries`` (Airflow sets it on a clear, and
    nothing else changes it); a grown ``clear_number`` of the DAG run. The last is the only one a clear
    of a *running* task leaves under Celery: the cleared try cannot write the record (Airflow gives the
    task instance a new id first, and the state store is addressed by it) and the scheduler raises
    ``max_tries`` only when the killed process reported success.
    """
    if record is None:
        return TryPlan("start")
    if record.stopped is not None and record.stopped.is_clear:
        return TryPlan(
            "start",
            f"The task was cleared while run {record.bench_result_id} went (it was stopped at "
            f"{utc_text(record.stopped.at)}): starting a new load test of scenario {record.scenario_id!r}",
        )
    if record.max_tries is not None and max_tries is not None and max_tries != record.max_tries:
        if record.run is None:
            return TryPlan(
                "start",
                f"The task was cleared (max_tries went from {record.max_tries} to {max_tries}): starting a "
                f"new load test of scenario {record.scenario_id!r}; the start sent at "
                f"{utc_text(record.start_sent_at)}, whose outcome is unknown, is not looked for",
            )
        return TryPlan(
            "start",
            f"The task was cleared (max_tries went from {record.max_tries} to {max_tries}): stopping run "
            f"{record.bench_result_id} of before the clear if it still goes, then starting a new load test "
            f"of scenario {record.scenario_id!r}",
            stop_first=record.run,
        )
    if record.run is None:
        return TryPlan("refuse", uncertain_start_message(record.scenario_id, record.start_sent_at))
    cleared = (
        record.clear_number is not None and clear_number is not None and clear_number > record.clear_number
    )
    return TryPlan("check_run", clear_seen=cleared)


def on_recorded_run(
    state: str, *, restart_failed_runs: bool, stopped_here: bool = False, clear_seen: bool = False
) -> Literal["attach", "judge", "restart", "settle"]:
    """What a retry does with the run an earlier try recorded, given its state now.

    ``judge``: take its verdict through the normal end of the wait (alarms, files, gate), never starting
    again. ``restart`` after ERROR or ABORTED in the service only when the user opted in (a run this
    package stopped itself, ``stopped_here``: its timeout, its gate, carries its verdict), and after an
    ABORTED that a clear of the DAG run explains (``clear_seen``: the cleared try stopped it and asked
    for a new run). ``settle``: a clear was seen and the run still goes: look again shortly, since a
    stop takes the service a moment; a run still going then was not stopped by the clear, and is
    re-attached to.
    """
    if state == FINISHED:
        return "judge"
    if state == "ABORTED" and clear_seen and not stopped_here:
        return "restart"
    if state in FAILED_STATES:
        return "restart" if restart_failed_runs and not stopped_here else "judge"
    if clear_seen:
        return "settle"
    return "attach"  # still going, or a state this version does not know: wait on it


def uncertain_start_message(scenario_id: str, sent_at: float, why: str | None = None) -> str:
    """The failure of a try that cannot know whether its (or an earlier try's) start was accepted."""
    cause = f" ({why})" if why else ""
    return (
        f"A start of scenario {scenario_id!r} was sent at {utc_text(sent_at)} and its outcome is unknown"
        f"{cause}: the service may have started (and be billing) a load test. Not starting another. "
        "Check the scenario's runs in the service for one started then: let it finish or stop it there. "
        "Clear this task to start a new run."
    )


def stop_hint(bench_result_id: str, report_url: str | None, conn_id: str) -> str:
    """How a person finds and stops a run the task no longer watches."""
    report = f" Report: {report_url}." if report_url else ""
    return (
        f"Run {bench_result_id} may still be going and billing.{report} To stop it, use the web UI or "
        f'LoadTestHook("{conn_id}").stop_run("{bench_result_id}").'
    )


def verdict_is_final(*, reason: str, state: str, restart_failed_runs: bool, store_works: bool) -> bool:
    """Whether a failed outcome must fail the task without retries (``AirflowFailException``).

    A verdict is final: a retry would only re-judge the same run, or start and bill another one. The
    exceptions: a run ending ERROR/ABORTED in the service with ``restart_failed_runs=True`` (a retry
    starts a new run, as the user asked), and a gate that could not be checked because the alarms
    could not be read (a retry re-attaches to the FINISHED run and reads them again), when the store
    lets a retry re-attach.
    """
    if not store_works:
        return True
    if reason == "ended" and state in FAILED_STATES:
        return not restart_failed_runs
    return reason != "gate_unchecked"


def positive_seconds(name: str, value: float | timedelta | None) -> float | None:
    """``value`` as seconds, refusing what is not a finite, positive number (``nan``, ``inf``, 0, -1)."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name} must be a finite, positive number of seconds, got {value!r}")
    return float(seconds)
