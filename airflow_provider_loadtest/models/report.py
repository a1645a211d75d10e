"""Report definitions: templates (spec 2.2, 4.2) and the BenchReport a run answers (beyond-the-spec)."""

from __future__ import annotations

import logging
from typing import Any, TypeAlias

from pydantic import ValidationError

from .base import ApiAdapter, ApiModel, Int, describe_errors, remember_input
from .configs import BenchReportConfig
from .items import ReportItem

__all__ = [
    "AnyReportTemplate",
    "BenchReport",
    "OpaqueReportTemplate",
    "ReportDefinition",
    "ReportTemplate",
    "ReportTemplateListAdapter",
    "parse_template_list",
]

logger = logging.getLogger("airflow_provider_loadtest.models")


class ReportDefinition(ApiModel):
    """A report definition (spec 2.2); timestamps are epoch milliseconds."""

    id: str | None = None
    workspace_id: str | None = None
    name: str | None = None
    description: str | None = None
    created: Int | None = None
    last_modified: Int | None = None
    configs: list[BenchReportConfig] | None = None
    items: list[ReportItem] | None = None


#: A report template is a report definition (spec 4.2 lists them per workspace).
ReportTemplate: TypeAlias = ReportDefinition

#: Parses a list of templates that all match the models (see :func:`parse_template_list` for the
#: tolerant reading of a workspace's list).
ReportTemplateListAdapter: ApiAdapter[list[ReportDefinition]] = ApiAdapter(list[ReportDefinition])


class OpaqueReportTemplate(ApiModel):
    """A template whose fields do not match :class:`ReportDefinition`: only ``id`` and ``name`` are
    read (all a choice by id or name needs); everything else is kept verbatim as extras."""

    id: str | None = None
    name: str | None = None


#: What a workspace's template list holds: templates read fully, or opaque ones.
AnyReportTemplate: TypeAlias = ReportDefinition | OpaqueReportTemplate


def parse_template_list(document: Any) -> list[AnyReportTemplate]:
    """Read ``GET /analysis/bench-report-templates/by-workspace/{id}``, one template at a time.

    Choosing a template needs only ids and names, so one template whose other fields do not match our
    models (a new field shape, a value of the wrong type) must not stop the choice of another: it is
    logged, naming its id and what did not match, and kept as an :class:`OpaqueReportTemplate`.
    The answer itself must be a list of objects.
    """
    if not isinstance(document, list):
        raise ValueError(f"expected a list of report templates, got {type(document).__name__}")
    templates: list[AnyReportTemplate] = []
    for position, raw in enumerate(document):
        if not isinstance(raw, dict):
            raise ValueError(f"report template #{position} is not an object: {raw!r:.80}")
        try:
            templates.append(ReportDefinition.from_api(raw))
        except ValidationError as exc:
            templates.append(_opaque(raw, position, exc))
    return templates


def _opaque(raw: dict[str, Any], position: int, exc: ValidationError) -> OpaqueReportTemplate:
    logger.warning(
        "Report template id %r (#%d in the list) does not match this version's models: %s. "
        "Kept as an opaque template: it can still be chosen by id or name.",
        raw.get("id"),
        position,
        describe_errors(exc),
    )
    known = {key: raw[key] for key in ("id", "name") if isinstance(raw.get(key), str)}
    template = OpaqueReportTemplate.model_validate(known)
    for key, value in raw.items():
        if key not in known:
            setattr(template, key, value)  # extra="allow": kept and written back as received
    remember_input(template, raw)  # written back in the order it came
    return template


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
