"""One function per endpoint of the service, each returning a description of the call.

A description says what to send (method, path, query, body), whether sending it twice is harmless, and
how to read the answer. The sync hook and the async client only move bytes; every id that goes into a
path is validated here and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import TypeAdapter

from airflow_provider_loadtest.api.errors import LoadTestApiError, trim_service_text
from airflow_provider_loadtest.api.validation import validate_file_name, validate_path_id
from airflow_provider_loadtest.models import (
    BenchReport,
    BenchResult,
    ExportReportConfig,
    GlobalMetrics,
    PrintReportTask,
    Progress,
    ReportTemplate,
    SummaryReportItem,
    TaskStatusEnvelope,
    ThresholdAlarm,
    ThresholdAlarmReportItem,
    Workspace,
)

T = TypeVar("T")
AnswerKind = Literal["json", "text", "bytes", "none"]


class RetrySafety(Enum):
    """What a failed attempt allows us to do again."""

    #: Reads and idempotent writes (stop): retry on connection errors, 429 and 502/503/504.
    SAFE = "safe"
    #: Calls that start something costly (a load test): retry only when the connection was never
    #: opened (refused, DNS failure, connect timeout), because then the service cannot have seen it.
    ONLY_IF_NOT_SENT = "only_if_not_sent"


@dataclass(frozen=True)
class ApiRequest(Generic[T]):
    """A call to make, and how to turn its answer into ``T``."""

    operation: str
    method: Literal["GET", "POST"]
    path: str
    parse: Callable[[Any], T]
    params: Mapping[str, str] = field(default_factory=dict)
    json_body: Any = None
    answer: AnswerKind = "json"
    retry: RetrySafety = RetrySafety.SAFE
    empty_answer_note: str = ""
    #: What the answer may be: JSON for the API's documents, anything for a downloaded file.
    accept: str = "application/json"

    def may_resend(self, *, never_opened: bool) -> bool:
        """Whether a failed try may be sent again: always for safe calls, and for costly ones only
        when the connection was never opened (so the service cannot have seen it)."""
        return self.retry is RetrySafety.SAFE or never_opened

    def error(self, status: int | None, detail: str, *, reached_service: bool = True) -> LoadTestApiError:
        """An exception for this call, so every failure names the operation, method and path."""
        return LoadTestApiError(
            operation=self.operation,
            method=self.method,
            path=self.path,
            status=status,
            detail=detail,
            reached_service=reached_service,
        )


def _segment(parameter: str, value: str) -> str:
    return quote(validate_path_id(parameter, value), safe="")


def _status_detail(status: int, service_text: str) -> str:
    said = f" The service said: {service_text}" if service_text else " The answer had no body."
    if status == 401:
        return (
            "the API key was refused: it is wrong or expired (set a valid key as the connection's password)."
            + said
        )
    if status == 403:
        return "the API key's user is not allowed to do this (plan limit or missing rights)." + said
    if status == 404:
        return "not found: check the id (it is the last segment of the resource's URL in the web UI)." + said
    if status == 429:
        return "the service is rate limiting this API key." + said
    return said.strip()


def decode_answer(
    request: ApiRequest[T], status: int, content_type: str | None, body: bytes, secret: str | None
) -> T:
    """Turn an HTTP answer into ``T``, or raise the package's error saying what went wrong."""
    if status >= 400:
        text = trim_service_text(body.decode("utf-8", "replace"), secret)
        raise request.error(status, _status_detail(status, text))
    if request.answer == "bytes":
        return request.parse(body)
    if request.answer == "text":
        return request.parse(body.decode("utf-8", "replace"))
    if request.answer == "none":
        return request.parse(None)
    if not body.strip():
        if request.empty_answer_note:
            return request.parse(None)
        raise request.error(
            status,
            "the service answered with an empty body. Results recorded before service version 17.0.0 "
            "answer empty until their data has been updated.",
        )
    try:
        document = json.loads(body)
    except ValueError:
        kind = (content_type or "unknown content type").split(";")[0]
        snippet = trim_service_text(body.decode("utf-8", "replace"), secret, limit=200)
        raise request.error(
            status, f"the answer is not JSON ({kind}); is the host the API base URL? It starts: {snippet}"
        ) from None
    try:
        return request.parse(document)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise request.error(
            status, f"the answer does not have the expected shape: {trim_service_text(str(exc), secret)}"
        ) from None


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _parse_list(kind: Any) -> Callable[[Any], Any]:
    return lambda document: _adapter(list[kind]).validate_python(document)


def _ignore(_: Any) -> None:
    return None


# --- runtime ------------------------------------------------------------------------------------


def run_scenario(
    scenario_id: str,
    *,
    template_id: str | None = None,
    name: str | None = None,
    properties: Mapping[str, str] | None = None,
) -> ApiRequest[BenchReport]:
    """``POST /runtime/scenarios/run/{scenarioId}``: start a load test (costly: never sent twice blindly)."""
    params: dict[str, str] = {}
    if template_id is not None:
        params["templateId"] = validate_path_id("template_id", template_id)
    if name:
        params["name"] = name
    return ApiRequest(
        operation="Start a run of scenario " + repr(scenario_id),
        method="POST",
        path=f"/runtime/scenarios/run/{_segment('scenario_id', scenario_id)}",
        params=params,
        json_body={"map": {str(k): str(v) for k, v in properties.items()}} if properties else None,
        parse=BenchReport.from_api,
        retry=RetrySafety.ONLY_IF_NOT_SENT,
    )


def get_bench_result(bench_result_id: str) -> ApiRequest[BenchResult]:
    """``GET /runtime/bench-results/{id}``: the run's state."""
    return ApiRequest(
        operation="Read the state of run " + repr(bench_result_id),
        method="GET",
        path=f"/runtime/bench-results/{_segment('bench_result_id', bench_result_id)}",
        parse=BenchResult.from_api,
    )


def get_progress(bench_result_id: str) -> ApiRequest[Progress]:
    """``GET /runtime/bench-results/progress/{id}``: how far the run is (not an end signal)."""
    return ApiRequest(
        operation="Read the progress of run " + repr(bench_result_id),
        method="GET",
        path=f"/runtime/bench-results/progress/{_segment('bench_result_id', bench_result_id)}",
        parse=Progress.from_api,
    )


def stop_run(bench_result_id: str) -> ApiRequest[None]:
    """``POST /runtime/bench-results/stop/{id}``: abort a run (idempotent, so retried like a read)."""
    return ApiRequest(
        operation="Stop run " + repr(bench_result_id),
        method="POST",
        path=f"/runtime/bench-results/stop/{_segment('bench_result_id', bench_result_id)}",
        parse=_ignore,
        answer="none",
    )


# --- analysis -----------------------------------------------------------------------------------


def list_templates(workspace_id: str) -> ApiRequest[list[ReportTemplate]]:
    """``GET /analysis/bench-report-templates/by-workspace/{workspaceId}``."""
    return ApiRequest(
        operation="List the report templates of workspace " + repr(workspace_id),
        method="GET",
        path=f"/analysis/bench-report-templates/by-workspace/{_segment('workspace_id', workspace_id)}",
        parse=_parse_list(ReportTemplate),
    )


def get_global_metrics(bench_result_id: str) -> ApiRequest[GlobalMetrics]:
    """``GET /analysis/metrics/global/{id}``: live headline figures (hits, errors, response time)."""
    return ApiRequest(
        operation="Read the global metrics of run " + repr(bench_result_id),
        method="GET",
        path=f"/analysis/metrics/global/{_segment('bench_result_id', bench_result_id)}",
        parse=lambda document: GlobalMetrics.from_api(document or {"metrics": []}),
        empty_answer_note="no metrics yet",
    )


def get_threshold_alarms(bench_result_id: str) -> ApiRequest[list[ThresholdAlarm]]:
    """``POST /analysis/threshold-alarms``: a read despite the verb, so retried like one."""
    validate_path_id("bench_result_id", bench_result_id)
    item = ThresholdAlarmReportItem.from_api(
        {"@type": "ThresholdAlarmReportItem", "metric": {"benchResultId": bench_result_id}}
    )
    return ApiRequest(
        operation="Read the threshold alarms of run " + repr(bench_result_id),
        method="POST",
        path="/analysis/threshold-alarms",
        json_body=item.to_api(),
        parse=lambda document: _parse_list(ThresholdAlarm)(document or []),
        empty_answer_note="no alarms",
    )


def summary_metric_values(
    bench_result_id: str, metrics: list[dict[str, Any]]
) -> ApiRequest[list[float | None]]:
    """``POST /analysis/metrics/summary`` with a ``SummaryReportItem``: one value per metric, in order.

    A read despite the verb, so retried like one. An empty answer (values not computed yet) reads as
    no values; a value that is not a number reads as missing rather than failing the whole call.
    """
    validate_path_id("bench_result_id", bench_result_id)
    item = SummaryReportItem.from_api(
        {"@type": "SummaryReportItem", "id": "", "name": "Quality gate", "metrics": metrics}
    )
    return ApiRequest(
        operation="Read the summary metric values of run " + repr(bench_result_id),
        method="POST",
        path="/analysis/metrics/summary",
        json_body=item.to_api(),
        parse=_summary_values,
        empty_answer_note="no values yet",
    )


def _summary_values(document: Any) -> list[float | None]:
    if document is None:
        return []
    if not isinstance(document, list):
        raise ValueError(f"expected a list of numbers, got {type(document).__name__}")
    return [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None for v in document]


def get_junit_report(bench_result_id: str) -> ApiRequest[str]:
    """``GET /analysis/junit-reports/{id}``: the run as JUnit XML, for CI-style consumers."""
    return ApiRequest(
        operation="Read the JUnit report of run " + repr(bench_result_id),
        method="GET",
        path=f"/analysis/junit-reports/{_segment('bench_result_id', bench_result_id)}",
        parse=str,
        answer="text",
    )


def list_run_files(bench_result_id: str) -> ApiRequest[list[str]]:
    """``GET /analysis/logs/list/{id}``: the names of the run's files (JUnit XML, logs, PDFs)."""
    return ApiRequest(
        operation="List the files of run " + repr(bench_result_id),
        method="GET",
        path=f"/analysis/logs/list/{_segment('bench_result_id', bench_result_id)}",
        parse=_file_names,
        empty_answer_note="no files",
    )


def download_run_file(bench_result_id: str, filename: str) -> ApiRequest[bytes]:
    """``GET /analysis/logs/{id}?filename=...``: one file of the run, as bytes."""
    validate_file_name("filename", filename)
    return ApiRequest(
        operation=f"Download file {filename!r} of run {bench_result_id!r}",
        method="GET",
        path=f"/analysis/logs/{_segment('bench_result_id', bench_result_id)}",
        params={"filename": filename},
        parse=bytes,
        answer="bytes",
        accept="*/*",
    )


def _file_names(document: Any) -> list[str]:
    """File names from a listing: plain strings (what the official clients read) or objects naming
    the file, inside a bare list or under ``files``; anything else is a shape error."""
    if document is None:
        return []
    if isinstance(document, dict):
        document = document.get("files", document.get("content"))
    if not isinstance(document, list):
        raise ValueError(f"expected a list of file names, got {type(document).__name__}")
    names = []
    for entry in document:
        name = entry
        if isinstance(entry, dict):
            name = entry.get("name") or entry.get("filename") or entry.get("fileName")
        if not isinstance(name, str) or not name:
            raise ValueError(f"expected file names, got {entry!r:.80}")
        names.append(name)
    return names


# --- print tasks (the report PDF) ---------------------------------------------------------------


def start_print_task(report_id: str, config: ExportReportConfig | None = None) -> ApiRequest[str]:
    """``POST /tasks`` with a PrintReportTask: ask the service to render the report as a PDF.

    Answers the task id as plain text. Retried like a read: a second print task only renders the
    same PDF twice, it starts no load test.
    """
    body = PrintReportTask(bench_report_id=validate_path_id("report_id", report_id))
    if config is not None:  # absent, not null: the service applies its defaults
        body.config = config
    return ApiRequest(
        operation="Start printing report " + repr(report_id) + " to PDF",
        method="POST",
        path="/tasks",
        json_body=body.to_api(),
        parse=_task_id,
        answer="text",
        accept="text/plain, application/json",
    )


def _task_id(text: str) -> str:
    """The task id, as plain text or (some proxies) a JSON string."""
    return text.strip().strip('"')


def get_print_task_result(task_id: str) -> ApiRequest[TaskStatusEnvelope]:
    """``GET /tasks/{id}/result``: pending (empty body or status envelope), done, or failed."""
    return ApiRequest(
        operation="Read the result of print task " + repr(task_id),
        method="GET",
        path=f"/tasks/{_segment('task_id', task_id)}/result",
        parse=TaskStatusEnvelope.from_poll_body,
        empty_answer_note="still pending (older servers)",
    )


# --- account ------------------------------------------------------------------------------------


def member_workspaces() -> ApiRequest[list[Workspace]]:
    """``GET /workspaces/member-of``: cheap and authenticated, hence the connection test."""
    return ApiRequest(
        operation="List the workspaces of the API key's user",
        method="GET",
        path="/workspaces/member-of",
        parse=_parse_list(Workspace),
    )
