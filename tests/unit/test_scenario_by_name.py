"""``RunScenarioOperator(scenario_name=...)``: a scenario chosen by the name the web UI shows, as a report
template is by ``template_name`` (exact first, then ignoring case); none or several refuse before the
start call, naming the candidates."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
import requests_mock as rm

from airflow_provider_loadtest.api.errors import AmbiguousScenarioError, ScenarioNotFoundError
from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from tests.conftest import BASE_URL
from tests.unit.test_hook import BENCH_REPORT, RUN_URL

PROJECTS_URL = f"{BASE_URL}/design/projects/by-workspace/ws-1/DESIGN"
PROJECTS = [{"id": "proj-1", "name": "Shop", "workspaceId": "ws-1"}, {"id": "proj-2", "name": "API"}]
SCENARIOS = {
    "proj-1": [
        {"id": "sc-1", "name": "Checkout flow", "projectId": "proj-1"},
        {"id": "sc-2", "name": "checkout FLOW", "projectId": "proj-1"},
        {"id": "sc-3", "name": "Browse", "projectId": "proj-1"},
    ],
    "proj-2": [{"id": "sc-4", "name": "browse"}, {"id": "sc-5", "name": "Login"}],  # no projectId given
}


def _context() -> dict[str, Any]:
    return {"ti": mock.MagicMock(name="ti")}


@pytest.fixture
def listings(requests_mock: rm.Mocker) -> rm.Mocker:
    requests_mock.get(PROJECTS_URL, json=PROJECTS)
    for project, scenarios in SCENARIOS.items():
        requests_mock.get(f"{BASE_URL}/runtime/scenarios/by-project/{project}", json=scenarios)
    for scenario in ("sc-1", "sc-4", "sc-5"):
        requests_mock.post(f"{BASE_URL}/runtime/scenarios/run/{scenario}", json=BENCH_REPORT)
    return requests_mock


def _starts(requests_mock: rm.Mocker) -> list[str]:
    return [r.path for r in requests_mock.request_history if r.method == "POST"]


def _op(**kwargs: Any) -> RunScenarioOperator:
    return RunScenarioOperator(task_id="t", wait_for_completion=False, **kwargs)


def test_exact_name_in_a_project_wins_over_a_case_variant(loadtest_conn: str, listings: rm.Mocker) -> None:
    result = _op(scenario_name="Checkout flow", project_id="proj-1").execute(_context())  # type: ignore[arg-type]
    assert result["scenario_id"] == "sc-1"
    assert _starts(listings) == ["/runtime/scenarios/run/sc-1"]
    assert PROJECTS_URL not in [r.url for r in listings.request_history]  # the project was given: one list


def test_a_name_ignoring_case_across_the_workspace(loadtest_conn: str, listings: rm.Mocker) -> None:
    result = _op(scenario_name="LOGIN", workspace_id="ws-1").execute(_context())  # type: ignore[arg-type]
    assert result["scenario_id"] == "sc-5"
    assert RUN_URL not in [r.url for r in listings.request_history]


def test_several_case_variants_refuse_naming_each_and_start_nothing(
    loadtest_conn: str, listings: rm.Mocker
) -> None:
    with pytest.raises(AirflowFailException) as caught:
        _op(scenario_name="CHECKOUT flow", project_id="proj-1").execute(_context())  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, AmbiguousScenarioError)
    message = str(caught.value)
    assert "2 scenarios of project 'proj-1' are named 'CHECKOUT flow'" in message
    assert "'Checkout flow' (id 'sc-1', project 'proj-1')" in message
    assert "'checkout FLOW' (id 'sc-2', project 'proj-1')" in message
    assert _starts(listings) == []


def test_the_same_name_in_two_projects_of_the_workspace_refuses(
    loadtest_conn: str, listings: rm.Mocker
) -> None:
    with pytest.raises(AirflowFailException, match="give project_id") as caught:
        _op(scenario_name="BROWSE", workspace_id="ws-1").execute(_context())  # type: ignore[arg-type]
    message = str(caught.value)
    assert "(id 'sc-3', project 'proj-1')" in message and "(id 'sc-4', project 'proj-2')" in message
    assert _starts(listings) == []


def test_exact_beats_case_across_projects(loadtest_conn: str, listings: rm.Mocker) -> None:
    result = _op(scenario_name="browse", workspace_id="ws-1").execute(_context())  # type: ignore[arg-type]
    assert result["scenario_id"] == "sc-4"


def test_no_such_name_lists_the_scenarios_there_are(loadtest_conn: str, listings: rm.Mocker) -> None:
    with pytest.raises(AirflowFailException) as caught:
        _op(scenario_name="Search", workspace_id="ws-1").execute(_context())  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, ScenarioNotFoundError)
    message = str(caught.value)
    assert "workspace 'ws-1' has no scenario named 'Search'; it has: " in message
    assert "'Login' (id 'sc-5', project 'proj-2')" in message
    assert "not retried" in message
    assert _starts(listings) == []


def test_an_empty_project_says_so(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(f"{BASE_URL}/runtime/scenarios/by-project/empty", json=[])
    with pytest.raises(AirflowFailException, match="project 'empty' has no scenarios, so none is named 'X'"):
        _op(scenario_name="X", project_id="empty").execute(_context())  # type: ignore[arg-type]


def test_parse_time_rules() -> None:
    with pytest.raises(ValueError, match="give scenario_id or scenario_name"):
        RunScenarioOperator(task_id="t", scenario_id="sc-1", scenario_name="x", project_id="p")
    with pytest.raises(ValueError, match="give scenario_id or scenario_name"):
        RunScenarioOperator(task_id="t")
    with pytest.raises(ValueError, match="scenario_name needs project_id or workspace_id"):
        RunScenarioOperator(task_id="t", scenario_name="x")
    with pytest.raises(ValueError, match="project_id"):
        RunScenarioOperator(task_id="t", scenario_name="x", project_id="a/b")


def test_a_rendered_bad_project_id_fails_before_any_call(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    op = _op(scenario_name="x", project_id="{{ var.value.p }}")
    op.project_id = "../p"  # as rendered
    with pytest.raises(AirflowFailException, match="project_id"):
        op.execute(_context())  # type: ignore[arg-type]
    assert requests_mock.request_history == []
