"""What a gate checks: the metrics and which way each gets worse, budgets, regression bounds, the
baseline, and the checked settings (``GateSpec``).

No I/O and no heavy imports: the operator checks plain gate settings when the DAG is parsed, so this
module loads at parse time; ``history.py`` loads only for the gates that use ``baseline="history"``.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.api.validation import is_templated, validate_path_id
from airflow_provider_loadtest.decisions.gate.rows import format_number

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.history import HistorySettings

#: ``baseline="previous"``: the run of the latest earlier DAG run of this task whose verdict passed.
PREVIOUS = "previous"
#: ``baseline="history"``: the noise of the last passing runs (``history.HISTORY``; written out here
#: so that this module does not load ``history.py`` for the gates that do not use it).
HISTORY = "history"
#: XCom key under which a passing run leaves its gate values for later DAG runs to compare against.
BASELINE_XCOM_KEY = "loadtest_gate_baseline"


def load_history() -> Any:
    from airflow_provider_loadtest.decisions.gate import history

    return history


class Direction(Enum):
    """Which way a metric gets worse, for the regression bound."""

    HIGHER_IS_WORSE = "higher is worse"
    LOWER_IS_WORSE = "lower is worse"
    #: A change is neither better nor worse (sizes, bytes, load): budgets only, no regression bound.
    NEUTRAL = "neither"
    #: A breakdown (per code, method, agent...), not one number: neither budgets nor bounds.
    BREAKDOWN = "not a single number"


_UP, _DOWN, _NEUTRAL, _BREAKDOWN = (
    Direction.HIGHER_IS_WORSE,
    Direction.LOWER_IS_WORSE,
    Direction.NEUTRAL,
    Direction.BREAKDOWN,
)

#: Every metric id of the spec (section 2.5) and which way it gets worse: the one table. Times,
#: errors and their rates are worse higher; throughput, hits, successes and Apdex scores (a 0 to 1
#: satisfaction score, although it is computed from a time) are worse lower.
METRIC_DIRECTIONS: dict[str, Direction] = {
    "ASSERTIONS_ERROR_TOTAL": _UP,
    "ASSERTIONS_FAILURE_TOTAL": _UP,
    "ASSERTIONS_SUCCESS_TOTAL": _DOWN,
    "CONNECT_TIME_APDEX": _DOWN,
    "CONNECT_TIME_AVG": _UP,
    "CONNECT_TIME_MAX": _UP,
    "CONNECT_TIME_MIN": _UP,
    "CONNECT_TIME_STD": _UP,
    "CONNECT_TIME_VAR": _UP,
    "ERRORS_TOTAL": _UP,
    "ERRORS_RATE": _UP,
    "ERRORS_PERCENT": _UP,
    "HITS_RATE": _DOWN,
    "HITS_TOTAL": _DOWN,
    "HITS_SUCCESSFUL_TOTAL": _DOWN,
    "HITS_SUCCESSFUL_PERCENT": _DOWN,
    "HTTP_MEDIA_TYPES": _BREAKDOWN,
    "HTTP_MEDIA_TYPES_THROUGHPUT": _BREAKDOWN,
    "HTTP_METHODS": _BREAKDOWN,
    "HTTP_RESPONSE_CODES": _BREAKDOWN,
    "LATENCY_APDEX": _DOWN,
    "LATENCY_AVG": _UP,
    "LATENCY_MAX": _UP,
    "LATENCY_MIN": _UP,
    "LATENCY_STD": _UP,
    "LATENCY_VAR": _UP,
    "MONITORING": _BREAKDOWN,
    "LOAD_GENERATOR": _BREAKDOWN,
    "NETWORK_TIME_AVG": _UP,
    "NETWORK_TIME_MAX": _UP,
    "NETWORK_TIME_MIN": _UP,
    "NETWORK_TIME_VAR": _UP,
    "RESPONSE_TIME_APDEX": _DOWN,
    "RESPONSE_TIME_AVG": _UP,
    "RESPONSE_TIME_MAX": _UP,
    "RESPONSE_TIME_MEDIAN": _UP,
    "RESPONSE_TIME_MIN": _UP,
    "RESPONSE_TIME_PERCENTILE_80": _UP,
    "RESPONSE_TIME_PERCENTILE_90": _UP,
    "RESPONSE_TIME_PERCENTILE_95": _UP,
    "RESPONSE_TIME_PERCENTILE_99": _UP,
    "RESPONSE_TIME_STD": _UP,
    "RESPONSE_TIME_VAR": _UP,
    "RESPONSE_SIZE": _NEUTRAL,
    "SENT_BYTES_AVG": _NEUTRAL,
    "SENT_BYTES_MAX": _NEUTRAL,
    "SENT_BYTES_MIN": _NEUTRAL,
    "SENT_BYTES_RATE": _NEUTRAL,
    "SENT_BYTES_STD": _NEUTRAL,
    "SENT_BYTES_TOTAL": _NEUTRAL,
    "THROUGHPUT_RATE": _DOWN,
    "THROUGHPUT_TOTAL": _DOWN,
    "USERLOAD": _NEUTRAL,
}

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}
_CONDITION = re.compile(r"^\s*(<=|>=|<|>)\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


def check_metric_id(parameter: str, metric: object, *, regression: bool = False) -> str:
    """Return ``metric`` if it is a metric id the gate can check, else a ``ValueError`` naming it and
    the closest known ids (a typo must fail when the DAG is parsed, not after a two-hour test)."""
    if not isinstance(metric, str) or metric not in METRIC_DIRECTIONS:
        import difflib  # only on the error path: DAG parsing stays cheap

        close = difflib.get_close_matches(str(metric).upper(), METRIC_DIRECTIONS, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(
            f"{parameter}: unknown metric id {metric!r}{hint} (the metric ids are listed in the "
            "service's API, section 2.5 'Metric')"
        )
    direction = METRIC_DIRECTIONS[metric]
    if direction is Direction.BREAKDOWN:
        raise ValueError(f"{parameter}: {metric} is a breakdown, not one number: it cannot be gated")
    if regression and direction is Direction.NEUTRAL:
        raise ValueError(
            f"{parameter}: {metric} is neither better nor worse when it changes; give it a budget in "
            "metric_budgets instead of a regression bound"
        )
    return metric


@dataclass(frozen=True)
class Budget:
    """A condition a metric's value must meet, such as ``<= 800``."""

    op: str
    bound: float

    @classmethod
    def parse(cls, metric: str, condition: object, parameter: str = "metric_budgets") -> Budget:
        """The condition, or a ``ValueError`` naming the setting it came from: ``parameter[metric]``, such
        as metric_budgets['RESPONSE_TIME_AVG'] (the default) or
        transaction_budgets['Checkout']['RESPONSE_TIME_AVG'] (a transaction's budget)."""
        match = _CONDITION.match(condition) if isinstance(condition, str) else None
        if match is None or not math.isfinite(float(match.group(2))):
            raise ValueError(
                f"{parameter}[{metric!r}]: condition {condition!r} does not parse; write an operator "
                "(<, <=, > or >=) and a number, such as '<= 800'"
            )
        return cls(match.group(1), float(match.group(2)))

    def allows(self, value: float) -> bool:
        return _OPERATORS[self.op](value, self.bound)

    def __str__(self) -> str:
        return f"{self.op} {format_number(self.bound)}"


def _mapping(parameter: str, value: object) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{parameter} must be a mapping of metric id to a value, got {type(value).__name__}")
    return value


def parse_budgets(value: object) -> dict[str, Budget]:
    """``metric_budgets``: ``{metric id: "<= 800"}``."""
    return {
        check_metric_id("metric_budgets", metric): Budget.parse(metric, condition)
        for metric, condition in _mapping("metric_budgets", value).items()
    }


def parse_regression(value: object, parameter: str = "max_regression_pct") -> dict[str, float]:
    """``max_regression_pct``: ``{metric id: how much worse than the baseline, in percent}``; errors
    name ``parameter`` (e.g. transaction_max_regression_pct['Checkout'] for a transaction's bounds)."""
    bounds: dict[str, float] = {}
    for metric, pct in _mapping(parameter, value).items():
        check_metric_id(parameter, metric, regression=True)
        try:
            number = float(pct)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(pct, bool) or not math.isfinite(number) or number < 0:
            raise ValueError(f"{parameter}[{metric!r}]: {pct!r} is not a percentage (a number, 0 or more)")
        bounds[metric] = number
    return bounds


def parse_baseline(value: object) -> str | None:
    """``baseline``: None, ``"previous"``, ``"history"``, or a bench result id."""
    if value is None or value == "":
        return None
    if value in (PREVIOUS, HISTORY):
        return str(value)
    return validate_path_id("baseline", value)


@dataclass(frozen=True)
class GateSpec:
    """The gate a task asked for, checked. ``history`` (the ``baseline="history"`` settings) is None
    unless the gate uses that baseline or was given history settings: the others never load it."""

    budgets: Mapping[str, Budget]
    max_regression_pct: Mapping[str, float]
    baseline: str | None
    history: HistorySettings | None = None

    @classmethod
    def parse(
        cls,
        metric_budgets: object,
        max_regression_pct: object,
        baseline: object,
        history_settings: Mapping[str, Any] | None = None,
    ) -> GateSpec:
        """Check the rendered settings; ``ValueError`` names what is wrong."""
        kind = parse_baseline(baseline)
        settings = None
        if kind == HISTORY or history_settings:
            settings = load_history().HistorySettings.parse(**(history_settings or {}))
        spec = cls(parse_budgets(metric_budgets), parse_regression(max_regression_pct), kind, settings)
        if spec.max_regression_pct and spec.baseline is None:
            raise ValueError(
                "max_regression_pct needs a baseline: 'history', 'previous' or a bench result id"
            )
        return spec

    @classmethod
    def check_literal(cls, metric_budgets: object, max_regression_pct: object, baseline: object) -> None:
        """At DAG-parse time: check what is not a template (templates are checked before the run)."""

        def plain(value: object) -> object:
            if is_templated(value):
                return None
            if isinstance(value, Mapping):
                return {k: v for k, v in value.items() if not (is_templated(k) or is_templated(v))}
            return value

        cls.parse(
            plain(metric_budgets),
            plain(max_regression_pct),
            PREVIOUS if is_templated(baseline) else baseline,
        )

    @property
    def metric_ids(self) -> tuple[str, ...]:
        """The metrics to fetch: budgets first, then regression bounds, each once."""
        return tuple(dict.fromkeys([*self.budgets, *self.max_regression_pct]))

    @property
    def active(self) -> bool:
        return bool(self.metric_ids)
