"""Issue 9: every call as the service's official clients make it (beyond-the-spec, "What the official
clients do"). One section per point of the issue; each test fails on the code before it."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest import models as m
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.decisions import report_pdf
from airflow_provider_loadtest.decisions.watch import WatchOptions, watch_run
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.operators.report import DownloadReportOperator, DownloadRunFilesOperator
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from tests.conftest import BASE_URL
from tests.unit.test_hook import BENCH_REPORT, RUN_URL, TEMPLATES_URL
from tests.unit.test_report import FILE_URL, JUNIT_URL, LIST_URL, PDF, RESULT_URL, TASKS_URL
from tests.unit.test_run_lifecycle import _context

FIXTURES = Path(__file__).parent / "fixtures"
ALARMS_URL = f"{BASE_URL}/analysis/threshold-alarms"
SCENARIO_URL = f"{BASE_URL}/runtime/scenarios/sc-1"
PROJECT_URL = f"{BASE_URL}/design/projects/proj-1"
STOP_URL = f"{BASE_URL}/runtime/bench-results/stop/br-1"


@pytest.fixture
def hook(loadtest_conn: str) -> LoadTestHook:
    return LoadTestHook(loadtest_conn_id=loadtest_conn)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hook_module, "_sleep", lambda seconds: None)


def _fixture(name: str) -> dict[str, Any]:
    document = json.loads((FIXTURES / name).read_text())
    assert isinstance(document, dict)
    return document


def _logged(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> str:
    """Everything logged: Airflow's task-side loggers write through structlog to the console."""
    captured = capsys.readouterr()
    return caplog.text + captured.out + captured.err


def _missing_keys(official: Any, ours: Any, where: str = "") -> list[str]:
    """Keys of the official body (recursively, in objects) that ours lacks."""
    if not isinstance(official, dict):
        return []
    if not isinstance(ours, dict):
        return [where or "(body)"]
    missing = []
    for key, value in official.items():
        if key not in ours:
            missing.append(f"{where}{key}")
        else:
            missing += _missing_keys(value, ours[key], f"{where}{key}.")
    return missing


# --- 1. threshold alarms: the Maven plugin's body ------------------------------------------------


def test_alarm_body_carries_every_key_of_the_maven_plugins(
    hook: LoadTestHook, requests_mock: rm.Mocker
) -> None:
    requests_mock.post(ALARMS_URL, json=[{"id": "a", "severity": "PASSED"}])
    hook.get_threshold_alarms("br-1")
    body = requests_mock.last_request.json()
    official = _fixture("maven_threshold_alarm_body.json")
    assert _missing_keys(official, body) == []
    assert body["metric"]["@type"] == "MonitoringMetric"
    assert body["metric"]["benchResultId"] == "br-1"
    assert body == {**official, "metric": {**official["metric"], "benchResultId": "br-1"}}


def test_metric_reads_its_optional_type_and_keeps_others() -> None:
    jenkins = {
        "@type": "HitMetric",
        "benchResultId": "br-1",
        "config": None,
        "field": "value",
        "filters": [],
        "id": "MONITORING",
        "scope": "PER_SAMPLE",
        "statistic": "AVERAGE",
        "type": "NUMBER_COUNTER",
    }
    metric = m.Metric.from_api(jenkins)
    assert metric.kind is m.MetricType.HIT_METRIC
    assert metric.to_api() == jenkins  # round trip, extras and key order included
    assert m.Metric.from_api({"@type": "MonitoringMetric"}).kind is m.MetricType.MONITORING_METRIC
    other = m.Metric.from_api({"@type": "ContainerMetric", "id": "X"})
    assert other.kind == "ContainerMetric" and other.to_api() == {"@type": "ContainerMetric", "id": "X"}
    assert "@type" not in m.Metric.from_api({"id": "HITS_TOTAL"}).to_api()  # absent stays absent


# --- 2. JUnit XML and file downloads: Accept --------------------------------------------------------


def test_junit_asks_for_xml_and_files_for_anything(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    def junit(request: Any, context: Any) -> str:
        if "xml" not in request.headers["Accept"]:  # a server honouring Accept, as Spring does
            context.status_code = 406
            return ""
        context.headers["Content-Type"] = "application/xml"
        return "<testsuites/>"

    requests_mock.get(JUNIT_URL, text=junit)
    assert hook.get_junit_report("br-1") == "<testsuites/>"
    assert requests_mock.last_request.headers["Accept"] == "application/xml, text/xml, */*"
    requests_mock.get(FILE_URL, content=b"log")
    hook.download_run_file("br-1", "jmeter.log")
    assert requests_mock.last_request.headers["Accept"] == "*/*"


# --- 3. PDF export: a print task whose result names no file ----------------------------------------


def _print(requests_mock: rm.Mocker, result: dict[str, Any], listings: list[list[str]]) -> None:
    requests_mock.get(LIST_URL, [{"json": names} for names in listings])
    requests_mock.post(TASKS_URL, text="task-1")
    requests_mock.get(RESULT_URL, [{"text": ""}, {"json": result}])
    requests_mock.get(FILE_URL, content=PDF)


def test_print_task_fixture_keys_are_in_our_body(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    official = _fixture("maven_print_task_body.json")
    _print(requests_mock, {"@type": "PrintReportTaskResult", "filename": "r.pdf"}, [[]])
    hook.export_report_pdf("rep-1", "br-1", config=official["config"], poll_interval=1)
    ours = next(r for r in requests_mock.request_history if r.method == "POST").json()
    assert _missing_keys(official, ours) == []


def test_envelope_without_a_file_name_takes_the_new_pdf_of_the_run(
    hook: LoadTestHook, requests_mock: rm.Mocker
) -> None:
    _print(
        requests_mock,
        {"taskId": "task-1", "status": "SUCCESS", "message": "done"},
        [["old.pdf", "jmeter.log"], ["old.pdf", "jmeter.log", "Nightly report.pdf"]],
    )
    assert hook.export_report_pdf("rep-1", "br-1", poll_interval=1) == PDF
    assert requests_mock.last_request.qs == {"filename": ["nightly report.pdf"]}  # qs lower-cases
    assert requests_mock.last_request.url.endswith("filename=Nightly+report.pdf")


def test_without_a_new_pdf_the_only_one_is_taken(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    _print(requests_mock, {"status": "SUCCESS"}, [["r.pdf"], ["r.pdf", "jmeter.log"]])
    assert hook.export_report_pdf("rep-1", "br-1", poll_interval=1) == PDF


def test_the_listing_before_may_fail_then_only_a_single_pdf_will_do(
    hook: LoadTestHook, requests_mock: rm.Mocker
) -> None:
    requests_mock.get(LIST_URL, [{"status_code": 404}, {"json": ["r.pdf"]}])
    requests_mock.post(TASKS_URL, text="task-1")
    requests_mock.get(RESULT_URL, json={"status": "SUCCESS"})
    requests_mock.get(FILE_URL, content=PDF)
    assert hook.export_report_pdf("rep-1", "br-1", poll_interval=1) == PDF


@pytest.mark.parametrize(
    ("listings", "named"),
    [
        ([[], ["a.pdf", "b.pdf"]], "2 new PDF files: a.pdf, b.pdf"),
        ([["a.pdf", "b.pdf"], ["a.pdf", "b.pdf"]], "2 PDF files, none of them new: a.pdf, b.pdf"),
    ],
)
def test_several_candidate_pdfs_are_an_error_naming_them(
    hook: LoadTestHook, requests_mock: rm.Mocker, listings: list[list[str]], named: str
) -> None:
    _print(requests_mock, {"status": "SUCCESS"}, listings)
    with pytest.raises(LoadTestApiError, match=named):
        hook.export_report_pdf("rep-1", "br-1", poll_interval=1)
    assert not any(r.url.startswith(FILE_URL + "?") for r in requests_mock.request_history)


def test_a_named_file_needs_no_second_listing(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    _print(requests_mock, {"@type": "PrintReportTaskResult", "filename": "r.pdf"}, [["x.pdf", "y.pdf"]])
    assert hook.export_report_pdf("rep-1", "br-1", poll_interval=1) == PDF
    assert sum(1 for r in requests_mock.request_history if r.url == LIST_URL) == 1


# --- 4. run files: agent logs skipped, .gz saved decompressed, JTL included ---------------------------


def _run_files(requests_mock: rm.Mocker, files: dict[str, bytes]) -> None:
    requests_mock.get(LIST_URL, json=list(files))
    for name, content in files.items():
        requests_mock.get(f"{FILE_URL}?filename={name}", content=content, complete_qs=True)


JTL = b"timeStamp,elapsed,label\n1,20,home\n"
RUN_FILES = {
    "jmeter.log": b"log",
    "lg-1-agent.log": b"agent",
    "lg-2-agent.log.gz": gzip.compress(b"agent"),
    "results.jtl.gz": gzip.compress(JTL),
    "raw.jtl": JTL,
    "Nightly.pdf": PDF,
}


def test_run_files_by_the_official_rule(loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path) -> None:
    _run_files(requests_mock, RUN_FILES)
    saved = DownloadRunFilesOperator(task_id="f", bench_result_id="br-1", destination=str(tmp_path)).execute(
        _context()  # type: ignore[arg-type]
    )
    assert sorted(entry["name"] for entry in saved) == ["Nightly.pdf", "jmeter.log", "raw.jtl", "results.jtl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "Nightly.pdf",
        "jmeter.log",
        "raw.jtl",
        "results.jtl",
    ]
    assert (tmp_path / "results.jtl").read_bytes() == JTL
    downloaded = {r.qs["filename"][0] for r in requests_mock.request_history if "filename" in r.qs}
    assert not any("agent" in name for name in downloaded)


def test_decompress_false_keeps_gz_files(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    _run_files(requests_mock, {"results.jtl.gz": RUN_FILES["results.jtl.gz"]})
    DownloadRunFilesOperator(
        task_id="f", bench_result_id="br-1", destination=str(tmp_path), decompress=False
    ).execute(_context())  # type: ignore[arg-type]
    assert (tmp_path / "results.jtl.gz").read_bytes() == RUN_FILES["results.jtl.gz"]


def test_gz_already_decompressed_on_the_way_is_saved_as_is(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    _run_files(requests_mock, {"results.jtl.gz": JTL})  # e.g. served with Content-Encoding: gzip
    DownloadRunFilesOperator(task_id="f", bench_result_id="br-1", destination=str(tmp_path)).execute(
        _context()  # type: ignore[arg-type]
    )
    assert (tmp_path / "results.jtl").read_bytes() == JTL


# --- 5. templates: chosen by id and name, whatever their other fields -----------------------------


BAD_TEMPLATE = {
    "id": "t-bad",
    "name": "Odd",
    "items": [{"@type": "TopReportItem", "size": "ten"}],
    "created": "yesterday",
}


def test_one_bad_template_never_stops_the_choice(
    hook: LoadTestHook, requests_mock: rm.Mocker, caplog: pytest.LogCaptureFixture
) -> None:
    requests_mock.get(TEMPLATES_URL, json=[BAD_TEMPLATE, {"id": "t-1", "name": "Smoke"}])
    with caplog.at_level(logging.WARNING):
        templates = hook.list_templates("ws-1")
    assert [t.id for t in templates] == ["t-bad", "t-1"]
    assert isinstance(templates[0], m.OpaqueReportTemplate)
    assert templates[0].to_api() == BAD_TEMPLATE  # kept as it came
    assert (
        "'t-bad'" in caplog.text and "items.0.TopReportItem.size" in caplog.text and "created" in caplog.text
    )
    found = hook.find_template("ws-1", name="smoke")
    assert found is not None and found.id == "t-1"
    odd = hook.find_template("ws-1", name="Odd")
    assert odd is not None and odd.id == "t-bad"


def test_run_scenario_starts_with_a_template_next_to_a_bad_one(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    requests_mock.get(TEMPLATES_URL, json=[BAD_TEMPLATE, {"id": "t-1", "name": "Smoke"}])
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    result = RunScenarioOperator(
        task_id="t", scenario_id="sc-1", workspace_id="ws-1", template_name="Smoke", wait_for_completion=False
    ).execute(_context())  # type: ignore[arg-type]
    assert result["template_id"] == "t-1"


# --- 6. the report link without workspace_id ---------------------------------------------------------


def _start_without_workspace(**kwargs: Any) -> dict[str, Any]:
    op = RunScenarioOperator(task_id="t", scenario_id="sc-1", wait_for_completion=False, **kwargs)
    result: dict[str, Any] = op.execute(_context())  # type: ignore[arg-type]
    return result


def test_report_link_from_the_scenarios_project(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    requests_mock.get(SCENARIO_URL, json={"id": "sc-1", "name": "Checkout", "projectId": "proj-1"})
    requests_mock.get(PROJECT_URL, json={"id": "proj-1", "name": "Shop", "workspaceId": "ws-7"})
    result = _start_without_workspace()
    assert result["report_url"] == f"{BASE_URL}/ui/workspace/ws-7/project/proj-1/analysis/report/rep-1"
    assert [r.url for r in requests_mock.request_history].count(SCENARIO_URL) == 1
    assert [r.url for r in requests_mock.request_history].count(PROJECT_URL) == 1


def test_workspace_id_skips_the_lookups(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    result = _start_without_workspace(workspace_id="ws-1")
    assert result["report_url"] == f"{BASE_URL}/ui/workspace/ws-1/project/proj-1/analysis/report/rep-1"
    assert [r.method for r in requests_mock.request_history] == ["POST"]


@pytest.mark.parametrize(
    "project",
    [
        {"status_code": 500, "text": "boom"},
        {"json": {"id": "proj-1"}},
        {"text": "<html>", "status_code": 200},
    ],
)
def test_a_failed_lookup_leaves_the_link_out_and_never_fails_the_run(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    project: dict[str, Any],
) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    requests_mock.get(SCENARIO_URL, json={"id": "sc-1", "projectId": "proj-1"})
    requests_mock.get(PROJECT_URL, **project)
    with caplog.at_level(logging.WARNING):
        result = _start_without_workspace()
    assert result["report_url"] is None and result["bench_result_id"] == "br-1"
    assert "No report link: could not find the workspace of scenario 'sc-1'" in _logged(caplog, capsys)


# --- 7. DownloadReportOperator(report_id=...) alone ----------------------------------------------------


def test_report_id_alone_finds_its_run(loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path) -> None:
    requests_mock.get(
        f"{BASE_URL}/analysis/bench-reports/rep-1", json={"id": "rep-1", "benchResultIds": ["br-1"]}
    )
    _print(requests_mock, {"@type": "PrintReportTaskResult", "filename": "r.pdf"}, [[]])
    result = DownloadReportOperator(
        task_id="pdf", report_id="rep-1", destination=str(tmp_path / "r.pdf"), check_interval=1
    ).execute(_context())  # type: ignore[arg-type]
    assert result["bench_result_id"] == "br-1" and (tmp_path / "r.pdf").read_bytes() == PDF


def test_a_report_without_runs_is_a_clear_error(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    requests_mock.get(f"{BASE_URL}/analysis/bench-reports/rep-1", json={"id": "rep-1", "benchResultIds": []})
    from airflow_provider_loadtest.compat import AirflowFailException

    op = DownloadReportOperator(task_id="pdf", report_id="rep-1", destination=str(tmp_path / "r.pdf"))
    with pytest.raises(AirflowFailException, match=r"names no run.*not retried"):  # bad input: no retry
        op.execute(_context())  # type: ignore[arg-type]


# --- 8. progress: see tests/unit/test_watch.py::test_progress_is_a_percentage_logged_with_one_decimal --


# --- 9. stop answers the run's BenchResult ------------------------------------------------------------


def test_stop_answers_a_bench_result_whose_state_is_logged(
    hook: LoadTestHook,
    requests_mock: rm.Mocker,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    requests_mock.post(STOP_URL, json={"id": "br-1", "state": "ABORTED"})
    with caplog.at_level(logging.INFO):
        result = hook.stop_run("br-1")
    assert result is not None and result.state == m.BenchResultState.ABORTED
    assert "the service reports it ABORTED" in _logged(caplog, capsys)
    requests_mock.post(STOP_URL, text="")  # an older server: still a stop
    assert hook.stop_run("br-1") is None


def test_the_watch_logs_the_state_the_stop_answers(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(f"{BASE_URL}/runtime/bench-results/br-1", json={"id": "br-1", "state": "RUNNING"})
    requests_mock.get(f"{BASE_URL}/runtime/bench-results/progress/br-1", json={"value": 12.5})
    requests_mock.get(f"{BASE_URL}/analysis/metrics/global/br-1", json={"metrics": []})
    requests_mock.post(STOP_URL, json={"id": "br-1", "state": "ABORTED"})
    lines: list[str] = []

    class Log:
        def log(self, level: int, message: str) -> None:
            lines.append(message)

    outcome = hook.drive(watch_run("br-1", WatchOptions(deadline=1.0), started_at=0.0), Log())  # type: ignore[arg-type]
    assert outcome.stopped
    assert "Asked to stop run br-1: the service reports it ABORTED" in lines


# --- 10. what a DAG author writes is strict; what the service sends is tolerant ------------------


def test_export_config_refuses_an_unknown_page_format_listing_the_allowed() -> None:
    with pytest.raises(
        ValueError, match=r"pageFormat 'A7' is not one of the allowed values: A0, A1, .*LEDGER"
    ):
        report_pdf.export_config({"pageFormat": "A7"})
    assert report_pdf.export_config({"pageFormat": "A4"}).page_format is m.PageFormat.A4  # type: ignore[union-attr]
    # the same value in a document from the service is kept as it comes
    assert (
        m.ExportReportConfig.from_api({"@type": "ExportReportConfig", "pageFormat": "A7"}).page_format == "A7"
    )


def test_a_bad_export_setting_fails_before_any_run_starts(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    op = RunScenarioOperator(
        task_id="t",
        scenario_id="sc-1",
        report_pdf_destination=str(tmp_path / "r.pdf"),
        report_export_config={"pageFormat": "A7"},
    )
    from airflow_provider_loadtest.compat import AirflowFailException

    with pytest.raises(AirflowFailException, match="allowed values"):  # never retried
        op.execute(_context())  # type: ignore[arg-type]
    assert requests_mock.request_history == []


def test_user_written_metric_ids_are_checked() -> None:
    with pytest.raises(ValueError, match=r"metric\.id 'RESPONSE_TIME_P95' is not one of the allowed values"):
        m.require_known_values(m.Metric(id="RESPONSE_TIME_P95"), "metric")
    m.require_known_values(m.Metric(id="RESPONSE_TIME_PERCENTILE_95", type="HIT"), "metric")
    item = m.SummaryReportItem(metrics=[m.Metric(id="HITS_TOTAL", type="WEBB")])
    with pytest.raises(ValueError, match=r"item\.metrics\[0\]\.type 'WEBB'"):
        m.require_known_values(item, "item")


# --- 11. vocabulary of the service's documentation ------------------------------------------------


def test_documented_vocabulary_is_known() -> None:
    area = m.ReportItemAdapter.validate_python(
        {"@type": "AreaRangeChartReportItem", "rangeType": "PERCENTAGE", "referenceType": "HISTOGRAM"}
    )
    assert isinstance(area, m.AreaRangeChartReportItem)
    assert area.range_type is m.RangeType.PERCENTAGE and area.reference_type is m.ReferenceType.HISTOGRAM
    for match in ("STARTS_WITH_IGNORECASE", "ENDS_WITH_IGNORECASE"):
        assert m.NameMatchType(match).value == match
    alarms = m.ReportItemAdapter.validate_python({"@type": "MonitoringAlarmsReportItem", "name": "Monitors"})
    assert isinstance(alarms, m.MonitoringAlarmsReportItem)
    assert alarms.to_api() == {"@type": "MonitoringAlarmsReportItem", "name": "Monitors"}
    assert m.Metric.from_api({"type": "HIT"}).type is m.SampleType.HIT
    assert m.Metric.from_api({"type": "CONTAINER"}).type is m.SampleType.CONTAINER


# --- 12. subscription_id ---------------------------------------------------------------------------


def test_subscription_id_is_sent_as_subscriptionId(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    hook.run_scenario("sc-1", subscription_id="sub-1")
    assert "subscriptionId=sub-1" in requests_mock.last_request.url


def test_operator_subscription_id_is_templated_and_checked(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    assert "subscription_id" in RunScenarioOperator.template_fields
    with pytest.raises(ValueError, match="subscription_id"):
        RunScenarioOperator(task_id="t", scenario_id="sc-1", subscription_id="a/b")
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    _start_without_workspace(workspace_id="ws-1", subscription_id="sub-1")
    assert requests_mock.request_history[0].qs == {"subscriptionid": ["sub-1"]}
    rendered = RunScenarioOperator(
        task_id="t2", scenario_id="sc-1", subscription_id="{{ params.sub }}", workspace_id="ws-1"
    )
    rendered.subscription_id = "../x"  # what a template rendered to
    with pytest.raises(ValueError, match="subscription_id"):
        rendered.start_run(_context())  # type: ignore[arg-type]
    assert len(requests_mock.request_history) == 1  # the bad one started nothing
