"""Report definitions: templates (spec 2.2, 4.2) and the BenchReport a run answers (beyond-the-spec)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from .base import ApiAdapter, ApiModel, HeldWarnings, Int, describe_errors
from .configs import BenchReportConfig
from .items import ReportItem

__all__ = [
    "AnyReportTemplate",
    "BenchReport",
    "OpaqueReportTemplate",
    "ReportDefinition",
    "ReportTemplate",
    "ReportTemplateListAdapter",
    "TemplateRef",
    "TemplateRefListAdapter",
    "parse_template_list",
    "parse_template_refs",
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
    templates: list[AnyReportTemplate] = []
    with HeldWarnings():  # an unknown @type met in many templates is said once
        for position, raw in _template_objects(document):
            try:
                templates.append(ReportDefinition.from_api(raw))
            except ValidationError as exc:
                templates.append(_opaque(raw, position, exc))
    return templates


def _template_objects(document: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """The templates of a list answer, each with its position; the answer must be a list of objects."""
    if not isinstance(document, list):
        raise ValueError(f"expected a list of report templates, got {type(document).__name__}")
    for position, raw in enumerate(document):
        if not isinstance(raw, dict):
            # Not cut here: the message is cut once the key is blanked out (else part of it shows).
            raise ValueError(f"report template #{position} is not an object: {raw!r}")
        yield position, raw


def _opaque(raw: dict[str, Any], position: int, exc: ValidationError) -> OpaqueReportTemplate:
    logger.warning(
        "Report template id %r (#%d in the list) does not match this version's models: %s. "
        "Kept as an opaque template: it can still be chosen by id or name.",
        raw.get("id"),
        position,
        describe_errors(exc),
    )
    odd = [key for key in ("id", "name") if key in raw and not isinstance(raw[key], str)]
    # Validated, not set one by one: ``setattr`` puts a key such as ``_links`` beside the extras.
    template = OpaqueReportTemplate.model_validate({k: v for k, v in raw.items() if k not in odd})
    for key in odd:
        setattr(template, key, raw[key])  # an id or name that is not a string: written back as received
    return template


class TemplateRef(BaseModel):
    """A report template as far as choosing one goes: its ``id`` and ``name``, nothing else read.

    Choosing a template by id or name is all the sensor, the operator and the deferred wait do with a
    workspace's list, and full templates cost thousands of objects each: here the rest of every
    template is skipped while the bytes are read, never built. Not written back (no ``to_api``).
    """

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    name: str | None = None


#: Reads a workspace's template list as :class:`TemplateRef` s (see :func:`parse_template_refs`).
TemplateRefListAdapter: TypeAdapter[list[TemplateRef]] = TypeAdapter(list[TemplateRef])


def parse_template_refs(document: Any) -> list[TemplateRef]:
    """The ids and names of a workspace's template list (the tolerant reading, one template at a time).

    An id or name that is not a string is logged and read as missing: that template cannot be chosen
    by it, and the others still can. The answer itself must be a list of objects.
    """
    refs = []
    for position, raw in _template_objects(document):
        fields = {key: raw.get(key) for key in ("id", "name")}
        odd = {
            key: value for key, value in fields.items() if value is not None and not isinstance(value, str)
        }
        if odd:
            logger.warning(
                "Report template #%d in the list has a %s that is not a string (%s): read as missing.",
                position,
                " and ".join(odd),
                ", ".join(f"{value!r:.40}" for value in odd.values()),
            )
        refs.append(TemplateRef(**{key: None if key in odd else value for key, value in fields.items()}))
    return refs


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
