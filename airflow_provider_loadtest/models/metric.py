"""The metric object used by report items (spec 2.5)."""

from __future__ import annotations

from .base import ApiModel
from .configs import BenchReportConfig
from .enums import MetricId, Open, SampleType
from .filters import QueryFilter

__all__ = ["Metric"]


class Metric(ApiModel):
    """A metric of one test result (spec 2.5): ``id`` is a MetricId, ``type`` a SampleType."""

    bench_result_id: str | None = None
    configs: list[BenchReportConfig] | None = None
    filters: list[QueryFilter] | None = None
    id: Open[MetricId] | None = None
    type: Open[SampleType] | None = None
