"""Finding a thing of the service by the name a person reads in the web UI: exact first, then ignoring case.

One rule for report templates and scenarios alike, so "which one did you mean" has one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def name_matches(items: Sequence[T], name: str, name_of: Callable[[T], str | None]) -> list[T]:
    """The items named exactly ``name``; if there are none, those named so ignoring case
    (``"nightly sla"`` finds ``"Nightly SLA"``). Several at the same level are for the caller to refuse:
    picking one at random would start a costly load test of a guess."""
    exact = [item for item in items if name_of(item) == name]
    if exact:
        return exact
    wanted = name.casefold()
    return [item for item in items if (found := name_of(item)) is not None and found.casefold() == wanted]
