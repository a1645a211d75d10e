"""Who may stop a load test, as the worker sees it: ``on_kill`` asks Airflow why the task is being ended
and stops the run only for a decision (a person, the task's timeout, the gate), never because the
process watching it went away; a decision is recorded before its one stop call.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.decisions.run_record import stop_hint
from airflow_provider_loadtest.decisions.stops import StopCause, StopDecision, decision
from airflow_provider_loadtest.lifecycle import support
from airflow_provider_loadtest.lifecycle.base import LifecycleBase
from airflow_provider_loadtest.lifecycle.support import (
    KILL_STOP_S,
    Kill,
    R,
    WorkerLeaving,
    describe_error,
    in_thread,
    relay,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.watch import RunOutcome


class Stopping(LifecycleBase):
    """Stop a run only when someone or something decided it should end (``decisions.stops``)."""

    def on_kill(self) -> None:
        """Airflow is ending this task's process: stop the load test only if someone decided it should end.

        Airflow calls this when a person marks the task failed or successful or clears it, when its
        ``execution_timeout`` passes outside the wait, and equally when the worker shuts down or restarts
        (SIGTERM) or the task's heartbeat was lost to an outage. The task instance's state as the API
        server sees it tells which (``decisions.stops.cause_on_worker``); unreadable or ambiguous means
        "leave the run going": the next try re-attaches to it. While the task waits, the wait ends now
        (retryable when the worker is going away), instead of watching on until the worker is killed.
        """
        if self._kill is not None:  # a worker restart signals the task twice (its group, its supervisor)
            return
        from airflow_provider_loadtest.compat import AirflowTaskTimeout
        from airflow_provider_loadtest.decisions.stops import cause_on_worker

        cause: StopCause | None
        readable = True
        if isinstance(sys.exc_info()[1], AirflowTaskTimeout):
            # Airflow calls on_kill inside its ``except AirflowTaskTimeout``: the task's own bound.
            cause, detail = "timeout", "execution_timeout"
        else:
            readable, state = False, "no task instance"
            ti = self._ti
            if ti is not None:
                answered, answer = in_thread(lambda: support.task_instance_state(ti), support.KILL_QUERY_S)
                readable, state = answer if answered else (False, answer)
            cause = cause_on_worker(state, readable=readable)
            detail = f"task instance state {state}" if readable else f"its state could not be read: {state}"
        self._kill = Kill(cause, time.time(), detail)
        run = self._active_run
        if cause is None:
            if run is not None and not readable and self._may_stop("marked_failed"):
                self._unconfirmed_kill(run, detail)
            elif run is not None:
                self.log.warning(
                    "This task's process is being ended, but nobody decided to end run %s (%s): leaving it "
                    "going; the next try of this task re-attaches to it",
                    run.bench_result_id,
                    detail,
                )
            if self._watching and run is not None:
                raise WorkerLeaving(f"the task's process was ended by its infrastructure ({detail})")
            return
        if run is not None and self._may_stop(cause):
            self._stop_for(
                run, decision(run.bench_result_id, cause, self._kill.at, detail), bound_s=KILL_STOP_S
            )
        if self._watching and run is not None:
            raise WorkerLeaving(f"stopping: {decision(run.bench_result_id, cause, 0).why}")

    def _unconfirmed_kill(self, run: StartedRun, detail: str) -> None:
        """The task's process is being ended and its state could not be read: a person's mark-failed
        cannot be told from a worker going away. The run is left going (never stopped on a guess), said
        at ERROR with how to stop it, and a pending stop is left for the next try (``PendingStop``),
        bounded: Airflow kills the process seconds after its SIGTERM."""
        from airflow_provider_loadtest.decisions.stops import PendingStop

        self.log.error(
            "This task's process is being ended and its state could not be read (%s): if a person marked "
            "the task failed or successful, run %s was NOT stopped; if the worker is going away, the next "
            "try re-attaches to it. %s",
            detail,
            run.bench_result_id,
            stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id),
        )
        number = getattr(self._ti, "try_number", None)
        pending = PendingStop(
            run.bench_result_id,
            number if isinstance(number, int) and not isinstance(number, bool) else None,
            time.time(),
            f"its worker could not read its state: {detail}",
            run.report_url,
        )
        left, why = in_thread(lambda: support.write_pending_stop(pending), support.KILL_QUERY_S)
        if not left:
            self.log.error("Could not leave the pending stop of run %s: %s", run.bench_result_id, why)

    def _act_on_a_decision_during_the_start(self, run: StartedRun) -> None:
        """``on_kill`` came while the run was being started or looked up: a decision to end it is acted on
        now, whatever the mode. The worker going away is not: the wait goes on (deferred, or by a retry)."""
        if self._kill is not None and self._kill.cause is not None:
            self._raise_if_killed(run)

    def _raise_if_killed(self, run: StartedRun) -> None:
        """``on_kill`` came before the wait began (during the start): act on it now."""
        if self._kill is None:
            return
        if self._kill.cause is not None and self._may_stop(self._kill.cause):
            self._stop_for(
                run, decision(run.bench_result_id, self._kill.cause, self._kill.at, self._kill.detail)
            )
        if self._kill.cause is None:
            why = f"the task's process was ended by its infrastructure ({self._kill.detail})"
            raise self._left_going(run, why)
        raise self._after_kill(run)

    def _after_kill(self, run: StartedRun) -> Exception:
        from airflow_provider_loadtest.compat import AirflowFailException

        assert self._kill is not None  # noqa: S101 - callers check
        if self._kill.cause is None:
            return self._left_going(run, self._kill.detail)
        why = decision(run.bench_result_id, self._kill.cause, self._kill.at).why
        if not self._may_stop(self._kill.cause):
            after = "it was left going (this task did not start it)"
        elif run.bench_result_id in self._stop_sent:
            after = "it was stopped"
        else:
            hint = stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id)
            after = f"stopping it failed. {hint}"
        return AirflowFailException(f"The task was ended: {why}; run {run.bench_result_id}: {after}.")

    def _left_going(self, run: StartedRun, why: str) -> Exception:
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

        hint = stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id)
        decided = self._decided.get(run.bench_result_id)
        if decided is not None:
            # The task had decided to stop it (its timeout, the gate) and recorded why: a retry takes
            # that verdict, never a second run.
            return AirflowException(
                f"Stopped watching run {run.bench_result_id}: {why}. It was being stopped because "
                f"{decided.why}; a retry of this task takes that verdict. {hint}"
            )
        if self._store_works:
            return AirflowException(
                f"Stopped watching run {run.bench_result_id}: {why}. It was not stopped: a retry of this "
                f"task re-attaches to it. {hint}"
            )
        return AirflowFailException(
            f"Stopped watching run {run.bench_result_id}: {why}. It was not stopped. {hint} Not retried: "
            "without a working task state store a retry would start a second load test."
        )

    def _stop_for(self, run: StartedRun, stop: StopDecision, *, bound_s: float | None = KILL_STOP_S) -> bool:
        """Stop ``run`` for ``stop``: the decision is recorded first (a retry must know the ABORTED is
        ours), then one stop call; never twice for the same run in one process. ``bound_s`` bounds the
        whole (``on_kill`` has seconds before Airflow's SIGKILL).

        A decision that cannot be recorded still stops the run: a person's or the task's decision stands,
        and the next try has other evidence (a clear raises the DAG run's ``clear_number``; a timeout's
        failure is final, so there is no next try to mislead)."""
        if run.bench_result_id in self._stopped:
            return run.bench_result_id in self._stop_sent
        self._stopped.add(run.bench_result_id)
        self._decided[run.bench_result_id] = stop

        def record_then_stop() -> bool:
            if not self._record_stop(stop):
                self.log.warning(
                    "Could not record why run %s is stopped (%s); stopping it anyway",
                    run.bench_result_id,
                    stop.why,
                )
            self.log.warning("Stopping run %s: %s", run.bench_result_id, stop.why)
            self.hook.stop_run(run.bench_result_id)
            return True

        ok: bool
        value: Any
        if bound_s is None:
            try:
                ok, value = True, record_then_stop()
            except Exception as exc:
                ok, value = False, describe_error(exc)
        else:
            ok, value = in_thread(record_then_stop, bound_s)
        if not ok:
            self.log.error(
                "Could not stop run %s: %s. %s",
                run.bench_result_id,
                value,
                stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id),
            )
            return False
        self._stop_sent.add(run.bench_result_id)
        self.log.warning("Stopped run %s", run.bench_result_id)
        return True

    def _recording_stops(self, steps: Generator[Any, Any, R]) -> Generator[Any, Any, R]:
        """``steps`` (a watch), with each stop the watch decides (``Stopping``: its deadline, the gate)
        recorded before the stop call goes out, and remembered so no second stop follows it."""
        from airflow_provider_loadtest.decisions.watch import Stopping

        def record(action: Any) -> None:
            if not isinstance(action, Stopping):
                return
            stop = decision(action.bench_result_id, action.cause, time.time())
            self._stopped.add(stop.bench_result_id)
            self._decided[stop.bench_result_id] = stop
            if not self._record_stop(stop):
                self.log.warning("Could not record why run %s is stopped", stop.bench_result_id)

        return relay(steps, on_action=record)

    def _remember_watch_stop(self, outcome: RunOutcome) -> None:
        """The watch stopped the run itself (its deadline, the gate while running): record the decision so
        a retry names the cause instead of "aborted from outside"."""
        if not outcome.stopped or outcome.reason not in ("timeout", "alarm"):
            return
        if outcome.bench_result_id in self._decided:  # recorded before its stop (``_recording_stops``)
            return
        cause: StopCause = "timeout" if outcome.reason == "timeout" else "gate"
        self._stopped.add(outcome.bench_result_id)
        if not self._record_stop(decision(outcome.bench_result_id, cause, time.time())):
            self.log.warning("Could not record why run %s was stopped", outcome.bench_result_id)
