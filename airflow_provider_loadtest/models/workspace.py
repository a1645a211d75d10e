"""Workspaces, design projects and scenarios (beyond-the-spec; only a few fields are published).

The Jenkins plugin reads a scenario's ``projectId`` and that design project's ``workspaceId`` to build
the report's web UI link; nothing else of these documents is used, the rest is kept as extras.
"""

from __future__ import annotations

from .base import ApiAdapter, ApiModel

__all__ = ["DesignProject", "Scenario", "Workspace", "WorkspaceListAdapter"]


class Workspace(ApiModel):
    """A workspace; fields other than ``id`` and ``name`` are unpublished and kept as extras."""

    id: str | None = None
    name: str | None = None


class DesignProject(ApiModel):
    """``GET /design/projects/{id}``: a design project, which belongs to ``workspace_id``."""

    id: str | None = None
    name: str | None = None
    workspace_id: str | None = None


class Scenario(ApiModel):
    """``GET /runtime/scenarios/{id}``: a scenario, which belongs to design project ``project_id``."""

    id: str | None = None
    name: str | None = None
    description: str | None = None
    project_id: str | None = None


#: Parses the answer of ``GET /workspaces/member-of``.
WorkspaceListAdapter: ApiAdapter[list[Workspace]] = ApiAdapter(list[Workspace])
