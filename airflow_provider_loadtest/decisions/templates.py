"""Choosing a report template from a workspace's list, the way a person would read the names.

Shared by the hook, the operator and the sensor so "which template did you mean" has one answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from airflow_provider_loadtest.api.errors import AmbiguousTemplateError, TemplateNotFoundError
from airflow_provider_loadtest.decisions.names import name_matches


class NamedTemplate(Protocol):
    """What choosing a template reads of it: a full template, an opaque one, or a ``TemplateRef``."""

    @property
    def id(self) -> str | None: ...

    @property
    def name(self) -> str | None: ...


TemplateT = TypeVar("TemplateT", bound=NamedTemplate)


def choose_template(
    templates: Sequence[TemplateT],
    *,
    workspace_id: str,
    name: str | None = None,
    template_id: str | None = None,
) -> TemplateT | None:
    """Return the template with ``template_id``, or the one named ``name``; ``None`` if none matches.

    A name matches exactly first, then ignoring case (``"nightly sla"`` finds ``"Nightly SLA"``). Two
    templates matching at the same level raise ``AmbiguousTemplateError``: starting a costly load test
    with a template picked at random would be worse than failing.
    """
    if (name is None) == (template_id is None):
        raise ValueError("give exactly one of name and template_id to choose a template")
    if template_id is not None:
        return next((t for t in templates if t.id == template_id), None)
    assert name is not None  # noqa: S101 - type narrowing: the check above makes it hold
    matches = name_matches(templates, name, lambda t: t.name)
    if len(matches) > 1:
        ids = ", ".join(repr(t.id) for t in matches)
        raise AmbiguousTemplateError(
            f"{len(matches)} report templates of workspace {workspace_id!r} are named {name!r} "
            f"(ids {ids}): rename one, or pass template_id instead of template_name"
        )
    return matches[0] if matches else None


def describe_missing(
    templates: Sequence[NamedTemplate],
    *,
    workspace_id: str,
    name: str | None = None,
    template_id: str | None = None,
) -> str:
    """A message for "no such template" that lists what the workspace does have (the first
    ``LISTED_TEMPLATES`` by name, and how many more: a workspace may hold hundreds)."""
    wanted = f"named {name!r}" if name is not None else f"with id {template_id!r}"
    if not templates:
        return f"workspace {workspace_id!r} has no report templates, so none is {wanted}"
    names = sorted(f"{t.name!r} (id {t.id!r})" for t in templates)
    more = len(names) - LISTED_TEMPLATES
    available = ", ".join(names[:LISTED_TEMPLATES]) + (f" and {more} more" if more > 0 else "")
    return f"workspace {workspace_id!r} has no report template {wanted}; it has: {available}"


#: Templates a "no such template" message names at most.
LISTED_TEMPLATES = 20


def require_template(
    templates: Sequence[TemplateT],
    *,
    workspace_id: str,
    name: str | None = None,
    template_id: str | None = None,
) -> TemplateT:
    """``choose_template``, raising ``TemplateNotFoundError`` (with the names that exist) on no match."""
    found = choose_template(templates, workspace_id=workspace_id, name=name, template_id=template_id)
    if found is None:
        raise TemplateNotFoundError(
            describe_missing(templates, workspace_id=workspace_id, name=name, template_id=template_id)
        )
    return found
