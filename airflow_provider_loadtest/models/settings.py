"""UI setting variants (spec 2.7) and their discriminated union :data:`UiSetting`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Field, Tag

from .base import KNOWN_TAG, TYPE_KEY, UNKNOWN_TAG, ApiAdapter, Bool, TypedModel, UnknownModel, variant_tags
from .interval import Interval, TimeRange

__all__ = [
    "NumberTableUiFilter",
    "StatisticTreeUiSettings",
    "StringTableUiFilter",
    "StringUiFilter",
    "TableUiSortSettings",
    "TimeRangeTableUiFilter",
    "UiSetting",
    "UiSettingAdapter",
    "UnknownUiSetting",
    "ValueTableUiFilter",
]


class TableUiSortSettings(TypedModel):
    """Sort column and direction of a table (spec 2.7)."""

    kind: Literal["TableUiSortSettings"] = Field(default="TableUiSortSettings", alias=TYPE_KEY)
    active: str | None = None
    direction: str | None = None


class NumberTableUiFilter(TypedModel):
    """Table filter on a number column (spec 2.7); ``range`` endpoints are plain integers."""

    kind: Literal["NumberTableUiFilter"] = Field(default="NumberTableUiFilter", alias=TYPE_KEY)
    field_label: str | None = None
    field_name: str | None = None
    id: str | None = None
    range: Interval | None = None


class StringUiFilter(TypedModel):
    """Free-text filter (spec 2.7)."""

    kind: Literal["StringUiFilter"] = Field(default="StringUiFilter", alias=TYPE_KEY)
    value: str | None = None


class TimeRangeTableUiFilter(TypedModel):
    """Table filter on a time column (spec 2.7); ``range`` has ``from``/``to`` in epoch ms."""

    kind: Literal["TimeRangeTableUiFilter"] = Field(default="TimeRangeTableUiFilter", alias=TYPE_KEY)
    field_label: str | None = None
    field_name: str | None = None
    id: str | None = None
    range: TimeRange | None = None


class ValueTableUiFilter(TypedModel):
    """Table filter on one value of a column (spec 2.7)."""

    kind: Literal["ValueTableUiFilter"] = Field(default="ValueTableUiFilter", alias=TYPE_KEY)
    field_label: str | None = None
    field_name: str | None = None
    id: str | None = None
    label: str | None = None
    value: str | None = None


class StringTableUiFilter(TypedModel):
    """Table filter matching a string column (spec 2.7); ``matchType`` is a free string there."""

    kind: Literal["StringTableUiFilter"] = Field(default="StringTableUiFilter", alias=TYPE_KEY)
    field_label: str | None = None
    field_name: str | None = None
    id: str | None = None
    match_type: str | None = None
    value: str | None = None
    ignore_case: Bool | None = None


class StatisticTreeUiSettings(TypedModel):
    """Selected node of a statistic tree (spec 2.7)."""

    kind: Literal["StatisticTreeUiSettings"] = Field(default="StatisticTreeUiSettings", alias=TYPE_KEY)
    node_id: str | None = None


class UnknownUiSetting(UnknownModel):
    """A UI setting whose ``@type`` is not in spec 2.7; kept verbatim."""

    family: ClassVar[str] = "UI setting"


UiSetting: TypeAlias = Annotated[
    Annotated[
        TableUiSortSettings
        | NumberTableUiFilter
        | StringUiFilter
        | TimeRangeTableUiFilter
        | ValueTableUiFilter
        | StringTableUiFilter
        | StatisticTreeUiSettings,
        Field(discriminator="kind"),
        Tag(KNOWN_TAG),
    ]
    | Annotated[UnknownUiSetting, Tag(UNKNOWN_TAG)],
    Field(union_mode="left_to_right"),
]
UnknownUiSetting.known_types = variant_tags(UiSetting)

UiSettingAdapter: ApiAdapter[UiSetting] = ApiAdapter(UiSetting)
