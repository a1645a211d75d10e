"""Trend selector variants (spec 2.3, elements of TrendReportConfig.selectors) and :data:`TrendSelector`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Field, Tag

from .base import KNOWN_TAG, TYPE_KEY, UNKNOWN_TAG, ApiAdapter, TypedModel, UnknownModel, variant_tags
from .enums import NameMatchType, Open
from .interval import Interval

__all__ = [
    "TrendReportCreationDateSelector",
    "TrendReportNameSelector",
    "TrendReportTagsSelector",
    "TrendReportUserDefinedSelector",
    "TrendSelector",
    "TrendSelectorAdapter",
    "UnknownTrendSelector",
]


class TrendReportCreationDateSelector(TypedModel):
    """Selects results created within ``range`` (epoch ms interval, spec 2.3)."""

    kind: Literal["TrendReportCreationDateSelector"] = Field(
        default="TrendReportCreationDateSelector", alias=TYPE_KEY
    )
    range: Interval | None = None


class TrendReportUserDefinedSelector(TypedModel):
    """Selects the listed results, each with a display name (spec 2.3)."""

    kind: Literal["TrendReportUserDefinedSelector"] = Field(
        default="TrendReportUserDefinedSelector", alias=TYPE_KEY
    )
    result_ids_to_name: dict[str, str] | None = None


class TrendReportNameSelector(TypedModel):
    """Selects results whose name matches ``search`` as ``type`` says (spec 2.3)."""

    kind: Literal["TrendReportNameSelector"] = Field(default="TrendReportNameSelector", alias=TYPE_KEY)
    search: str | None = None
    type: Open[NameMatchType] | None = None


class TrendReportTagsSelector(TypedModel):
    """Selects results carrying ``tags`` (spec 2.3)."""

    kind: Literal["TrendReportTagsSelector"] = Field(default="TrendReportTagsSelector", alias=TYPE_KEY)
    tags: list[str] | None = None


class UnknownTrendSelector(UnknownModel):
    """A trend selector whose ``@type`` is not in spec 2.3; kept verbatim."""

    family: ClassVar[str] = "trend selector"


TrendSelector: TypeAlias = Annotated[
    Annotated[
        TrendReportCreationDateSelector
        | TrendReportUserDefinedSelector
        | TrendReportNameSelector
        | TrendReportTagsSelector,
        Field(discriminator="kind"),
        Tag(KNOWN_TAG),
    ]
    | Annotated[UnknownTrendSelector, Tag(UNKNOWN_TAG)],
    Field(union_mode="left_to_right"),
]
UnknownTrendSelector.known_types = variant_tags(TrendSelector)

TrendSelectorAdapter: ApiAdapter[TrendSelector] = ApiAdapter(TrendSelector)
