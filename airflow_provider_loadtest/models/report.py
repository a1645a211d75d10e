"""Report definitions: templates (spec 2.2, 4.2) and the BenchReport a run answers (beyond-the-spec)."""

from __future__ import annotations

from typing import TypeAlias

from pydantic import TypeAdapter

from .base import ApiModel
from .configs import BenchReportConfig
from .items import ReportItem

__all__ = ["BenchReport", "ReportDefinition", "ReportTemplate", "ReportTemplateListAdapter"]


class ReportDefinition(ApiModel):
    """A report definition (spec 2.2); timestamps are epoch milliseconds."""

    id: str | None = None
    workspace_id: str | None = None
    name: str | None = None
    description: str | None = None
    created: int | None = None
    last_modified: int | None = None
    configs: list[BenchReportConfig] | None = None
    items: list[ReportItem] | None = None


#: A report template is a report definition (spec 4.2 lists them per workspace).
ReportTemplate: TypeAlias = ReportDefinition

#: Parses the answer of ``GET /analysis/bench-report-templates/by-workspace/{workspaceId}``.
ReportTemplateListAdapter: TypeAdapter[list[ReportDefinition]] = TypeAdapter(list[ReportDefinition])


class BenchReport(ReportDefinition):
    """The report of a run, as answered by ``POST /runtime/scenarios/run/{id}`` (beyond-the-spec)."""

    project_id: str | None = None
    bench_result_ids: list[str] | None = None

    @property
    def bench_result_id(self) -> str | None:
        """The run's id: the first of ``benchResultIds`` (None when the list is missing or empty)."""
        if not self.bench_result_ids:
            return None
        return self.bench_result_ids[0]
