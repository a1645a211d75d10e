"""BenchReportConfig variants (spec 2.3) and their discriminated union :data:`BenchReportConfig`."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import Field, Tag

from .base import (
    KNOWN_TAG,
    TYPE_KEY,
    UNKNOWN_TAG,
    ApiAdapter,
    ApiModel,
    Bool,
    Int,
    Number,
    TypedModel,
    UnknownModel,
    variant_tags,
)
from .enums import Open, PageFormat
from .selectors import TrendSelector

__all__ = [
    "ApdexReportConfig",
    "BenchReportConfig",
    "BenchReportConfigAdapter",
    "ColorsReportConfig",
    "ComparisonReportConfig",
    "ExportReportConfig",
    "GraphReportConfig",
    "PageMargin",
    "SingleColorReportConfig",
    "TimeRangeReportConfig",
    "TrendReportConfig",
    "UnknownReportConfig",
]


class TrendReportConfig(TypedModel):
    """Which results a trend report compares (spec 2.3)."""

    kind: Literal["TrendReportConfig"] = Field(default="TrendReportConfig", alias=TYPE_KEY)
    selectors: list[TrendSelector] | None = None
    shown_results: Int | None = None


class TimeRangeReportConfig(TypedModel):
    """Time window of the report, epoch ms (spec 2.3); JSON ``from`` is the attribute ``from_``."""

    kind: Literal["TimeRangeReportConfig"] = Field(default="TimeRangeReportConfig", alias=TYPE_KEY)
    from_: Int | None = Field(default=None, alias="from")
    to: Int | None = None


class ApdexReportConfig(TypedModel):
    """Apdex thresholds (spec 2.3)."""

    kind: Literal["ApdexReportConfig"] = Field(default="ApdexReportConfig", alias=TYPE_KEY)
    satisfying: Number | None = None
    tolerating: Number | None = None


class SingleColorReportConfig(TypedModel):
    """One colour for a chart (spec 2.3)."""

    kind: Literal["SingleColorReportConfig"] = Field(default="SingleColorReportConfig", alias=TYPE_KEY)
    color: str | None = None


class PageMargin(ApiModel):
    """Page margins of a PDF export, CSS-like strings (spec 2.3, ExportReportConfig.pageMargin)."""

    bottom: str | None = None
    left: str | None = None
    right: str | None = None
    top: str | None = None


class ExportReportConfig(TypedModel):
    """PDF export settings (spec 2.3); also the ``config`` of a PrintReportTask."""

    kind: Literal["ExportReportConfig"] = Field(default="ExportReportConfig", alias=TYPE_KEY)
    cover_page: str | None = None
    orientation: str | None = None
    page_format: Open[PageFormat] | None = None
    page_margin: PageMargin | None = None
    scale: Number | None = None
    tables_row_count: dict[str, Any] | None = None


class ComparisonReportConfig(TypedModel):
    """Names of the compared results (spec 2.3)."""

    kind: Literal["ComparisonReportConfig"] = Field(default="ComparisonReportConfig", alias=TYPE_KEY)
    names: list[str] | None = None


class ColorsReportConfig(TypedModel):
    """Colour map of a chart (spec 2.3)."""

    kind: Literal["ColorsReportConfig"] = Field(default="ColorsReportConfig", alias=TYPE_KEY)
    colors: dict[str, Any] | None = None


class GraphReportConfig(TypedModel):
    """Display limits and thresholds of graphs (spec 2.3)."""

    kind: Literal["GraphReportConfig"] = Field(default="GraphReportConfig", alias=TYPE_KEY)
    acceptable_errors_percentage: Int | None = None
    acceptable_response_size: Int | None = None
    display_color_dots: Bool | None = None
    display_threshold_label: Bool | None = None
    max_columns: Int | None = None
    max_lines: Int | None = None
    max_percentiles: Int | None = None
    max_pies: Int | None = None
    max_statistics: Int | None = None
    threshold_colors: dict[str, str] | None = None


class UnknownReportConfig(UnknownModel):
    """A BenchReportConfig whose ``@type`` is not in spec 2.3; kept verbatim."""

    family: ClassVar[str] = "BenchReportConfig"


BenchReportConfig: TypeAlias = Annotated[
    Annotated[
        TrendReportConfig
        | TimeRangeReportConfig
        | ApdexReportConfig
        | SingleColorReportConfig
        | ExportReportConfig
        | ComparisonReportConfig
        | ColorsReportConfig
        | GraphReportConfig,
        Field(discriminator="kind"),
        Tag(KNOWN_TAG),
    ]
    | Annotated[UnknownReportConfig, Tag(UNKNOWN_TAG)],
    Field(union_mode="left_to_right"),
]
UnknownReportConfig.known_types = variant_tags(BenchReportConfig)

BenchReportConfigAdapter: ApiAdapter[BenchReportConfig] = ApiAdapter(BenchReportConfig)
