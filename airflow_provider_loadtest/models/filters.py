"""Query filter variants (spec 2.6) and their discriminated union :data:`QueryFilter`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Field, Tag

from .base import KNOWN_TAG, TYPE_KEY, UNKNOWN_TAG, ApiAdapter, TypedModel, UnknownModel, variant_tags

__all__ = ["MultiTermFilter", "QueryFilter", "QueryFilterAdapter", "SingleTermFilter", "UnknownQueryFilter"]


class SingleTermFilter(TypedModel):
    """Filter on one term of a field (spec 2.6)."""

    kind: Literal["SingleTermFilter"] = Field(default="SingleTermFilter", alias=TYPE_KEY)
    field: str | None = None
    term: str | None = None


class MultiTermFilter(TypedModel):
    """Filter on several terms of a field (spec 2.6)."""

    kind: Literal["MultiTermFilter"] = Field(default="MultiTermFilter", alias=TYPE_KEY)
    field: str | None = None
    terms: list[str] | None = None


class UnknownQueryFilter(UnknownModel):
    """A query filter whose ``@type`` is not in spec 2.6; kept verbatim."""

    family: ClassVar[str] = "query filter"


QueryFilter: TypeAlias = Annotated[
    Annotated[
        SingleTermFilter | MultiTermFilter,
        Field(discriminator="kind"),
        Tag(KNOWN_TAG),
    ]
    | Annotated[UnknownQueryFilter, Tag(UNKNOWN_TAG)],
    Field(union_mode="left_to_right"),
]
UnknownQueryFilter.known_types = variant_tags(QueryFilter)

QueryFilterAdapter: ApiAdapter[QueryFilter] = ApiAdapter(QueryFilter)
