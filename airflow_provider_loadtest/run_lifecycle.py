"""One run lifecycle for every task that watches a load test: wait, judge, save, verdict, and when to stop.

``RunScenarioOperator`` (which starts the run) and ``LoadTestRunSensor`` (which waits for one started
elsewhere) are two front doors to the same lifecycle; this mixin holds everything after "we have a run":

- **wait** on the worker (``watch_run`` driven by the hook) or deferred to the triggerer
  (``LoadTestRunTrigger``), with the task's ``timeout``/``execution_timeout`` as the watch's deadline;
- **judge** the ended run: its state, the threshold-alarm gate, the metric budgets and regression bounds;
- **save** the JUnit XML and PDF before the verdict, and describe the outlet assets' events;
- **stop** a run only when someone or something decided it should end (``decisions.stops``): never
  because the process watching it went away. A wait the triggerer cannot do for its own reasons (a
  connection it cannot read, a trigger that fails to load) is handed back to a worker, never dropped.

Imported at DAG-parse time by the operator and sensor modules: everything heavy loads inside methods.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, NoReturn, TypeVar, cast

from airflow_provider_loadtest.decisions.run_record import positive_seconds, stop_hint, verdict_is_final
from airflow_provider_loadtest.decisions.runs import check_gate_severity, is_terminal
from airflow_provider_loadtest.decisions.stops import StopCause, StopDecision, decision, explain
from airflow_provider_loadtest.links.report import LoadTestReportLink
from airflow_provider_loadtest.operators.common import LoadTestHookMixin

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath

    from airflow_provider_loadtest.decisions.gate import Baseline, GateRow, GateSpec, Unreadable, Verdict
    from airflow_provider_loadtest.decisions.history import GateHistory, SeriesHistory, SeriesKey
    from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary
    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.transactions import TransactionGate
    from airflow_provider_loadtest.decisions.watch import RunOutcome, WatchOptions

R = TypeVar("R")

#: How long ``on_kill`` may spend asking Airflow why the task is being ended, and then stopping the run:
#: Airflow's task supervisor escalates to SIGKILL 5 s after its SIGTERM.
KILL_QUERY_S = 1.5
KILL_STOP_S = 3.0


@dataclass(frozen=True)
class _Kill:
    """What ``on_kill`` found: the decision to end the run (``cause``), or ``None`` for "the watcher is
    going away, the run is not to be stopped"."""

    cause: StopCause | None
    at: float
    detail: str


class WorkerLeaving(BaseException):
    """Raised by ``on_kill`` into the wait it interrupts, so the wait ends now. A ``BaseException``, like
    the ``KeyboardInterrupt`` it stands for: no ``except Exception`` on the way (an HTTP client's retry,
    a generator's error handling) may swallow it; ``_watch_here`` turns it into the task's failure."""


def _in_thread(fn: Callable[[], Any], seconds: float) -> tuple[bool, Any]:
    """Run ``fn`` in a daemon thread, waiting at most ``seconds``: ``(True, result)`` or ``(False, why)``.

    ``on_kill`` runs in a signal handler on the task's main thread, which may have been interrupted while
    holding the lock of Airflow's channel to its supervisor (or of the HTTP pool): calling them from that
    thread could deadlock, so the calls go through a thread of their own, bounded.
    """
    box: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            box.append((True, fn()))
        except Exception as exc:
            box.append((False, f"{type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=target, name="loadtest-on-kill", daemon=True)
    thread.start()
    thread.join(seconds)
    return box[0] if box else (False, f"no answer within {seconds:g} s")


def task_instance_state(ti: Any) -> tuple[bool, Any]:
    """The task instance's state as the API server sees it now: ``(readable, state)``.

    Through the Task SDK's supervisor channel (``RuntimeTaskInstance.get_task_states``), which works on a
    worker and, from a thread, in the triggerer.
    """
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        map_index = getattr(ti, "map_index", -1)
        map_index = map_index if isinstance(map_index, int) else -1
        states = RuntimeTaskInstance.get_task_states(
            dag_id=ti.dag_id,
            task_ids=[ti.task_id],
            run_ids=[ti.run_id],
            map_index=map_index if map_index >= 0 else None,
        )
        key = ti.task_id if map_index < 0 else f"{ti.task_id}_{map_index}"
        by_task = states.get(ti.run_id)
        if not isinstance(by_task, dict) or key not in by_task:
            return False, "the task instance was not found"
        return True, by_task[key]
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"


class RunLifecycle(LoadTestHookMixin):
    """Mixin for a ``BaseOperator`` that watches a run: see the module docstring.

    The front door sets the attributes below (``_init_watch`` checks and sets the shared ones), finds its
    run, calls ``_adopt`` and then ``_wait_for``. It may override ``_record_stop`` (where a stop decision
    is remembered) and ``_store_holds`` (whether a retry could find the run).
    """

    check_interval: float
    fail_on_alarm_severity: str | None
    stop_on_alarm: bool
    deferrable: bool
    restart_failed_runs: bool
    junit_destination: str | ObjectStoragePath | None
    report_pdf_destination: str | ObjectStoragePath | None
    report_export_config: Any
    metric_budgets: Any
    baseline: Any
    max_regression_pct: Any
    history_settings: Any
    transaction_budgets: Any
    transaction_max_regression_pct: Any
    log: Any
    task_id: str
    execution_timeout: timedelta | None

    def _init_watch(
        self,
        *,
        wait_for_completion: bool,
        check_interval: float,
        fail_on_alarm_severity: str | None,
        stop_on_alarm: bool,
        deferrable: bool,
        junit_destination: str | ObjectStoragePath | None,
        report_pdf_destination: str | ObjectStoragePath | None,
        report_export_config: Any,
        metric_budgets: Any,
        baseline: Any,
        max_regression_pct: Any,
        history_settings: Any = None,
        transaction_budgets: Any = None,
        transaction_max_regression_pct: Any = None,
    ) -> None:
        """Check and set what every front door shares; a ``ValueError`` names a bad setting at parse time."""
        gate = check_gate_severity(fail_on_alarm_severity)
        interval_s = positive_seconds("check_interval", check_interval)
        if stop_on_alarm and gate is None:
            raise ValueError(
                "stop_on_alarm needs fail_on_alarm_severity: which severity should stop the run?"
            )
        if not wait_for_completion and (junit_destination or report_pdf_destination):
            raise ValueError(
                "junit_destination and report_pdf_destination need wait_for_completion=True: "
                "the files exist once the run ended"
            )
        if any(v is not None for v in (metric_budgets, max_regression_pct, baseline, history_settings)):
            from airflow_provider_loadtest.decisions.gate import GateSpec  # only DAGs with a gate pay for it

            GateSpec.check_literal(metric_budgets, max_regression_pct, baseline)
            history_settings_of(history_settings, baseline, literal_only=True)
        if not wait_for_completion and (metric_budgets or max_regression_pct):
            raise ValueError("metric_budgets and max_regression_pct need wait_for_completion=True")
        if transaction_budgets is not None or transaction_max_regression_pct is not None:
            from airflow_provider_loadtest.decisions.transactions import TransactionGate

            TransactionGate.check_literal(transaction_budgets, transaction_max_regression_pct, baseline)
            if not wait_for_completion and (transaction_budgets or transaction_max_regression_pct):
                raise ValueError(
                    "transaction_budgets and transaction_max_regression_pct need wait_for_completion=True: "
                    "they are judged from the JTL files of the ended run"
                )
        self.check_interval = interval_s if interval_s is not None else 10.0
        self.fail_on_alarm_severity = gate
        self.stop_on_alarm = stop_on_alarm
        self.deferrable = deferrable
        self.junit_destination = junit_destination
        self.report_pdf_destination = report_pdf_destination
        self.report_export_config = report_export_config
        self.metric_budgets = metric_budgets
        self.baseline = baseline
        self.max_regression_pct = max_regression_pct
        self.history_settings = history_settings
        self.transaction_budgets = transaction_budgets
        self.transaction_max_regression_pct = transaction_max_regression_pct
        self._active_run: StartedRun | None = None
        self._store_works = True  # until the task finds it has no task state store it can rely on
        self._ti: Any = None
        self._kill: _Kill | None = None
        self._watching = False
        self._stopped: set[str] = set()  # runs this process decided to stop (one stop per decision)
        self._decided: dict[str, StopDecision] = {}  # ... and why
        self._stop_sent: set[str] = set()  # ... and whose stop call the service accepted

    # --- waiting ---------------------------------------------------------------------------------

    def _adopt(self, context: Context, run: StartedRun) -> StartedRun:
        """This task now watches ``run``: show its report link and remember it for ``on_kill``."""
        from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY

        self._active_run = run
        ti = _context_get(context, "ti")
        if ti is not None:
            ti.xcom_push(key=RUN_RECORD_KEY, value=run.to_xcom())
        LoadTestReportLink.publish(context, run.report_url)
        return run

    def _wait_for(self, context: Context, run: StartedRun, known_state: str | None) -> dict[str, Any]:
        """Wait for ``run`` (here or deferred; ``known_state`` terminal: judge it at once) and give the
        task's result or raise its failure."""
        options = self._watch_options(context, run)
        if self.deferrable and (known_state is None or not is_terminal(known_state)):
            from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger

            self.log.info(
                "Deferring: the triggerer watches run %s, freeing this worker slot", run.bench_result_id
            )
            self.defer(  # type: ignore[attr-defined]
                trigger=LoadTestRunTrigger(
                    loadtest_conn_id=self.loadtest_conn_id,
                    run_record=run.to_xcom(),
                    options=options.to_json(),
                    started_at=run.started_at,
                    stops_on_kill=self._may_stop("marked_failed"),
                ),
                method_name="execute_complete",
            )
        return self._finish(context, run, self._watch_here(run, options))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: the same verdict as the sync path. A wait the triggerer
        could not do (``handback``) goes on here, on the worker."""
        from airflow_provider_loadtest.decisions.runs import StartedRun
        from airflow_provider_loadtest.decisions.watch import RunOutcome

        run = StartedRun.from_xcom(event["run"])
        self._ti = _context_get(context, "ti")
        self._active_run = run
        LoadTestReportLink.publish(context, run.report_url)  # this process computes the link at task end
        self._store_holds(context, run)
        status = event.get("status")
        if status == "handback":
            return self._watch_after_handback(context, run, str(event.get("message")))
        if status != "done":
            raise self._wait_ended_without_verdict(
                run,
                f"watching it in the triggerer failed: {event.get('message')}",
                never_succeeds=bool(event.get("never_succeeds")),
            )
        outcome = RunOutcome.from_json(event["outcome"])
        self._remember_watch_stop(outcome)
        return self._finish(context, run, outcome)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A trigger that failed in the triggerer itself (it could not be loaded or crashed: Airflow resumes
        the task only to fail it) must not leave the run unwatched: the worker takes the wait over."""
        from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR

        kwargs = next_kwargs or {}
        error = kwargs.get("error")
        if next_method != TRIGGER_FAIL_REPR or str(getattr(error, "value", error)) == "Trigger timeout":
            return super().resume_execution(next_method, next_kwargs, context)  # type: ignore[misc]
        record = self._run_to_take_back(context)
        if record is None:
            return super().resume_execution(next_method, next_kwargs, context)  # type: ignore[misc]
        from airflow_provider_loadtest.decisions.runs import StartedRun

        run = self._adopt(context, StartedRun.from_xcom(record))
        self._store_holds(context, run)
        return self._watch_after_handback(context, run, f"the trigger failed in the triggerer: {error}")

    def _run_to_take_back(self, context: Context) -> dict[str, Any] | None:
        """The run a failed trigger was watching, from what this task recorded (XCom)."""
        from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY

        ti = _context_get(context, "ti")
        if ti is None:
            return None
        try:
            record = ti.xcom_pull(task_ids=self.task_id, key=RUN_RECORD_KEY, map_indexes=ti.map_index)
        except Exception:
            return None
        return record if isinstance(record, dict) and record.get("bench_result_id") else None

    def _watch_after_handback(self, context: Context, run: StartedRun, why: str) -> dict[str, Any]:
        self.log.warning(
            "The triggerer could not watch run %s (%s): watching it on this worker instead",
            run.bench_result_id,
            why,
        )
        return self._finish(context, run, self._watch_here(run, self._watch_options(context, run)))

    def _watch_options(self, context: Context, run: StartedRun) -> WatchOptions:
        """The wait's bounds. Deferred tasks carry their own deadline: Airflow's deferral timeout
        would skip ``execute_complete`` and leave the run going."""
        from airflow_provider_loadtest.decisions.watch import WatchOptions

        deadlines = []
        run_timeout = self._run_timeout_s()
        if run_timeout is not None:
            deadlines.append(run.started_at + run_timeout)
        if self.execution_timeout is not None:
            ti = _context_get(context, "ti")
            task_start = getattr(ti, "start_date", None)
            begun = task_start.timestamp() if task_start is not None else time.time()
            deadlines.append(begun + self.execution_timeout.total_seconds())
        return WatchOptions(
            check_interval_s=self.check_interval,
            deadline=min(deadlines) if deadlines else None,
            fail_on_alarm_severity=self.fail_on_alarm_severity,
            stop_on_alarm=self.stop_on_alarm,
            log_every_s=max(60.0, self.check_interval),
            stop_on_timeout=self._may_stop("timeout"),
        )

    def _run_timeout_s(self) -> float | None:
        """The longest wait for the run from its start (the operator's ``timeout``); ``None``: no bound."""
        return None

    def _watch_here(self, run: StartedRun, options: WatchOptions) -> RunOutcome:
        """Wait on this worker.

        The run is stopped only for a decision: the watch's own deadline or gate, ``execution_timeout``,
        or a person ending the task (``on_kill``). A worker going away, an API outage or any other
        failure of the wait leaves it going for a retry to re-attach to.
        """
        from airflow_provider_loadtest.api.errors import LoadTestApiError
        from airflow_provider_loadtest.compat import (
            AirflowFailException,
            AirflowTaskTimeout,
        )
        from airflow_provider_loadtest.decisions.watch import watch_run

        self._raise_if_killed(run)
        self._watching = True
        try:
            outcome = self.hook.drive(
                self._recording_stops(watch_run(run.bench_result_id, options, started_at=run.started_at)),
                self.log,
            )
        except LoadTestApiError as exc:
            raise self._wait_ended_without_verdict(
                run, f"the status API failed: {exc}", never_succeeds=exc.never_succeeds
            ) from exc
        except AirflowTaskTimeout as exc:
            if not self._may_stop("timeout"):
                raise AirflowFailException(
                    f"The task's execution_timeout passed while run {run.bench_result_id} went; it was left "
                    "going (this task did not start it)."
                ) from exc
            stop = decision(run.bench_result_id, "timeout", time.time(), "execution_timeout")
            stopped = self._stop_for(run, stop, bound_s=None)
            raise AirflowFailException(
                f"Run {run.bench_result_id} was still going when the task's execution_timeout passed; "
                + ("it was stopped." if stopped else "stopping it failed: stop it in the web UI.")
            ) from exc
        except WorkerLeaving as exc:
            raise self._after_kill(run) from exc
        except Exception as exc:
            if self._kill is not None:  # on_kill decided while the wait unwound
                raise self._after_kill(run) from exc
            raise self._wait_ended_without_verdict(
                run, f"the wait failed ({type(exc).__name__}: {exc})", never_succeeds=False
            ) from exc
        except BaseException:
            # KeyboardInterrupt, SystemExit: the process is going away; no decision about the run.
            self.log.warning("Stopped watching run %s; it is left going", run.bench_result_id)
            raise
        finally:
            self._watching = False
        self._remember_watch_stop(outcome)
        if self._kill is not None and self._kill.cause is not None:
            raise self._after_kill(run)
        return outcome

    def _wait_ended_without_verdict(self, run: StartedRun, why: str, *, never_succeeds: bool) -> Exception:
        """The failure of a wait that ended with the run possibly still going: say how to stop it."""
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

        hint = stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id)
        if self._store_works and not never_succeeds:
            return AirflowException(
                f"The wait for run {run.bench_result_id} ended without a verdict: {why}. {hint} "
                "A retry of this task re-attaches to it."
            )
        return AirflowFailException(
            f"The wait for run {run.bench_result_id} ended without a verdict: {why}. {hint} Not retried: "
            + ("a retry would get the same answer." if never_succeeds else "a retry could not find this run.")
        )

    # --- ending the task: who may stop the run ---------------------------------------------------

    def _may_stop(self, cause: StopCause) -> bool:
        """Whether this task stops a run for ``cause``. The operator started its run: every decision
        stops it. A sensor overrides this: it stops only what it was asked to."""
        return True

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
        if isinstance(sys.exc_info()[1], AirflowTaskTimeout):
            # Airflow calls on_kill inside its ``except AirflowTaskTimeout``: the task's own bound.
            cause, detail = "timeout", "execution_timeout"
        else:
            readable, state = False, "no task instance"
            ti = self._ti
            if ti is not None:
                answered, answer = _in_thread(lambda: task_instance_state(ti), KILL_QUERY_S)
                readable, state = answer if answered else (False, answer)
            cause = cause_on_worker(state, readable=readable)
            detail = f"task instance state {state}" if readable else f"its state could not be read: {state}"
        self._kill = _Kill(cause, time.time(), detail)
        run = self._active_run
        if cause is None:
            if run is not None:
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
                ok, value = False, f"{type(exc).__name__}: {exc}"
        else:
            ok, value = _in_thread(record_then_stop, bound_s)
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

    def _record_stop(self, stop: StopDecision) -> bool:
        """Remember ``stop`` where a retry finds it; ``False`` when it could not be. The operator writes it
        into its run record; a front door without a record has nothing to keep consistent."""
        return True

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

    def _store_holds(self, context: Context, run: StartedRun) -> None:
        """After a deferral (a new process): can a retry find ``run``? The operator checks its store."""
        self._store_works = True

    # --- the verdict ---------------------------------------------------------------------------

    def _recorded_stop(self) -> StopDecision | None:
        """The stop decision a retry found for its run (the operator's record), if any."""
        return None

    def _finish(self, context: Context, run: StartedRun, outcome: RunOutcome) -> dict[str, Any]:
        """Save the files, then succeed or fail. The run record stays: a retry takes this verdict."""
        if is_terminal(outcome.state):
            self._active_run = None  # nothing left to stop, whatever ends this process from here
        stop = self._recorded_stop()
        if stop is not None and outcome.state == "ABORTED" and stop.bench_result_id == run.bench_result_id:
            outcome = replace(
                outcome,
                reason="stopped_here",
                message=f"Run {run.bench_result_id} ended ABORTED: {explain(stop)}",
            )
        result = {**run.to_xcom(), **outcome.summary()}
        result.pop("summary_metrics", None)
        verdict = self._check_gate(context, run, outcome)
        if verdict is not None:
            result["gate"] = [row.to_xcom() for row in verdict.rows]
        result.update(self._save_files(context, run, must_succeed=outcome.succeeded))
        passed = outcome.succeeded and (verdict is None or verdict.passed)
        self._describe_outlet_events(context, result, passed, verdict)
        self._active_run = None
        ti = _context_get(context, "ti")
        if passed:
            if verdict is not None and ti is not None:
                from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, Baseline

                baseline = Baseline(run.bench_result_id, verdict.metrics, transactions=verdict.transactions)
                ti.xcom_push(key=BASELINE_XCOM_KEY, value=baseline.to_xcom())
                _push_history(ti, verdict)
            self.log.info("%s in %.0f s", outcome.message, outcome.duration_s)
            return result
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

        if ti is not None:
            ti.xcom_push(key="return_value", value=result)
        report = f" Report: {run.report_url}" if run.report_url else ""
        if outcome.succeeded and verdict is not None:
            # The run FINISHED and its values are what they are: a retry would reach the same verdict.
            # Its night is remembered too (the history's rules keep a failing night out of the values
            # judged against, and count it towards a change that persists); a run that did not finish
            # leaves the history as it was.
            if ti is not None:
                _push_history(ti, verdict)
            raise AirflowFailException(f"{verdict.message()}.{report}")
        final = verdict_is_final(
            reason=outcome.reason,
            state=outcome.state,
            restart_failed_runs=getattr(self, "restart_failed_runs", False),
            store_works=self._store_works,
        )
        raise (AirflowFailException if final else AirflowException)(f"{outcome.message}.{report}")

    # --- the quality gate ----------------------------------------------------------------------

    def _gate_spec(self, context: Context | None = None) -> GateSpec:
        """The rendered gate settings, checked before the run starts (templates render late). With the
        ``context``, also the DAG run's acceptance of a change (``loadtest_accept_change``): a typo in it
        fails before anything starts, not after the load test."""
        from airflow_provider_loadtest.decisions.gate import GateSpec

        try:
            spec = GateSpec.parse(
                self.metric_budgets,
                self.max_regression_pct,
                self.baseline,
                history_settings_of(self.history_settings, self.baseline),
            )
            self._transaction_gate(spec)
            if context is not None:
                self._gate_accepted(context, spec)
        except ValueError as exc:
            from airflow_provider_loadtest.compat import AirflowFailException

            raise AirflowFailException(str(exc)) from exc
        return spec

    def _transaction_gate(self, spec: GateSpec) -> TransactionGate:
        """The rendered ``transaction_budgets`` and ``transaction_max_regression_pct``, checked against
        the task's baseline (``ValueError`` names what is wrong)."""
        from airflow_provider_loadtest.decisions.transactions import TransactionGate

        return TransactionGate.parse(
            self.transaction_budgets, self.transaction_max_regression_pct, spec.baseline
        )

    def _gate_accepted(self, context: Context, spec: GateSpec) -> frozenset[str]:
        """The gated metrics whose change a person accepted as the new normal for this DAG run
        (``decisions.history.accepted_metrics``), for the run and its transactions alike; only
        ``baseline="history"`` has a normal to move. ``ValueError`` for a value that does not read:
        a typo must not pass a regression."""
        from airflow_provider_loadtest.decisions.history import HISTORY, accepted_metrics

        if spec.baseline != HISTORY:
            return frozenset()
        gated = dict.fromkeys([*spec.metric_ids, *self._transaction_gate(spec).metric_ids])
        return accepted_metrics(dag_run_conf(context), self.task_id, gated)

    def _check_gate(self, context: Context, run: StartedRun, outcome: RunOutcome) -> Verdict | None:
        """Fetch the values and judge them, once the run ended. After a failed run this is best
        effort (the task fails for the run's own reason); after a FINISHED one a failed fetch fails
        the task, and a retry re-attaches to the run (kept in its record) and judges again."""
        spec = self._gate_spec()
        transactions = self._transaction_gate(spec)
        if not (spec.active or transactions.active) or not is_terminal(outcome.state):
            return None
        from airflow_provider_loadtest.decisions.gate import evaluate
        from airflow_provider_loadtest.decisions.history import HISTORY

        baseline, note = self._gate_baseline(context, spec.baseline, run)
        history, accepted = None, frozenset[str]()
        if spec.baseline == HISTORY:
            history = self._gate_history(context)
            try:
                accepted = self._gate_accepted(context, spec)
            except ValueError as exc:
                from airflow_provider_loadtest.compat import AirflowFailException

                raise AirflowFailException(str(exc)) from exc
            bounded = {*spec.max_regression_pct, *transactions.bounded_metric_ids}
            moved = sorted(accepted & bounded)  # a budget has no normal to move
            if moved:
                self.log.warning(
                    "The DAG run accepts the change of %s as the new normal (loadtest_accept_change): "
                    "not judged against the history tonight, which restarts from this run",
                    ", ".join(moved),
                )
        try:
            rows, series, text = self._judge_transactions(
                run, transactions, spec, baseline, history, accepted, must=outcome.succeeded
            )
            steps = evaluate(
                spec,
                run.bench_result_id,
                known_metrics=run.summary_metrics or {},
                baseline=baseline,
                baseline_note=note,
                history=history,
                accepted=accepted,
                transaction_rows=rows,
                transaction_history=series,
                transactions_log=text,
            )
            return self.hook.drive(steps, self.log)
        except Exception as exc:
            if outcome.succeeded:
                raise
            self.log.error("Could not check the quality gate of run %s: %s", run.bench_result_id, exc)
            return None

    # --- the gate per transaction, from the run's JTL files ---------------------------------------

    def _judge_transactions(
        self,
        run: StartedRun,
        gate: TransactionGate,
        spec: GateSpec,
        baseline: Baseline | None,
        history: GateHistory | None,
        accepted: frozenset[str],
        *,
        must: bool,
    ) -> tuple[list[GateRow], dict[SeriesKey, SeriesHistory], str | None]:
        """Read the run's JTL files once and judge each transaction (``decisions.transactions``); also
        the slowest transactions for the log, named by a budget or not. A run without JTL files, or one
        that does not read, fails every transaction row as not measured. A task without a transaction
        gate reads no JTL file: a long run's files can be hundreds of megabytes, not worth a log line."""
        from airflow_provider_loadtest.decisions.gate import Unreadable
        from airflow_provider_loadtest.decisions.history import HISTORY
        from airflow_provider_loadtest.decisions.transactions import (
            judge_transaction_gate,
            needs_baseline_run,
            slowest_text,
        )

        if not gate.active:
            return [], {}, None
        summary = self._transaction_figures(run.bench_result_id, gate, must=must)
        if isinstance(summary, Unreadable):
            text = None if gate.active else f"The slowest transactions are not listed: {summary.reason}"
        else:
            text = slowest_text(summary)
        known: Mapping[str, Mapping[str, object]] | Unreadable | None = None
        baseline_summary: JtlSummary | Unreadable | None = None
        if gate.bounds and baseline is not None and spec.baseline != HISTORY:
            if baseline.unreadable is not None:
                known = Unreadable(baseline.unreadable)
            else:
                known = baseline.transactions
                if not isinstance(summary, Unreadable) and needs_baseline_run(gate, summary, known):
                    baseline_summary = self._transaction_figures(baseline.bench_result_id, gate, must=must)
        rows, series = judge_transaction_gate(
            gate,
            summary,
            baseline=spec.baseline,
            baseline_values=known,
            baseline_summary=baseline_summary,
            history=history,
            accepted=accepted,
            settings=spec.history,
        )
        return rows, series, text

    def _transaction_figures(
        self, bench_result_id: str, gate: TransactionGate, *, must: bool
    ) -> JtlSummary | Unreadable:
        """A run's JTL figures, or why there are none. A failure a retry could get past (the service
        or the network) fails the task when the run FINISHED and transactions are gated, so that a
        retry judges again; anything else is said, and the transaction rows fail as not measured."""
        from airflow_provider_loadtest.api.errors import LoadTestApiError
        from airflow_provider_loadtest.decisions.gate import Unreadable

        try:
            return self._read_jtl(bench_result_id, gate.metric_ids)
        except ValueError as exc:  # a JtlError, or a listed name no download call may carry
            return Unreadable(str(exc))
        except LoadTestApiError as exc:
            if must and gate.active and not exc.never_succeeds:
                raise
            return Unreadable(f"the JTL files of run {bench_result_id} could not be downloaded: {exc}")

    def _read_jtl(self, bench_result_id: str, metric_ids: Iterable[str]) -> JtlSummary:
        """Every JTL file of a run (one per load generator) streamed from the service into one reader:
        memory holds per-transaction figures, never a file (``decisions.jtl``). ``JtlError`` for a run
        without JTL files, a file that does not read or a download that came back empty."""
        from airflow_provider_loadtest.api import endpoints
        from airflow_provider_loadtest.decisions.jtl import JtlError, JtlReader, jtl_files

        began = time.monotonic()
        names = jtl_files(self.hook.list_run_files(bench_result_id), bench_result_id)
        reader = JtlReader(metric_ids)
        size = 0
        for name in names:
            part = reader.file(name)
            self.hook.call(endpoints.download_run_file(bench_result_id, name), sink=cast("BinaryIO", part))
            if part.tell() == 0:
                raise JtlError(
                    f"The download of JTL file {name!r} of run {bench_result_id} was empty (0 bytes): "
                    "a JTL file holds at least its header line, so the download was cut"
                )
            size += part.tell()
            part.close()
        summary = reader.summary()
        self.log.info(
            "Read %d samples of %d transactions from %d JTL file(s) of run %s (%.1f MB) in %.1f s",
            summary.samples,
            len(summary.transactions),
            len(names),
            bench_result_id,
            size / 1e6,
            time.monotonic() - began,
        )
        return summary

    def _gate_history(self, context: Context) -> GateHistory | None:
        """The history the latest earlier DAG run of this task left in XCom (``baseline="history"``),
        read through Airflow like the ``"previous"`` baseline. Its own earlier tries' XComs are cleared
        by Airflow when a try starts, so a retry judges against the same history as the first try.
        ``None`` (no task instance to read with) fails every bounded metric as not measured."""
        from airflow_provider_loadtest.decisions.history import HISTORY_XCOM_KEY, GateHistory

        ti = _context_get(context, "ti")
        if ti is None:
            return None
        return GateHistory.from_xcom(
            ti.xcom_pull(
                task_ids=self.task_id,
                key=HISTORY_XCOM_KEY,
                include_prior_dates=True,
                map_indexes=getattr(ti, "map_index", -1),
            )
        )

    def _gate_baseline(
        self, context: Context, wanted: str | None, run: StartedRun
    ) -> tuple[Baseline | None, str | None]:
        """The baseline run: pinned, or the one the latest earlier passing DAG run of this task left
        in XCom (only passing runs leave one), read through Airflow, never a store of ours."""
        from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, PREVIOUS, Baseline
        from airflow_provider_loadtest.decisions.history import HISTORY

        if wanted is None or wanted == HISTORY:
            return None, None
        if wanted != PREVIOUS:
            return Baseline(wanted, {}), None
        ti = _context_get(context, "ti")
        if ti is None:
            return None, "no task instance to read earlier runs from"
        found = Baseline.from_xcom(
            ti.xcom_pull(
                task_ids=self.task_id,
                key=BASELINE_XCOM_KEY,
                include_prior_dates=True,
                map_indexes=getattr(ti, "map_index", -1),
            )
        )
        if found is None or found.bench_result_id == run.bench_result_id:
            return None, "no baseline yet (no earlier run of this task passed)"
        return found, None

    def _describe_outlet_events(
        self, context: Context, result: dict[str, Any], passed: bool, verdict: Verdict | None
    ) -> None:
        """Put the run and its verdict in the ``extra`` of each outlet asset's event (Airflow emits
        the events only if the task succeeds)."""
        outlets = list(getattr(self, "outlets", None) or ())
        events = _context_get(context, "outlet_events") if outlets else None
        if events is None:
            return
        from airflow_provider_loadtest.decisions.gate import asset_extra

        extra = asset_extra(result, passed=passed, verdict=verdict)
        for asset in outlets:
            events[asset].extra.update(extra)

    # --- the files -------------------------------------------------------------------------------

    def _check_file_settings(self) -> None:
        """Refuse a bad destination or export setting now, not after a two-hour load test."""
        if not (self.junit_destination or self.report_pdf_destination):
            return
        from airflow_provider_loadtest.decisions.report_pdf import export_config
        from airflow_provider_loadtest.hooks.artifacts import storage_path

        for destination in (self.junit_destination, self.report_pdf_destination):
            if destination:
                storage_path(destination)
        export_config(self.report_export_config)

    def _save_files(self, context: Context, run: StartedRun, *, must_succeed: bool) -> dict[str, Any]:
        """Save the JUnit XML and the PDF the task asked for, before the run record is forgotten.

        After a successful run a file that cannot be saved fails the task, and its retry re-attaches
        to the FINISHED run to try again. Where it could not re-attach (no task state store before
        Airflow 3.3), the task fails without retries rather than start a second load test. After a
        failed run saving is best effort: the task then fails for the run's own reason.
        """
        wanted: list[tuple[str, Any, Callable[[], bytes]]] = [
            (
                "junit",
                self.junit_destination,
                lambda: self.hook.get_junit_report(run.bench_result_id).encode(),
            ),
            (
                "report_pdf",
                self.report_pdf_destination,
                lambda: self.hook.export_report_pdf(
                    run.report_id, run.bench_result_id, config=self.report_export_config
                ),
            ),
        ]
        from airflow_provider_loadtest.hooks.artifacts import write_atomically

        saved: dict[str, Any] = {}
        for key, destination, fetch in wanted:
            if not destination:
                continue
            try:
                written = write_atomically(destination, fetch())
            except Exception as exc:
                if must_succeed:
                    self._fail_saving(run, key, exc)
                self.log.error("Could not save the %s of run %s: %s", key, run.bench_result_id, exc)
                continue
            except BaseException as exc:  # a timeout or kill while the run's failure is pending
                if must_succeed:
                    raise
                self.log.error("Stopped saving the files of run %s: %s", run.bench_result_id, exc)
                break
            self.log.info(
                "Saved the %s of run %s to %s (%d bytes)",
                key,
                run.bench_result_id,
                written.path,
                written.size,
            )
            saved[key] = written.to_xcom()
        return saved

    def _fail_saving(self, run: StartedRun, key: str, exc: Exception) -> NoReturn:
        if self._store_works:
            raise exc  # the retry re-attaches to the FINISHED run and saves again
        from airflow_provider_loadtest.compat import AirflowFailException

        raise AirflowFailException(
            f"Run {run.bench_result_id} FINISHED but its {key} could not be saved: {exc}. Not retried: "
            "without a working task state store a retry could not re-attach to this run and would "
            "start a second load test."
        ) from exc


@contextmanager
def refusing_what_cannot_succeed() -> Iterator[None]:
    """Fail without retries on what a retry would meet again: a refused key, an unknown scenario or
    template, an id or setting that fails validation once rendered."""
    from airflow_provider_loadtest.api.errors import (
        AmbiguousTemplateError,
        LoadTestApiError,
        TemplateNotFoundError,
    )
    from airflow_provider_loadtest.compat import AirflowFailException

    try:
        yield
    except LoadTestApiError as exc:
        if exc.never_succeeds:
            raise AirflowFailException(f"{exc} (not retried: a retry would get the same answer)") from exc
        raise
    except (ValueError, TemplateNotFoundError, AmbiguousTemplateError) as exc:
        raise AirflowFailException(f"{exc} (not retried: a retry would meet the same problem)") from exc


_NOTHING: Any = object()


def relay(
    steps: Generator[Any, Any, R],
    *,
    on_action: Callable[[Any], None] | None = None,
    first_answer: Any = _NOTHING,
) -> Generator[Any, Any, R]:
    """Pass a sans-I/O generator's actions through to a driver, answers and errors back, unchanged but
    for: ``on_action`` sees each action first; ``first_answer`` answers its first request (a state read
    a moment ago) without sending it."""
    from airflow_provider_loadtest.api.errors import LoadTestApiError

    send: Any = None
    error: LoadTestApiError | None = None
    if first_answer is not _NOTHING:
        try:
            steps.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        send = first_answer
    while True:
        try:
            action = steps.throw(error) if error is not None else steps.send(send)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        send, error = None, None
        if on_action is not None:
            on_action(action)
        try:
            send = yield action
        except LoadTestApiError as exc:
            error = exc


def _context_get(context: Any, key: str) -> Any:
    return context.get(key) if hasattr(context, "get") else None


def dag_run_conf(context: Any) -> Mapping[str, Any]:
    """The DAG run's conf as far as the gate reads it (``loadtest_accept_change``).

    Airflow 3.1 to 3.3 give a task both ``dag_run.conf`` (what the person triggered the run with) and
    ``params`` (the DAG's params, overridden by the conf unless ``[core] dag_run_conf_overrides_params``
    is off). The conf is read first; the params serve when the conf does not name the key, so a DAG
    may declare ``loadtest_accept_change`` as a ``Param`` (a checkbox in the trigger form).
    """
    from airflow_provider_loadtest.decisions.history import ACCEPT_CHANGE

    conf = getattr(_context_get(context, "dag_run"), "conf", None)
    conf = conf if isinstance(conf, Mapping) else {}
    if ACCEPT_CHANGE in conf:
        return conf
    params = _context_get(context, "params")
    if isinstance(params, Mapping) and ACCEPT_CHANGE in params:
        return {ACCEPT_CHANGE: params[ACCEPT_CHANGE]}
    return conf


def _push_history(ti: Any, verdict: Verdict) -> None:
    """Leave the next night's history (``baseline="history"``) in XCom beside the verdict."""
    if verdict.history is None:
        return
    from airflow_provider_loadtest.decisions.history import HISTORY_XCOM_KEY

    ti.xcom_push(key=HISTORY_XCOM_KEY, value=verdict.history.to_xcom())


def history_settings_of(value: object, baseline: object, *, literal_only: bool = False) -> dict[str, Any]:
    """``history_settings`` as keyword arguments of ``HistorySettings.parse``, checked; ``ValueError``
    names what is wrong.

    Rendered templates are strings: a number in one (``"20"``) is read as the number. ``literal_only``
    (at DAG-parse time) skips what is still a template; with a templated entry only the names are
    checked then, the values once rendered.
    """
    from airflow_provider_loadtest.api.validation import is_templated
    from airflow_provider_loadtest.decisions.history import HISTORY, HistorySettings

    if not value or (literal_only and is_templated(value)):
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"history_settings must be a mapping of setting name to value, got {type(value).__name__}"
        )
    if baseline != HISTORY and not (literal_only and is_templated(baseline)):
        raise ValueError(f"history_settings apply to baseline='history', not baseline={baseline!r}")
    names = [name for name in value if not (literal_only and is_templated(name))]
    unknown = [name for name in names if name not in HistorySettings.__dataclass_fields__]
    if unknown:
        HistorySettings.parse(**{str(name): None for name in unknown})  # the error names them
    settings = {
        name: _number_of(setting)
        for name, setting in value.items()
        if not (literal_only and (is_templated(name) or is_templated(setting)))
    }
    if len(settings) == len(value):  # a setting still templated is checked with the others once rendered
        HistorySettings.parse(**settings)
    return settings


def _number_of(value: object) -> object:
    """A rendered template's number (``"20"``, ``"2.5"``) as the number; anything else as it is."""
    if not isinstance(value, str):
        return value
    for kind in (int, float):
        try:
            return kind(value.strip())
        except ValueError:
            continue
    return value
