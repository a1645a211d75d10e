"""Watching a run until it ends: the one place that decides what a state or an alarm list means.

``watch_run`` is a generator that does no I/O: it yields what it needs done (an API call, a pause, a
log line) and is sent the results. The worker drives it with the sync hook, the triggerer with the
async client, so both modes poll, log, gate and time out identically.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.decisions.runs import (
    FAILED_STATES,
    breaking_alarms,
    check_gate_severity,
    describe_alarms,
    is_terminal,
    normal_state,
    unknown_severity_alarms,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.api.endpoints import ApiRequest
    from airflow_provider_loadtest.models import GlobalMetrics, ThresholdAlarm

#: How long past the watch deadline the stop call (or the reads after a run that ended just in time)
#: may take in all, tries and back-off: best effort, bounded, so a service that is down cannot keep a
#: timed-out task alive.
STOP_GRACE_S = 30.0


#: The most a triggerer wait puts off its first poll (see ``first_poll_delay``).
MAX_FIRST_POLL_DELAY_S = 60.0


def first_poll_delay(bench_result_id: str, check_interval_s: float) -> float:
    """How long a wait in the triggerer puts off its first poll: a fraction of one check interval
    (at most ``MAX_FIRST_POLL_DELAY_S``) drawn from the run's id.

    Waits resumed together (a triggerer restart, a DAG deferring many tasks in the same second) would
    otherwise poll in step for as long as they run: bursts that make polls late and need a connection
    each. With each wait's phase drawn from its id they spread evenly over the interval, and a wait
    keeps the same phase across restarts (deterministic, so tests need no random seed). A run's end
    is still seen within one interval of it, as before.
    """
    digest = hashlib.blake2b(bench_result_id.encode(), digest_size=8).digest()
    fraction = int.from_bytes(digest, "big") / 2.0**64  # in [0, 1)
    return fraction * max(0.0, min(check_interval_s, MAX_FIRST_POLL_DELAY_S))


def _until(request: ApiRequest[Any], deadline: float | None) -> ApiRequest[Any]:
    """``request`` carrying the watch deadline, so its tries and back-off never run past it."""
    return request if deadline is None else replace(request, deadline=deadline)


def alarm_record(alarm: ThresholdAlarm) -> dict[str, Any]:
    """A threshold alarm as JSON-safe data for XCom and trigger events."""
    return alarm.to_api()


def metric_records(metrics: GlobalMetrics | None) -> dict[str, Any]:
    """Headline metrics as ``{name: {"value": v, "unit": u}}``."""
    if metrics is None or not metrics.metrics:
        return {}
    return {str(m.name): {"value": m.value, "unit": m.unit} for m in metrics.metrics if m.name}


def format_metrics(records: dict[str, Any]) -> str:
    """Headline metrics for a log line: ``Hits 72,000, Errors 288, Average response time 612.3 ms``. A
    unit that only repeats the name (``Hits`` in ``hits``) is left out."""
    return ", ".join(_metric_text(str(name), rec) for name, rec in records.items())


def _metric_text(name: str, record: dict[str, Any]) -> str:
    value = record.get("value")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        shown = str(value)
    else:
        shown = f"{value:,}" if isinstance(value, int) else f"{round(value, 3):,}"
    unit = str(record.get("unit") or "")
    return f"{name} {shown} {unit}" if unit and unit.casefold() != name.casefold() else f"{name} {shown}"


@dataclass(frozen=True)
class Sleep:
    """Pause before the next poll."""

    seconds: float


@dataclass(frozen=True)
class Log:
    """A line for the task log."""

    message: str
    level: int = logging.INFO


@dataclass(frozen=True)
class Stopping(Log):
    """The watch decided to stop the run (its deadline, the gate while running); the stop call follows.

    A ``Log`` to every driver (it is logged like one), so the drivers need not know it; the run
    lifecycle intercepts it on the way to record the decision before the stop is sent.
    """

    bench_result_id: str = ""
    cause: Literal["timeout", "gate"] = "timeout"


Action = "ApiRequest[Any] | Sleep | Log"


@dataclass(frozen=True)
class WatchOptions:
    """How to watch a run; JSON-safe so a trigger can carry it."""

    check_interval_s: float = 10.0
    deadline: float | None = None  # epoch seconds after which the run is stopped and the task fails
    fail_on_alarm_severity: str | None = None
    stop_on_alarm: bool = False
    log_every_s: float = 60.0
    #: Stop the run when the deadline passes (the operator, which started it); a sensor watching a run it
    #: did not start leaves it going unless asked.
    stop_on_timeout: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchOptions:
        return cls(**data)


#: ``stopped_here``: the run ended ABORTED because this package stopped it (its record says why).
Reason = Literal["finished", "ended", "alarm", "timeout", "gate_unchecked", "stopped_here"]


@dataclass(frozen=True)
class RunOutcome:
    """How a watched run ended, and whether the task should succeed."""

    bench_result_id: str
    state: str
    reason: Reason
    succeeded: bool
    message: str
    duration_s: float
    stopped: bool = False
    alarms: list[dict[str, Any]] = field(default_factory=list)
    breaking: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOutcome:
        return cls(**data)

    def summary(self) -> dict[str, Any]:
        """What the task returns on top of the run's ids."""
        return {
            "state": self.state,
            "duration_s": round(self.duration_s, 3),
            "alarms": self.alarms,
            "metrics": self.metrics,
            "stopped": self.stopped,
        }


class _Progress:
    """Decides when a progress line is worth logging: on a state change, else every ``every_s``."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.last_state: str | None = None
        self.last_at: float | None = None

    def due(self, state: str, now: float) -> bool:
        if state != self.last_state or self.last_at is None or now - self.last_at >= self.every_s:
            self.last_state, self.last_at = state, now
            return True
        return False


def watch_run(
    bench_result_id: str,
    options: WatchOptions,
    *,
    started_at: float,
    now: Callable[[], float] | None = None,
    first_delay_s: float = 0.0,
) -> Generator[Any, Any, RunOutcome]:
    """Poll the run until it ends, the gate breaks or the deadline passes; return the outcome.

    Yields ``ApiRequest`` (send back the parsed answer, or throw the ``LoadTestApiError``), ``Sleep``
    and ``Log``. Stops the run itself on a broken gate or a passed deadline (best effort: a failed
    stop is logged, never raised over the real reason). ``first_delay_s`` puts off the first poll
    (never past the deadline): the triggerer passes ``first_poll_delay`` so its waits do not poll in
    step.
    """
    now = now or time.time
    progress = _Progress(options.log_every_s)
    state = "UNKNOWN"
    deadline = options.deadline
    if first_delay_s > 0:
        pause = first_delay_s if deadline is None else max(0.0, min(first_delay_s, deadline - now()))
        if pause > 0:
            yield Sleep(pause)
    read_state = _until(endpoints.get_bench_result(bench_result_id), deadline)  # the same every poll
    while True:
        try:
            result = yield read_state
        except LoadTestApiError as exc:
            if deadline is None or now() < deadline:
                raise
            # The status could not be read and the timeout passed meanwhile: stop the run anyway.
            yield Log(f"Could not read the state of run {bench_result_id}: {exc}", logging.WARNING)
            return (yield from _time_out(bench_result_id, state, now(), started_at, options.stop_on_timeout))
        state = normal_state(result.state)
        if is_terminal(state):
            break
        current = now()
        broke = yield from _gate_while_running(bench_result_id, state, options, started_at, current, now)
        if broke is not None:
            return broke
        if progress.due(state, current):
            yield from _log_progress(bench_result_id, state, deadline)
        if deadline is not None and current >= deadline:
            return (
                yield from _time_out(bench_result_id, state, current, started_at, options.stop_on_timeout)
            )
        pause = options.check_interval_s
        if options.deadline is not None:
            pause = max(0.0, min(pause, options.deadline - current))
        yield Sleep(pause)
    return (yield from conclude_run(bench_result_id, state, options, started_at=started_at, ended_at=now()))


def poll_run(
    bench_result_id: str,
    options: WatchOptions,
    *,
    started_at: float,
    now: Callable[[], float] | None = None,
) -> Generator[Any, Any, RunOutcome | None]:
    """One look at a run, for a sensor's poke: its outcome once it ended (or broke the gate while
    running, with ``stop_on_alarm``), else ``None`` after a progress line. The same decisions as
    ``watch_run``, which is this in a loop with the deadline and the pauses."""
    now = now or time.time
    result = yield _until(endpoints.get_bench_result(bench_result_id), options.deadline)
    state = normal_state(result.state)
    if is_terminal(state):
        return (
            yield from conclude_run(bench_result_id, state, options, started_at=started_at, ended_at=now())
        )
    broke = yield from _gate_while_running(bench_result_id, state, options, started_at, now(), now)
    if broke is None:
        yield from _log_progress(bench_result_id, state, options.deadline)
    return broke


def _gate_while_running(
    bench_result_id: str,
    state: str,
    options: WatchOptions,
    started_at: float,
    current: float,
    now: Callable[[], float],
) -> Generator[Any, Any, RunOutcome | None]:
    """With ``stop_on_alarm``: the alarms of a RUNNING run; a broken gate stops it (the outcome)."""
    gate = check_gate_severity(options.fail_on_alarm_severity)
    if not (gate and options.stop_on_alarm and state == "RUNNING"):
        return None
    deadline = options.deadline
    alarms = yield from _read_alarms(bench_result_id, tolerate=True, deadline=deadline)
    broken = yield from _gate(alarms or [], gate)
    if not broken:
        return None
    stopped = yield from _stop(
        bench_result_id, f"{len(broken)} alarm(s) at or above {gate}", max(now(), deadline or 0.0), "gate"
    )
    return RunOutcome(
        bench_result_id=bench_result_id,
        state=state,
        reason="alarm",
        succeeded=False,
        message=f"Run {bench_result_id} broke the quality gate ({gate}) while running and was "
        f"stopped: {describe_alarms(broken)}",
        duration_s=current - started_at,
        stopped=stopped,
        alarms=alarms or [],
        breaking=broken,
    )


def conclude_run(
    bench_result_id: str, state: str, options: WatchOptions, *, started_at: float, ended_at: float
) -> Generator[Any, Any, RunOutcome]:
    """The outcome of a run that ended ``state``: its alarms against the gate, its headline metrics."""
    gate = check_gate_severity(options.fail_on_alarm_severity)
    deadline = options.deadline
    # The run ended in time: its alarms and metrics may still be read a little past the deadline.
    final = None if deadline is None else max(deadline, ended_at) + STOP_GRACE_S
    alarms = yield from _read_alarms(bench_result_id, tolerate=gate is None, deadline=final)
    metrics = yield from _read_metrics(bench_result_id, final)
    base: dict[str, Any] = {
        "bench_result_id": bench_result_id,
        "state": state,
        "duration_s": ended_at - started_at,
        "alarms": alarms or [],
        "metrics": metrics,
    }
    if metrics:
        yield Log(f"Run {bench_result_id} ended {state}: {format_metrics(metrics)}")
    if state in FAILED_STATES:
        why = "was aborted from outside" if state == "ABORTED" else "failed in the service"
        return RunOutcome(
            reason="ended", succeeded=False, message=f"Run {bench_result_id} {why} (state {state})", **base
        )
    if alarms is None:
        return RunOutcome(
            reason="gate_unchecked",
            succeeded=False,
            message=f"Run {bench_result_id} FINISHED but its threshold alarms could not be read, so the "
            f"{gate} quality gate could not be checked",
            **base,
        )
    broken = yield from _gate(alarms, gate)
    if broken:
        return RunOutcome(
            reason="alarm",
            succeeded=False,
            breaking=broken,
            message=f"Run {bench_result_id} FINISHED but broke the quality gate ({gate}): "
            + describe_alarms(broken),
            **base,
        )
    return RunOutcome(reason="finished", succeeded=True, message=f"Run {bench_result_id} FINISHED", **base)


def _gate(alarms: list[dict[str, Any]], gate: str | None) -> Generator[Any, Any, list[dict[str, Any]]]:
    """The alarms breaking ``gate``, with a warning for those whose severity is unknown (they break it)."""
    if gate is not None:
        unknown = unknown_severity_alarms(alarms)
        if unknown:
            yield Log(
                f"{len(unknown)} alarm(s) have a severity this package does not know, counted as breaking "
                f"the {gate} gate: {describe_alarms(unknown)}",
                logging.WARNING,
            )
    return breaking_alarms(alarms, gate)


def _time_out(
    bench_result_id: str, state: str, at: float, started_at: float, stop: bool = True
) -> Generator[Any, Any, RunOutcome]:
    """The deadline passed (noticed at ``at``): stop the run (best effort, bounded) and say so; a watch
    told not to stop (a sensor on a run it did not start) leaves it going."""
    if stop:
        stopped = yield from _stop(bench_result_id, "the task's timeout passed", at, "timeout")
        after = "it was stopped." if stopped else "stopping it failed: stop it in the web UI."
    else:
        stopped, after = False, "it was left going (stop_on_timeout is off)."
    return RunOutcome(
        bench_result_id=bench_result_id,
        state=state,
        reason="timeout",
        succeeded=False,
        message=f"Run {bench_result_id} was still {state} when the task's timeout passed; " + after,
        duration_s=at - started_at,
        stopped=stopped,
    )


def _read_alarms(
    bench_result_id: str, *, tolerate: bool, deadline: float | None
) -> Generator[Any, Any, list[dict[str, Any]] | None]:
    """The run's alarms; ``None`` when they could not be read (an error only matters with a gate)."""
    try:
        alarms = yield _until(endpoints.get_threshold_alarms(bench_result_id), deadline)
    except LoadTestApiError as exc:
        yield Log(f"Could not read the threshold alarms of run {bench_result_id}: {exc}", logging.WARNING)
        return [] if tolerate else None
    return [alarm_record(a) for a in alarms]


def _read_metrics(bench_result_id: str, deadline: float | None) -> Generator[Any, Any, dict[str, Any]]:
    try:
        metrics = yield _until(endpoints.get_global_metrics(bench_result_id), deadline)
    except LoadTestApiError as exc:
        yield Log(f"Could not read the metrics of run {bench_result_id}: {exc}", logging.WARNING)
        return {}
    return metric_records(metrics)


def _log_progress(bench_result_id: str, state: str, deadline: float | None) -> Generator[Any, Any, None]:
    """One readable line: state, percent done and the live headline metrics (best effort)."""
    parts = [f"Run {bench_result_id}: {state}"]
    try:
        progress = yield _until(endpoints.get_progress(bench_result_id), deadline)
        if progress.percent is not None:  # a progress answer without a number is no reason to fail
            parts.append(f"{progress.percent:.1f}% done")  # 0 to 100, decimals as the service sends
    except LoadTestApiError:
        pass
    if state == "RUNNING":
        metrics = yield from _read_metrics(bench_result_id, deadline)
        if metrics:
            parts.append(format_metrics(metrics))
    yield Log(", ".join(parts))


def _stop(
    bench_result_id: str, why: str, from_time: float, cause: Literal["timeout", "gate"]
) -> Generator[Any, Any, bool]:
    """Stop the run, its tries bounded to ``STOP_GRACE_S`` past ``from_time`` (epoch seconds)."""
    yield Stopping(f"Stopping run {bench_result_id}: {why}", logging.WARNING, bench_result_id, cause)
    try:
        answer = yield replace(endpoints.stop_run(bench_result_id), deadline=from_time + STOP_GRACE_S)
    except LoadTestApiError as exc:
        yield Log(f"Could not stop run {bench_result_id}: {exc}", logging.ERROR)
        return False
    if answer is not None:  # the stop answers the run's BenchResult
        yield Log(
            f"Asked to stop run {bench_result_id}: the service reports it {answer.state}", logging.WARNING
        )
    return True
