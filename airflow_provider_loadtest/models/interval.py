"""Interval object of trend selectors and number UI filters (spec 2.3, 2.7)."""

from __future__ import annotations

from pydantic import Field

from .base import ApiModel, Int
from .enums import BoundType, Open

__all__ = ["Interval", "TimeRange"]


class Interval(ApiModel):
    """A range with optional endpoints (spec 2.3): an omitted (or null) endpoint leaves that side unbounded.

    A bound type that is missing, or that this version does not know, counts as CLOSED (inclusive);
    only an explicit OPEN excludes the endpoint.
    """

    lower_endpoint: Int | None = None
    lower_bound_type: Open[BoundType] | None = None
    upper_endpoint: Int | None = None
    upper_bound_type: Open[BoundType] | None = None

    def contains(self, value: int | float) -> bool:
        """Whether ``value`` lies in the interval, honouring OPEN (exclusive) and CLOSED (inclusive)."""
        if self.lower_endpoint is not None:
            if self.lower_bound_type == BoundType.OPEN:
                if value <= self.lower_endpoint:
                    return False
            elif value < self.lower_endpoint:
                return False
        if self.upper_endpoint is not None:
            if self.upper_bound_type == BoundType.OPEN:
                if value >= self.upper_endpoint:
                    return False
            elif value > self.upper_endpoint:
                return False
        return True


class TimeRange(ApiModel):
    """``range`` of TimeRangeTableUiFilter (spec 2.7): ``from`` and ``to`` in epoch ms."""

    from_: Int | None = Field(default=None, alias="from")
    to: Int | None = None
