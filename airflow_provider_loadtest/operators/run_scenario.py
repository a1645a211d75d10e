"""``RunScenarioOperator``: start a load test, wait for it, gate on its alarms, never start it twice.

Imported by every DAG file that uses it, so at module level it imports only Airflow's base classes and
the package's cheap modules; the HTTP clients, the models and the trigger load when the task runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseOperator

from airflow_provider_loadtest.api.validation import validate_path_id
from airflow_provider_loadtest.compat import conf
from airflow_provider_loadtest.decisions.run_record import (
    RUN_RECORD_KEY,
    RunRecord,
    on_recorded_run,
    plan_try,
    positive_seconds,
    read_max_tries,
    read_try_number,
    stop_hint,
    uncertain_start_message,
    verdict_is_final,
)
from airflow_provider_loadtest.decisions.runs import check_gate_severity, is_terminal
from airflow_provider_loadtest.links.report import LoadTestReportLink
from airflow_provider_loadtest.operators.common import DEFAULT_CONN_ID, LoadTestHookMixin, check_literal_ids

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath

    from airflow_provider_loadtest.decisions.gate import Baseline, GateSpec, Verdict
    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.watch import RunOutcome, WatchOptions

__all__ = ["DEFAULT_CONN_ID", "RUN_RECORD_KEY", "RunScenarioOperator", "check_literal_ids"]


class RunScenarioOperator(LoadTestHookMixin, BaseOperator):
    """Start a load test of ``scenario_id``, wait until it ends, and fail the task when it went wrong.

    :param scenario_id: the scenario to run (last segment of its URL in the web UI).
    :param template_id: report template to use for the run.
    :param template_name: choose the template by name instead, from ``workspace_id``'s templates (exact
        match first, then ignoring case; no match or several matches fail the task before anything
        starts).
    :param workspace_id: the scenario's workspace; needed with ``template_name``. For the report link
        it is looked up when not given (the scenario's project, then that project's workspace, once
        per run); giving it skips those two calls.
    :param test_name: a name for this run in the service (e.g. ``"nightly {{ ds }}"``).
    :param properties: key/value properties passed to the run (newer servers).
    :param subscription_id: the subscription that pays for the run, for accounts with several
        (sent as the query parameter ``subscriptionId``).
    :param wait_for_completion: wait until the run ends (default). ``False`` returns once it started.
    :param check_interval: seconds between two polls of the run's state (the official clients use 10);
        a finite, positive number.
    :param timeout: longest wait for the run (seconds or ``timedelta``, finite and positive); past it
        the run is stopped and the task fails. ``execution_timeout`` also stops the run, in both modes.
    :param fail_on_alarm_severity: ``None``, ``"WARNING"`` or ``"CRITICAL"``: fail the task when a
        threshold alarm reaches this severity.
    :param stop_on_alarm: also check the alarms at each poll while the run goes, and stop the run as
        soon as the gate breaks (saves the rest of a doomed test).
    :param deferrable: wait in the triggerer instead of holding a worker slot.
    :param restart_failed_runs: opt in to a second (billed) load test: a run ending ERROR or ABORTED
        then fails the task with retries allowed, and a retry that finds it so starts a new run.
        ``False`` (default): that verdict is final, like a broken gate or a timeout. A run still going
        is always re-attached to, and a FINISHED one is never started again.

    A start is sent at most once per task instance across its tries (``decisions.run_record``): a try
    that finds an earlier start with unknown outcome, or whose own start's outcome is unknown, fails
    without retries rather than risk a second load test. Clearing the task starts a new run. Without
    Airflow 3.3's task state store, every failure after the start is final.
    :param junit_destination: save the run's JUnit XML here once it ended (absolute path, ``file://``
        or object-store URL such as ``s3://bucket/{{ ds }}/junit.xml``, or an ``ObjectStoragePath``),
        for downstream tasks and CI-style tools.
    :param report_pdf_destination: save the report as a PDF here once the run ended (same kinds of
        destination); see ``DownloadReportOperator`` for doing it as a separate task.
    :param report_export_config: PDF page settings (keys of the service's ``ExportReportConfig``).
    :param metric_budgets: the quality gate's budgets, ``{metric id: condition}`` such as
        ``{"RESPONSE_TIME_PERCENTILE_95": "<= 800", "ERRORS_PERCENT": "< 1"}`` (operators ``<``, ``<=``,
        ``>``, ``>=``; metric ids of the service's API, section 2.5). Checked once the run ended.
    :param baseline: the run to compare against: ``None``, ``"previous"`` (the run of the latest
        earlier DAG run of this task whose verdict passed, read from Airflow's XCom) or a bench
        result id (e.g. ``"{{ var.value.loadtest_baseline }}"``).
    :param max_regression_pct: ``{metric id: percent}``: how much worse than the baseline the run
        may be; "worse" follows the metric (``decisions.gate.METRIC_DIRECTIONS``). No baseline yet
        is not a failure: budgets only are checked.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    Files are written atomically, before the task's verdict. When the run succeeded, a file that
    cannot be saved fails the task (a retry re-attaches to the finished run, it does not start a new
    one); when the run failed, saving is best effort and never hides the run's failure.

    Returns (XCom ``return_value``) a dict: ``report_id``, ``bench_result_id``, ``project_id``,
    ``template_id``, ``workspace_id``, ``scenario_id``, ``test_name``, ``report_url``, ``started_at`` and,
    once waited for, ``state``, ``duration_s``, ``alarms``, ``metrics`` and ``stopped``, plus ``junit``
    and ``report_pdf`` (``{"path", "size"}``) for the files saved, and ``gate`` (one dict per gated
    metric: ``metric``, ``value``, ``passed``, ``budget``, ``baseline``, ``change_pct``) when a gate is
    set. With ``outlets`` (Airflow Assets) the asset event's ``extra`` carries the run and the verdict;
    Airflow emits asset events only when the task succeeds. On failure the same dict is pushed as XCom
    ``return_value`` before the task fails, so the alarms stay visible. The run is also pushed as XCom
    ``loadtest_run`` once started, when the task's **Load test report** link appears.
    """

    template_fields: Sequence[str] = (
        "scenario_id",
        "template_id",
        "template_name",
        "workspace_id",
        "test_name",
        "properties",
        "subscription_id",
        "junit_destination",
        "report_pdf_destination",
        "report_export_config",
        "metric_budgets",
        "baseline",
        "max_regression_pct",
    )
    template_fields_renderers = {
        "properties": "json",
        "report_export_config": "json",
        "metric_budgets": "json",
        "max_regression_pct": "json",
    }
    operator_extra_links = (LoadTestReportLink(),)
    ui_color = "#f4d35e"

    def __init__(
        self,
        *,
        scenario_id: str,
        template_id: str | None = None,
        template_name: str | None = None,
        workspace_id: str | None = None,
        test_name: str | None = None,
        properties: Mapping[str, str] | None = None,
        subscription_id: str | None = None,
        wait_for_completion: bool = True,
        check_interval: float = 10.0,
        timeout: float | timedelta | None = None,
        fail_on_alarm_severity: str | None = None,
        stop_on_alarm: bool = False,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        restart_failed_runs: bool = False,
        junit_destination: str | ObjectStoragePath | None = None,
        report_pdf_destination: str | ObjectStoragePath | None = None,
        report_export_config: Mapping[str, Any] | None = None,
        metric_budgets: Mapping[str, str] | None = None,
        baseline: str | None = None,
        max_regression_pct: Mapping[str, float] | None = None,
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if template_id is not None and template_name is not None:
            raise ValueError("give template_id or template_name, not both")
        if template_name is not None and workspace_id is None:
            raise ValueError("template_name needs workspace_id: templates are listed per workspace")
        check_literal_ids(
            scenario_id=scenario_id,
            template_id=template_id,
            workspace_id=workspace_id,
            subscription_id=subscription_id,
        )
        gate = check_gate_severity(fail_on_alarm_severity)
        interval_s = positive_seconds("check_interval", check_interval)
        timeout_s = positive_seconds("timeout", timeout)
        if stop_on_alarm and gate is None:
            raise ValueError(
                "stop_on_alarm needs fail_on_alarm_severity: which severity should stop the run?"
            )
        if not wait_for_completion and (junit_destination or report_pdf_destination):
            raise ValueError(
                "junit_destination and report_pdf_destination need wait_for_completion=True: "
                "the files exist once the run ended"
            )
        self.scenario_id = scenario_id
        self.template_id = template_id
        self.template_name = template_name
        self.workspace_id = workspace_id
        self.test_name = test_name
        self.properties = properties
        self.subscription_id = subscription_id
        self.wait_for_completion = wait_for_completion
        self.check_interval = interval_s if interval_s is not None else 10.0
        self.timeout = timeout_s
        self.fail_on_alarm_severity = gate
        self.stop_on_alarm = stop_on_alarm
        self.deferrable = deferrable
        self.restart_failed_runs = restart_failed_runs
        self.junit_destination = junit_destination
        self.report_pdf_destination = report_pdf_destination
        if metric_budgets is not None or max_regression_pct is not None or baseline is not None:
            from airflow_provider_loadtest.decisions.gate import GateSpec  # only DAGs with a gate pay for it

            GateSpec.check_literal(metric_budgets, max_regression_pct, baseline)
        if not wait_for_completion and (metric_budgets or max_regression_pct):
            raise ValueError("metric_budgets and max_regression_pct need wait_for_completion=True")
        self.report_export_config = report_export_config
        self.metric_budgets = metric_budgets
        self.baseline = baseline
        self.max_regression_pct = max_regression_pct
        self.loadtest_conn_id = loadtest_conn_id
        self._active_run: StartedRun | None = None
        self._store_works = True  # until the task finds it has no task state store it can rely on
        self._store_warned = False

    # --- the task ------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        with _refusing_what_cannot_succeed():
            self._check_file_settings()
            self._gate_spec()
            run, earlier_state = self._attach_or_start(context)
        if not self.wait_for_completion:
            return run.to_xcom()
        options = self._watch_options(context, run)
        if self.deferrable and (earlier_state is None or not is_terminal(earlier_state)):
            from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger

            self.log.info(
                "Deferring: the triggerer watches run %s, freeing this worker slot", run.bench_result_id
            )
            self.defer(
                trigger=LoadTestRunTrigger(
                    loadtest_conn_id=self.loadtest_conn_id,
                    run_record=run.to_xcom(),
                    options=options.to_json(),
                    started_at=run.started_at,
                ),
                method_name="execute_complete",
            )
        return self._finish(context, run, self._watch_here(run, options))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: the same verdict as the sync path."""
        from airflow_provider_loadtest.decisions.runs import StartedRun
        from airflow_provider_loadtest.decisions.watch import RunOutcome

        run = StartedRun.from_xcom(event["run"])
        LoadTestReportLink.publish(context, run.report_url)  # this process computes the link at task end
        self._check_store_holds(context, run)
        if event.get("status") != "done":
            raise self._wait_ended_without_verdict(
                run,
                f"watching it in the triggerer failed: {event.get('message')}",
                never_succeeds=bool(event.get("never_succeeds")),
            )
        return self._finish(context, run, RunOutcome.from_json(event["outcome"]))

    def on_kill(self) -> None:
        """The task is being killed on its worker: stop the load test too (best effort)."""
        if self._active_run is not None:
            self._stop_quietly(self._active_run, "the task was killed")

    # --- starting, or finding the run an earlier try started ------------------------------------

    def _attach_or_start(self, context: Context) -> tuple[StartedRun, str | None]:
        """Re-attach to the run an earlier try of this task instance started, judge it, or start one.

        Returns the run and, for a run of an earlier try, its state. The rules are in
        ``decisions.run_record``; the record lives in Airflow's task state store (3.3+).
        """
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
        from airflow_provider_loadtest.decisions.runs import StartedRun

        store = _context_get(context, "task_state_store")
        ti = _context_get(context, "ti")
        max_tries = read_max_tries(ti)
        record: RunRecord | None = None
        self._store_works = store is not None
        if store is None:
            self._no_working_store("there is no task state store (Airflow < 3.3)")
        else:
            try:
                record = RunRecord.from_store(store.get(RUN_RECORD_KEY))
            except Exception as exc:
                if read_try_number(ti) != 1:
                    raise AirflowException(
                        f"Could not read the task state store ({exc}): an earlier try may have started a "
                        "load test, so this try starts none. Nothing was started."
                    ) from exc
                self._no_working_store(f"the task state store could not be read ({exc})")
                store = None  # the first try ever: no earlier start to find, but none can be recorded
        plan = plan_try(record, max_tries=max_tries)
        if plan.action == "refuse":
            raise AirflowFailException(plan.message)
        if plan.action == "check_run" and record is not None and record.run is not None:
            run = StartedRun.from_xcom(record.run)
            state = str(self.hook.get_bench_result(run.bench_result_id).state or "UNKNOWN")
            step = on_recorded_run(state, restart_failed_runs=self.restart_failed_runs)
            if step == "attach":
                self.log.info(
                    "Re-attaching to run %s started by an earlier try (state %s)", run.bench_result_id, state
                )
                return self._adopt(context, run), state
            if step == "judge":
                self.log.info(
                    "Run %s of an earlier try already ended %s: taking its verdict, not starting another",
                    run.bench_result_id,
                    state,
                )
                return self._adopt(context, run), state
            self.log.warning(
                "Run %s of an earlier try ended %s: starting a new run (restart_failed_runs=True)",
                run.bench_result_id,
                state,
            )
        elif plan.message:
            self.log.warning("%s", plan.message)
        return self._adopt(context, self._start_recorded(store, max_tries)), None

    def _start_recorded(self, store: Any, max_tries: int | None) -> StartedRun:
        """Send the start, with "start in flight" recorded before and the run recorded after."""
        from airflow_provider_loadtest.api.errors import LoadTestApiError
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

        start = self._prepare_start()
        sent_at = time.time()
        record = RunRecord(start.scenario_id, sent_at, max_tries)
        if store is not None:
            try:
                store.set(RUN_RECORD_KEY, record.to_store())
            except Exception as exc:
                raise AirflowException(
                    f"Could not record in the task state store that a start is in flight ({exc}): not "
                    "starting a load test a retry could not find. Nothing was started."
                ) from exc
        try:
            run = self._send_start(start, sent_at)
        except LoadTestApiError as exc:
            if exc.outcome_unknown:
                raise AirflowFailException(
                    uncertain_start_message(start.scenario_id, sent_at, str(exc))
                ) from exc
            _store_delete(store, self.log)  # refused: nothing started, a retry may start
            raise
        except ValueError as exc:  # a 2xx without the run's ids: the service may have started it
            raise AirflowFailException(uncertain_start_message(start.scenario_id, sent_at, str(exc))) from exc
        if store is not None:
            try:
                store.set(RUN_RECORD_KEY, record.with_run(run.to_xcom()).to_store())
            except Exception as exc:
                self._no_working_store(f"the started run could not be recorded in the store ({exc})")
        return run

    def _no_working_store(self, why: str) -> None:
        """Say once why this try runs without a record a retry could use, and make failures final."""
        if self._store_works is False and self._store_warned:
            return
        self._store_works = False
        self._store_warned = True
        self.log.warning(
            "No working task state store: %s. A retry could not find this task's run, so every failure "
            "after the start fails the task without retries (never a second load test).",
            why,
        )

    def _check_store_holds(self, context: Context, run: StartedRun) -> None:
        """After a deferral (a new process): can a retry find ``run`` in the store?"""
        store = _context_get(context, "task_state_store")
        self._store_works = True
        if store is None:
            self._no_working_store("there is no task state store (Airflow < 3.3)")
            return
        try:
            record = RunRecord.from_store(store.get(RUN_RECORD_KEY))
        except Exception as exc:
            self._no_working_store(f"the task state store could not be read ({exc})")
            return
        if record is None or not record.run or record.run.get("bench_result_id") != run.bench_result_id:
            self._no_working_store(f"the task state store does not hold run {run.bench_result_id}")

    def _adopt(self, context: Context, run: StartedRun) -> StartedRun:
        self._active_run = run
        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is not None:
            ti.xcom_push(key=RUN_RECORD_KEY, value=run.to_xcom())
        LoadTestReportLink.publish(context, run.report_url)
        return run

    def start_run(self, context: Context) -> StartedRun:
        """Check the rendered arguments, resolve the template and start the run (one POST).

        Records nothing: ``execute`` records the start in flight and the run around this call.
        """
        return self._send_start(self._prepare_start(), time.time())

    def _prepare_start(self) -> _StartRequest:
        """Everything that can fail before the start is sent: rendered ids, properties, the template."""
        scenario_id = validate_path_id("scenario_id", self.scenario_id)
        workspace_id = (
            validate_path_id("workspace_id", self.workspace_id) if self.workspace_id is not None else None
        )
        properties = self._checked_properties()
        template_id = self._resolve_template_id(workspace_id)
        subscription_id = (
            validate_path_id("subscription_id", self.subscription_id) if self.subscription_id else None
        )
        return _StartRequest(scenario_id, workspace_id, template_id, properties, subscription_id)

    def _send_start(self, start: _StartRequest, sent_at: float) -> StartedRun:
        from airflow_provider_loadtest.decisions.runs import StartedRun

        report = self.hook.run_scenario(
            start.scenario_id,
            template_id=start.template_id,
            name=self.test_name or None,
            properties=start.properties,
            subscription_id=start.subscription_id,
        )
        workspace_id = start.workspace_id
        if workspace_id is None and report.project_id:  # for the link only: a failed lookup answers None
            workspace_id = self.hook.find_workspace_id(start.scenario_id)
        run = StartedRun.from_report(
            report,
            scenario_id=start.scenario_id,
            template_id=start.template_id,
            workspace_id=workspace_id,
            test_name=self.test_name,
            settings=self.hook.settings,
            started_at=sent_at,
        )
        spec = self._gate_spec()
        if spec.active:
            from dataclasses import replace

            from airflow_provider_loadtest.decisions.gate import report_metrics

            run = replace(run, summary_metrics=report_metrics(report.items, spec.metric_ids))
        self.log.info(
            "Started a load test of scenario %r: run %s, report %s%s",
            start.scenario_id,
            run.bench_result_id,
            run.report_id,
            f" with template {start.template_id!r}"
            if start.template_id
            else " with the scenario's default report",
        )
        if run.report_url:
            self.log.info("Report: %s", run.report_url)
        else:
            self.log.info("No report link (set workspace_id on the task to skip the workspace lookup)")
        return run

    def _resolve_template_id(self, workspace_id: str | None) -> str | None:
        if self.template_name is None:
            if self.template_id is None:
                return None
            return validate_path_id("template_id", self.template_id)
        from airflow_provider_loadtest.decisions.templates import require_template

        assert workspace_id is not None  # noqa: S101 - type narrowing, enforced in __init__
        from airflow_provider_loadtest.api import endpoints

        # Ids and names only: all the choice reads (full templates cost thousands of objects each).
        templates = self.hook.call(endpoints.list_template_refs(workspace_id))
        template = require_template(templates, workspace_id=workspace_id, name=self.template_name)
        self.log.info(
            "Using report template %r (id %s) of workspace %r", template.name, template.id, workspace_id
        )
        return validate_path_id("template_id", template.id)

    def _checked_properties(self) -> dict[str, str] | None:
        if not self.properties:
            return None
        if not isinstance(self.properties, Mapping):
            raise ValueError(
                f"properties must be a mapping of names to values, got {type(self.properties).__name__}"
            )
        return {str(key): str(value) for key, value in self.properties.items()}

    # --- waiting and the verdict ---------------------------------------------------------------

    def _watch_options(self, context: Context, run: StartedRun) -> WatchOptions:
        """The wait's bounds. Deferred tasks carry their own deadline: Airflow's deferral timeout
        would skip ``execute_complete`` and leave the run going."""
        from airflow_provider_loadtest.decisions.watch import WatchOptions

        deadlines = []
        if self.timeout is not None:
            deadlines.append(run.started_at + self.timeout)
        if self.execution_timeout is not None:
            ti = context.get("ti") if hasattr(context, "get") else None
            task_start = getattr(ti, "start_date", None)
            begun = task_start.timestamp() if task_start is not None else time.time()
            deadlines.append(begun + self.execution_timeout.total_seconds())
        return WatchOptions(
            check_interval_s=self.check_interval,
            deadline=min(deadlines) if deadlines else None,
            fail_on_alarm_severity=self.fail_on_alarm_severity,
            stop_on_alarm=self.stop_on_alarm,
            log_every_s=max(60.0, self.check_interval),
        )

    def _watch_here(self, run: StartedRun, options: WatchOptions) -> RunOutcome:
        """Wait on this worker. If the wait is cut short (execution_timeout, kill, shutdown), the run
        is stopped; an API outage while polling leaves it going for a retry to re-attach to."""
        from airflow_provider_loadtest.api.errors import LoadTestApiError
        from airflow_provider_loadtest.compat import AirflowFailException, AirflowTaskTimeout
        from airflow_provider_loadtest.decisions.watch import watch_run

        try:
            return self.hook.drive(
                watch_run(run.bench_result_id, options, started_at=run.started_at), self.log
            )
        except LoadTestApiError as exc:
            raise self._wait_ended_without_verdict(
                run, f"the status API failed: {exc}", never_succeeds=exc.never_succeeds
            ) from exc
        except (Exception, AirflowTaskTimeout) as exc:
            self._stop_quietly(run, "the task stopped waiting for it")
            if self._store_works:
                raise  # the retry finds the stopped run and takes its verdict
            raise AirflowFailException(
                f"Stopped waiting for run {run.bench_result_id} ({type(exc).__name__}: {exc}); not retried: "
                "without a working task state store a retry would start a second load test."
            ) from exc
        except BaseException:
            self._stop_quietly(run, "the task stopped waiting for it")
            raise

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

    def _finish(self, context: Context, run: StartedRun, outcome: RunOutcome) -> dict[str, Any]:
        """Save the files, then succeed or fail. The run record stays: a retry takes this verdict."""
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

                ti.xcom_push(
                    key=BASELINE_XCOM_KEY, value=Baseline(run.bench_result_id, verdict.metrics).to_xcom()
                )
            self.log.info("%s in %.0f s", outcome.message, outcome.duration_s)
            return result
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

        if ti is not None:
            ti.xcom_push(key="return_value", value=result)
        report = f" Report: {run.report_url}" if run.report_url else ""
        if outcome.succeeded and verdict is not None:
            # The run FINISHED and its values are what they are: a retry would reach the same verdict.
            raise AirflowFailException(f"{verdict.message()}.{report}")
        final = verdict_is_final(
            reason=outcome.reason,
            state=outcome.state,
            restart_failed_runs=self.restart_failed_runs,
            store_works=self._store_works,
        )
        raise (AirflowFailException if final else AirflowException)(f"{outcome.message}.{report}")

    # --- the quality gate ----------------------------------------------------------------------

    def _gate_spec(self) -> GateSpec:
        """The rendered gate settings, checked before the run starts (templates render late)."""
        from airflow_provider_loadtest.decisions.gate import GateSpec

        try:
            return GateSpec.parse(self.metric_budgets, self.max_regression_pct, self.baseline)
        except ValueError as exc:
            from airflow_provider_loadtest.compat import AirflowFailException

            raise AirflowFailException(str(exc)) from exc

    def _check_gate(self, context: Context, run: StartedRun, outcome: RunOutcome) -> Verdict | None:
        """Fetch the values and judge them, once the run ended. After a failed run this is best
        effort (the task fails for the run's own reason); after a FINISHED one a failed fetch fails
        the task, and a retry re-attaches to the run (kept in its record) and judges again."""
        spec = self._gate_spec()
        if not spec.active or not is_terminal(outcome.state):
            return None
        from airflow_provider_loadtest.decisions.gate import evaluate

        baseline, note = self._gate_baseline(context, spec.baseline, run)
        steps = evaluate(
            spec,
            run.bench_result_id,
            known_metrics=run.summary_metrics or {},
            baseline=baseline,
            baseline_note=note,
        )
        try:
            return self.hook.drive(steps, self.log)
        except Exception as exc:
            if outcome.succeeded:
                raise
            self.log.error("Could not check the quality gate of run %s: %s", run.bench_result_id, exc)
            return None

    def _gate_baseline(
        self, context: Context, wanted: str | None, run: StartedRun
    ) -> tuple[Baseline | None, str | None]:
        """The baseline run: pinned, or the one the latest earlier passing DAG run of this task left
        in XCom (only passing runs leave one), read through Airflow, never a store of ours."""
        from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, PREVIOUS, Baseline

        if wanted is None:
            return None, None
        if wanted != PREVIOUS:
            return Baseline(wanted, {}), None
        ti = context.get("ti") if hasattr(context, "get") else None
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
        events = context.get("outlet_events") if outlets and hasattr(context, "get") else None
        if events is None:
            return
        from airflow_provider_loadtest.decisions.gate import asset_extra

        extra = asset_extra(result, passed=passed, verdict=verdict)
        for asset in outlets:
            events[asset].extra.update(extra)

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
                    self._fail_saving(context, run, key, exc)
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

    def _fail_saving(self, context: Context, run: StartedRun, key: str, exc: Exception) -> NoReturn:
        if self._store_works:
            raise exc  # the retry re-attaches to the FINISHED run and saves again
        from airflow_provider_loadtest.compat import AirflowFailException

        raise AirflowFailException(
            f"Run {run.bench_result_id} FINISHED but its {key} could not be saved: {exc}. Not retried: "
            "without a working task state store a retry could not re-attach to this run and would "
            "start a second load test."
        ) from exc

    def _stop_quietly(self, run: StartedRun, why: str) -> None:
        self.log.warning("Stopping run %s: %s", run.bench_result_id, why)
        try:
            self.hook.stop_run(run.bench_result_id)
        except Exception as exc:
            self.log.error(
                "Could not stop run %s: %s. %s",
                run.bench_result_id,
                exc,
                stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id),
            )
        else:
            self.log.warning("Stopped run %s", run.bench_result_id)


@dataclass(frozen=True)
class _StartRequest:
    """The checked, rendered arguments of one start call."""

    scenario_id: str
    workspace_id: str | None
    template_id: str | None
    properties: dict[str, str] | None
    subscription_id: str | None


@contextmanager
def _refusing_what_cannot_succeed() -> Iterator[None]:
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


def _context_get(context: Any, key: str) -> Any:
    return context.get(key) if hasattr(context, "get") else None


def _store_delete(store: Any, log: Any) -> None:
    if store is None:
        return
    try:
        store.delete(RUN_RECORD_KEY)
    except Exception as exc:
        log.warning("Could not clear the start-in-flight record (a retry will refuse to start): %s", exc)
