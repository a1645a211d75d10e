"""Who may stop a load test, and how a stop is remembered: the rule the worker and the triggerer share.

A load test ends by itself at its planned duration, so leaving one running costs nothing the user did not
already plan to pay; stopping a healthy one wastes it and turns an infrastructure blip into a red gate.
So **a run is stopped only when someone or something decided it should end**:

- a person: marking the task instance failed or successful, or clearing it (a request for a new run);
- the task's own bounds: ``timeout`` or ``execution_timeout``;
- the gate: ``stop_on_alarm``.

Never because the process watching it went away: a triggerer that lost its trigger to another one (a
stall past ``triggerer_health_check_threshold``), a worker shut down or restarted (SIGTERM), a heartbeat
lost to a metadata-database outage. Airflow 3.3 calls ``on_kill`` in all of these cases alike, so the
cause is read from what Airflow itself knows at that moment: the task instance's state as the API
server sees it. When it cannot be read, or it is ambiguous, the run is left going: the next try (or the
other triggerer) re-attaches to it.

When the task does stop its run, the decision is written into the run record (``decisions.run_record``)
before the stop is sent, so a retry neither blames "outside" for a self-inflicted ABORTED nor takes it as
the run's verdict, and a person's clear is recognised whatever order the scheduler and the next try see
it in.

No I/O, nothing heavy: the operator module imports this at DAG-parse time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

#: Why a run was stopped by this package (``StopDecision.by``).
StopCause = Literal["clear", "marked_failed", "marked_success", "state_changed", "timeout", "gate"]

#: Task-instance states (Airflow's ``TaskInstanceState`` values) that only a person sets on a task that is
#: running or deferred. ``failed`` may also be the scheduler giving up on a task whose heartbeats stopped
#: with no retries left; it is taken as a person's (the far more common case) and documented.
_PERSON_SET: dict[str, StopCause] = {
    "failed": "marked_failed",
    "success": "marked_success",
    "skipped": "state_changed",
    "removed": "state_changed",
}

_CAUSE_TEXT: dict[StopCause, str] = {
    "clear": "a person cleared the task",
    "marked_failed": "a person marked the task failed",
    "marked_success": "a person marked the task successful",
    "state_changed": "Airflow set the task instance skipped or removed (marked so, or the DAG run's "
    "dagrun_timeout passed)",
    "timeout": "the task's timeout passed",
    "gate": "the quality gate broke while it ran",
}


@dataclass(frozen=True)
class StopDecision:
    """A decision to end a run: who decided (``by``), in words (``why``), when (epoch seconds), which run."""

    bench_result_id: str
    by: StopCause
    why: str
    at: float

    def to_store(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_store(cls, value: object) -> StopDecision | None:
        """Read a stored decision; ``None`` for nothing or something unreadable."""
        if not isinstance(value, dict):
            return None
        by, at, run = value.get("by"), value.get("at"), value.get("bench_result_id")
        if by not in _CAUSE_TEXT or not isinstance(at, (int, float)) or not isinstance(run, str):
            return None
        return cls(run, by, str(value.get("why") or _CAUSE_TEXT[by]), float(at))

    @property
    def is_clear(self) -> bool:
        """A clear asks for a new run: the next try starts one."""
        return self.by == "clear"


def decision(bench_result_id: str, by: StopCause, at: float, detail: str | None = None) -> StopDecision:
    """A ``StopDecision`` with its cause in words (and ``detail`` after it)."""
    why = _CAUSE_TEXT[by] + (f" ({detail})" if detail else "")
    return StopDecision(bench_result_id, by, why, at)


def _normal(ti_state: object) -> str | None:
    """A task-instance state as Airflow's API sends it (an enum or its value), lower case; ``None``
    when it could not be read."""
    if ti_state is None:
        return None
    value = getattr(ti_state, "value", ti_state)
    return str(value).strip().lower() or None


def cause_on_worker(ti_state: object, *, readable: bool) -> StopCause | None:
    """Why the task running on a worker is being killed, from its state as the API server sees it now.

    ``None``: not a decision to end the run (the worker is shutting down or restarting, the heartbeat was
    lost, the state could not be read, or Airflow re-queued the task after losing it): leave the run going
    for the next try. ``restarting`` is how Airflow 3 marks a *running* task instance that a person
    cleared. A state of ``None`` is not a clear here: Airflow sets a running task instance to ``None``
    only when a restarted scheduler resets a task it cannot adopt (infrastructure); a clear turns the
    RESTARTING task into ``None`` only after its process ended.
    """
    if not readable:
        return None
    state = _normal(ti_state)
    if state == "restarting":
        return "clear"
    return _PERSON_SET.get(state) if state is not None else None


def cause_in_triggerer(ti_state: object, *, readable: bool) -> StopCause | None:
    """Why the triggerer cancelled a deferred wait (Airflow 3.3 calls ``on_kill`` for every trigger it
    stops running, including one that merely moved to another triggerer).

    Only a state a person sets ends the run here. ``deferred`` means another triggerer holds the wait;
    ``scheduled``/``queued``/``running`` mean the wait's event fired (here or elsewhere) and the task is
    resuming, or a new try after a clear is starting; ``None`` is a clear whose next try has not started.
    In the clear cases the next try itself stops the old run (it can record why; a trigger cannot write
    the task's state store), so the triggerer leaves them alone.
    """
    if not readable:
        return None
    state = _normal(ti_state)
    return _PERSON_SET.get(state) if state is not None else None


#: Where a trigger that could not learn why its wait was ended leaves a ``PendingStop``: an Airflow
#: Variable named after the run (the task state store, where the run record lives, is the worker's only;
#: a trigger can write Variables), so whatever watches that run next learns of it.
PENDING_STOP_PREFIX = "loadtest_pending_stop."


def pending_stop_key(bench_result_id: str) -> str:
    """The Variable holding the pending stop of ``bench_result_id``."""
    return PENDING_STOP_PREFIX + bench_result_id


@dataclass(frozen=True)
class PendingStop:
    """A stop nobody could confirm: the wait for run ``bench_result_id`` of try ``try_number`` of its task
    was ended (its trigger cancelled, or its worker's process killed), and the task instance's state (a
    person's mark-failed, or the wait merely moving elsewhere) could not be read for ``why``; the run was
    left going at ``at``."""

    bench_result_id: str
    try_number: int | None
    at: float
    why: str
    report_url: str | None = None

    def to_store(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_store(cls, value: object) -> PendingStop | None:
        """Read a stored pending stop (a dict, or its JSON text); ``None`` for nothing or junk."""
        if isinstance(value, str):
            import json

            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, dict):
            return None
        run, at, number = value.get("bench_result_id"), value.get("at"), value.get("try_number")
        if not isinstance(run, str) or not isinstance(at, (int, float)) or isinstance(at, bool):
            return None
        number = number if isinstance(number, int) and not isinstance(number, bool) else None
        url = value.get("report_url")
        why = str(value.get("why") or "unknown")
        return cls(run, number, float(at), why, url if isinstance(url, str) else None)

    def describe(self) -> str:
        """The pending stop in words, for the log of whoever finds it."""
        of_try = f"try {self.try_number}" if self.try_number is not None else "an earlier try"
        return (
            f"the wait for run {self.bench_result_id} of {of_try} of this task was ended at "
            f"{utc_text(self.at)}, and whether a person ended it could not be learned ({self.why}), so the "
            "stop a person may have asked for was left pending"
        )


def on_pending_stop(*, clear_seen: bool) -> Literal["stop", "moot"]:
    """What a later try of the task does with a pending stop (``PendingStop``) of the run it finds.

    ``stop``: the task was cleared since (a person asked for the run to end and a new one to start):
    the run of before ends, and the pending stop is why. ``moot``: the try that left it is still the
    task's try (its wait moved elsewhere and came back), or Airflow retried the task after it, which
    it does only when the try failed for a reason of its own: a person who marks a task failed or
    successful ends it for good, so no retry follows a person's decision and the run is healthy.
    """
    if clear_seen:
        return "stop"
    return "moot"


def explain(stop: StopDecision) -> str:
    """The cause of a run's ABORTED state when this package stopped it."""
    return f"it was stopped at {utc_text(stop.at)} because {stop.why}"


def utc_text(epoch: float) -> str:
    """``2026-11-23 14:05:09 UTC``: what a person matches against the service's run list.

    Here, not in ``decisions.run_record``, so the dependency goes one way: the run record holds stop
    decisions (and imports this module); a stop decision knows nothing of the record.
    """
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
