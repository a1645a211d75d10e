"""Waiting for a run: on the worker (``watch_run`` driven by the hook) or deferred to the triggerer
(``LoadTestRunTrigger``), with the task's ``timeout``/``execution_timeout`` as the watch's deadline. A wait
the triggerer cannot do for its own reasons (a connection it cannot read, a trigger that fails to load)
is handed back to the worker, never dropped.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.decisions.run_record import stop_hint
from airflow_provider_loadtest.decisions.runs import is_terminal
from airflow_provider_loadtest.decisions.stops import decision
from airflow_provider_loadtest.lifecycle.base import LifecycleBase
from airflow_provider_loadtest.lifecycle.support import (
    WorkerLeaving,
    context_get,
    describe_error,
)
from airflow_provider_loadtest.links.report import LoadTestReportLink

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.watch import RunOutcome, WatchOptions


class Waiting(LifecycleBase):
    """Wait for the run here or in the triggerer; take the wait back from a triggerer that cannot do it."""

    def _adopt(self, context: Context, run: StartedRun) -> StartedRun:
        """This task now watches ``run``: show its report link and remember it for ``on_kill``."""
        from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY

        self._active_run = run
        ti = context_get(context, "ti")
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
        self._ti = context_get(context, "ti")
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

        ti = context_get(context, "ti")
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
            ti = context_get(context, "ti")
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
                run, f"the wait failed ({describe_error(exc)})", never_succeeds=False
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
