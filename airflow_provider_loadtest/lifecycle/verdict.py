"""The verdict of an ended run: its state, the threshold-alarm gate, the metric budgets and regression
bounds (against a pinned run, the previous night or the history), the transaction gates, the files saved
before the verdict, and the outlet assets' events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_provider_loadtest.decisions.run_record import verdict_is_final
from airflow_provider_loadtest.decisions.runs import is_terminal
from airflow_provider_loadtest.decisions.stops import explain
from airflow_provider_loadtest.lifecycle.base import LifecycleBase
from airflow_provider_loadtest.lifecycle.support import (
    context_get,
    dag_run_conf,
    history_settings_of,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_loadtest.decisions.gate import Baseline, GateSpec, Verdict
    from airflow_provider_loadtest.decisions.gate.history import GateHistory
    from airflow_provider_loadtest.decisions.gate.nights import Memory
    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.decisions.watch import RunOutcome
    from airflow_provider_loadtest.lifecycle.explaining import Explanation


class Judging(LifecycleBase):
    """The verdict of an ended run: its state, the gates, the files, the outlet events."""

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
        self._run_failures = None
        verdict = self._check_gate(context, run, outcome)
        if verdict is not None:
            result["gate"] = [row.to_xcom() for row in verdict.rows]
            if verdict.night is not None:
                result["night_effect"] = verdict.night.to_xcom()
        result.update(self._save_files(context, run, must_succeed=outcome.succeeded))
        passed = outcome.succeeded and (verdict is None or verdict.passed)
        why = self._explain(run, outcome, verdict, passed)
        if why.data:
            result["explanation"] = why.data
        from airflow_provider_loadtest.decisions.gate.summary import summary_markdown

        result["summary"] = summary_markdown(
            result, verdict, passed=passed, why=why.news, run_message=outcome.message
        )
        self._describe_outlet_events(context, result, passed, verdict)
        self._active_run = None
        ti = context_get(context, "ti")
        if passed:
            if verdict is not None and ti is not None:
                from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, Baseline

                baseline = Baseline(run.bench_result_id, verdict.metrics, transactions=verdict.transactions)
                ti.xcom_push(key=BASELINE_XCOM_KEY, value=baseline.to_xcom())
                self._record_night(context, ti, run, verdict)
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
                self._record_night(context, ti, run, verdict)
            raise AirflowFailException(f"{verdict.message()}.{report}{_why_text(why)}")
        final = verdict_is_final(
            reason=outcome.reason,
            state=outcome.state,
            restart_failed_runs=getattr(self, "restart_failed_runs", False),
            store_works=self._store_works,
        )
        raise (AirflowFailException if final else AirflowException)(
            f"{outcome.message}.{report}{_why_text(why)}"
        )

    def _explain(
        self, run: StartedRun, outcome: RunOutcome, verdict: Verdict | None, passed: bool
    ) -> Explanation:
        """Why the run or its gate failed (``lifecycle.explaining``), said in the log; nothing when it
        passed. An ERROR or ABORTED run: the service's word and its JMeter log's ERROR lines; a failed
        gate: the failing transactions' failures from the JTL files already read."""
        from airflow_provider_loadtest.lifecycle.explaining import (
            Explanation,
            explain_gate,
            explain_run,
            read_jmeter_logs,
        )

        if passed:
            return Explanation()
        if outcome.state in ("ERROR", "ABORTED"):
            why = explain_run(outcome, read_jmeter_logs(self.hook, run.bench_result_id))
        elif verdict is not None and not verdict.passed:
            why = explain_gate(verdict, getattr(self, "_run_failures", None))
        else:
            return Explanation()
        if why.lines:
            self.log.error("Why run %s failed:\n%s", run.bench_result_id, "\n".join(why.lines))
        return why

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

    def _gate_accepted(self, context: Context, spec: GateSpec) -> frozenset[str]:
        """The gated metrics whose change a person accepted as the new normal for this DAG run
        (``decisions.gate.history.accepted_metrics``), for the run and its transactions alike; only
        ``baseline="history"`` has a normal to move. ``ValueError`` for a value that does not read:
        a typo must not pass a regression."""
        from airflow_provider_loadtest.decisions.gate.history import HISTORY, accepted_metrics

        if spec.baseline != HISTORY:
            return frozenset()
        from airflow_provider_loadtest.decisions.gate.load import LOAD_METRICS

        # The applied load is judged against its history too: a deliberate change of it is accepted alike.
        gated = dict.fromkeys([*spec.metric_ids, *self._transaction_gate(spec).metric_ids, *LOAD_METRICS])
        return accepted_metrics(dag_run_conf(context), self.task_id, gated)

    def _check_gate(self, context: Context, run: StartedRun, outcome: RunOutcome) -> Verdict | None:
        """Fetch the values and judge them, once the run ended. After a failed run this is best
        effort (the task fails for the run's own reason); after a FINISHED one a failed fetch fails
        the task, and a retry re-attaches to the run (kept in its record) and judges again."""
        spec = self._gate_spec()
        transactions = self._transaction_gate(spec)
        min_userload = getattr(self, "min_userload", None)
        fail_on_caveats = bool(getattr(self, "fail_on_trust_caveats", False))
        active = spec.active or transactions.active or min_userload is not None or fail_on_caveats
        if not active or not is_terminal(outcome.state):
            return None
        from airflow_provider_loadtest.decisions.gate import evaluate
        from airflow_provider_loadtest.decisions.gate.history import HISTORY
        from airflow_provider_loadtest.lifecycle.night_records import night_date

        baseline, note = self._gate_baseline(context, spec.baseline, run)
        history, accepted = None, frozenset[str]()
        self._night_memory: Memory | None = None
        self._night_accepted = frozenset[str]()
        if spec.baseline == HISTORY:
            history = self._gate_history(context, spec, run)
            try:
                accepted = self._gate_accepted(context, spec)
            except ValueError as exc:
                from airflow_provider_loadtest.compat import AirflowFailException

                raise AirflowFailException(str(exc)) from exc
            self._night_accepted = accepted
            bounded = {*spec.max_regression_pct, *transactions.bounded_metric_ids}
            moved = sorted(accepted & bounded)  # a budget has no normal to move
            if moved:
                self.log.warning(
                    "The DAG run accepts the change of %s as the new normal (loadtest_accept_change): "
                    "not judged against the history tonight, which restarts from this run",
                    ", ".join(moved),
                )
        try:
            self._run_samples = None
            rows, series, text, specs = self._judge_transactions(
                run, transactions, spec, baseline, history, accepted, must=outcome.succeeded
            )
            from airflow_provider_loadtest.decisions.gate.caveats import trust_caveats

            counted = getattr(self, "_run_samples", None)
            caveats = trust_caveats(
                alarms=outcome.alarms,
                samples=counted[0] if counted else None,
                not_modified=counted[1] if counted else None,
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
                transaction_series=specs,
                min_userload=min_userload,
                caveats=caveats,
                fail_on_caveats=fail_on_caveats,
                duration_s=outcome.duration_s,
                when=night_date(run),
            )
            return self.hook.drive(steps, self.log)
        except Exception as exc:
            if outcome.succeeded:
                raise
            self.log.error("Could not check the quality gate of run %s: %s", run.bench_result_id, exc)
            return None

    def _gate_history(
        self, context: Context, spec: GateSpec, run: StartedRun | None = None
    ) -> GateHistory | None:
        """Tonight's history (``baseline="history"``), derived from the nights this task recorded
        (``lifecycle.night_records``): one night per bench result of ``run``'s scenario, in the order
        the runs happened, whatever order or kind of DAG run Airflow made. Without ``run`` (before the
        start), every recorded night of the task. Its own earlier tries' XComs are cleared by Airflow
        when a try starts, so a retry judges against the same nights as the first try. ``None`` (no
        task instance to read with) fails every bounded metric as not measured."""
        from airflow_provider_loadtest.decisions.gate.history import GateHistory, HistorySettings
        from airflow_provider_loadtest.lifecycle.night_records import ran_at_of, recall_history

        ti = context_get(context, "ti")
        if ti is None:
            return None
        # Before the start: the scenario the task names, when it names one by id.
        scenario = run.scenario_id if run is not None else getattr(self, "scenario_id", None)
        try:
            recalled = recall_history(
                ti,
                self.task_id,
                spec.history or HistorySettings(),
                scenario_id=scenario if isinstance(scenario, str) and scenario else None,
                bench_result_id=run.bench_result_id if run is not None else None,
                ran_at=ran_at_of(run) if run is not None else None,
            )
        except Exception as exc:  # never pass a regression on a memory that does not read: fail closed
            self.log.error("The gate's recorded nights could not be read: %r", exc)
            return GateHistory(error=f"the gate's recorded nights could not be read ({exc!r})")
        if run is not None:
            self._night_memory, self._night_without_record = recalled.memory, recalled.without_record
            before = recalled.memory.before
            self.log.info(
                "The history of scenario %s: %d earlier night(s) recorded%s",
                run.scenario_id,
                len(before),
                f", the last of run {before[-1].bench_result_id} ({before[-1].when})" if before else "",
            )
        for line in recalled.notes:
            self.log.warning("%s", line)
        if run is not None:
            self._say_backfill(context, ran_at_of(run))
        return recalled.history

    def _say_backfill(self, context: Context, ran_at: float) -> None:
        """A DAG run dated days before its load test ran (a backfill, a catch-up) is a night of when it
        ran: its figures measure the system as it is now, not as it was on its logical date."""
        from datetime import datetime

        logical = getattr(context_get(context, "dag_run"), "logical_date", None)
        if isinstance(logical, datetime) and ran_at - logical.timestamp() > BACKFILL_S:
            self.log.warning(
                "This DAG run's logical date %s lies %.0f days before its load test ran (a backfill or a "
                "catch-up): the night is judged and remembered as of when it ran",
                logical.date().isoformat(),
                (ran_at - logical.timestamp()) / 86_400,
            )

    def _record_night(self, context: Context, ti: Any, run: StartedRun, verdict: Verdict) -> None:
        """Record tonight's night once, with its identity, beside the history it ended with."""
        if verdict.history is None:
            return
        from airflow_provider_loadtest.lifecycle.night_records import context_ids, night_record, push_night

        record = night_record(
            run,
            verdict,
            accepted=getattr(self, "_night_accepted", frozenset()),
            memory=getattr(self, "_night_memory", None),
            context_ids=context_ids(context, ti),
        )
        push_night(ti, record, verdict, getattr(self, "_night_without_record", ()))

    def _gate_baseline(
        self, context: Context, wanted: str | None, run: StartedRun
    ) -> tuple[Baseline | None, str | None]:
        """The baseline run: pinned, or the one the latest earlier passing DAG run of this task left
        in XCom (only passing runs leave one), read through Airflow, never a store of ours."""
        from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, PREVIOUS, Baseline
        from airflow_provider_loadtest.decisions.gate.history import HISTORY

        if wanted is None or wanted == HISTORY:
            return None, None
        if wanted != PREVIOUS:
            return Baseline(wanted, {}), None
        ti = context_get(context, "ti")
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
        events = context_get(context, "outlet_events") if outlets else None
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


#: A DAG run dated more than this before its load test ran is said to be a backfill (two days: a daily
#: schedule's data interval ends a day after its logical date).
BACKFILL_S = 2 * 86_400


def _why_text(why: Explanation) -> str:
    """The explanation's first lines, for the exception's message."""
    text = why.for_exception()
    return f" Why: {text}" if text else ""
