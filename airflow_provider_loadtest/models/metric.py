"""The metric object used by report items (spec 2.5)."""

from __future__ import annotations

from pydantic import Field

from .base import TYPE_KEY, ApiModel
from .configs import BenchReportConfig
from .enums import MetricId, MetricType, Open, SampleType
from .filters import QueryFilter

__all__ = ["Metric"]


class Metric(ApiModel):
    """A metric of one test result (spec 2.5): ``id`` is a MetricId, ``type`` a SampleType.

    ``kind`` (JSON ``@type``) is optional: the spec's documents have none, but the official clients send
    one in request bodies (``HitMetric``, ``MonitoringMetric``). Another value is kept as it comes.
    """

    kind: Open[MetricType] | None = Field(default=None, alias=TYPE_KEY)
    bench_result_id: str | None = None
    configs: list[BenchReportConfig] | None = None
    filters: list[QueryFilter] | None = None
    id: Open[MetricId] | None = None
    type: Open[SampleType] | None = None
