"""Workspace as answered by ``GET /workspaces/member-of`` (beyond-the-spec; only id and name published)."""

from __future__ import annotations

from pydantic import TypeAdapter

from .base import ApiModel

__all__ = ["Workspace", "WorkspaceListAdapter"]


class Workspace(ApiModel):
    """A workspace; fields other than ``id`` and ``name`` are unpublished and kept as extras."""

    id: str | None = None
    name: str | None = None


#: Parses the answer of ``GET /workspaces/member-of``.
WorkspaceListAdapter: TypeAdapter[list[Workspace]] = TypeAdapter(list[Workspace])
