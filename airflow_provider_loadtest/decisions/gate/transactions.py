"""Gates per transaction: budgets on the figures of each JTL label, judged like the run's own gate.

``transaction_budgets`` maps a label, or a pattern such as ``"api/*"`` (``fnmatch``, case-sensitive
like JMeter's labels), to ``{metric id: condition}`` with the metric ids computable from samples
(``jtl_figures.SAMPLE_METRICS``). A pattern applies to every sampled label it matches; where a label
is named exactly, its own budget for a metric wins over a pattern's, and among patterns the first one
naming the metric wins, so that each (transaction, metric) has one row. The rows are ``gate.GateRow``s
made by ``gate.judge``, the run gate's own code, with ``transaction`` set.

``transaction_max_regression_pct`` (``{label or pattern: {metric id: percent}}``, the same rules) bounds
how much worse each transaction may be than the task's ``baseline``, judged by ``gate.judge_history`` as
the run's bounds are: against the baseline run's value of that transaction, or against the noise of the
transaction's own history (its series ``(label, metric)`` in the task's gate history).

A budget naming a transaction the run never sampled fails (a gate that measured nothing must not
pass), naming the labels the run did sample, closest first; so does every row when the run's JTL files
could not be read. No I/O (the run lifecycle downloads the files into ``decisions.jtl.JtlReader``), and
only cheap imports at module level: the operator checks the settings when the DAG is parsed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_loadtest.api.validation import is_templated
from airflow_provider_loadtest.decisions.gate import (
    DEFAULT_HISTORY,
    Budget,
    GateRow,
    GateSpec,
    Unreadable,
    check_metric_id,
    judge_history,
    parse_regression,
)
from airflow_provider_loadtest.decisions.gate.history import (
    HISTORY,
    NOT_MEASURED,
    GateHistory,
    HistorySettings,
    SeriesHistory,
    SeriesKey,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.judging import SeriesSpec
    from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary

__all__ = [
    "BOUNDS_PARAMETER",
    "PARAMETER",
    "TransactionBudgets",
    "TransactionGate",
    "judge_transaction_gate",
    "judge_transactions",
    "needs_baseline_run",
    "slowest_text",
    "transaction_series",
    "unsampled_reason",
]

PARAMETER = "transaction_budgets"
BOUNDS_PARAMETER = "transaction_max_regression_pct"
_PATTERN_CHARACTERS = frozenset("*?[")
#: How many sampled labels a failure for an unsampled transaction names.
_LABELS_NAMED = 10


def is_pattern(key: str) -> bool:
    """Whether a budget's key is a pattern (``*``, ``?``, ``[...]``) rather than one label."""
    return not _PATTERN_CHARACTERS.isdisjoint(key)


def _sample_metrics() -> tuple[str, ...]:
    from airflow_provider_loadtest.decisions.jtl_figures import SAMPLE_METRICS

    return SAMPLE_METRICS


def _check_metric(where: str, metric: object) -> str:
    metric_id = check_metric_id(where, metric)
    computable = _sample_metrics()
    if metric_id not in computable:
        raise ValueError(
            f"{where}: {metric_id} cannot be computed from a run's samples; a transaction can be "
            f"gated on {', '.join(computable)}"
        )
    return metric_id


@dataclass(frozen=True)
class TransactionBudgets:
    """``transaction_budgets``, checked: per label or pattern, the budget of each metric id."""

    budgets: Mapping[str, Mapping[str, Budget]]

    @classmethod
    def parse(cls, value: object) -> TransactionBudgets:
        """Check the rendered setting; ``ValueError`` names what is wrong, and where."""
        budgets: dict[str, dict[str, Budget]] = {}
        for key, where, conditions in _per_transaction(
            value, PARAMETER, "condition", "{'RESPONSE_TIME_PERCENTILE_95': '<= 800'}"
        ):
            budgets[key] = {
                _check_metric(where, metric): Budget.parse(metric, condition, where)
                for metric, condition in conditions.items()
            }
        return cls(budgets)

    @classmethod
    def check_literal(cls, value: object) -> None:
        """At DAG-parse time: check what is not a template (the rest is checked once rendered)."""
        if is_templated(value) or not isinstance(value, Mapping):
            cls.parse(None if is_templated(value) else value)
            return
        plain: dict[Any, Any] = {}
        for key, conditions in value.items():
            if is_templated(key) or is_templated(conditions):
                continue
            kept = conditions
            if isinstance(conditions, Mapping) and conditions:
                kept = {m: c for m, c in conditions.items() if not (is_templated(m) or is_templated(c))}
                if not kept:  # every condition is a template
                    continue
            plain[key] = kept
        cls.parse(plain)

    @property
    def metric_ids(self) -> tuple[str, ...]:
        """Every metric id a budget names, once (what the JTL reader must compute)."""
        return tuple(dict.fromkeys(m for conditions in self.budgets.values() for m in conditions))

    @property
    def active(self) -> bool:
        return bool(self.budgets)


def _closest_first(wanted: str, labels: Sequence[str]) -> list[str]:
    import difflib

    target = wanted.lower()
    if is_pattern(wanted):
        target = "".join(ch for ch in target if ch not in _PATTERN_CHARACTERS)
    return sorted(
        labels, key=lambda label: (-difflib.SequenceMatcher(None, target, label.lower()).ratio(), label)
    )


def unsampled_reason(key: str, labels: Sequence[str]) -> str:
    """Why a budget on ``key`` cannot be checked: no sample has that label (or matches that pattern),
    with the labels the run sampled, closest first."""
    what = f"no sampled label matches {key!r}" if is_pattern(key) else f"the run never sampled {key!r}"
    if not labels:
        return f"{what}: its JTL files hold no samples"
    named = _closest_first(key, labels)[:_LABELS_NAMED]
    more = f" and {len(labels) - len(named)} more" if len(labels) > len(named) else ""
    return f"{what}; labels sampled (closest first): {', '.join(map(repr, named))}{more}"


T = TypeVar("T")


def _assignments(
    settings: Mapping[str, Mapping[str, T]], labels: Sequence[str]
) -> tuple[dict[str, dict[str, T]], list[str]]:
    """Which setting (a budget or a bound) each (label, metric) gets, and the keys no sampled label
    answers."""
    sampled = set(labels)
    assigned: dict[str, dict[str, tuple[T, bool]]] = {}
    unmatched: list[str] = []
    for key, per_metric in settings.items():
        exact = key in sampled
        targets = [key] if exact else [label for label in labels if fnmatch.fnmatchcase(label, key)]
        if not targets:
            unmatched.append(key)
            continue
        for label in targets:
            slot = assigned.setdefault(label, {})
            for metric, setting in per_metric.items():
                if metric not in slot or (exact and not slot[metric][1]):
                    slot[metric] = (setting, exact)
    return {label: {m: b for m, (b, _) in slot.items()} for label, slot in assigned.items()}, unmatched


#: Why a metric of a sampled transaction has no value.
NO_COLUMN = "the run's JTL files lack the column it is computed from"


@dataclass(frozen=True)
class TransactionGate:
    """The gate per transaction a task asked for, checked: ``transaction_budgets`` and
    ``transaction_max_regression_pct`` (``{label or pattern: {metric id: percent}}``, judged against
    the task's ``baseline`` like ``max_regression_pct``: the previous run's value of that transaction,
    a pinned run's, or the noise of its own history)."""

    budgets: TransactionBudgets = field(default_factory=lambda: TransactionBudgets({}))
    bounds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @classmethod
    def parse(cls, budgets: object, bounds: object, baseline: object) -> TransactionGate:
        """Check the rendered settings (``baseline`` as ``GateSpec.parse`` read it); ``ValueError``
        names what is wrong."""
        gate = cls(TransactionBudgets.parse(budgets), _parse_bounds(bounds))
        if gate.bounds and baseline in (None, ""):
            raise ValueError(
                "transaction_max_regression_pct needs a baseline: 'history', 'previous' or a bench result id"
            )
        return gate

    @classmethod
    def check_literal(cls, budgets: object, bounds: object, baseline: object) -> None:
        """At DAG-parse time: check what is not a template (the rest is checked once rendered)."""
        TransactionBudgets.check_literal(budgets)
        if is_templated(bounds):
            return
        plain = _plain(bounds)
        cls.parse(None, plain, "previous" if is_templated(baseline) else baseline)

    @property
    def metric_ids(self) -> tuple[str, ...]:
        """Every metric id a budget or bound names, once (what the JTL reader must compute)."""
        bounded = (m for per_metric in self.bounds.values() for m in per_metric)
        return tuple(dict.fromkeys([*self.budgets.metric_ids, *bounded]))

    @property
    def bounded_metric_ids(self) -> tuple[str, ...]:
        """The metric ids with a regression bound on some transaction (what a person may accept)."""
        return tuple(dict.fromkeys(m for per_metric in self.bounds.values() for m in per_metric))

    @property
    def active(self) -> bool:
        return self.budgets.active or bool(self.bounds)

    @property
    def named(self) -> list[str]:
        """The labels and patterns named, in the order given (budgets first)."""
        return list(dict.fromkeys([*self.budgets.budgets, *self.bounds]))


def _plain(value: object) -> object:
    """``transaction_max_regression_pct`` without its templated keys and values (checked later)."""
    if not isinstance(value, Mapping):
        return value
    plain: dict[Any, Any] = {}
    for key, per_metric in value.items():
        if is_templated(key) or is_templated(per_metric):
            continue
        kept = per_metric
        if isinstance(per_metric, Mapping) and per_metric:
            kept = {m: p for m, p in per_metric.items() if not (is_templated(m) or is_templated(p))}
            if not kept:
                continue
        plain[key] = kept
    return plain


def _parse_bounds(value: object) -> dict[str, dict[str, float]]:
    bounds: dict[str, dict[str, float]] = {}
    for key, where, per_metric in _per_transaction(
        value, BOUNDS_PARAMETER, "percent", "{'RESPONSE_TIME_PERCENTILE_95': 10}"
    ):
        for metric in per_metric:
            _check_metric(where, metric)
        bounds[key] = parse_regression(per_metric, where)
    return bounds


def _per_transaction(
    value: object, parameter: str, what: str, example: str
) -> Iterator[tuple[str, str, Mapping[Any, Any]]]:
    """``{label or pattern: {metric id: what}}`` checked level by level: each label, where it is (for the
    messages: ``parameter['label']``) and its mapping; a ``ValueError`` names what is wrong, and where."""
    if value is None or value == {}:
        return
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{parameter} must be a mapping of transaction label (or pattern such as 'api/*') to "
            f"{{metric id: {what}}}, got {type(value).__name__}"
        )
    for key, inner in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"{parameter}: {key!r} is not a transaction label (a non-empty string)")
        where = f"{parameter}[{key!r}]"
        if not isinstance(inner, Mapping) or not inner:
            raise ValueError(f"{where} must be a non-empty mapping of metric id to {what}, such as {example}")
        yield key, where, inner


def _unmeasured_rows(gate: TransactionGate, key: str, reason: str) -> list[GateRow]:
    """A failing (not measured) row for each metric ``key`` names: nothing could be judged."""
    budgets = gate.budgets.budgets.get(key, {})
    bounds = gate.bounds.get(key, {})
    return [
        GateRow(
            metric=metric,
            value=None,
            passed=False,
            budget=str(budgets[metric]) if metric in budgets else None,
            max_regression_pct=bounds.get(metric),
            reason=f"not measured: {reason}",
            status=NOT_MEASURED,
            transaction=key,
        )
        for metric in dict.fromkeys([*budgets, *bounds])
    ]


def needs_baseline_run(
    gate: TransactionGate, summary: JtlSummary, known: Mapping[str, Mapping[str, object]]
) -> bool:
    """Whether a bound needs a baseline value that ``known`` (from XCom) lacks: the baseline run's own
    JTL files must then be read."""
    bounds, _ = _assignments(gate.bounds, summary.labels)
    return any(known.get(label, {}).get(metric) is None for label, per in bounds.items() for metric in per)


def transaction_series(
    gate: TransactionGate, summary: JtlSummary | Unreadable
) -> tuple[list[SeriesSpec], list[GateRow]]:
    """Under ``baseline="history"``: each (transaction, metric) a budget or bound names, as a series
    for ``judging.judge_gate`` to judge with the run's own metrics (one budget, one night effect), with
    the samples behind it; and a failing row per key no sample answers (or for every key when the
    run's JTL files could not be read)."""
    from airflow_provider_loadtest.decisions.gate.judging import SeriesSpec

    if isinstance(summary, Unreadable):
        return [], [row for key in gate.named for row in _unmeasured_rows(gate, key, summary.reason)]
    labels = summary.labels
    budgets, unmatched = _assignments(gate.budgets.budgets, labels)
    bounds, unbounded = _assignments(gate.bounds, labels)
    series = []
    for label in dict.fromkeys([*budgets, *bounds]):
        stats = summary.transactions[label]
        own_budgets, own_bounds = budgets.get(label, {}), bounds.get(label, {})
        for metric in dict.fromkeys([*own_budgets, *own_bounds]):
            value = stats.metric(metric)
            series.append(
                SeriesSpec(
                    (label, metric),
                    value if value is not None else Unreadable(NO_COLUMN),
                    own_budgets.get(metric),
                    own_bounds.get(metric),
                    samples=_samples(stats),
                )
            )
    rows = [
        row
        for key in dict.fromkeys([*unmatched, *unbounded])
        for row in _unmeasured_rows(gate, key, unsampled_reason(key, labels))
    ]
    return series, rows


def _samples(stats: Any) -> int:
    """The samples a transaction's figures come from (a Transaction Controller's own rows aside)."""
    return int(stats.hits) - int(getattr(stats, "controller_rows", 0) or 0)


def judge_transaction_gate(
    gate: TransactionGate,
    summary: JtlSummary | Unreadable,
    *,
    baseline: str | None = None,
    baseline_values: Mapping[str, Mapping[str, object]] | Unreadable | None = None,
    baseline_summary: JtlSummary | Unreadable | None = None,
    history: GateHistory | None = None,
    accepted: Iterable[str] = (),
    settings: HistorySettings | None = None,
) -> tuple[list[GateRow], dict[SeriesKey, SeriesHistory]]:
    """One row per (transaction, metric), judged by ``gate.judge_history`` as the run's metrics are, and
    the transactions' history series for the next night (``baseline="history"``).

    ``summary`` is the run's JTL figures, or why they could not be read: every row then fails as not
    measured. ``baseline`` is the task's (``GateSpec.baseline``). For a baseline run, its values come
    from ``baseline_values`` (the XCom it left, ``{label: {metric: value}}``; ``Unreadable``: fail the
    bounds) and, for what that lacks, from ``baseline_summary`` (its own JTL files, when read);
    ``baseline_values=None``: no baseline run yet (budgets only, as for the run). A key no sample
    answers gets a failing row per metric it names.
    """
    if isinstance(summary, Unreadable):
        return [row for key in gate.named for row in _unmeasured_rows(gate, key, summary.reason)], {}
    if baseline == HISTORY:  # every transaction judged together (``judging.judge_gate``)
        from airflow_provider_loadtest.decisions.gate.judging import judge_gate

        series_specs, unmatched_rows = transaction_series(gate, summary)
        together, next_history, _ = judge_gate(
            series_specs, history, settings or DEFAULT_HISTORY, accepted=accepted
        )
        keys = {one.key for one in series_specs}
        return together + unmatched_rows, {k: v for k, v in next_history.series.items() if k in keys}
    labels = summary.labels
    budgets, unmatched = _assignments(gate.budgets.budgets, labels)
    bounds, unbounded = _assignments(gate.bounds, labels)
    rows: list[GateRow] = []
    series: dict[SeriesKey, SeriesHistory] = {}
    for label in dict.fromkeys([*budgets, *bounds]):
        stats = summary.transactions[label]
        spec = GateSpec(
            budgets=budgets.get(label, {}),
            max_regression_pct=bounds.get(label, {}),
            baseline=baseline,
            history=settings or DEFAULT_HISTORY,
        )
        values: dict[str, object] = {}
        for metric in spec.metric_ids:
            value = stats.metric(metric)
            values[metric] = value if value is not None else Unreadable(NO_COLUMN)
        base = None
        if baseline != HISTORY and baseline_values is not None and spec.max_regression_pct:
            base = _baseline_of(label, spec.metric_ids, baseline_values, baseline_summary)
        judged, after = judge_history(
            spec, values, base, history=history, accepted=accepted, transaction=label
        )
        rows += judged
        if after is not None:
            series.update((key, value) for key, value in after.series.items() if key[0] == label)
    for key in dict.fromkeys([*unmatched, *unbounded]):
        rows += _unmeasured_rows(gate, key, unsampled_reason(key, labels))
    return rows, series


def _baseline_of(
    label: str,
    metric_ids: Sequence[str],
    known: Mapping[str, Mapping[str, object]] | Unreadable,
    summary: JtlSummary | Unreadable | None,
) -> dict[str, object]:
    """The baseline run's value of each metric of ``label``: from XCom, else its JTL figures, else why
    not (the bound then fails as not measured)."""
    if isinstance(known, Unreadable):
        return dict.fromkeys(metric_ids, known)
    own = known.get(label, {})
    values: dict[str, object] = {}
    for metric in metric_ids:
        if own.get(metric) is not None:
            values[metric] = own[metric]
        elif isinstance(summary, Unreadable):
            values[metric] = Unreadable(f"the baseline run's JTL files could not be read: {summary.reason}")
        elif summary is None or label not in summary.transactions:
            values[metric] = Unreadable(f"the baseline run has no value of {metric} for {label!r}")
        else:
            value = summary.transactions[label].metric(metric)
            values[metric] = value if value is not None else Unreadable(NO_COLUMN)
    return values


def judge_transactions(budgets: TransactionBudgets, summary: JtlSummary) -> list[GateRow]:
    """One row per (transaction, metric) of ``budgets`` (no regression bounds), judged by ``gate.judge``
    as the run's metrics are; a key no sample answers gets a failing (not measured) row per metric."""
    return judge_transaction_gate(TransactionGate(budgets), summary)[0]


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def slowest_text(summary: JtlSummary, count: int = 5) -> str:
    """The ``count`` slowest transactions by p95 response time, with hits and errors, for the log:
    the first thing a person asks after a failed gate, whether or not a budget names them."""
    slowest = summary.slowest(count)
    if not slowest:
        return f"No transaction sampled in {len(summary.files)} JTL file(s)."
    header = ("transaction", "hits", "errors", "p95 ms", "p99 ms", "avg ms", "max ms")
    lines = [header] + [
        (
            stats.label.replace("\n", " "),
            f"{stats.hits:,}",
            f"{stats.errors:,} ({_number(stats.metric('ERRORS_PERCENT'), 2)} %)",
            _number(stats.metric("RESPONSE_TIME_PERCENTILE_95")),
            _number(stats.metric("RESPONSE_TIME_PERCENTILE_99")),
            _number(stats.metric("RESPONSE_TIME_AVG"), 1),
            _number(stats.metric("RESPONSE_TIME_MAX")),
        )
        for stats in slowest
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    table = "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    )
    heading = (
        f"Slowest transactions by p95 response time ({len(slowest)} of {len(summary.transactions)}, "
        f"{summary.samples:,} samples in {len(summary.files)} JTL file(s)):"
    )
    return f"{heading}\n{table}"
