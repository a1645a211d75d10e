"""The gate per transaction: the run's JTL files (every load generator's, gzipped or not) streamed into one
``decisions.jtl.JtlReader`` once the run ended, and the transactions judged by the gate's own code.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, BinaryIO, cast

from airflow_provider_loadtest.lifecycle.base import LifecycleBase

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_loadtest.decisions.gate import Baseline, GateRow, GateSpec, Unreadable
    from airflow_provider_loadtest.decisions.gate.history import GateHistory, SeriesHistory, SeriesKey
    from airflow_provider_loadtest.decisions.gate.judging import SeriesSpec
    from airflow_provider_loadtest.decisions.gate.transactions import TransactionGate
    from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary
    from airflow_provider_loadtest.decisions.runs import StartedRun


class TransactionJudging(LifecycleBase):
    """Read the run's JTL files once and judge its transactions."""

    def _transaction_gate(self, spec: GateSpec) -> TransactionGate:
        """The rendered ``transaction_budgets`` and ``transaction_max_regression_pct``, checked against
        the task's baseline (``ValueError`` names what is wrong)."""
        from airflow_provider_loadtest.decisions.gate.transactions import TransactionGate

        return TransactionGate.parse(
            self.transaction_budgets, self.transaction_max_regression_pct, spec.baseline
        )

    def _check_labels_before_start(self, context: Context, spec: GateSpec, gate: TransactionGate) -> None:
        """Before the (billed) start: a gated label that looks like a typo of one the history of the last
        nights knows fails now (``ValueError``), not after the run (``decisions.labels``); what cannot
        be known is said in the log."""
        from airflow_provider_loadtest.decisions.gate.history import HISTORY
        from airflow_provider_loadtest.decisions.labels import check_labels

        if not gate.active:
            return
        history = self._gate_history(context, spec) if spec.baseline == HISTORY else None
        known = frozenset(
            label for (label, _metric) in (history.series if history else {}) if label is not None
        )
        if not known:
            self.log.info(
                "The transaction labels are checked once the run ended: no earlier night's labels to check "
                "them against before the start (%s)",
                "the history has none yet"
                if spec.baseline == HISTORY
                else "only baseline='history' keeps them, in XCom",
            )
            return
        found = check_labels(
            {
                "transaction_budgets": gate.budgets.budgets,
                "transaction_max_regression_pct": gate.bounds,
            },
            known,
        )
        for note in found.notes:
            self.log.warning("%s", note)
        if found.refusals:
            raise ValueError("; ".join(found.refusals) + ". Nothing was started.")

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
    ) -> tuple[list[GateRow], dict[SeriesKey, SeriesHistory], str | None, list[SeriesSpec]]:
        """Read the run's JTL files once and judge each transaction (``decisions.gate.transactions``); also
        the slowest transactions for the log, named by a budget or not. A run without JTL files, or one
        that does not read, fails every transaction row as not measured. A task without a transaction
        gate reads no JTL file: a long run's files can be hundreds of megabytes, not worth a log line."""
        from airflow_provider_loadtest.decisions.gate import Unreadable
        from airflow_provider_loadtest.decisions.gate.history import HISTORY
        from airflow_provider_loadtest.decisions.gate.transactions import (
            judge_transaction_gate,
            needs_baseline_run,
            slowest_text,
            transaction_series,
        )

        if not gate.active:
            return [], {}, None, []
        summary = self._transaction_figures(run.bench_result_id, gate, must=must)
        # Why samples failed, read in the same pass: the verdict explains a failed gate with it.
        self._run_failures = None if isinstance(summary, Unreadable) else summary.failures
        # Its 304 answers, for the service's trust caveat (``decisions.gate.caveats``).
        self._run_samples = (
            None if isinstance(summary, Unreadable) else (summary.samples, summary.not_modified)
        )
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
        if spec.baseline == HISTORY:  # judged with the run's metrics, together (``evaluate``)
            specs, unmatched = transaction_series(gate, summary)
            return unmatched, {}, text, specs
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
        return rows, series, text, []

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
