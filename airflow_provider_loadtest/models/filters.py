"""Query filter variants (spec 2.6) and their discriminated union :data:`QueryFilter`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, TypeAlias

from pydantic import Discriminator, Field, Tag, TypeAdapter

from .base import TYPE_KEY, UNKNOWN_TAG, TypedModel, UnknownModel, type_discriminator

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
    Annotated[SingleTermFilter, Tag("SingleTermFilter")]
    | Annotated[MultiTermFilter, Tag("MultiTermFilter")]
    | Annotated[UnknownQueryFilter, Tag(UNKNOWN_TAG)],
    Discriminator(type_discriminator(SingleTermFilter, MultiTermFilter)),
]

QueryFilterAdapter: TypeAdapter[QueryFilter] = TypeAdapter(QueryFilter)
