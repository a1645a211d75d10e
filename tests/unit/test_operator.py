from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
import requests_mock as rm

from airflow_provider_loadtest.api.errors import (
    AmbiguousTemplateError,
    LoadTestApiError,
    TemplateNotFoundError,
)
from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.links.report import REPORT_URL_XCOM_KEY, LoadTestReportLink
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY, RunScenarioOperator
from tests.conftest import API_KEY, BASE_URL
from tests.unit.test_hook import BENCH_REPORT, RUN_URL, TEMPLATES, TEMPLATES_URL


def _context() -> dict[str, Any]:
    return {"ti": mock.MagicMock(name="ti")}


def _pushed(context: dict[str, Any]) -> dict[str, Any]:
    return {c.kwargs["key"]: c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list}


def test_returns_json_safe_run_dict_and_publishes_link(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    op = RunScenarioOperator(
        task_id="t",
        scenario_id="sc-1",
        template_name="smoke",
        workspace_id="ws-1",
        test_name="nightly",
        wait_for_completion=False,
    )
    context = _context()
    result = op.execute(context)  # type: ignore[arg-type]
    assert isinstance(result.pop("started_at"), float)
    url = f"{BASE_URL}/ui/workspace/ws-1/project/proj-1/analysis/report/rep-1"
    assert result == {
        "scenario_id": "sc-1",
        "report_id": "rep-1",
        "bench_result_id": "br-1",
        "project_id": "proj-1",
        "template_id": "t-3",
        "workspace_id": "ws-1",
        "test_name": "nightly",
        "report_url": url,
    }
    assert requests_mock.last_request.qs == {"templateid": ["t-3"], "name": ["nightly"]}
    pushed = _pushed(context)
    assert pushed[REPORT_URL_XCOM_KEY] == url
    assert pushed[LoadTestReportLink().xcom_key] == url
    assert pushed[RUN_RECORD_KEY]["bench_result_id"] == "br-1"
    assert API_KEY not in repr(result)


def test_template_id_is_used_as_given(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    requests_mock.get(f"{BASE_URL}/runtime/scenarios/sc-1", status_code=404)
    result = RunScenarioOperator(
        task_id="t", wait_for_completion=False, scenario_id="sc-1", template_id="t-9"
    ).execute(_context())  # type: ignore[arg-type]
    assert result["template_id"] == "t-9"
    assert result["report_url"] is None  # no workspace, and its lookup failed: no link, no failure
    assert [r.method for r in requests_mock.request_history] == ["POST", "GET"]


def test_missing_template_lists_what_exists_and_starts_nothing(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES[:3])
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    op = RunScenarioOperator(
        task_id="t",
        wait_for_completion=False,
        scenario_id="sc-1",
        template_name="Weekly",
        workspace_id="ws-1",
    )
    with pytest.raises(AirflowFailException) as caught:  # a retry would meet the same list
        op.execute(_context())  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, TemplateNotFoundError)
    message = str(caught.value)
    assert "workspace 'ws-1' has no report template named 'Weekly'" in message
    assert "'Smoke' (id 't-3')" in message
    assert not any(r.method == "POST" for r in requests_mock.request_history)


def test_ambiguous_template_starts_nothing(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    op = RunScenarioOperator(
        task_id="t", wait_for_completion=False, scenario_id="sc-1", template_name="dup", workspace_id="ws-1"
    )
    with pytest.raises(AirflowFailException) as caught:
        op.execute(_context())  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, AmbiguousTemplateError)
    assert not any(r.method == "POST" for r in requests_mock.request_history)


@pytest.mark.parametrize("bad", ["a/b", "..", "a?b", "a#b", "a b", ""])
def test_literal_bad_ids_fail_at_dag_parse_time(bad: str) -> None:
    with pytest.raises(ValueError, match="scenario_id"):
        RunScenarioOperator(task_id="t", scenario_id=bad)
    with pytest.raises(ValueError, match="workspace_id"):
        RunScenarioOperator(task_id="t", scenario_id="ok", workspace_id=bad, template_name="x")


@pytest.mark.parametrize("field", ["scenario_id", "template_id", "workspace_id"])
def test_rendered_bad_ids_fail_before_any_http_call(
    loadtest_conn: str, requests_mock: rm.Mocker, field: str
) -> None:
    op = RunScenarioOperator(
        task_id="t",
        wait_for_completion=False,
        scenario_id="{{ x }}",
        template_id="{{ y }}",
        workspace_id="{{ z }}",
    )
    op.scenario_id, op.template_id, op.workspace_id = "sc-1", "t-1", "ws-1"  # what rendering would give
    setattr(op, field, "../../admin")
    with pytest.raises(AirflowFailException, match=field) as caught:  # never retried
        op.execute(_context())  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, ValueError)
    assert requests_mock.call_count == 0


def test_argument_combinations_are_checked() -> None:
    with pytest.raises(ValueError, match="not both"):
        RunScenarioOperator(
            task_id="t", scenario_id="s", template_id="a", template_name="b", workspace_id="w"
        )
    with pytest.raises(ValueError, match="needs workspace_id"):
        RunScenarioOperator(task_id="t", scenario_id="s", template_name="b")


def test_properties_are_sent_as_strings(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    RunScenarioOperator(
        task_id="t", wait_for_completion=False, scenario_id="sc-1", properties={"USERS": 50}
    ).execute(_context())  # type: ignore[arg-type, dict-item]
    assert requests_mock.request_history[0].json() == {"map": {"USERS": "50"}}


def test_answer_without_run_id_is_an_error(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json={"id": "rep-1", "benchResultIds": []})
    with pytest.raises(AirflowFailException, match="no report id or bench result id"):
        RunScenarioOperator(task_id="t", wait_for_completion=False, scenario_id="sc-1").execute(_context())  # type: ignore[arg-type]


def test_api_failure_propagates_with_details(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, status_code=403, text="Plan limit reached")
    with pytest.raises(AirflowFailException, match="Plan limit reached") as caught:
        RunScenarioOperator(task_id="t", wait_for_completion=False, scenario_id="sc-1").execute(_context())  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, LoadTestApiError)
    assert caught.value.__cause__.status == 403


def test_templated_fields() -> None:
    assert set(RunScenarioOperator.template_fields) == {
        "scenario_id",
        "scenario_name",
        "project_id",
        "template_id",
        "template_name",
        "workspace_id",
        "test_name",
        "properties",
        "subscription_id",
        "junit_destination",
        "report_pdf_destination",
        "report_export_config",
        "metric_budgets",
        "baseline",
        "max_regression_pct",
        "history_settings",
        "transaction_budgets",
        "transaction_max_regression_pct",
    }


def test_link_reads_the_published_url_without_asking_the_xcom_api() -> None:
    """A task that failed before starting a run: no XCom lookup, so no "[error] XCom not found" line."""
    link = LoadTestReportLink()
    op = mock.Mock(spec=[])
    with mock.patch("airflow.sdk.execution_time.xcom.XCom.get_value") as get_value:
        assert link.get_link(op, ti_key=mock.sentinel.key) == ""  # type: ignore[arg-type]
        ti = mock.Mock()
        LoadTestReportLink.publish({"task": op, "ti": ti}, "https://x/ui/r")
        assert link.get_link(op, ti_key=mock.sentinel.key) == "https://x/ui/r"  # type: ignore[arg-type]
    get_value.assert_not_called()
    pushed = {c.kwargs["key"]: c.kwargs["value"] for c in ti.xcom_push.call_args_list}
    assert pushed == {REPORT_URL_XCOM_KEY: "https://x/ui/r", link.xcom_key: "https://x/ui/r"}
    assert link.name == "Load test report"
