"""Trend selector variants (spec 2.3, elements of TrendReportConfig.selectors) and :data:`TrendSelector`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Discriminator, Field, Tag, TypeAdapter

from .base import TYPE_KEY, UNKNOWN_TAG, TypedModel, UnknownModel, type_discriminator
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
    Annotated[TrendReportCreationDateSelector, Tag("TrendReportCreationDateSelector")]
    | Annotated[TrendReportUserDefinedSelector, Tag("TrendReportUserDefinedSelector")]
    | Annotated[TrendReportNameSelector, Tag("TrendReportNameSelector")]
    | Annotated[TrendReportTagsSelector, Tag("TrendReportTagsSelector")]
    | Annotated[UnknownTrendSelector, Tag(UNKNOWN_TAG)],
    Discriminator(
        type_discriminator(
            TrendReportCreationDateSelector,
            TrendReportUserDefinedSelector,
            TrendReportNameSelector,
            TrendReportTagsSelector,
        )
    ),
]

TrendSelectorAdapter: TypeAdapter[TrendSelector] = TypeAdapter(TrendSelector)
