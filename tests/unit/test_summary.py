"""``return_value["summary"]`` (``decisions.gate.summary``) and the explanations beside it
(``lifecycle.explaining``): the verdict in short Markdown a notifier sends with one template line (the
recipe in docs/recipes.md rendered as Airflow renders a notifier's template), bounded and escaped; why
an ERROR run or a failed gate failed, in the log, the exception and XCom."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
from airflow_provider_loadtest.decisions.gate import GateRow, Verdict
from airflow_provider_loadtest.decisions.gate.summary import MAX_ROWS, summary_markdown
from airflow_provider_loadtest.decisions.samples.jmeter_log import jmeter_log_errors
from airflow_provider_loadtest.lifecycle.explaining import BoundedLog, explain_run, is_jmeter_log
from tests.conftest import BASE_URL
from tests.unit.test_gate import SUMMARY_URL, _gate_context, _pushed
from tests.unit.test_run_lifecycle import FILES_URL, _op, _service

RESULT = {
    "bench_result_id": "br-5",
    "scenario_id": "light-scenario",
    "state": "FINISHED",
    "report_url": "https://load.example.test/ui/report/r-5",
}
LIGHT = GateRow(
    metric="USERLOAD",
    value=100.0,
    passed=False,
    baseline=500.0,
    status="not_measured",
    reason="the run applied 100 of its usual 500 users: its response times do not describe the usual load",
)
P95 = "RESPONSE_TIME_PERCENTILE_95"
OK = GateRow(metric=P95, value=480.0, passed=True, status="noise")


def test_a_failed_gate_reads_as_its_result_the_rows_that_failed_and_why_and_the_link() -> None:
    text = summary_markdown(
        RESULT, Verdict((OK, LIGHT), None), passed=False, why=["Checkout: 9 failed; codes 502 x6"]
    )
    lines = text.splitlines()
    assert lines[0] == (
        "**Load test failed its quality gate**: run `br-5` (`light-scenario`), FINISHED"
        " · [report](https://load.example.test/ui/report/r-5)"
    )
    assert lines[1] == (
        "- **USERLOAD** 100 (usual 500): the run applied 100 of its usual 500 users: its response times "
        "do not describe the usual load"
    )
    assert P95 not in text  # a row that passed is not news
    assert lines[-2:] == ["Why:", "- `Checkout: 9 failed; codes 502 x6`"]


def test_a_pass_and_an_error_run_read_as_such() -> None:
    passed = summary_markdown(RESULT, Verdict((OK,), None), passed=True)
    assert passed.startswith("**Load test passed**") and "1 gated series, none failed" in passed
    error = summary_markdown(
        {**RESULT, "state": "ERROR"},
        None,
        passed=False,
        why=["2026-01-01 00:00:01,100 ERROR o.a.j.s.FileServer: Failed to open users.csv"],
        run_message="Run br-5 failed in the service (state ERROR)",
    )
    assert error.splitlines()[:2] == [
        "**Load test failed: the run ended ERROR**: run `br-5` (`light-scenario`), ERROR"
        " · [report](https://load.example.test/ui/report/r-5)",
        "- Run br-5 failed in the service (state ERROR)",
    ]
    assert "Failed to open users.csv" in error


def test_the_summary_is_bounded_and_a_label_cannot_inject_markup() -> None:
    rows = tuple(
        GateRow(metric=P95, value=900.0 + i, passed=False, status="budget", reason="budget <= 800",
                transaction=f"[t{i}](https://evil.example) `x`")
        for i in range(40)
    )  # fmt: skip
    text = summary_markdown(RESULT, Verdict(rows, None), passed=False, why=["x" * 5000] * 30)
    assert text.count("\n- **") == MAX_ROWS and "and 30 more failing row(s)" in text
    assert "- **RESPONSE_TIME_PERCENTILE_95** of `[t0](https://evil.example) 'x'` 900: budget <= 800" in text
    assert len(text) < 8000
    assert (
        summary_markdown({**RESULT, "report_url": "javascript:alert(1)"}, None, passed=True).count("[") == 0
    )


# --- the recipe, rendered as Airflow renders a notifier's template ------------------------------


def _recipe_template() -> str:
    page = (Path(__file__).parents[2] / "docs" / "recipes.md").read_text(encoding="utf-8")
    found = re.search(r"^SUMMARY = '(.+)'$", page, re.MULTILINE)
    assert found, "the recipe's one template line"
    return found.group(1)


def test_the_recipe_line_renders_the_summary_as_a_notifier_would() -> None:
    from airflow.sdk import DAG
    from airflow.sdk.bases.notifier import BaseNotifier

    class ChatNotifier(BaseNotifier):  # a user's own notifier: Slack's and Teams' take `text` alike
        template_fields = ("text",)

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text
            self.sent: list[str] = []

        def notify(self, context: Any) -> None:
            self.sent.append(self.text)

    summary = summary_markdown(RESULT, Verdict((LIGHT,), None), passed=False)

    class TaskInstance:  # what a callback's context holds, as far as the template reads it
        def xcom_pull(self, task_ids: str, key: str = "return_value", **_: Any) -> Any:
            return (
                {**RESULT, "summary": summary} if (task_ids, key) == ("load_test", "return_value") else None
            )

    ti = TaskInstance()
    notifier = ChatNotifier(_recipe_template())
    notifier({"ti": ti, "dag": DAG(dag_id="nightly_with_notice", schedule=None)})
    assert notifier.sent == [summary]


# --- why it failed -------------------------------------------------------------------------------


def test_an_error_run_says_its_jmeter_logs_errors_in_the_log_exception_and_xcom(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["ERROR"])
    requests_mock.get(FILES_URL, json=["lg-1-agent.log", "jmeter.log.gz", "lg-1.jtl.gz"])
    log = (
        "2026-01-01 00:00:01,100 INFO o.a.j.JMeter: Loading file: plan.jmx\n"
        "2026-01-01 00:00:01,200 ERROR o.a.j.s.FileServer: Failed to open users.csv?password=hunter2\n"
        "java.io.FileNotFoundException: users.csv\n"
    )
    requests_mock.get(f"{BASE_URL}/analysis/logs/br-1", content=gzip.compress(log.encode()))
    context = _gate_context()
    with pytest.raises(AirflowException) as caught:
        _op().execute(context)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "Why: The JMeter log holds 1 ERROR line(s):" in message
    assert "Failed to open users.csv?password=***" in message and "hunter2" not in message
    assert message.count("state ERROR") == 1  # the service's word is said once
    downloaded = [r.qs.get("filename") for r in requests_mock.request_history if "filename" in r.qs]
    assert downloaded == [["jmeter.log.gz"]]  # not the agent's log, not the JTL
    result = _pushed(context)["return_value"]
    assert result["explanation"]["jmeter_log"]["total"] == 1
    assert "Failed to open users.csv" in result["summary"]
    assert result["summary"].count("state ERROR") == 1  # the service's word once, in the summary too
    assert "Why run br-1 failed" in capsys.readouterr().out


def test_a_log_that_cannot_be_read_is_said_and_the_run_fails_for_its_own_reason(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["ERROR"])
    requests_mock.get(FILES_URL, status_code=404)
    with pytest.raises(AirflowException, match=r"state ERROR\).*Why: The JMeter log of run br-1 could not"):
        _op().execute(_gate_context())  # type: ignore[arg-type]


def test_a_passing_run_reads_no_log_and_says_no_why(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[600.0])
    result = _op(metric_budgets={P95: "<= 800"}).execute(_gate_context())  # type: ignore[arg-type]
    assert "explanation" not in result and result["summary"].startswith("**Load test passed**")
    assert not any("/analysis/logs/" in r.url for r in requests_mock.request_history)


def test_a_failed_gate_without_a_transaction_gate_fails_with_its_rows_alone(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[900.0])
    context = _gate_context()
    with pytest.raises(AirflowFailException) as caught:
        _op(metric_budgets={P95: "<= 800"}).execute(context)  # type: ignore[arg-type]
    assert "Why:" not in str(caught.value)
    assert _pushed(context)["return_value"]["summary"].splitlines()[1] == f"- **{P95}** 900: budget <= 800"


def test_the_service_s_word_and_breaking_alarms_lead_an_error_run_s_explanation() -> None:
    outcome = mock.MagicMock(state="ABORTED", message="Run br-2 was stopped: alarm broke it",
                             breaking=[{"id": "a1", "name": "Errors < 1 %"}])  # fmt: skip
    why = explain_run(outcome, jmeter_log_errors(""))
    assert why.lines[:2] == [
        "The service says: Run br-2 was stopped: alarm broke it",
        "Alarms that broke the run: Errors < 1 %",
    ]
    assert why.for_exception().startswith("Alarms that broke the run")


def test_a_large_log_is_read_by_its_head_and_tail() -> None:
    sink = BoundedLog(gzipped=False, head=160, tail=100)
    lines = [f"2026-01-01 00:00:{i % 60:02d},000 INFO line {i}" for i in range(1000)]
    lines[2] = "2026-01-01 00:00:02,000 ERROR o.a.j.JMeter: at the start"
    lines[-1] = "2026-01-01 00:00:59,000 ERROR o.a.j.JMeter: at the end"
    data = "\n".join(lines).encode()
    for start in range(0, len(data), 37):
        sink.write(data[start : start + 37])
    kept = sink.lines()
    assert sum(map(len, kept)) < 300 and any("bytes of the log not read" in line for line in kept)
    assert [e.message for e in jmeter_log_errors(kept).entries] == [
        "o.a.j.JMeter: at the start",
        "o.a.j.JMeter: at the end",
    ]
    sink.seek(0)  # a retried download starts again
    assert sink.lines() == []
    assert is_jmeter_log("lg-2-jmeter.log.gz") and not is_jmeter_log("lg-1-agent.log")
    assert not is_jmeter_log("lg-1.jtl.gz")
