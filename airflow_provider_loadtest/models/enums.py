"""Closed value sets of the service (spec 2.3 to 2.7, beyond-the-spec.md), as ``StrEnum``s.

Fields typed with these enums use :data:`Open` so that a value the service adds later is kept as a
plain string instead of failing validation (tolerant reader).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, TypeVar

from pydantic import Field

__all__ = [
    "AlarmSeverity",
    "BenchResultState",
    "BoundType",
    "ChartMode",
    "ComputeType",
    "MetricId",
    "MetricType",
    "MonitorType",
    "NameMatchType",
    "Open",
    "PageFormat",
    "RangeType",
    "ReferenceType",
    "SampleType",
    "TaskStatus",
]

_E = TypeVar("_E", bound=StrEnum)

#: An enum-typed field that still accepts unknown values: known values become enum members,
#: anything else stays a ``str`` (left-to-right union, so the enum is tried first).
Open = Annotated[_E | str, Field(union_mode="left_to_right")]


class MetricId(StrEnum):
    """Metric ids (spec 2.5)."""

    ASSERTIONS_ERROR_TOTAL = "ASSERTIONS_ERROR_TOTAL"
    ASSERTIONS_FAILURE_TOTAL = "ASSERTIONS_FAILURE_TOTAL"
    ASSERTIONS_SUCCESS_TOTAL = "ASSERTIONS_SUCCESS_TOTAL"
    CONNECT_TIME_APDEX = "CONNECT_TIME_APDEX"
    CONNECT_TIME_AVG = "CONNECT_TIME_AVG"
    CONNECT_TIME_MAX = "CONNECT_TIME_MAX"
    CONNECT_TIME_MIN = "CONNECT_TIME_MIN"
    CONNECT_TIME_STD = "CONNECT_TIME_STD"
    CONNECT_TIME_VAR = "CONNECT_TIME_VAR"
    ERRORS_TOTAL = "ERRORS_TOTAL"
    ERRORS_RATE = "ERRORS_RATE"
    ERRORS_PERCENT = "ERRORS_PERCENT"
    HITS_RATE = "HITS_RATE"
    HITS_TOTAL = "HITS_TOTAL"
    HITS_SUCCESSFUL_TOTAL = "HITS_SUCCESSFUL_TOTAL"
    HITS_SUCCESSFUL_PERCENT = "HITS_SUCCESSFUL_PERCENT"
    HTTP_MEDIA_TYPES = "HTTP_MEDIA_TYPES"
    HTTP_MEDIA_TYPES_THROUGHPUT = "HTTP_MEDIA_TYPES_THROUGHPUT"
    HTTP_METHODS = "HTTP_METHODS"
    HTTP_RESPONSE_CODES = "HTTP_RESPONSE_CODES"
    LATENCY_APDEX = "LATENCY_APDEX"
    LATENCY_AVG = "LATENCY_AVG"
    LATENCY_MAX = "LATENCY_MAX"
    LATENCY_MIN = "LATENCY_MIN"
    LATENCY_STD = "LATENCY_STD"
    LATENCY_VAR = "LATENCY_VAR"
    MONITORING = "MONITORING"
    LOAD_GENERATOR = "LOAD_GENERATOR"
    NETWORK_TIME_AVG = "NETWORK_TIME_AVG"
    NETWORK_TIME_MAX = "NETWORK_TIME_MAX"
    NETWORK_TIME_MIN = "NETWORK_TIME_MIN"
    NETWORK_TIME_VAR = "NETWORK_TIME_VAR"
    RESPONSE_TIME_APDEX = "RESPONSE_TIME_APDEX"
    RESPONSE_TIME_AVG = "RESPONSE_TIME_AVG"
    RESPONSE_TIME_MAX = "RESPONSE_TIME_MAX"
    RESPONSE_TIME_MEDIAN = "RESPONSE_TIME_MEDIAN"
    RESPONSE_TIME_MIN = "RESPONSE_TIME_MIN"
    RESPONSE_TIME_PERCENTILE_80 = "RESPONSE_TIME_PERCENTILE_80"
    RESPONSE_TIME_PERCENTILE_90 = "RESPONSE_TIME_PERCENTILE_90"
    RESPONSE_TIME_PERCENTILE_95 = "RESPONSE_TIME_PERCENTILE_95"
    RESPONSE_TIME_PERCENTILE_99 = "RESPONSE_TIME_PERCENTILE_99"
    RESPONSE_TIME_STD = "RESPONSE_TIME_STD"
    RESPONSE_TIME_VAR = "RESPONSE_TIME_VAR"
    RESPONSE_SIZE = "RESPONSE_SIZE"
    SENT_BYTES_AVG = "SENT_BYTES_AVG"
    SENT_BYTES_MAX = "SENT_BYTES_MAX"
    SENT_BYTES_MIN = "SENT_BYTES_MIN"
    SENT_BYTES_RATE = "SENT_BYTES_RATE"
    SENT_BYTES_STD = "SENT_BYTES_STD"
    SENT_BYTES_TOTAL = "SENT_BYTES_TOTAL"
    THROUGHPUT_RATE = "THROUGHPUT_RATE"
    THROUGHPUT_TOTAL = "THROUGHPUT_TOTAL"
    USERLOAD = "USERLOAD"


class SampleType(StrEnum):
    """Sample types of a metric (spec 2.5)."""

    BASIC = "BASIC"
    WEB = "WEB"
    LOAD = "LOAD"
    ERRORS = "ERRORS"
    NUMBER_COUNTER = "NUMBER_COUNTER"
    TEXTUAL_COUNTER = "TEXTUAL_COUNTER"
    THRESHOLD_ALARM = "THRESHOLD_ALARM"
    # Seen in the service's documentation (beyond-the-spec "Vocabulary").
    HIT = "HIT"
    CONTAINER = "CONTAINER"


class MetricType(StrEnum):
    """``@type`` of a metric in request bodies (the official clients send one; beyond-the-spec)."""

    HIT_METRIC = "HitMetric"
    MONITORING_METRIC = "MonitoringMetric"


class PageFormat(StrEnum):
    """Page formats of ExportReportConfig.pageFormat (spec 2.3)."""

    A0 = "A0"
    A1 = "A1"
    A2 = "A2"
    A3 = "A3"
    A4 = "A4"
    A5 = "A5"
    A6 = "A6"
    LETTER = "LETTER"
    LEGAL = "LEGAL"
    TABLOID = "TABLOID"
    LEDGER = "LEDGER"


class BoundType(StrEnum):
    """Interval bound types (spec 2.3): CLOSED includes the endpoint, OPEN excludes it."""

    OPEN = "OPEN"
    CLOSED = "CLOSED"


class MonitorType(StrEnum):
    """LoadGeneratorsChartReportItem.monitorType (spec 2.4)."""

    HOST = "HOST"
    JVM = "JVM"


class ComputeType(StrEnum):
    """StatisticTableReportItem.computeType (spec 2.4)."""

    NORMAL = "NORMAL"
    DELTA = "DELTA"


class ChartMode(StrEnum):
    """StackedChartReportItem.mode (spec 2.4)."""

    ABSOLUTE = "ABSOLUTE"
    PERCENT = "PERCENT"


class RangeType(StrEnum):
    """AreaRangeChartReportItem.rangeType (spec 2.4)."""

    RAW = "RAW"
    PERCENT = "PERCENT"
    PERCENTAGE = "PERCENTAGE"  # the service's documentation


class ReferenceType(StrEnum):
    """AreaRangeChartReportItem.referenceType (spec 2.4)."""

    DATE_HISTOGRAM = "DATE_HISTOGRAM"
    SUMMARY = "SUMMARY"
    HISTOGRAM = "HISTOGRAM"  # the service's documentation


class NameMatchType(StrEnum):
    """TrendReportNameSelector.type (spec 2.3)."""

    EQUALS = "EQUALS"
    EQUALS_IGNORECASE = "EQUALS_IGNORECASE"
    CONTAINS = "CONTAINS"
    CONTAINS_IGNORECASE = "CONTAINS_IGNORECASE"
    STARTS_WITH = "STARTS_WITH"
    ENDS_WITH = "ENDS_WITH"
    # The service's documentation also has these case-insensitive variants.
    STARTS_WITH_IGNORECASE = "STARTS_WITH_IGNORECASE"
    ENDS_WITH_IGNORECASE = "ENDS_WITH_IGNORECASE"


class BenchResultState(StrEnum):
    """States of a test run (BenchResult.state, beyond-the-spec "Watch a run")."""

    CREATED = "CREATED"
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    SCALING = "SCALING"
    PREPARING = "PREPARING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    ABORTED = "ABORTED"
    ERROR = "ERROR"

    @property
    def is_terminal(self) -> bool:
        """FINISHED, ABORTED and ERROR end a run; every other state (and unknown ones) does not."""
        return self in _TERMINAL_STATES

    @classmethod
    def is_terminal_value(cls, value: str | None) -> bool:
        """Like :attr:`is_terminal` for a raw (possibly unknown) state; unknown means not terminal."""
        return value in _TERMINAL_STATES


_TERMINAL_STATES = frozenset({BenchResultState.FINISHED, BenchResultState.ABORTED, BenchResultState.ERROR})

_SEVERITY_RANK = {"PASSED": 0, "WARNING": 1, "CRITICAL": 2}


class AlarmSeverity(StrEnum):
    """Threshold alarm severities (beyond-the-spec "Pass or fail"), ordered by gravity.

    Members compare by gravity (``PASSED < WARNING < CRITICAL``), not alphabetically, so ``max()`` of
    a list of severities is the worst one. Comparison with a non-member falls back to ``str``.
    """

    PASSED = "PASSED"
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"

    @property
    def rank(self) -> int:
        """Gravity: PASSED 0, WARNING 1, CRITICAL 2."""
        return _SEVERITY_RANK[self.value]

    @classmethod
    def rank_of(cls, value: str | None) -> int | None:
        """Gravity of a raw severity value; ``None`` for an unknown (or missing) severity."""
        if value is None:
            return None
        return _SEVERITY_RANK.get(str(value))

    def __lt__(self, other: object) -> bool:
        if isinstance(other, AlarmSeverity):
            return self.rank < other.rank
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if isinstance(other, AlarmSeverity):
            return self.rank <= other.rank
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, AlarmSeverity):
            return self.rank > other.rank
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if isinstance(other, AlarmSeverity):
            return self.rank >= other.rank
        return NotImplemented


class TaskStatus(StrEnum):
    """Status of an asynchronous task in the 17.1.0+ polling envelope (beyond-the-spec, a *guess*)."""

    PENDING = "PENDING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
