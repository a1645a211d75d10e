"""Per-transaction figures from a run's samples: running sums while the JTL files are read, then the
metric ids a gate can check (``SAMPLE_METRICS``).

Memory holds per label a bounded number of distinct values, never the samples. Counts, sums,
averages, standard deviations, minima and maxima are exact. Percentiles are nearest-rank (the smallest
sampled value with at least the wanted share of samples at or below it): exact while a label has at
most ``EXACT_VALUES`` distinct response times (JMeter writes whole milliseconds, so most runs stay
exact); past that, times are counted in logarithmic buckets (values under 128 ms exact, then 64 buckets
per power of two) and a percentile is its bucket's middle, within ``PERCENTILE_RELATIVE_ERROR``
(under 0.8 %) of the exact value.

Why not a library: DDSketch (``ddsketch``, pure Python) is the closest fit, but it always buckets (a
p95 of exactly 800 ms reads 801.3), its quantiles are not nearest-rank, and it brings ``six`` to every
worker; ``hdrhistogram`` needs ``pbr`` and a recent ``setuptools`` at run time; t-digest and KLL
sketches (``tdigest``, ``fastdigest``, ``datasketches``) bound the error of the rank, not of the value.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import mul
from typing import Any

from airflow_provider_loadtest.decisions.samples.failures import RunFailures

__all__ = [
    "EXACT_VALUES",
    "PERCENTILE_RELATIVE_ERROR",
    "SAMPLE_METRICS",
    "BadValue",
    "Distribution",
    "JtlSummary",
    "LabelFigures",
    "TransactionStats",
    "columns_for",
    "count_values",
    "is_whole",
]

#: Distinct values a label's response times are counted exactly under, before buckets take over.
EXACT_VALUES = 2048
#: Distinct raw values a label's other columns gather before they are folded into sums.
PENDING_VALUES = 1024
#: Values below this are their own bucket; above, each power of two has 64 buckets.
_EXACT_BELOW = 128
#: The most a percentile read from buckets is off, relative to the exact one: half a bucket's width
#: over its lower bound, (2**e - 1) / 2 / (64 * 2**e) < 1/128.
PERCENTILE_RELATIVE_ERROR = 1 / 128

try:  # Counter.update's own counting loop, in C, without its per-call checks (called per label and batch)
    from _collections import _count_elements as count_values  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - an interpreter without it

    def count_values(mapping: Any, values: Iterable[str]) -> None:
        mapping.update(values)


class BadValue(Exception):
    """A value of a numeric column that is no whole number (the parser names the file and line)."""

    def __init__(self, column: str, text: str) -> None:
        super().__init__(column, text)
        self.column, self.text = column, text


def is_whole(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def bucket(value: int) -> int:
    """The log bucket of a whole value: itself under 128, else 64 buckets per power of two (monotone)."""
    if value < _EXACT_BELOW:
        return value
    shift = value.bit_length() - 7
    return (shift << 6) + (value >> shift)


def bucket_middle(key: int) -> float:
    """The middle of the whole values a bucket holds."""
    if key < _EXACT_BELOW:
        return float(key)
    shift = (key >> 6) - 1
    low = (key - (shift << 6)) << shift
    return low + ((1 << shift) - 1) / 2


def _parse(column: str, pending: Mapping[str, int]) -> dict[int, int]:
    """Text values and their counts as whole numbers (converted in C)."""
    try:
        values = dict(zip(map(int, pending), pending.values(), strict=True))
    except ValueError:
        raise BadValue(column, next(text for text in pending if not is_whole(text))) from None
    if len(values) != len(pending):  # the same value written twice ("7" and "007"): add them up
        values = {}
        for text, count in pending.items():
            values[int(text)] = values.get(int(text), 0) + count
    return values


def _moments(values: Mapping[int, int]) -> tuple[int, int, int, int, int]:
    """Count, sum, sum of squares, minimum and maximum of counted values (in C)."""
    keys, counts = values.keys(), values.values()
    return (
        sum(counts),
        sum(map(mul, keys, counts)),
        sum(map(mul, map(mul, keys, keys), counts)),
        min(keys),
        max(keys),
    )


# --- running figures, while the files are read ---------------------------------------------------------


class Moments:
    """Count, sum, sum of squares, minimum and maximum of one column of a label, exact.

    Values are counted as text first (in C, over a batch of the column) and converted once per distinct
    value when ``PENDING_VALUES`` are pending: sample values repeat, so this costs far less than a
    conversion per sample.
    """

    __slots__ = ("column", "count", "high", "low", "pending", "squares", "total")

    def __init__(self, column: str) -> None:
        self.column = column
        self.pending: Counter[str] = Counter()
        self.count = 0
        self.total = 0
        self.squares = 0
        self.low: int | None = None
        self.high: int | None = None

    def add(self, values: Iterable[str]) -> None:
        count_values(self.pending, values)
        if len(self.pending) > PENDING_VALUES:
            self.spill()

    def spill(self) -> None:
        """Fold the pending values into the sums (``BadValue`` for one that is no whole number)."""
        if self.pending:
            values = _parse(self.column, self.pending)
            self.pending = Counter()
            self._take(values)

    def _take(self, values: Mapping[int, int]) -> None:
        self._add_moments(*_moments(values))

    def _add_moments(self, count: int, total: int, squares: int, low: int | None, high: int | None) -> None:
        if not count or low is None or high is None:
            return
        self.count += count
        self.total += total
        self.squares += squares
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)

    def merge(self, other: Moments) -> None:
        self._add_moments(other.count, other.total, other.squares, other.low, other.high)
        self.pending.update(other.pending)
        if len(self.pending) > PENDING_VALUES:
            self.spill()

    def distribution(self) -> Distribution:
        self.spill()
        return Distribution(self.count, self.total, self.squares, self.low, self.high)


class Times(Moments):
    """A label's response times: the moments, and how many samples took each time (percentiles).

    While a label has at most ``EXACT_VALUES`` distinct times, its pending text values are all its
    values (exact); past that, they are folded into log buckets (``buckets`` is None until then).
    """

    __slots__ = ("buckets",)

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.buckets: dict[int, int] | None = None

    def add(self, values: Iterable[str]) -> None:
        count_values(self.pending, values)
        if len(self.pending) > EXACT_VALUES:
            self.spill()

    def check(self) -> None:
        """Convert the pending values once, so that one that is no whole number is found now."""
        _parse(self.column, self.pending)

    def _take(self, values: Mapping[int, int]) -> None:
        super()._take(values)
        buckets = self.buckets if self.buckets is not None else {}
        for value, count in values.items():  # ``bucket``, inlined: this runs once per distinct value
            if value < _EXACT_BELOW:
                key = value
            else:
                shift = value.bit_length() - 7
                key = (shift << 6) + (value >> shift)
            buckets[key] = buckets.get(key, 0) + count
        self.buckets = buckets

    def merge(self, other: Moments) -> None:
        if not isinstance(other, Times):
            raise TypeError("response times merge with response times only")
        if self.buckets is None and other.buckets is None:
            self.pending.update(other.pending)
            if len(self.pending) > EXACT_VALUES:
                self.spill()
            return
        self.spill()
        other.spill()
        if other.buckets is not None:
            self._add_moments(other.count, other.total, other.squares, other.low, other.high)
            buckets = self.buckets if self.buckets is not None else {}
            for key, count in other.buckets.items():
                buckets[key] = buckets.get(key, 0) + count
            self.buckets = buckets

    def distribution(self) -> Distribution:
        if self.buckets is None:  # exact: every value is still pending, as text
            values = _parse(self.column, self.pending) if self.pending else {}
            count, total, squares, low, high = _moments(values) if values else (0, 0, 0, None, None)
            return Distribution(count, total, squares, low, high, tuple(sorted(values.items())), True)
        self.spill()
        return Distribution(
            self.count,
            self.total,
            self.squares,
            self.low,
            self.high,
            tuple(sorted(self.buckets.items())),
            False,
        )


class LabelFigures:
    """What one file (or the whole run) holds about one label so far."""

    __slots__ = ("bytes", "connect", "controller_rows", "elapsed", "errors", "hits", "latency", "sent_bytes")

    def __init__(self) -> None:
        self.hits = 0
        self.errors = 0
        #: Rows that are a Transaction Controller's own (counted in ``hits``; no latency, no connect time).
        self.controller_rows = 0
        self.elapsed = Times("elapsed")
        self.latency = Moments("Latency")
        self.connect = Moments("Connect")
        self.sent_bytes = Moments("sentBytes")
        self.bytes = 0

    def check(self) -> None:
        """Convert every pending value (``BadValue`` for one that is no whole number)."""
        self.elapsed.check()
        for moments in (self.latency, self.connect, self.sent_bytes):
            moments.spill()

    def merge(self, other: LabelFigures) -> None:
        self.hits += other.hits
        self.errors += other.errors
        self.controller_rows += other.controller_rows
        self.elapsed.merge(other.elapsed)
        self.latency.merge(other.latency)
        self.connect.merge(other.connect)
        self.sent_bytes.merge(other.sent_bytes)
        self.bytes += other.bytes

    def stats(self, label: str, columns: frozenset[str], span_s: float | None) -> TransactionStats:
        """The label's figures, for the optional ``columns`` every file had. A label whose rows are all
        a Transaction Controller's has no latency and no connect time (its rows' are no such times)."""
        timed = self.controller_rows < self.hits
        return TransactionStats(
            label=label,
            hits=self.hits,
            errors=self.errors,
            elapsed=self.elapsed.distribution(),
            latency=self.latency.distribution() if "Latency" in columns and timed else None,
            connect=self.connect.distribution() if "Connect" in columns and timed else None,
            sent_bytes=self.sent_bytes.distribution() if "sentBytes" in columns else None,
            bytes_total=self.bytes if "bytes" in columns else None,
            span_s=span_s if "timeStamp" in columns else None,
            controller_rows=self.controller_rows,
        )


# --- the figures, once read ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Distribution:
    """Figures of one column of one label: exact moments, and counts per value (per log bucket when
    ``exact`` is False) for percentiles."""

    count: int
    total: int
    squares: int
    low: int | None
    high: int | None
    counts: tuple[tuple[int, int], ...] = ()
    exact: bool = True

    @property
    def average(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def variance(self) -> float | None:
        """Population variance (as JMeter's reports compute it), from exact integer sums."""
        if not self.count:
            return None
        return (self.count * self.squares - self.total * self.total) / (self.count * self.count)

    @property
    def std(self) -> float | None:
        variance = self.variance
        return math.sqrt(max(variance, 0.0)) if variance is not None else None

    def percentile(self, percent: float) -> float | None:
        """The nearest-rank percentile: the smallest value with at least ``percent`` % of the samples
        at or below it (exact, or the middle of its log bucket within ``PERCENTILE_RELATIVE_ERROR``)."""
        if not self.counts or self.low is None or self.high is None or not 0 < percent <= 100:
            return None
        total = sum(count for _, count in self.counts)
        # Whole numbers: 95 % of 100 samples must be rank 95, not 95.00000000000001 (rank 96).
        rank = max(1, -(-round(percent * 10_000) * total // 1_000_000))
        seen = 0
        for key, count in self.counts:
            seen += count
            if seen >= rank:
                value = float(key) if self.exact else bucket_middle(key)
                return min(max(value, float(self.low)), float(self.high))
        return float(self.high)  # not reached: ``seen`` ends at ``total``, at least ``rank``


#: Metric ids (``decisions.gate.METRIC_DIRECTIONS``) computed per transaction from its samples. Rates
#: are per second of the run's span, from the first sample's start to the last sample's end over every
#: generator, so the transactions' hit rates add up to the run's.
SAMPLE_METRICS: tuple[str, ...] = (
    "HITS_TOTAL",
    "HITS_RATE",
    "HITS_SUCCESSFUL_TOTAL",
    "HITS_SUCCESSFUL_PERCENT",
    "ERRORS_TOTAL",
    "ERRORS_RATE",
    "ERRORS_PERCENT",
    "RESPONSE_TIME_AVG",
    "RESPONSE_TIME_MIN",
    "RESPONSE_TIME_MAX",
    "RESPONSE_TIME_STD",
    "RESPONSE_TIME_VAR",
    "RESPONSE_TIME_MEDIAN",
    "RESPONSE_TIME_PERCENTILE_80",
    "RESPONSE_TIME_PERCENTILE_90",
    "RESPONSE_TIME_PERCENTILE_95",
    "RESPONSE_TIME_PERCENTILE_99",
    "LATENCY_AVG",
    "LATENCY_MIN",
    "LATENCY_MAX",
    "LATENCY_STD",
    "LATENCY_VAR",
    "CONNECT_TIME_AVG",
    "CONNECT_TIME_MIN",
    "CONNECT_TIME_MAX",
    "CONNECT_TIME_STD",
    "CONNECT_TIME_VAR",
    "THROUGHPUT_TOTAL",
    "THROUGHPUT_RATE",
    "RESPONSE_SIZE",
    "SENT_BYTES_TOTAL",
    "SENT_BYTES_RATE",
    "SENT_BYTES_AVG",
    "SENT_BYTES_MIN",
    "SENT_BYTES_MAX",
    "SENT_BYTES_STD",
)

#: The optional JTL column each family of metric ids is computed from.
_METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("LATENCY_", "Latency"),
    ("CONNECT_TIME_", "Connect"),
    ("SENT_BYTES_", "sentBytes"),
    ("THROUGHPUT_", "bytes"),
    ("RESPONSE_SIZE", "bytes"),
)


def columns_for(metrics: Iterable[str]) -> frozenset[str]:
    """The optional columns the metric ids need (label, elapsed and success are always read): a gate
    on response times and errors spends nothing on the others."""
    wanted: set[str] = set()
    for metric in metrics:
        wanted.update(column for prefix, column in _METRIC_COLUMNS if metric.startswith(prefix))
        if metric.endswith("_RATE"):
            wanted.add("timeStamp")
    return frozenset(wanted)


_STATISTICS: dict[str, Callable[[Distribution], float | None]] = {
    "AVG": lambda d: d.average,
    "MIN": lambda d: None if d.low is None else float(d.low),
    "MAX": lambda d: None if d.high is None else float(d.high),
    "STD": lambda d: d.std,
    "VAR": lambda d: d.variance,
    "MEDIAN": lambda d: d.percentile(50),
    "PERCENTILE_80": lambda d: d.percentile(80),
    "PERCENTILE_90": lambda d: d.percentile(90),
    "PERCENTILE_95": lambda d: d.percentile(95),
    "PERCENTILE_99": lambda d: d.percentile(99),
}


@dataclass(frozen=True)
class TransactionStats:
    """One label's figures over the whole run (every generator). A figure whose column was not read
    or that a file lacks (``Latency``, ``Connect``, ``bytes``, ``sentBytes``, ``timeStamp``) is None."""

    label: str
    hits: int
    errors: int
    elapsed: Distribution
    latency: Distribution | None = None
    connect: Distribution | None = None
    sent_bytes: Distribution | None = None
    bytes_total: int | None = None
    span_s: float | None = None
    #: Of ``hits``, the rows that are a Transaction Controller's own ("Number of samples in transaction").
    controller_rows: int = 0

    def _rate(self, total: float | None) -> float | None:
        return total / self.span_s if total is not None and self.span_s else None

    def _counts(self) -> dict[str, float | None]:
        hits, errors, received = self.hits, self.errors, self.bytes_total
        sent = self.sent_bytes.total if self.sent_bytes is not None else None
        return {
            "HITS_TOTAL": hits,
            "HITS_RATE": self._rate(hits),
            "HITS_SUCCESSFUL_TOTAL": hits - errors,
            "HITS_SUCCESSFUL_PERCENT": 100 * (hits - errors) / hits if hits else None,
            "ERRORS_TOTAL": errors,
            "ERRORS_RATE": self._rate(errors),
            "ERRORS_PERCENT": 100 * errors / hits if hits else None,
            "THROUGHPUT_TOTAL": received,
            "THROUGHPUT_RATE": self._rate(received),
            "RESPONSE_SIZE": received / hits if received is not None and hits else None,
            "SENT_BYTES_TOTAL": sent,
            "SENT_BYTES_RATE": self._rate(sent),
        }

    def metric(self, metric_id: str) -> float | None:
        """The value of a metric id of ``SAMPLE_METRICS`` (None for another id, or without its column)."""
        if metric_id not in SAMPLE_METRICS:
            return None
        for prefix, distribution in (
            ("RESPONSE_TIME_", self.elapsed),
            ("LATENCY_", self.latency),
            ("CONNECT_TIME_", self.connect),
            ("SENT_BYTES_", self.sent_bytes),
        ):
            statistic = _STATISTICS.get(metric_id.removeprefix(prefix))
            if metric_id.startswith(prefix) and statistic is not None:
                return statistic(distribution) if distribution is not None else None
        value = self._counts()[metric_id]
        return float(value) if value is not None else None

    def metrics(self) -> dict[str, float | None]:
        """Every metric of ``SAMPLE_METRICS``."""
        return {metric_id: self.metric(metric_id) for metric_id in SAMPLE_METRICS}


@dataclass(frozen=True)
class JtlSummary:
    """What a run's JTL files say: the files read, the run's span, each label's figures, why samples
    failed (``failures``) and what the reader left out or noticed (``notes``: a file cut inside its
    last sample), to be said beside the verdict."""

    files: tuple[str, ...]
    transactions: Mapping[str, TransactionStats]
    first_ms: int | None = None
    last_ms: int | None = None
    failures: RunFailures = field(default_factory=RunFailures)
    notes: tuple[str, ...] = ()
    #: Samples answered ``304 Not Modified`` (the service's trust caveat: past ~40 % of the answers,
    #: throughput and times are an optimistic floor; ``decisions.gate.caveats``).
    not_modified: int = 0

    @property
    def span_s(self) -> float | None:
        """Seconds from the first sample's start to the last sample's end (None without timeStamp)."""
        if self.first_ms is None or self.last_ms is None:
            return None
        return max(self.last_ms - self.first_ms, 1) / 1000

    @property
    def labels(self) -> list[str]:
        return sorted(self.transactions)

    @property
    def samples(self) -> int:
        """The samplers' samples: Transaction Controller rows left out (their children are samples, or
        with "Generate parent sample" they stand for several)."""
        return sum(stats.hits - stats.controller_rows for stats in self.transactions.values())

    @property
    def controller_rows(self) -> int:
        """Rows that are a Transaction Controller's own."""
        return sum(stats.controller_rows for stats in self.transactions.values())

    def slowest(self, count: int = 5) -> list[TransactionStats]:
        """The ``count`` transactions with the highest p95 response time (then the most hits)."""
        return sorted(
            self.transactions.values(),
            key=lambda s: (-(s.metric("RESPONSE_TIME_PERCENTILE_95") or 0.0), -s.hits, s.label),
        )[:count]
