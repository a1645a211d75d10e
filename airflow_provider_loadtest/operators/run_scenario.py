"""``RunScenarioOperator``: start a load test, wait for it, gate on its alarms, never start it twice.

Imported by every DAG file that uses it, so at module level it imports only Airflow's base classes and
the package's cheap modules; the HTTP clients, the models and the trigger load when the task runs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import BaseOperator

from airflow_provider_loadtest.api.validation import validate_path_id
from airflow_provider_loadtest.compat import conf
from airflow_provider_loadtest.decisions.run_record import (
    RUN_RECORD_KEY,
    RunRecord,
    on_recorded_run,
    plan_try,
    positive_seconds,
    read_clear_number,
    read_max_tries,
    read_try_number,
    uncertain_start_message,
)
from airflow_provider_loadtest.decisions.runs import is_terminal
from airflow_provider_loadtest.decisions.stops import on_pending_stop, utc_text
from airflow_provider_loadtest.lifecycle import RunLifecycle, refusing_what_cannot_succeed
from airflow_provider_loadtest.lifecycle.support import context_get
from airflow_provider_loadtest.links.report import LoadTestReportLink
from airflow_provider_loadtest.operators.common import DEFAULT_CONN_ID, check_literal_ids

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath

    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.stops import PendingStop, StopDecision

__all__ = ["DEFAULT_CONN_ID", "RUN_RECORD_KEY", "RunScenarioOperator", "check_literal_ids"]

#: How long a try that saw a clear of its DAG run watches the earlier run for the stop the cleared try
#: sent, and how often it looks (the service takes a moment to turn a stopped run ABORTED).
CLEAR_SETTLE_S = 60.0
CLEAR_SETTLE_POLL_S = 5.0


def _pause(seconds: float) -> None:
    """Indirection so tests can check the waits without spending them."""
    time.sleep(seconds)


class RunScenarioOperator(RunLifecycle, BaseOperator):
    """Start a load test of ``scenario_id``, wait until it ends, and fail the task when it went wrong.

    :param scenario_id: the scenario to run (last segment of its URL in the web UI); or give
        ``scenario_name``.
    :param scenario_name: choose the scenario by the name the web UI shows instead, among the scenarios
        of ``project_id`` or, without it, of every design project of ``workspace_id`` (exact match
        first, then ignoring case; no match or several matches fail the task before anything starts,
        naming the candidates).
    :param project_id: the design project ``scenario_name`` is looked up in (one listing call); without
        it, ``workspace_id``'s projects are listed, then each one's scenarios.
    :param template_id: report template to use for the run.
    :param template_name: choose the template by name instead, from ``workspace_id``'s templates (exact
        match first, then ignoring case; no match or several matches fail the task before anything
        starts).
    :param workspace_id: the scenario's workspace; needed with ``template_name``. For the report link
        it is looked up when not given (the scenario's project, then that project's workspace, once
        per run); giving it skips those two calls.
    :param test_name: a name for this run in the service (e.g. ``"nightly {{ dag_run.run_after | ds }}"``).
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
        or object-store URL such as ``s3://bucket/{{ dag_run.run_after | ds }}/junit.xml``, or an
        ``ObjectStoragePath``),
        for downstream tasks and CI-style tools.
    :param report_pdf_destination: save the report as a PDF here once the run ended (same kinds of
        destination); see ``DownloadReportOperator`` for doing it as a separate task.
    :param report_export_config: PDF page settings (keys of the service's ``ExportReportConfig``).
    :param metric_budgets: the quality gate's budgets, ``{metric id: condition}`` such as
        ``{"RESPONSE_TIME_PERCENTILE_95": "<= 800", "ERRORS_PERCENT": "< 1"}`` (operators ``<``, ``<=``,
        ``>``, ``>=``; metric ids of the service's API, section 2.5). Checked once the run ended.
    :param baseline: what to compare against: ``None``; ``"history"`` (the run-to-run noise of the
        last passing nights of this task, kept in Airflow's XCom: a metric fails only when it is both
        worse than ``max_regression_pct`` and beyond what the noise explains; see
        ``docs/gate_quality.md``); ``"previous"`` (the run of the latest earlier DAG run of this task
        whose verdict passed, read from Airflow's XCom); or a bench result id (e.g.
        ``"{{ var.value.loadtest_baseline }}"``).
    :param max_regression_pct: ``{metric id: percent}``: how much worse than the baseline (or the
        history's centre) the run may be: the smallest change that matters to you. "Worse" follows
        the metric (``decisions.gate.METRIC_DIRECTIONS``). No baseline yet is not a failure: budgets
        only are checked (with ``"history"``: the bound alone, against the few nights there are, until
        the history is long enough, said in the log).
    :param history_settings: with ``baseline="history"``, how it judges (``decisions.gate.history.
        HistorySettings``: ``window``, ``min_history``, ``fail_z``, ``persist_z``, ``suspect_z``,
        ``persist_nights``); ``None`` takes the defaults measured in ``docs/gate_quality.md``. An
        unknown name or a bad value fails when the DAG is parsed (a templated value before the run).
        A person accepts a regression as the new normal by triggering the DAG run with the conf
        ``{"loadtest_accept_change": true}`` (or a list of metric ids, or ``{task id: ...}``): those
        metrics pass that night (budgets still apply) and their history restarts from it.
    :param transaction_budgets: budgets per transaction (JTL label), ``{label: {metric id: condition}}``
        such as ``{"Checkout": {"RESPONSE_TIME_PERCENTILE_95": "<= 800", "ERRORS_PERCENT": "< 1"}}``;
        a label pattern (``"api/*"``) applies to each matching label (a label named exactly wins). The
        metric ids computable from samples (``decisions.jtl_figures.SAMPLE_METRICS``: response time,
        latency and connect time statistics and percentiles, hits, errors and successes, their rates
        and percentages, bytes). Judged once the run ended from its JTL files (every load generator's,
        read as they download, memory bounded); a transaction the run never sampled, a run without
        JTL files or a JTL that does not read fails as not measured. Whenever the task has a gate
        and the run has JTL files, the log lists the 5 slowest transactions by p95.
    :param transaction_max_regression_pct: ``{label or pattern: {metric id: percent}}``: how much worse
        than the ``baseline`` each transaction may be, as ``max_regression_pct`` for the run: against
        the same transaction in the previous passing run or a pinned run (its value in XCom, else its
        JTL files), or its own history with ``baseline="history"`` (``loadtest_accept_change`` accepts
        the change of a transaction's metric too).
    :param min_userload: the virtual users the run must apply (its ``USERLOAD``): a run that applied
        fewer fails its gate as not measured (its response times do not describe the intended load).
        With ``baseline="history"`` the applied load (``USERLOAD``, ``HITS_RATE``) is also judged against
        its own history without it: markedly less than usual fails (``decisions.gate.load``).
    :param fail_on_trust_caveats: fail the gate when the service's own trust caveats apply
        (``decisions.gate.caveats``): more than 40 % of the samples answered 304 (known when a transaction
        gate reads the JTL files), or an alarm of the service shows an overloaded load generator. Without
        it they are said in the log beside the verdict.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    Files are written atomically, before the task's verdict. When the run succeeded, a file that
    cannot be saved fails the task (a retry re-attaches to the finished run, it does not start a new
    one); when the run failed, saving is best effort and never hides the run's failure.

    Returns (XCom ``return_value``) a dict: ``report_id``, ``bench_result_id``, ``project_id``,
    ``template_id``, ``workspace_id``, ``scenario_id``, ``test_name``, ``report_url``, ``started_at`` and,
    once waited for, ``state``, ``duration_s``, ``alarms``, ``metrics`` and ``stopped``, plus ``junit``
    and ``report_pdf`` (``{"path", "size"}``) for the files saved, and ``gate`` (one dict per gated
    metric: ``metric``, ``value``, ``passed``, ``status``, ``budget``, ``baseline``, ``change_pct``,
    ``max_regression_pct``, ``reason``, and with ``baseline="history"`` the history's ``centre``,
    ``noise``, ``band_low``/``band_high``, ``history_n`` and a ``note``, and ``transaction``: the JTL
    label of a transaction's row, ``None`` for the run's; ``GateRow.from_xcom`` reads them) when a gate
    is set; ``summary`` (the verdict in short Markdown, for a notifier: docs/recipes.md) and, when the run
    or its gate failed, ``explanation`` (the JMeter log's ERROR lines of an ERROR or ABORTED run, or the
    failing transactions' failure messages and codes). With ``baseline="history"`` the task also
    records its night (XCom ``loadtest_gate_night``, passing or failing: a failing night never joins
    the values judged against) beside the history it ended with (``loadtest_gate_history``); the next
    nights derive their history from those records (docs/gate.md, "What the gate remembers"). With
    ``outlets`` (Airflow Assets)
    the asset event's ``extra`` carries the run and the verdict (the run's gated values under
    ``metrics``, each transaction's under ``transactions``, the rows under ``gate``); Airflow emits
    asset events only when the task succeeds. On failure the same dict is pushed as XCom
    ``return_value`` before the task fails, so the alarms stay visible. The run is also pushed as XCom
    ``loadtest_run`` once started, when the task's **Load test report** link appears.
    """

    template_fields: Sequence[str] = (
        "scenario_id",
        "scenario_name",
        "project_id",
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
        "history_settings",
        "transaction_budgets",
        "transaction_max_regression_pct",
    )
    template_fields_renderers = {
        "properties": "json",
        "report_export_config": "json",
        "metric_budgets": "json",
        "max_regression_pct": "json",
        "history_settings": "json",
        "transaction_budgets": "json",
        "transaction_max_regression_pct": "json",
    }
    operator_extra_links = (LoadTestReportLink(),)
    ui_color = "#f4d35e"

    def __init__(
        self,
        *,
        scenario_id: str | None = None,
        scenario_name: str | None = None,
        project_id: str | None = None,
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
        history_settings: Mapping[str, float] | None = None,
        transaction_budgets: Mapping[str, Mapping[str, str]] | None = None,
        transaction_max_regression_pct: Mapping[str, Mapping[str, float]] | None = None,
        min_userload: int | None = None,
        fail_on_trust_caveats: bool = False,
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if min_userload is not None and (
            isinstance(min_userload, bool) or not isinstance(min_userload, int) or min_userload < 1
        ):
            raise ValueError(
                f"min_userload must be a whole number of virtual users, 1 or more; got {min_userload!r}"
            )
        self.min_userload = min_userload
        self.fail_on_trust_caveats = fail_on_trust_caveats
        if (scenario_id is None) == (scenario_name is None):
            raise ValueError(
                "give scenario_id or scenario_name (with project_id or workspace_id), one of them"
            )
        if scenario_name is not None and project_id is None and workspace_id is None:
            raise ValueError(
                "scenario_name needs project_id or workspace_id: scenarios are listed per project, "
                "and a workspace's projects per workspace"
            )
        if template_id is not None and template_name is not None:
            raise ValueError("give template_id or template_name, not both")
        if template_name is not None and workspace_id is None:
            raise ValueError("template_name needs workspace_id: templates are listed per workspace")
        check_literal_ids(
            scenario_id=scenario_id,
            project_id=project_id,
            template_id=template_id,
            workspace_id=workspace_id,
            subscription_id=subscription_id,
        )
        self._init_watch(
            wait_for_completion=wait_for_completion,
            check_interval=check_interval,
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
        self.timeout = positive_seconds("timeout", timeout)
        self.scenario_id = scenario_id
        self.scenario_name = scenario_name
        self.project_id = project_id
        self.template_id = template_id
        self.template_name = template_name
        self.workspace_id = workspace_id
        self.test_name = test_name
        self.properties = properties
        self.subscription_id = subscription_id
        self.wait_for_completion = wait_for_completion
        self.restart_failed_runs = restart_failed_runs
        self.loadtest_conn_id = loadtest_conn_id
        self._store_warned = False
        self._store: Any = None  # the task state store this try records its run in, when it works
        self._record: RunRecord | None = None

    # --- the task ------------------------------------------------------------------------------

    def _run_timeout_s(self) -> float | None:
        return self.timeout

    def execute(self, context: Context) -> dict[str, Any]:
        self._ti = context_get(context, "ti")
        with refusing_what_cannot_succeed():
            self._check_file_settings()
            self._gate_spec(context)
            run, earlier_state = self._attach_or_start(context)
        self._act_on_a_decision_during_the_start(run)
        if not self.wait_for_completion:
            return run.to_xcom()
        return self._wait_for(context, run, earlier_state)

    # --- starting, or finding the run an earlier try started ------------------------------------

    def _attach_or_start(self, context: Context) -> tuple[StartedRun, str | None]:
        """Re-attach to the run an earlier try of this task instance started, judge it, or start one.

        Returns the run and, for a run of an earlier try, its state. The rules are in
        ``decisions.run_record``; the record lives in Airflow's task state store (3.3+).
        """
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
        from airflow_provider_loadtest.decisions.runs import StartedRun

        store = context_get(context, "task_state_store")
        ti = context_get(context, "ti")
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
        self._store = store
        self._record = record
        clear_number = read_clear_number(context)
        plan = plan_try(record, max_tries=max_tries, clear_number=clear_number)
        if plan.action == "refuse":
            raise AirflowFailException(plan.message)
        pending = self._pending_stop(record)
        if plan.action == "check_run" and record is not None and record.run is not None:
            run = StartedRun.from_xcom(record.run)
            state = self._recorded_run_state(run, record)
            if pending is not None and self._act_on_pending_stop(run, state, pending, plan.clear_seen):
                return self._adopt(context, self._start_recorded(store, max_tries, clear_number)), None
            step = on_recorded_run(
                state,
                restart_failed_runs=self.restart_failed_runs,
                stopped_here=record.stopped is not None,
                clear_seen=plan.clear_seen,
            )
            if step == "settle":
                state = self._settled_state(run, state)
                step = on_recorded_run(state, restart_failed_runs=self.restart_failed_runs, clear_seen=True)
                step = "attach" if step == "settle" else step
            if step == "attach":
                self.log.info(
                    "Re-attaching to run %s that %s started (state %s)",
                    run.bench_result_id,
                    record.started_by,
                    state,
                )
                return self._adopt(context, run), state
            if step == "judge":
                self.log.info(
                    "Run %s of an earlier try already ended %s: taking its verdict, not starting another",
                    run.bench_result_id,
                    state,
                )
                return self._adopt(context, run), state
            if plan.clear_seen and state == "ABORTED":
                self.log.warning(
                    "The DAG run was cleared after run %s started, and the run ended ABORTED: the clear of "
                    "this task stopped it. Starting the new run the clear asked for",
                    run.bench_result_id,
                )
            else:
                self.log.warning(
                    "Run %s of an earlier try ended %s: starting a new run (restart_failed_runs=True)",
                    run.bench_result_id,
                    state,
                )
        elif plan.message:
            self.log.warning("%s", plan.message)
        if plan.stop_first is not None:
            self._stop_run_of_before_the_clear(StartedRun.from_xcom(plan.stop_first), pending)
        return self._adopt(context, self._start_recorded(store, max_tries, clear_number)), None

    def _run_state(self, run: StartedRun) -> str:
        return str(self.hook.get_bench_result(run.bench_result_id).state or "UNKNOWN")

    def _recorded_run_state(self, run: StartedRun, record: RunRecord) -> str:
        """The state of the run an earlier try started; a failure to read it says, as that try would
        have, that the run may be billing and how to stop it."""
        from airflow_provider_loadtest.api.errors import LoadTestApiError

        try:
            return self._run_state(run)
        except LoadTestApiError as exc:
            raise self._wait_ended_without_verdict(
                run,
                f"re-attaching to it ({record.started_by} started it), its state could not be read: {exc}",
                never_succeeds=exc.never_succeeds,
            ) from exc

    def _pending_stop(self, record: RunRecord | None) -> PendingStop | None:
        """The stop a trigger left pending for the recorded run (``decisions.stops.PendingStop``), if
        any; best effort (a Variable that cannot be read is said, and taken as none)."""
        if record is None or record.bench_result_id is None:
            return None
        from airflow_provider_loadtest.lifecycle import support

        try:
            return support.read_pending_stop(record.bench_result_id)
        except Exception as exc:
            self.log.warning(
                "Could not read whether a stop of run %s was left pending: %s",
                record.bench_result_id,
                support.describe_error(exc),
            )
            return None

    def _forget_pending_stop(self, bench_result_id: str) -> None:
        from airflow_provider_loadtest.lifecycle import support

        try:
            support.clear_pending_stop(bench_result_id)
        except Exception as exc:
            self.log.warning(
                "Could not remove the pending stop of run %s: %s",
                bench_result_id,
                support.describe_error(exc),
            )

    def _act_on_pending_stop(
        self, run: StartedRun, state: str, pending: PendingStop, clear_seen: bool
    ) -> bool:
        """A trigger left a stop of ``run`` pending: ``True`` when it was a person's (a clear came since)
        and the run was stopped, so the try starts the new run the clear asked for."""
        self._forget_pending_stop(run.bench_result_id)
        if is_terminal(state):
            return False
        if on_pending_stop(clear_seen=clear_seen) == "stop":
            self.log.warning(
                "A stop was pending: %s. The DAG run was cleared since: stopping run %s, then starting the "
                "new run the clear asked for",
                pending.describe(),
                run.bench_result_id,
            )
            self._stop_for(run, self._pending_decision(run, pending), bound_s=None)
            return True
        self.log.info(
            "A stop was pending: %s. This try is a retry, which Airflow starts only after a failure of the "
            "task's own, never after a person marked it failed or successful: the wait had moved on, nobody "
            "asked for run %s to end",
            pending.describe(),
            run.bench_result_id,
        )
        return False

    @staticmethod
    def _pending_decision(run: StartedRun, pending: PendingStop) -> StopDecision:
        from airflow_provider_loadtest.decisions.stops import decision

        detail = f"a stop was pending since {utc_text(pending.at)}: {pending.why}"
        return decision(run.bench_result_id, "clear", time.time(), detail)

    def _settled_state(self, run: StartedRun, state: str) -> str:
        """A clear of the DAG run came after ``run`` started, and it still goes: if the clear was this
        task's, its try has just asked the service to stop it, which takes a moment. Look again for up to
        ``CLEAR_SETTLE_S``; a run still going then was not stopped by the clear."""
        deadline = time.monotonic() + CLEAR_SETTLE_S
        while not is_terminal(state) and time.monotonic() < deadline:
            _pause(CLEAR_SETTLE_POLL_S)
            state = self._run_state(run)
        return state

    def _stop_run_of_before_the_clear(self, run: StartedRun, pending: PendingStop | None = None) -> None:
        """A person cleared the task while its run went, and the try that watched it could not stop it
        (it was deferred, or its worker died first): the clear asked for a new run, so the old one ends.
        ``pending``: a stop its trigger left pending (said as the stop's reason, then removed)."""
        from airflow_provider_loadtest.decisions.stops import decision

        if pending is not None:
            self.log.warning("A stop was pending: %s", pending.describe())
            self._forget_pending_stop(run.bench_result_id)

        try:
            state = str(self.hook.get_bench_result(run.bench_result_id).state or "UNKNOWN")
        except Exception as exc:
            self.log.warning(
                "Could not read the state of run %s of before the clear: %s", run.bench_result_id, exc
            )
            state = "UNKNOWN"
        if is_terminal(state):
            return
        stop = (
            self._pending_decision(run, pending)
            if pending is not None
            else decision(run.bench_result_id, "clear", time.time())
        )
        self._stop_for(run, stop, bound_s=None)

    def _start_recorded(self, store: Any, max_tries: int | None, clear_number: int | None) -> StartedRun:
        """Send the start, with "start in flight" recorded before and the run recorded after."""
        from airflow_provider_loadtest.api.errors import LoadTestApiError
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException

        start = self._prepare_start()
        self._refuse_to_start_if_killed()
        sent_at = time.time()
        record = RunRecord(
            start.scenario_id,
            sent_at,
            max_tries,
            clear_number=clear_number,
            started_by_try=read_try_number(self._ti),
        )
        if store is not None:
            try:
                store.set(RUN_RECORD_KEY, record.to_store())
            except Exception as exc:
                raise AirflowException(
                    f"Could not record in the task state store that a start is in flight ({exc}): not "
                    "starting a load test a retry could not find. Nothing was started."
                ) from exc
            if self._kill is not None:  # on_kill came while the record was written: nothing is sent
                _store_delete(store, self.log)
                self._refuse_to_start_if_killed()
        try:
            run = self._send_start(start, sent_at)
        except LoadTestApiError as exc:
            if exc.outcome_unknown:
                raise AirflowFailException(
                    uncertain_start_message(start.scenario_id, sent_at, str(exc))
                ) from exc
            _store_delete(store, self.log)  # refused: nothing started, a retry may start
            if not exc.reached_service:
                raise AirflowException(
                    f"Nothing was started: the start of scenario {start.scenario_id!r} never reached the "
                    f"service ({exc}). Check the connection {self.loadtest_conn_id!r} (its host, port and "
                    "scheme) and that the service runs; a retry of this task starts the load test."
                ) from exc
            raise
        except ValueError as exc:  # a 2xx without the run's ids: the service may have started it
            raise AirflowFailException(uncertain_start_message(start.scenario_id, sent_at, str(exc))) from exc
        self._record = record.with_run(run.to_xcom())
        if store is not None:
            try:
                store.set(RUN_RECORD_KEY, self._record.to_store())
            except Exception as exc:
                self._no_working_store(f"the started run could not be recorded in the store ({exc})")
        return run

    def _refuse_to_start_if_killed(self) -> None:
        """Airflow is ending this task (``on_kill`` came before the start was sent): start nothing."""
        if self._kill is None:
            return
        from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
        from airflow_provider_loadtest.decisions.stops import decision

        if self._kill.cause is None:
            raise AirflowException(
                f"The task's process is being ended ({self._kill.detail}) before its load test was started: "
                "nothing was started; a retry starts it."
            )
        why = decision("", self._kill.cause, self._kill.at).why
        raise AirflowFailException(
            f"The task was ended before its load test was started: {why}. Nothing was started."
        )

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

    def _store_holds(self, context: Context, run: StartedRun) -> None:
        """After a deferral (a new process): can a retry find ``run`` in the store?"""
        store = context_get(context, "task_state_store")
        self._store_works = True
        self._store, self._record = None, None
        if store is None:
            self._no_working_store("there is no task state store (Airflow < 3.3)")
            return
        try:
            record = RunRecord.from_store(store.get(RUN_RECORD_KEY))
        except Exception as exc:
            self._no_working_store(f"the task state store could not be read ({exc})")
            return
        if record is None or record.bench_result_id != run.bench_result_id:
            self._no_working_store(f"the task state store does not hold run {run.bench_result_id}")
            return
        self._store, self._record = store, record

    def _record_stop(self, stop: StopDecision) -> bool:
        """Write ``stop`` into the run record before the stop is sent. Without a store there is nothing a
        retry could misread (it could not re-attach at all)."""
        record = self._record
        if record is not None and record.bench_result_id == stop.bench_result_id:
            self._record = record.with_stop(stop)
        if self._store is None or record is None:
            return True
        try:
            self._store.set(RUN_RECORD_KEY, record.with_stop(stop).to_store())
        except Exception as exc:
            self.log.warning(
                "Could not record in the task state store why run %s is stopped: %s",
                stop.bench_result_id,
                exc,
            )
            return False
        return True

    def _recorded_stop(self) -> StopDecision | None:
        return self._record.stopped if self._record is not None else None

    def start_run(self, context: Context) -> StartedRun:
        """Check the rendered arguments, resolve the template and start the run (one POST).

        Records nothing: ``execute`` records the start in flight and the run around this call.
        """
        return self._send_start(self._prepare_start(), time.time())

    def _prepare_start(self) -> _StartRequest:
        """Everything that can fail before the start is sent: rendered ids, properties, the scenario
        and the template."""
        workspace_id = (
            validate_path_id("workspace_id", self.workspace_id) if self.workspace_id is not None else None
        )
        scenario_id = self._resolve_scenario_id(workspace_id)
        spec = self._gate_spec()  # only a try about to start checks labels: a re-attaching one must not fail
        context = cast("Context", {"ti": getattr(self, "_ti", None)})  # what reading the history needs
        self._check_labels_before_start(context, spec, self._transaction_gate(spec))
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

    def _resolve_scenario_id(self, workspace_id: str | None) -> str:
        """``scenario_id``, or the id of the one scenario named ``scenario_name`` where the task says
        it lives (``decisions.scenarios``: exact, then ignoring case; none or several refuse)."""
        if self.scenario_name is None:
            return validate_path_id("scenario_id", self.scenario_id)
        from airflow_provider_loadtest.decisions.scenarios import require_scenario

        name = self.scenario_name
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"scenario_name must be a non-empty string, got {name!r}")
        if self.project_id is not None:
            project_id = validate_path_id("project_id", self.project_id)
            where = f"project {project_id!r}"
            scenarios = self.hook.list_scenarios(project_id)
        else:
            assert workspace_id is not None  # noqa: S101 - type narrowing, enforced in __init__
            where = f"workspace {workspace_id!r}"
            scenarios = [
                scenario if scenario.project_id else scenario.model_copy(update={"project_id": project.id})
                for project in self.hook.list_design_projects(workspace_id)
                if project.id
                for scenario in self.hook.list_scenarios(validate_path_id("project_id", project.id))
            ]
        scenario = require_scenario(scenarios, name=name, where=where)
        self.log.info("Using scenario %r (id %s) of %s", scenario.name, scenario.id, where)
        return validate_path_id("scenario_id", scenario.id)

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


@dataclass(frozen=True)
class _StartRequest:
    """The checked, rendered arguments of one start call."""

    scenario_id: str
    workspace_id: str | None
    template_id: str | None
    properties: dict[str, str] | None
    subscription_id: str | None


def _store_delete(store: Any, log: Any) -> None:
    if store is None:
        return
    try:
        store.delete(RUN_RECORD_KEY)
    except Exception as exc:
        log.warning("Could not clear the start-in-flight record (a retry will refuse to start): %s", exc)
