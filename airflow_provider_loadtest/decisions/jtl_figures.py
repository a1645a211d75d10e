"""The per-transaction figures' old home: their names now live in ``decisions.samples.figures``
(re-exported here so that every existing import keeps working)."""

from __future__ import annotations

from airflow_provider_loadtest.decisions.samples.figures import (
    EXACT_VALUES,
    PENDING_VALUES,
    PERCENTILE_RELATIVE_ERROR,
    SAMPLE_METRICS,
    BadValue,
    Distribution,
    JtlSummary,
    LabelFigures,
    Moments,
    Times,
    TransactionStats,
    bucket,
    bucket_middle,
    columns_for,
    count_values,
    is_whole,
)

__all__ = [
    "EXACT_VALUES",
    "PENDING_VALUES",
    "PERCENTILE_RELATIVE_ERROR",
    "SAMPLE_METRICS",
    "BadValue",
    "Distribution",
    "JtlSummary",
    "LabelFigures",
    "Moments",
    "Times",
    "TransactionStats",
    "bucket",
    "bucket_middle",
    "columns_for",
    "count_values",
    "is_whole",
]
