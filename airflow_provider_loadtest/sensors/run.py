"""``LoadTestRunSensor``: wait for a load test run started elsewhere, and judge it like the operator does.

For a run that ``RunScenarioOperator(wait_for_completion=False)`` started earlier in the DAG, or that the
service's own scheduler or another pipeline started: the same watch, timeout, alarm gate, metric gates
and report link as the operator, through the same lifecycle (``lifecycle.RunLifecycle``) and the
same sans-I/O decisions. It never starts a run, and it stops one only when asked (``stop_on_alarm``, or
``stop_on_timeout``): it did not start it.

Imported at DAG-parse time: nothing heavy at module level.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_provider_loadtest.compat import AirflowSensorTimeout, conf
from airflow_provider_loadtest.lifecycle import (
    RunLifecycle,
    context_get,
    refusing_what_cannot_succeed,
    relay,
)
from airflow_provider_loadtest.links.report import LoadTestReportLink
from airflow_provider_loadtest.operators.common import DEFAULT_CONN_ID, check_literal_ids

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath

    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.stops import StopCause
    from airflow_provider_loadtest.decisions.watch import WatchOptions


R = TypeVar("R")


class LoadTestRunSensor(RunLifecycle, BaseSensorOperator):
    """Wait until a load test run ends; fail the task when it went wrong, as ``RunScenarioOperator`` does.

    :param bench_result_id: the run: its bench result id (e.g. ``"{{ var.value.nightly_run }}"``), or the
        dict ``RunScenarioOperator`` returns (``run_op.output``), which also brings the report id, the
        workspace and the start time (for the report link, the PDF and the duration).
    :param workspace_id: the run's workspace, for the report link when only an id is given.
    :param report_id: the run's report, for the report link and ``report_pdf_destination`` when only an
        id is given.
    :param stop_on_timeout: stop the run when the sensor's ``timeout`` or ``execution_timeout`` passes.
        Off by default: this task did not start the run.
    :param fail_on_alarm_severity: ``None``, ``"WARNING"`` or ``"CRITICAL"``: fail the task when a
        threshold alarm reaches this severity.
    :param stop_on_alarm: also check the alarms at each look while the run goes, and stop the run as
        soon as the gate breaks.
    :param metric_budgets: the quality gate's budgets, as for ``RunScenarioOperator``.
    :param baseline: ``None``, ``"history"`` (the noise of the last passing nights of this task),
        ``"previous"`` (the latest earlier passing run of this task) or a bench result id, as for
        ``RunScenarioOperator``.
    :param max_regression_pct: ``{metric id: percent}`` worse than the baseline (or the history's
        centre) allowed.
    :param history_settings: with ``baseline="history"``, how it judges, as for
        ``RunScenarioOperator``; ``None``: the measured defaults. The DAG-run conf
        ``loadtest_accept_change`` accepts a change as the new normal, as for the operator.
    :param transaction_budgets: budgets per transaction (JTL label or pattern), judged from the run's
        JTL files, as for ``RunScenarioOperator``.
    :param transaction_max_regression_pct: ``{label or pattern: {metric id: percent}}`` worse than the
        baseline allowed per transaction, as for ``RunScenarioOperator``.
    :param junit_destination: save the run's JUnit XML here once it ended.
    :param report_pdf_destination: save the report as a PDF here once it ended (needs the report id).
    :param report_export_config: PDF page settings (keys of the service's ``ExportReportConfig``).
    :param deferrable: after a first look on the worker, wait in the triggerer instead of holding a worker
        slot or rescheduling. Defaults to ``[operators] default_deferrable``.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    Airflow's sensor arguments keep their meaning: ``poke_interval`` is the time between two looks at
    the run's state (default 10 s, as the official clients poll), ``timeout`` how long to wait (past it
    the sensor fails, or skips with ``soft_fail``, and the run is left going unless
    ``stop_on_timeout``), and the poke and reschedule modes both work: each look is one call for the
    state (and, while running with ``stop_on_alarm``, one for the alarms), the first of which also checks
    that the service knows the run.

    Returns (XCom ``return_value``) the same dict as ``RunScenarioOperator`` once it waited: the run's
    ids and report link, ``state``, ``duration_s`` (from the start time when the dict gave one, else
    from when this sensor began), ``alarms``, ``metrics``, ``gate`` and the files saved (and, with
    ``baseline="history"``, its night's record, XCom ``loadtest_gate_night``: a bench result judged on
    several nights counts once). The run is also
    pushed as XCom ``loadtest_run`` when the sensor begins, and the report link shows on the task.
    """

    template_fields: Sequence[str] = (
        "bench_result_id",
        "workspace_id",
        "report_id",
        "junit_destination",
        "report_pdf_destination",
        "report_export_config",
        "metric_budgets",
        "baseline",
        "max_regression_pct",
        "history_settings",
        "transaction_budgets",
        "transaction_max_regression_pct",
    )
    template_fields_renderers = {
        "report_export_config": "json",
        "metric_budgets": "json",
        "max_regression_pct": "json",
        "history_settings": "json",
        "transaction_budgets": "json",
        "transaction_max_regression_pct": "json",
    }
    operator_extra_links = (LoadTestReportLink(),)
    ui_color = "#f9e79f"

    def __init__(
        self,
        *,
        bench_result_id: str | Mapping[str, Any],
        workspace_id: str | None = None,
        report_id: str | None = None,
        stop_on_timeout: bool = False,
        fail_on_alarm_severity: str | None = None,
        stop_on_alarm: bool = False,
        metric_budgets: Mapping[str, str] | None = None,
        baseline: str | None = None,
        max_regression_pct: Mapping[str, float] | None = None,
        history_settings: Mapping[str, float] | None = None,
        transaction_budgets: Mapping[str, Mapping[str, str]] | None = None,
        transaction_max_regression_pct: Mapping[str, Mapping[str, float]] | None = None,
        junit_destination: str | ObjectStoragePath | None = None,
        report_pdf_destination: str | ObjectStoragePath | None = None,
        report_export_config: Mapping[str, Any] | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", 10.0)
        super().__init__(**kwargs)
        if isinstance(bench_result_id, str):
            check_literal_ids(bench_result_id=bench_result_id)
        elif not isinstance(bench_result_id, Mapping) and not hasattr(bench_result_id, "resolve"):
            raise ValueError(
                "bench_result_id must be a bench result id or the dict RunScenarioOperator returns, got "
                f"{type(bench_result_id).__name__}"
            )
        check_literal_ids(workspace_id=workspace_id, report_id=report_id)
        self._init_watch(
            wait_for_completion=True,
            check_interval=float(self.poke_interval),
            fail_on_alarm_severity=fail_on_alarm_severity,
            stop_on_alarm=stop_on_alarm,
            deferrable=deferrable,
            junit_destination=junit_destination,
            report_pdf_destination=report_pdf_destination,
            report_export_config=report_export_config,
            metric_budgets=metric_budgets,
            baseline=baseline,
            max_regression_pct=max_regression_pct,
            history_settings=history_settings,
            transaction_budgets=transaction_budgets,
            transaction_max_regression_pct=transaction_max_regression_pct,
        )
        self.bench_result_id = bench_result_id
        self.workspace_id = workspace_id
        self.report_id = report_id
        self.stop_on_timeout = stop_on_timeout
        self.loadtest_conn_id = loadtest_conn_id
        self._run: StartedRun | None = None
        self._known_state: Any = None  # the bench result read when the run was resolved

    # --- the task ------------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        """Look once; then wait here (poke or reschedule) or, with ``deferrable``, in the triggerer."""
        from airflow_provider_loadtest.compat import AirflowSkipException

        self._ti = context_get(context, "ti")
        with refusing_what_cannot_succeed():
            self._check_file_settings()
            self._gate_spec(context)
            run = self._adopt(context, self._resolve_run(context))
        self._say_a_pending_stop(run)
        if self.deferrable:
            first = self._soft(lambda: self.poke(context))
            if first.is_done:
                return first.xcom_value
            return self._wait_for(context, run, None)
        try:
            return super().execute(context)
        except (AirflowSensorTimeout, AirflowSkipException) as exc:
            timed_out = not isinstance(exc, AirflowSkipException) or str(exc).startswith(
                "Sensor has timed out"
            )
            if self.stop_on_timeout and timed_out:
                from airflow_provider_loadtest.decisions.stops import decision

                stop = decision(run.bench_result_id, "timeout", time.time(), "the sensor's timeout")
                self._stop_for(run, stop)
            raise

    def _say_a_pending_stop(self, run: StartedRun) -> None:
        """The task that started ``run`` was ended while nobody could tell whether a person ended it
        (``decisions.stops.PendingStop``): say so, with how to stop it. The sensor never stops a run it
        did not start on a person's behalf, and leaves the pending stop to that task's next try."""
        from airflow_provider_loadtest.decisions.run_record import stop_hint
        from airflow_provider_loadtest.lifecycle import support

        try:
            pending = support.read_pending_stop(run.bench_result_id)
        except Exception as exc:
            self.log.warning(
                "Could not read whether a stop of run %s was left pending: %s",
                run.bench_result_id,
                support.describe_error(exc),
            )
            return
        if pending is not None:
            self.log.warning(
                "A stop of run %s is pending: %s. This sensor did not start the run and does not stop it. %s",
                run.bench_result_id,
                pending.describe(),
                stop_hint(run.bench_result_id, run.report_url, self.loadtest_conn_id),
            )

    def _soft(self, look: Callable[[], PokeReturnValue]) -> PokeReturnValue:
        """A look outside Airflow's sensor loop (the deferrable sensor's first), failing as that loop
        would: with ``soft_fail``, a failed verdict skips the task."""
        from airflow_provider_loadtest.compat import AirflowFailException, AirflowSkipException

        try:
            return look()
        except (AirflowFailException, AirflowSensorTimeout) as exc:
            if self.soft_fail:
                raise AirflowSkipException("Skipping due to soft_fail is set to True.") from exc
            raise

    def poke(self, context: Context) -> PokeReturnValue:
        """One look at the run: not done while it goes; once it ended, its verdict (or its failure)."""
        with refusing_what_cannot_succeed():  # a key refused at any look fails at once, as at the first
            return self._look(context)

    def _look(self, context: Context) -> PokeReturnValue:
        from dataclasses import replace

        from airflow_provider_loadtest.decisions.watch import poll_run

        run = self._run if self._run is not None else self._adopt(context, self._resolve_run(context))
        # Airflow's sensor loop keeps the sensor's timeout between looks; a look has no deadline of its own.
        options = replace(super()._watch_options(context, run), check_interval_s=float(self.poke_interval))
        steps = poll_run(run.bench_result_id, options, started_at=run.started_at)
        known, self._known_state = self._known_state, None
        if known is not None:  # this look's state was read when the run was resolved: no second call
            steps = relay(steps, first_answer=known)
        outcome = self.hook.drive(steps, self.log)
        if outcome is None:
            return PokeReturnValue(is_done=False)
        self._remember_watch_stop(outcome)
        return PokeReturnValue(is_done=True, xcom_value=self._finish(context, run, outcome))

    # --- the run -------------------------------------------------------------------------------

    def _resolve_run(self, context: Context) -> StartedRun:
        """The run to watch, from an id or the operator's dict; an id the service does not know fails
        at once (never retried)."""
        from dataclasses import replace

        from airflow_provider_loadtest.api.validation import validate_path_id
        from airflow_provider_loadtest.decisions.runs import StartedRun

        given = self.bench_result_id
        if isinstance(given, Mapping):
            run = StartedRun.from_xcom(dict(given))
            run_id = validate_path_id("bench_result_id", run.bench_result_id)
        else:
            run_id = validate_path_id("bench_result_id", given)
            run = None
        result = self.hook.get_bench_result(run_id)  # 404 -> "not found: check the id", never retried
        self._known_state = result
        if run is None:
            workspace_id = validate_path_id("workspace_id", self.workspace_id) if self.workspace_id else None
            report_id = validate_path_id("report_id", self.report_id) if self.report_id else None
            project_id = result.result_project_id or result.design_project_id
            url = None
            if workspace_id and report_id and project_id:
                url = self.hook.settings.report_url(workspace_id, str(project_id), report_id)
            run = StartedRun(
                scenario_id=result.scenario_id or "",
                report_id=report_id or "",
                bench_result_id=run_id,
                project_id=str(project_id) if project_id else None,
                template_id=None,
                workspace_id=workspace_id,
                test_name=None,
                report_url=url,
                started_at=self._began(context),
            )
        if not isinstance(run.started_at, int | float) or isinstance(run.started_at, bool):
            run = replace(run, started_at=self._began(context))  # a dict without a start time
        if self.report_pdf_destination and not run.report_id:
            raise ValueError(
                "report_pdf_destination needs the run's report: give report_id, or the dict "
                "RunScenarioOperator returns as bench_result_id"
            )
        self._run = run
        return run

    def _began(self, context: Context) -> float:
        ti = context_get(context, "ti")
        start = getattr(ti, "start_date", None)
        return float(start.timestamp()) if start is not None else time.time()

    def _sensor_deadline(self, context: Context) -> float:
        return self._began(context) + float(self.timeout)

    def _watch_options(self, context: Context, run: StartedRun) -> WatchOptions:
        """For a wait in the triggerer (or handed back from it): the sensor's ``timeout`` as the watch's
        deadline, from when the sensor began."""
        from dataclasses import replace

        options = super()._watch_options(context, run)
        deadline = self._sensor_deadline(context)
        if options.deadline is not None:
            deadline = min(deadline, options.deadline)
        return replace(options, deadline=deadline, check_interval_s=float(self.poke_interval))

    def _may_stop(self, cause: StopCause) -> bool:
        """Only what it was asked to: its timeout with ``stop_on_timeout``, the gate with ``stop_on_alarm``;
        never a person's action (it did not start the run)."""
        if cause == "timeout":
            return self.stop_on_timeout
        return cause == "gate"

    def _store_holds(self, context: Context, run: StartedRun) -> None:
        """A retry of a sensor needs no record: it watches the same run id again."""
        self._store_works = True


__all__ = ["LoadTestRunSensor"]
