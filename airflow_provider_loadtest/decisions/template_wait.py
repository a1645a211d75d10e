"""Waiting for a report template in the triggerer: poll the workspace's list until the template exists.

Sans-I/O like ``watch.watch_run``: ``wait_for_template`` yields the list call, pauses and log lines, and
is sent the answers, so the deferred ``TemplateSensor`` and any other driver share one set of rules
(the choice itself is ``templates.choose_template``, the same as the sensor's ``poke``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import TemplateNotFoundError
from airflow_provider_loadtest.decisions.templates import choose_template, describe_missing
from airflow_provider_loadtest.decisions.watch import Log, Sleep

if TYPE_CHECKING:
    from airflow_provider_loadtest.models import TemplateRef


class TemplateWaitTimeout(TemplateNotFoundError):
    """The template did not appear before the sensor's deadline."""


def wait_for_template(
    workspace_id: str,
    *,
    name: str | None = None,
    template_id: str | None = None,
    interval_s: float,
    deadline: float,
    now: Callable[[], float] = time.time,
) -> Generator[Any, Any, TemplateRef]:
    """Return the template once ``choose_template`` finds it; raise ``TemplateWaitTimeout`` at ``deadline``.

    ``deadline`` is wall-clock epoch seconds: the wait may move between processes (a triggerer restart
    re-creates the trigger), and only wall-clock time means the same thing in both. An ambiguous name
    raises ``AmbiguousTemplateError`` at once: waiting will not make two templates one.
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    while True:
        # Ids and names only: all the choice reads (full templates cost thousands of objects each).
        templates: list[TemplateRef] = yield endpoints.list_template_refs(workspace_id)
        found = choose_template(templates, workspace_id=workspace_id, name=name, template_id=template_id)
        if found is not None:
            yield Log(f"Found report template {found.name!r} (id {found.id}) in workspace {workspace_id!r}")
            return found
        missing = describe_missing(templates, workspace_id=workspace_id, name=name, template_id=template_id)
        left = deadline - now()
        if left <= 0:
            raise TemplateWaitTimeout(f"gave up waiting for the report template: {missing}")
        yield Log(f"Not yet: {missing}", logging.INFO)
        yield Sleep(min(interval_s, left))
