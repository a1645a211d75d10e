"""The run lifecycle's shared state: what a front door (operator, sensor) sets, checked once, and the
hooks a front door may override (where a stop decision is recorded, whether a retry can find the run).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.decisions.run_record import positive_seconds
from airflow_provider_loadtest.decisions.runs import check_gate_severity
from airflow_provider_loadtest.decisions.stops import StopCause, StopDecision
from airflow_provider_loadtest.lifecycle.support import Kill, R, history_settings_of
from airflow_provider_loadtest.operators.common import LoadTestHookMixin

if TYPE_CHECKING:
    from collections.abc import Generator

    from airflow.sdk import Context, ObjectStoragePath

    from airflow_provider_loadtest.decisions.gate import Baseline, GateRow, GateSpec
    from airflow_provider_loadtest.decisions.gate.history import GateHistory, SeriesHistory, SeriesKey
    from airflow_provider_loadtest.decisions.gate.judging import SeriesSpec
    from airflow_provider_loadtest.decisions.gate.transactions import TransactionGate
    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.samples.failures import RunFailures
    from airflow_provider_loadtest.decisions.watch import RunOutcome


class LifecycleBase(LoadTestHookMixin):
    """The attributes and overridable hooks the lifecycle's parts share (see ``lifecycle``)."""

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
            from airflow_provider_loadtest.decisions.gate.transactions import TransactionGate

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
        #: Why the run's samples failed, from the JTL files the transaction gate read (explains a failure).
        self._run_failures: RunFailures | None = None
        #: The samples the JTL files held, and how many were answered 304 (a trust caveat).
        self._run_samples: tuple[int, int] | None = None
        self._store_works = True  # until the task finds it has no task state store it can rely on
        self._ti: Any = None
        self._kill: Kill | None = None
        self._watching = False
        self._stopped: set[str] = set()  # runs this process decided to stop (one stop per decision)
        self._decided: dict[str, StopDecision] = {}  # ... and why
        self._stop_sent: set[str] = set()  # ... and whose stop call the service accepted

    def _run_timeout_s(self) -> float | None:
        """The longest wait for the run from its start (the operator's ``timeout``); ``None``: no bound."""
        return None

    def _may_stop(self, cause: StopCause) -> bool:
        """Whether this task stops a run for ``cause``. The operator started its run: every decision
        stops it. A sensor overrides this: it stops only what it was asked to."""
        return True

    def _record_stop(self, stop: StopDecision) -> bool:
        """Remember ``stop`` where a retry finds it; ``False`` when it could not be. The operator writes it
        into its run record; a front door without a record has nothing to keep consistent."""
        return True

    def _store_holds(self, context: Context, run: StartedRun) -> None:
        """After a deferral (a new process): can a retry find ``run``? The operator checks its store."""
        self._store_works = True

    def _recorded_stop(self) -> StopDecision | None:
        """The stop decision a retry found for its run (the operator's record), if any."""
        return None

    if TYPE_CHECKING:  # implemented by the other parts of the lifecycle (see ``lifecycle``)

        def _finish(self, context: Context, run: StartedRun, outcome: RunOutcome) -> dict[str, Any]: ...
        def _remember_watch_stop(self, outcome: RunOutcome) -> None: ...
        def _raise_if_killed(self, run: StartedRun) -> None: ...
        def _recording_stops(self, steps: Generator[Any, Any, R]) -> Generator[Any, Any, R]: ...
        def _stop_for(self, run: StartedRun, stop: StopDecision, *, bound_s: float | None = ...) -> bool: ...
        def _after_kill(self, run: StartedRun) -> Exception: ...
        def _transaction_gate(self, spec: GateSpec) -> TransactionGate: ...
        def _gate_history(
            self, context: Context, spec: GateSpec, run: StartedRun | None = None
        ) -> GateHistory | None: ...
        def _check_labels_before_start(
            self, context: Context, spec: GateSpec, gate: TransactionGate
        ) -> None: ...
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
        ) -> tuple[list[GateRow], dict[SeriesKey, SeriesHistory], str | None, list[SeriesSpec]]: ...
