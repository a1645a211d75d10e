"""Gates per transaction: budgets on the figures of each JTL label, judged like the run's own gate.

``transaction_budgets`` maps a label, or a pattern such as ``"api/*"`` (``fnmatch``, case-sensitive
like JMeter's labels), to ``{metric id: condition}`` with the metric ids computable from samples
(``jtl_figures.SAMPLE_METRICS``). A pattern applies to every sampled label it matches; where a label
is named exactly, its own budget for a metric wins over a pattern's, and among patterns the first one
naming the metric wins, so that each (transaction, metric) has one row. The rows are ``gate.GateRow``s
made by ``gate.judge``, the run gate's own code, with ``transaction`` set.

A budget naming a transaction the run never sampled fails (a gate that measured nothing must not
pass), naming the labels the run did sample, closest first. No I/O, and only cheap imports at module
level: the operator checks the settings when the DAG is parsed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.api.validation import is_templated
from airflow_provider_loadtest.decisions.gate import (
    Budget,
    GateRow,
    GateSpec,
    Unreadable,
    check_metric_id,
    judge,
)
from airflow_provider_loadtest.decisions.history import NOT_MEASURED

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary

__all__ = ["PARAMETER", "TransactionBudgets", "judge_transactions", "slowest_text", "unsampled_reason"]

PARAMETER = "transaction_budgets"
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
        if value is None or value == {}:
            return cls({})
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{PARAMETER} must be a mapping of transaction label (or pattern such as 'api/*') to "
                f"{{metric id: condition}}, got {type(value).__name__}"
            )
        budgets: dict[str, dict[str, Budget]] = {}
        for key, conditions in value.items():
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"{PARAMETER}: {key!r} is not a transaction label (a non-empty string)")
            where = f"{PARAMETER}[{key!r}]"
            if not isinstance(conditions, Mapping) or not conditions:
                raise ValueError(
                    f"{where} must be a non-empty mapping of metric id to condition, such as "
                    "{'RESPONSE_TIME_PERCENTILE_95': '<= 800'}"
                )
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


def _assignments(
    budgets: TransactionBudgets, labels: Sequence[str]
) -> tuple[dict[str, dict[str, Budget]], list[str]]:
    """Which budget each (label, metric) gets, and the keys no sampled label answers."""
    sampled = set(labels)
    assigned: dict[str, dict[str, tuple[Budget, bool]]] = {}
    unmatched: list[str] = []
    for key, conditions in budgets.budgets.items():
        exact = key in sampled
        targets = [key] if exact else [label for label in labels if fnmatch.fnmatchcase(label, key)]
        if not targets:
            unmatched.append(key)
            continue
        for label in targets:
            slot = assigned.setdefault(label, {})
            for metric, budget in conditions.items():
                if metric not in slot or (exact and not slot[metric][1]):
                    slot[metric] = (budget, exact)
    return {label: {m: b for m, (b, _) in slot.items()} for label, slot in assigned.items()}, unmatched


#: Why a metric of a sampled transaction has no value.
NO_COLUMN = "the run's JTL files lack the column it is computed from"


def judge_transactions(budgets: TransactionBudgets, summary: JtlSummary) -> list[GateRow]:
    """One row per (transaction, metric), judged by ``gate.judge`` as the run's metrics are; a key no
    sample answers gets a failing (not measured) row per metric it names."""
    labels = summary.labels
    assigned, unmatched = _assignments(budgets, labels)
    rows: list[GateRow] = []
    for label, conditions in assigned.items():
        stats = summary.transactions[label]
        values: dict[str, object] = {}
        for metric in conditions:
            value = stats.metric(metric)
            values[metric] = value if value is not None else Unreadable(NO_COLUMN)
        spec = GateSpec(budgets=conditions, max_regression_pct={}, baseline=None)
        rows += judge(spec, values, None, transaction=label)
    for key in unmatched:
        reason = f"not measured: {unsampled_reason(key, labels)}"
        rows += [
            GateRow(
                metric=metric,
                value=None,
                passed=False,
                budget=str(budget),
                reason=reason,
                status=NOT_MEASURED,
                transaction=key,
            )
            for metric, budget in budgets.budgets[key].items()
        ]
    return rows


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
