"""Choosing a scenario by the name the web UI shows, among a project's or a workspace's scenarios.

``RunScenarioOperator(scenario_name=...)`` lists the scenarios where the task says they live (a design
project, or every design project of a workspace) and asks this module which one was meant: the same
rule as a report template's name (``decisions.names``), and a refusal that names the candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_provider_loadtest.api.errors import AmbiguousScenarioError, ScenarioNotFoundError
from airflow_provider_loadtest.decisions.names import name_matches

if TYPE_CHECKING:
    from airflow_provider_loadtest.models import Scenario

#: How many scenarios a "none is named" message lists before it says how many more there are.
MAX_LISTED = 20


def _label(scenario: Scenario) -> str:
    return f"{scenario.name!r} (id {scenario.id!r}, project {scenario.project_id!r})"


def require_scenario(scenarios: Sequence[Scenario], *, name: str, where: str) -> Scenario:
    """The one scenario named ``name`` (exact first, then ignoring case) among ``scenarios``, listed
    from ``where`` ("project 'p'", "workspace 'w'"); ``ScenarioNotFoundError`` naming what there is
    when none is, ``AmbiguousScenarioError`` naming each candidate when several are."""
    matches = name_matches(scenarios, name, lambda s: s.name)
    if len(matches) == 1:
        if not matches[0].id:
            raise ScenarioNotFoundError(f"the scenario named {name!r} in {where} has no id in the answer")
        return matches[0]
    if matches:
        raise AmbiguousScenarioError(
            f"{len(matches)} scenarios of {where} are named {name!r}: "
            + ", ".join(_label(s) for s in matches)
            + ": rename one, give project_id, or pass scenario_id instead of scenario_name"
        )
    if not scenarios:
        raise ScenarioNotFoundError(f"{where} has no scenarios, so none is named {name!r}")
    listed = sorted(_label(s) for s in scenarios)
    more = f" and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
    raise ScenarioNotFoundError(
        f"{where} has no scenario named {name!r}; it has: {', '.join(listed[:MAX_LISTED])}{more}"
    )
