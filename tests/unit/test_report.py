"""Report artifacts: the PDF print task (both polling shapes), run files, atomic writes, the operators."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import requests_mock as rm
from airflow.sdk import ObjectStoragePath

from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
from airflow_provider_loadtest.decisions import report_pdf
from airflow_provider_loadtest.hooks import artifacts
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.operators.report import (
    DownloadReportOperator,
    DownloadRunFilesOperator,
    is_agent_log,
    run_ids,
)
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY, RunScenarioOperator
from tests.conftest import API_KEY, BASE_URL
from tests.unit.test_run_lifecycle import FakeStateStore, _context, _service

TASKS_URL = f"{BASE_URL}/tasks"
RESULT_URL = f"{BASE_URL}/tasks/task-1/result"
FILE_URL = f"{BASE_URL}/analysis/logs/br-1"
LIST_URL = f"{BASE_URL}/analysis/logs/list/br-1"
JUNIT_URL = f"{BASE_URL}/analysis/junit-reports/br-1"
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n"
PENDING_EMPTY: dict[str, Any] = {"text": "", "status_code": 200}
DONE_LEGACY = {"json": {"@type": "PrintReportTaskResult", "filename": "rep-1.pdf"}}
RUN = {"report_id": "rep-1", "bench_result_id": "br-1", "state": "FINISHED"}
JAVA_TRACE = "java.lang.IllegalStateException: Chrome crashed\n" + "\n".join(
    f"\tat com.example.print.Renderer.step{i}(Renderer.java:{i})" for i in range(5000)
)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake monotonic clock that the hook's sleeps move forward; it also records the sleeps."""
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(hook_module, "_sleep", sleep)
    monkeypatch.setattr(report_pdf, "_monotonic", lambda: now[0])
    return slept


@pytest.fixture
def hook(loadtest_conn: str) -> LoadTestHook:
    return LoadTestHook(loadtest_conn_id=loadtest_conn)


def _print_service(
    requests_mock: rm.Mocker, polls: list[dict[str, Any]], pdf: bytes = PDF, files: list[Any] | None = None
) -> None:
    """The print task's calls; ``files`` are the run's file listings, in order (one listing before the
    task starts, one after it ends when the task named no file)."""
    requests_mock.get(LIST_URL, [{"json": listing} for listing in files or [[]]])
    requests_mock.post(TASKS_URL, text="task-1", headers={"Content-Type": "text/plain"})
    requests_mock.get(RESULT_URL, polls)
    requests_mock.get(FILE_URL, content=pdf, headers={"Content-Type": "application/pdf"})


def _task_request(requests_mock: rm.Mocker) -> Any:
    """The ``POST /tasks`` request (the run's files are listed before it)."""
    return next(r for r in requests_mock.request_history if r.method == "POST" and r.url == TASKS_URL)


def _calls(requests_mock: rm.Mocker, url: str) -> int:
    return sum(1 for r in requests_mock.request_history if r.url.split("?")[0] == url)


# --- the print task -------------------------------------------------------------------------------


def test_legacy_shape_empty_body_while_pending(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [PENDING_EMPTY, PENDING_EMPTY, DONE_LEGACY])
    pdf = hook.export_report_pdf(
        "rep-1", "br-1", config={"pageFormat": "A4", "orientation": "LANDSCAPE"}, poll_interval=3
    )
    assert pdf == PDF
    task = _task_request(requests_mock)
    assert task.json() == {
        "@type": "PrintReportTask",
        "benchReportId": "rep-1",
        "config": {"@type": "ExportReportConfig", "pageFormat": "A4", "orientation": "LANDSCAPE"},
    }
    assert _calls(requests_mock, RESULT_URL) == 3
    assert clock == [3, 3]
    download = requests_mock.last_request
    assert download.qs == {"filename": ["rep-1.pdf"]}
    assert download.headers["Accept"] == "*/*"
    assert download.headers["Authorization"] == f"Bearer {API_KEY}"


def test_status_envelope_shape(hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]) -> None:
    _print_service(
        requests_mock,
        [
            {"json": {"status": "PENDING"}},
            {"json": {"status": "SUCCESS", "result": DONE_LEGACY["json"]}},
        ],
    )
    assert hook.export_report_pdf("rep-1", "br-1") == PDF
    assert clock == [report_pdf.DEFAULT_PDF_POLL_INTERVAL_S]
    assert _task_request(requests_mock).json() == {"@type": "PrintReportTask", "benchReportId": "rep-1"}


def test_envelope_with_the_file_name_on_top(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [{"json": {"status": "SUCCESS", "filename": "rep-1.pdf"}}])
    assert hook.export_report_pdf("rep-1", "br-1") == PDF
    assert clock == []


def test_failed_task_result_says_why_without_the_stack_trace(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(
        requests_mock, [PENDING_EMPTY, {"json": {"@type": "FailedTaskResult", "stackTrace": JAVA_TRACE}}]
    )
    with pytest.raises(LoadTestApiError) as caught:
        hook.export_report_pdf("rep-1", "br-1")
    message = str(caught.value)
    assert "print task failed" in message
    assert "Chrome crashed" in message
    assert "more lines" in message
    assert len(message) < 800
    assert "Read the result of print task 'task-1'" in message
    assert _calls(requests_mock, FILE_URL) == 0


def test_failed_envelope_uses_its_message(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [{"json": {"status": "FAILED", "message": "Report has no data"}}])
    with pytest.raises(LoadTestApiError, match="print task failed: Report has no data"):
        hook.export_report_pdf("rep-1", "br-1")


def test_task_that_never_finishes_times_out(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [PENDING_EMPTY])
    with pytest.raises(LoadTestApiError, match=r"still PENDING after 60 s \(timeout 60 s\)"):
        hook.export_report_pdf("rep-1", "br-1", timeout=60, poll_interval=7)
    assert sum(clock) == 60  # the last pause is cut to the deadline, not a full interval past it
    assert _calls(requests_mock, RESULT_URL) == 10


def test_an_answer_that_is_not_a_pdf_is_refused(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [DONE_LEGACY], pdf=b"<html><body>Login</body></html>")
    with pytest.raises(LoadTestApiError, match=r"not a PDF \(31 bytes, starting '<html>"):
        hook.export_report_pdf("rep-1", "br-1")


def test_success_without_a_file_name_and_no_pdf_in_the_run_is_an_error(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [{"json": {"status": "SUCCESS"}}], files=[["jmeter.log"], ["jmeter.log"]])
    with pytest.raises(LoadTestApiError, match="lists no PDF file"):
        hook.export_report_pdf("rep-1", "br-1")
    assert _calls(requests_mock, FILE_URL) == 0


def test_task_id_that_is_not_an_id_is_refused(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(LIST_URL, json=[])
    requests_mock.post(TASKS_URL, text="<html>../admin</html>")
    with pytest.raises(LoadTestApiError, match="not a task id"):
        hook.export_report_pdf("rep-1", "br-1")
    assert [r.method for r in requests_mock.request_history] == ["GET", "POST"]


def test_json_string_task_id_is_read(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [DONE_LEGACY])
    requests_mock.post(TASKS_URL, text='"task-1"\n')
    assert hook.export_report_pdf("rep-1", "br-1") == PDF


def test_busy_poll_is_retried_like_any_read(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [{"status_code": 503, "headers": {"Retry-After": "2"}}, DONE_LEGACY])
    assert hook.export_report_pdf("rep-1", "br-1") == PDF
    assert clock == [2.0]


@pytest.mark.parametrize(
    ("report_id", "bench_result_id", "parameter"),
    [("../x", "br-1", "report_id"), ("rep-1", "a/b", "bench_result_id"), ("", "br-1", "report_id")],
)
def test_bad_ids_are_refused_before_any_call(
    hook: LoadTestHook, requests_mock: rm.Mocker, report_id: str, bench_result_id: str, parameter: str
) -> None:
    with pytest.raises(ValueError, match=parameter):
        hook.export_report_pdf(report_id, bench_result_id)
    assert requests_mock.request_history == []


def test_export_config_accepts_service_or_python_names_and_refuses_typos() -> None:
    config = report_pdf.export_config({"page_format": "A4", "scale": 0.8})
    assert config is not None
    assert config.to_api() == {"@type": "ExportReportConfig", "pageFormat": "A4", "scale": 0.8}
    with pytest.raises(ValueError, match=r"unknown settings \['pageFromat'\]"):
        report_pdf.export_config({"pageFromat": "A4"})
    assert report_pdf.export_config(None) is None


def test_key_never_in_a_print_failure(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(requests_mock, [{"json": {"status": "FAILED", "message": f"bad token {API_KEY}"}}])
    with pytest.raises(LoadTestApiError) as caught:
        hook.export_report_pdf("rep-1", "br-1")
    assert "print task failed" in str(caught.value)
    assert API_KEY not in str(caught.value)


# --- run files ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        ["junit.xml", "jmeter.log"],
        [{"name": "junit.xml"}, {"filename": "jmeter.log"}],
        {"files": ["junit.xml", "jmeter.log"]},
    ],
)
def test_run_file_listing_shapes(hook: LoadTestHook, requests_mock: rm.Mocker, answer: Any) -> None:
    requests_mock.get(LIST_URL, json=answer)
    assert hook.list_run_files("br-1") == ["junit.xml", "jmeter.log"]


def test_empty_run_file_listing_is_no_files(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(LIST_URL, text="")
    assert hook.list_run_files("br-1") == []


def test_unexpected_listing_is_a_clear_error(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    requests_mock.get(LIST_URL, json={"count": 2})
    with pytest.raises(
        LoadTestApiError, match=r"List the files of run 'br-1'.*expected a list of file names"
    ):
        hook.list_run_files("br-1")


def test_agent_logs_are_recognised() -> None:
    assert is_agent_log("agent-1.log") and is_agent_log("Agent12.log") and is_agent_log("run-agent-3.log")
    assert not is_agent_log("jmeter.log") and not is_agent_log("junit.xml") and not is_agent_log("agents.xml")


# --- atomic writes --------------------------------------------------------------------------------


def test_local_write_creates_folders_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.pdf"
    saved = artifacts.write_atomically(str(target), PDF)
    assert saved == artifacts.SavedFile(path=str(target), size=len(PDF))
    assert target.read_bytes() == PDF
    assert os.listdir(target.parent) == ["report.pdf"]


def test_a_failed_write_keeps_the_old_file_and_no_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.pdf"
    target.write_bytes(b"%PDF- yesterday")

    def disk_full(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(artifacts.os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        artifacts.write_atomically(f"file://{target}", PDF)
    assert target.read_bytes() == b"%PDF- yesterday"
    assert os.listdir(tmp_path) == ["report.pdf"]


def test_relative_and_empty_destinations_are_refused() -> None:
    with pytest.raises(ValueError, match="absolute path"):
        artifacts.write_atomically("reports/x.pdf", PDF)
    with pytest.raises(ValueError, match="must not be empty"):
        artifacts.write_atomically(" ", PDF)


def test_object_store_destination(tmp_path: Path) -> None:
    import fsspec
    from airflow.sdk.io.store import attach

    # Airflow 3.1 knows no memory:// store by itself (3.2+ does): attach fsspec's, as a user would.
    attach("memory", fs=fsspec.filesystem("memory"))
    target = ObjectStoragePath("memory://loadtest-tests/nightly/report.pdf")
    saved = artifacts.write_atomically(target, PDF)
    assert saved.size == len(PDF)
    assert saved.path.startswith("memory://")
    assert target.read_bytes() == PDF


# --- DownloadReportOperator -----------------------------------------------------------------------


@pytest.mark.parametrize("run", [RUN, json.dumps(RUN), str(RUN)], ids=["dict", "json", "python-repr"])
def test_download_report_operator_reads_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path, run: Any
) -> None:
    _print_service(requests_mock, [DONE_LEGACY])
    target = tmp_path / "2026-11-23" / "report.pdf"
    result = DownloadReportOperator(task_id="pdf", run=run, destination=str(target)).execute(_context())  # type: ignore[arg-type]
    assert result == {"path": str(target), "size": len(PDF), "report_id": "rep-1", "bench_result_id": "br-1"}
    assert target.read_bytes() == PDF


def test_explicit_ids_win_over_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    requests_mock.post(TASKS_URL, text="task-1")
    requests_mock.get(RESULT_URL, [DONE_LEGACY])
    requests_mock.get(f"{BASE_URL}/analysis/logs/list/br-9", json=[])
    requests_mock.get(f"{BASE_URL}/analysis/logs/br-9", content=PDF)
    DownloadReportOperator(
        task_id="pdf", run=RUN, bench_result_id="br-9", destination=str(tmp_path / "r.pdf")
    ).execute(_context())  # type: ignore[arg-type]
    assert requests_mock.last_request.url.startswith(f"{BASE_URL}/analysis/logs/br-9")


def test_missing_ids_fail_before_any_call(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    op = DownloadRunFilesOperator(task_id="files", run={"report_id": "rep-1"}, destination=str(tmp_path))
    with pytest.raises(AirflowFailException, match="missing bench_result_id: pass run="):  # never retried
        op.execute(_context())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing report_id and bench_result_id"):
        run_ids(None, report_id=None, bench_result_id=None, need_report=True)
    with pytest.raises(ValueError, match="run must be the dict"):
        run_ids("not a run", report_id=None, bench_result_id=None, need_report=True)
    assert requests_mock.request_history == []


def test_failed_pdf_leaves_no_file(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    _print_service(requests_mock, [DONE_LEGACY], pdf=b"{}")
    op = DownloadReportOperator(task_id="pdf", run=RUN, destination=str(tmp_path / "r.pdf"))
    with pytest.raises(LoadTestApiError):
        op.execute(_context())  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_literal_bad_ids_fail_at_parse_time() -> None:
    with pytest.raises(ValueError, match="report_id"):
        DownloadReportOperator(task_id="pdf", report_id="a?b", destination="/tmp/x.pdf")
    DownloadReportOperator(task_id="pdf", report_id="{{ params.rid }}", destination="/tmp/x.pdf")


# --- DownloadRunFilesOperator ---------------------------------------------------------------------


def test_run_files_skip_agent_logs_by_default(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    requests_mock.get(LIST_URL, json=["junit.xml", "jmeter.log", "agent-1.log", "agent-2.log", "rep-1.pdf"])
    requests_mock.get(FILE_URL, content=b"data")
    op = DownloadRunFilesOperator(
        task_id="files", run=RUN, destination=str(tmp_path), include=["*.xml", "*.log"]
    )
    saved = op.execute(_context())  # type: ignore[arg-type]
    assert [s["name"] for s in saved] == ["junit.xml", "jmeter.log"]
    assert sorted(os.listdir(tmp_path)) == ["jmeter.log", "junit.xml"]
    assert saved[0] == {"name": "junit.xml", "path": str(tmp_path / "junit.xml"), "size": 4}
    everything = DownloadRunFilesOperator(
        task_id="all", bench_result_id="br-1", destination=str(tmp_path / "all"), include_agent_logs=True
    ).execute(_context())  # type: ignore[arg-type]
    assert len(everything) == 5


def test_run_file_names_that_would_escape_the_folder_are_skipped(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    requests_mock.get(LIST_URL, json=["junit.xml", "../../.bashrc", "a/b.log", "Nightly report 100%.pdf"])
    requests_mock.get(FILE_URL, content=b"data")
    op = DownloadRunFilesOperator(task_id="files", bench_result_id="br-1", destination=str(tmp_path / "f"))
    saved = op.execute(_context())  # type: ignore[arg-type]
    assert [s["name"] for s in saved] == ["junit.xml", "Nightly report 100%.pdf"]
    fetched = [r.qs["filename"][0] for r in requests_mock.request_history if r.url.startswith(FILE_URL + "?")]
    assert fetched == ["junit.xml", "nightly report 100%.pdf"]  # requests-mock lower-cases query values
    assert sorted(os.listdir(tmp_path / "f")) == ["Nightly report 100%.pdf", "junit.xml"]
    assert not (tmp_path / ".bashrc").exists()


def test_download_refuses_a_file_name_with_a_separator(hook: LoadTestHook, requests_mock: rm.Mocker) -> None:
    with pytest.raises(ValueError, match="not a valid file name"):
        hook.download_run_file("br-1", "../x.pdf")
    assert requests_mock.request_history == []


def test_pending_envelope_naming_its_file_is_not_downloaded_yet(
    hook: LoadTestHook, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _print_service(
        requests_mock,
        [
            {"json": {"status": "PENDING", "filename": "rep-1.pdf"}},
            {"json": {"status": "RUNNING", "filename": "rep-1.pdf"}},
            {"json": {"status": "SUCCESS", "filename": "rep-1.pdf"}},
        ],
    )
    assert hook.export_report_pdf("rep-1", "br-1") == PDF
    assert _calls(requests_mock, RESULT_URL) == 3
    assert _calls(requests_mock, FILE_URL) == 1


def test_replacing_a_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "report.pdf"
    target.write_bytes(b"%PDF- old")
    target.chmod(0o600)
    artifacts.write_atomically(str(target), PDF)
    assert target.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "new.pdf"
    old_mask = os.umask(0o027)
    try:
        artifacts.write_atomically(str(fresh), PDF)
    finally:
        os.umask(old_mask)
    assert fresh.stat().st_mode & 0o777 == 0o640


# --- RunScenarioOperator's destinations -----------------------------------------------------------


def _print_and_junit(requests_mock: rm.Mocker, *, pdf_polls: list[dict[str, Any]]) -> None:
    _print_service(requests_mock, pdf_polls)
    requests_mock.get(JUNIT_URL, text="<testsuites/>", headers={"Content-Type": "application/xml"})


def test_run_scenario_saves_junit_and_pdf_before_its_verdict(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    _service(requests_mock, ["RUNNING", "FINISHED"])
    _print_and_junit(requests_mock, pdf_polls=[DONE_LEGACY])
    store = FakeStateStore()
    op = RunScenarioOperator(
        task_id="t",
        scenario_id="sc-1",
        check_interval=1,
        junit_destination=str(tmp_path / "junit.xml"),
        report_pdf_destination=f"file://{tmp_path}/report.pdf",
        report_export_config={"pageFormat": "A4"},
    )
    result = op.execute(_context(store))  # type: ignore[arg-type]
    assert result["junit"] == {"path": str(tmp_path / "junit.xml"), "size": len("<testsuites/>")}
    assert result["report_pdf"] == {"path": str(tmp_path / "report.pdf"), "size": len(PDF)}
    assert (tmp_path / "report.pdf").read_bytes() == PDF
    assert requests_mock.request_history[-3].json()["config"] == {
        "@type": "ExportReportConfig",
        "pageFormat": "A4",
    }
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"  # kept: a retry takes the verdict


def test_a_file_that_cannot_be_saved_fails_a_good_run_but_keeps_it_for_the_retry(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.get(JUNIT_URL, status_code=500, text="boom")
    store = FakeStateStore()
    op = RunScenarioOperator(
        task_id="t", scenario_id="sc-1", junit_destination=str(tmp_path / "junit.xml"), check_interval=1
    )
    with pytest.raises(LoadTestApiError, match="JUnit report"):
        op.execute(_context(store))  # type: ignore[arg-type]
    assert store.data[RUN_RECORD_KEY]["run"]["bench_result_id"] == "br-1"  # the retry re-attaches


def test_a_failed_run_still_fails_for_its_own_reason_when_saving_fails(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    _service(requests_mock, ["ERROR"])
    _print_and_junit(requests_mock, pdf_polls=[{"json": {"status": "FAILED", "message": "no data"}}])
    context = _context(FakeStateStore())
    op = RunScenarioOperator(
        task_id="t",
        scenario_id="sc-1",
        check_interval=1,
        junit_destination=str(tmp_path / "junit.xml"),
        report_pdf_destination=str(tmp_path / "report.pdf"),
    )
    with pytest.raises(AirflowException, match="failed in the service") as caught:
        op.execute(context)  # type: ignore[arg-type]
    assert not isinstance(caught.value, LoadTestApiError)
    assert (tmp_path / "junit.xml").exists()  # what could be saved was saved
    assert not (tmp_path / "report.pdf").exists()
    pushed = {c.kwargs["key"]: c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list}
    assert pushed["return_value"]["junit"]["size"] == len("<testsuites/>")


def test_without_a_state_store_a_save_failure_is_not_retried(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    """Before Airflow 3.3 a retry could not re-attach: it would start a second load test."""
    _service(requests_mock, ["FINISHED"])
    requests_mock.get(JUNIT_URL, status_code=500, text="boom")
    op = RunScenarioOperator(
        task_id="t", scenario_id="sc-1", junit_destination=str(tmp_path / "junit.xml"), check_interval=1
    )
    with pytest.raises(AirflowFailException, match=r"Not retried: without a working task state store"):
        op.execute(_context())  # type: ignore[arg-type]


def test_a_retry_after_a_save_failure_saves_without_a_second_start(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.get(JUNIT_URL, [{"status_code": 409, "text": "boom"}, {"text": "<testsuites/>"}])
    store = FakeStateStore()
    target = tmp_path / "junit.xml"
    with pytest.raises(LoadTestApiError):
        RunScenarioOperator(task_id="t", scenario_id="sc-1", junit_destination=str(target)).execute(
            _context(store)  # type: ignore[arg-type]
        )
    result = RunScenarioOperator(task_id="t", scenario_id="sc-1", junit_destination=str(target)).execute(
        _context(store)  # type: ignore[arg-type]
    )
    assert result["junit"]["path"] == str(target)
    assert target.read_text() == "<testsuites/>"
    starts = [
        r for r in requests_mock.request_history if r.method == "POST" and "/runtime/scenarios/run/" in r.url
    ]
    assert len(starts) == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"junit_destination": "reports/junit.xml"}, "absolute path"),
        (
            {"report_pdf_destination": "/tmp/r.pdf", "report_export_config": {"pageFromat": "A4"}},
            "unknown settings",
        ),
    ],
)
def test_bad_file_settings_fail_before_the_run_starts(
    loadtest_conn: str, requests_mock: rm.Mocker, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(AirflowFailException, match=message):  # never retried
        RunScenarioOperator(task_id="t", scenario_id="sc-1", **settings).execute(_context())  # type: ignore[arg-type]
    assert requests_mock.request_history == []


def test_destinations_need_waiting() -> None:
    with pytest.raises(ValueError, match="need wait_for_completion=True"):
        RunScenarioOperator(
            task_id="t", scenario_id="sc-1", wait_for_completion=False, junit_destination="/tmp/j.xml"
        )


def test_deferred_task_saves_the_files_when_it_resumes(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], tmp_path: Path
) -> None:
    from tests.unit.test_run_lifecycle import _outcome, _saved_record

    _print_and_junit(requests_mock, pdf_polls=[DONE_LEGACY])
    store = FakeStateStore({RUN_RECORD_KEY: _saved_record()})
    op = RunScenarioOperator(
        task_id="t",
        scenario_id="sc-1",
        deferrable=True,
        junit_destination=str(tmp_path / "junit.xml"),
        report_pdf_destination=str(tmp_path / "report.pdf"),
    )
    result = op.execute_complete(
        _context(store),  # type: ignore[arg-type]
        {"status": "done", "run": _saved_record(), "outcome": _outcome()},
    )
    assert result["report_pdf"]["size"] == len(PDF) == (tmp_path / "report.pdf").stat().st_size
    assert result["junit"]["path"] == str(tmp_path / "junit.xml")
    assert store.data[RUN_RECORD_KEY] == _saved_record()  # kept: a retry takes this verdict
