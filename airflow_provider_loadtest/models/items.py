"""Report item variants (spec 2.4) and their discriminated union :data:`ReportItem`."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import Field, Tag

from .base import (
    KNOWN_TAG,
    TYPE_KEY,
    UNKNOWN_TAG,
    ApiAdapter,
    Bool,
    Int,
    Number,
    TypedModel,
    UnknownModel,
    variant_tags,
)
from .enums import ChartMode, ComputeType, MonitorType, Open, RangeType, ReferenceType, SampleType
from .filters import QueryFilter
from .metric import Metric
from .settings import UiSetting

__all__ = [
    "AreaRangeChartReportItem",
    "BarChartReportItem",
    "ErrorsReportItem",
    "InsightsReportItem",
    "LineChartReportItem",
    "LoadGeneratorsChartReportItem",
    "LoadGeneratorsTreeReportItem",
    "MonitoringAlarmsReportItem",
    "MonitorsTableReportItem",
    "PercentilesChartReportItem",
    "PieChartReportItem",
    "ReportItem",
    "ReportItemAdapter",
    "ReportItemBase",
    "StackedChartReportItem",
    "StatisticTableReportItem",
    "StatisticTreeReportItem",
    "SummaryReportItem",
    "SynopsisReportItem",
    "TextReportItem",
    "TextualMonitorReportItem",
    "ThresholdAlarmReportItem",
    "TopReportItem",
    "TrendConfigReportItem",
    "UnknownReportItem",
]


class ReportItemBase(TypedModel):
    """Fields every report item has (spec 2.4): ``id`` and ``name``."""

    id: str | None = None
    name: str | None = None


class MonitorsTableReportItem(ReportItemBase):
    """Table of monitors of a result (spec 2.4)."""

    kind: Literal["MonitorsTableReportItem"] = Field(default="MonitorsTableReportItem", alias=TYPE_KEY)
    bench_result_id: str | None = None
    settings: list[UiSetting] | None = None


class StatisticTreeReportItem(ReportItemBase):
    """Tree of statistics (spec 2.4)."""

    kind: Literal["StatisticTreeReportItem"] = Field(default="StatisticTreeReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None
    settings: list[UiSetting] | None = None


class LoadGeneratorsChartReportItem(ReportItemBase):
    """Chart of load generator monitors (spec 2.4)."""

    kind: Literal["LoadGeneratorsChartReportItem"] = Field(
        default="LoadGeneratorsChartReportItem", alias=TYPE_KEY
    )
    bench_result_id: str | None = None
    monitor_type: Open[MonitorType] | None = None


class TrendConfigReportItem(ReportItemBase):
    """Shows the trend configuration (spec 2.4); no other fields."""

    kind: Literal["TrendConfigReportItem"] = Field(default="TrendConfigReportItem", alias=TYPE_KEY)


class PieChartReportItem(ReportItemBase):
    """Pie chart (spec 2.4)."""

    kind: Literal["PieChartReportItem"] = Field(default="PieChartReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None


class TopReportItem(ReportItemBase):
    """Top ``size`` entries of a metric (spec 2.4)."""

    kind: Literal["TopReportItem"] = Field(default="TopReportItem", alias=TYPE_KEY)
    metric: Metric | None = None
    size: Int | None = None


class TextReportItem(ReportItemBase):
    """Free text (spec 2.4)."""

    kind: Literal["TextReportItem"] = Field(default="TextReportItem", alias=TYPE_KEY)
    description: str | None = None


class ThresholdAlarmReportItem(ReportItemBase):
    """Threshold alarms of a metric (spec 2.4); also the body of ``POST /analysis/threshold-alarms``."""

    kind: Literal["ThresholdAlarmReportItem"] = Field(default="ThresholdAlarmReportItem", alias=TYPE_KEY)
    metric: Metric | None = None
    settings: list[UiSetting] | None = None


class LoadGeneratorsTreeReportItem(ReportItemBase):
    """Tree of load generators (spec 2.4)."""

    kind: Literal["LoadGeneratorsTreeReportItem"] = Field(
        default="LoadGeneratorsTreeReportItem", alias=TYPE_KEY
    )
    bench_result_id: str | None = None
    settings: list[UiSetting] | None = None


class SynopsisReportItem(ReportItemBase):
    """Synopsis of a result (spec 2.4)."""

    kind: Literal["SynopsisReportItem"] = Field(default="SynopsisReportItem", alias=TYPE_KEY)
    bench_result_id: str | None = None


class StatisticTableReportItem(ReportItemBase):
    """Table of statistics (spec 2.4)."""

    kind: Literal["StatisticTableReportItem"] = Field(default="StatisticTableReportItem", alias=TYPE_KEY)
    compute_type: Open[ComputeType] | None = None
    metrics: list[Metric] | None = None
    settings: list[UiSetting] | None = None
    size: Int | None = None


class StackedChartReportItem(ReportItemBase):
    """Stacked chart (spec 2.4)."""

    kind: Literal["StackedChartReportItem"] = Field(default="StackedChartReportItem", alias=TYPE_KEY)
    metric: Metric | None = None
    mode: Open[ChartMode] | None = None


class LineChartReportItem(ReportItemBase):
    """Line chart (spec 2.4)."""

    kind: Literal["LineChartReportItem"] = Field(default="LineChartReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None


class InsightsReportItem(ReportItemBase):
    """Insights of a result (spec 2.4)."""

    kind: Literal["InsightsReportItem"] = Field(default="InsightsReportItem", alias=TYPE_KEY)
    bench_result_id: str | None = None
    filters: list[QueryFilter] | None = None
    sample_type: Open[SampleType] | None = None
    settings: list[UiSetting] | None = None
    thresholds: dict[str, Any] | None = None


class PercentilesChartReportItem(ReportItemBase):
    """Percentiles chart (spec 2.4)."""

    kind: Literal["PercentilesChartReportItem"] = Field(default="PercentilesChartReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None
    percentiles: list[Number] | None = None


class AreaRangeChartReportItem(ReportItemBase):
    """Area range chart (spec 2.4)."""

    kind: Literal["AreaRangeChartReportItem"] = Field(default="AreaRangeChartReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None
    range_type: Open[RangeType] | None = None
    reference_type: Open[ReferenceType] | None = None


class SummaryReportItem(ReportItemBase):
    """Summary (spec 2.4)."""

    kind: Literal["SummaryReportItem"] = Field(default="SummaryReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None


class ErrorsReportItem(ReportItemBase):
    """Errors of a result (spec 2.4)."""

    kind: Literal["ErrorsReportItem"] = Field(default="ErrorsReportItem", alias=TYPE_KEY)
    bench_result_id: str | None = None
    filters: list[QueryFilter] | None = None
    settings: list[UiSetting] | None = None


class BarChartReportItem(ReportItemBase):
    """Bar chart (spec 2.4)."""

    kind: Literal["BarChartReportItem"] = Field(default="BarChartReportItem", alias=TYPE_KEY)
    metrics: list[Metric] | None = None
    stacked: Bool | None = None


class TextualMonitorReportItem(ReportItemBase):
    """Textual monitor (spec 2.4)."""

    kind: Literal["TextualMonitorReportItem"] = Field(default="TextualMonitorReportItem", alias=TYPE_KEY)
    metric: Metric | None = None
    settings: list[UiSetting] | None = None


class MonitoringAlarmsReportItem(ReportItemBase):
    """Alarms of the monitors of a result (the service's documentation; fields not published, kept)."""

    kind: Literal["MonitoringAlarmsReportItem"] = Field(default="MonitoringAlarmsReportItem", alias=TYPE_KEY)
    bench_result_id: str | None = None


class UnknownReportItem(UnknownModel):
    """A report item whose ``@type`` is not in spec 2.4; kept verbatim."""

    family: ClassVar[str] = "report item"


ReportItem: TypeAlias = Annotated[
    Annotated[
        MonitorsTableReportItem
        | StatisticTreeReportItem
        | LoadGeneratorsChartReportItem
        | TrendConfigReportItem
        | PieChartReportItem
        | TopReportItem
        | TextReportItem
        | ThresholdAlarmReportItem
        | LoadGeneratorsTreeReportItem
        | SynopsisReportItem
        | StatisticTableReportItem
        | StackedChartReportItem
        | LineChartReportItem
        | InsightsReportItem
        | PercentilesChartReportItem
        | AreaRangeChartReportItem
        | SummaryReportItem
        | ErrorsReportItem
        | BarChartReportItem
        | TextualMonitorReportItem
        | MonitoringAlarmsReportItem,
        Field(discriminator="kind"),
        Tag(KNOWN_TAG),
    ]
    | Annotated[UnknownReportItem, Tag(UNKNOWN_TAG)],
    Field(union_mode="left_to_right"),
]
UnknownReportItem.known_types = variant_tags(ReportItem)

ReportItemAdapter: ApiAdapter[ReportItem] = ApiAdapter(ReportItem)
