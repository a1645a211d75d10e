"""One function per endpoint of the service, each returning a description of the call.

A description says what to send (method, path, query, body), whether sending it twice is harmless, and
how to read the answer. The sync hook and the async client only move bytes; every id that goes into a
path is validated here and nowhere else.
"""

from __future__ import annotations

import gc
import json
import os
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from typing import Any, BinaryIO, Generic, Literal, TypeVar
from urllib.parse import quote, urlsplit

from pydantic import StrictFloat, TypeAdapter, ValidationError

from airflow_provider_loadtest.api.errors import LoadTestApiError, trim_service_text
from airflow_provider_loadtest.api.validation import validate_file_name, validate_path_id
from airflow_provider_loadtest.models import (
    AnyReportTemplate,
    ApiModel,
    BenchReport,
    BenchResult,
    DesignProject,
    ExportReportConfig,
    GlobalMetrics,
    MetricType,
    PrintReportTask,
    Progress,
    ReportTemplateListAdapter,
    SampleType,
    Scenario,
    SummaryReportItem,
    TaskStatusEnvelope,
    TemplateRef,
    TemplateRefListAdapter,
    ThresholdAlarm,
    ThresholdAlarmListAdapter,
    ThresholdAlarmReportItem,
    Workspace,
    parse_template_list,
    parse_template_refs,
)
from airflow_provider_loadtest.models.base import ApiAdapter, HeldWarnings, describe_errors

T = TypeVar("T")
M = TypeVar("M", bound=ApiModel)
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
    #: Epoch seconds past which no retry is sent and no back-off waits (the watch deadline); set by
    #: ``decisions.watch`` with ``dataclasses.replace``. ``None``: only the connection's bounds apply.
    deadline: float | None = None
    #: The fast way to read the answer: straight from its bytes into ``T`` (no ``json.loads`` first).
    #: It must give what ``parse`` gives for the same answer, or raise: then ``parse`` of the decoded
    #: JSON decides (the tolerant reading, or the error that says what is wrong).
    parse_json: Callable[[bytes], T] | None = None

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


def _status_detail(status: int, service_text: str, conn_id: str | None = None) -> str:
    """What an error status means for the user; a refused key names the connection it came from."""
    said = f" The service said: {service_text}" if service_text else " The answer had no body."
    connection = f"connection {conn_id!r}" if conn_id else "the connection"
    if status == 401:
        return (
            "the API key was refused: it is wrong or expired (set a valid key as the password of "
            f"{connection})." + said
        )
    if status == 403:
        return (
            "the API key's user is not allowed to do this (plan limit or missing rights; the key of "
            f"{connection})." + said
        )
    if status == 404:
        return "not found: check the id (it is the last segment of the resource's URL in the web UI)." + said
    if status == 429:
        return "the service is rate limiting this API key." + said
    return said.strip()


#: The largest answer read into memory (JSON documents, text): a service or proxy gone wrong must not
#: take the worker's memory with it.
MAX_ANSWER_BYTES = 32 * 2**20
#: Downloads (``answer="bytes"``: run files, printed PDFs) are files, with a bound of their own; the
#: sync hook's ``save_run_file`` streams them to disk instead of memory.
MAX_DOWNLOAD_BYTES = 2 * 2**30


#: Content codings the clients ask for (``Accept-Encoding``) and undo themselves, bounded (``AnswerBody``).
ACCEPT_ENCODING = "gzip, deflate"
#: Compressed input handed to zlib at a time, and the most it may inflate to in one step: the size bound
#: is checked between steps, so a small compressed answer cannot expand past it in one go.
_INFLATE_STEP = 64 * 2**10


class _Inflater:
    """Undoes a ``gzip`` or ``deflate`` content coding in bounded steps (zlib does the inflating).

    Neither client lets its HTTP library decompress: urllib3 before 2.6 and aiohttp before 3.13.3 (both
    newer than the Airflow floor's day) inflate a whole network read at once, so a 1 MB answer could
    grow by hundreds of MiB before any size check ran. Here no step yields more than ``_INFLATE_STEP``.
    """

    def __init__(self, coding: str) -> None:
        self.coding = coding
        # gzip, or deflate as a zlib stream (what servers send); raw deflate is tried if that fails.
        self._wbits = zlib.MAX_WBITS | 32
        self._zlib = zlib.decompressobj(wbits=self._wbits)
        self._started = False

    def steps(self, data: bytes) -> Iterator[bytes]:
        """The inflated bytes of ``data``, at most ``_INFLATE_STEP`` at a time."""
        try:
            while data:
                out = self._zlib.decompress(data, _INFLATE_STEP)
                self._started = True
                data = self._zlib.unconsumed_tail
                if self._zlib.eof and self._zlib.unused_data:  # another gzip member follows
                    data = self._zlib.unused_data + data
                    self._zlib = zlib.decompressobj(wbits=self._wbits)
                if out:
                    yield out
        except zlib.error as exc:
            if self.coding == "deflate" and not self._started and self._wbits > 0:
                self._wbits = -zlib.MAX_WBITS  # a raw deflate stream (some servers send it so)
                self._zlib = zlib.decompressobj(wbits=self._wbits)
                yield from self.steps(data)
                return
            raise ValueError(f"its {self.coding} content does not decompress ({exc})") from None

    def end(self) -> bytes:
        """What zlib still holds; an error when the compressed stream stopped before its end."""
        tail = self._zlib.flush()
        if not self._zlib.eof:
            raise ValueError(f"its {self.coding} content ends before the end of the compressed stream")
        return tail


class AnswerBody:
    """The bytes of one answer as the transport reads them, refused once over ``MAX_ANSWER_BYTES``.

    Both transports read answers in chunks through this, so an oversized answer stops early (the
    connection is then closed) instead of being read whole. A ``gzip`` or ``deflate`` answer
    (``coding``: its ``Content-Encoding``) is inflated here, in bounded steps, so the bound holds on
    the inflated size as it grows; a coding that was not asked for is refused.
    """

    def __init__(
        self,
        request: ApiRequest[Any],
        status: int,
        limit: int | None = None,
        sink: BinaryIO | None = None,
        coding: str | None = None,
    ) -> None:
        self.request = request
        self.status = status
        self.limit = limit or (MAX_DOWNLOAD_BYTES if request.answer == "bytes" else MAX_ANSWER_BYTES)
        self.size = 0
        self._chunks: list[bytes] = []
        #: Where a successful download goes instead of memory (emptied first: a retry rewrites it).
        self.sink = sink if sink is not None and 200 <= status < 300 else None
        if self.sink is not None:
            self.sink.seek(0)
            self.sink.truncate()
        self._inflater = self._inflater_for(coding)

    def _inflater_for(self, coding: str | None) -> _Inflater | None:
        name = (coding or "").strip().lower()
        if name in ("", "identity"):
            return None
        if name in ("gzip", "x-gzip", "deflate"):
            return _Inflater("deflate" if name == "deflate" else "gzip")
        raise self.request.error(
            self.status,
            f"the answer is encoded as {coding!r}, which was not asked for "
            f"(Accept-Encoding: {ACCEPT_ENCODING})",
        )

    def add(self, chunk: bytes) -> None:
        """Take one chunk as it arrived; raises the call's error when the answer grows past the limit
        (inflated size, for a compressed answer) or does not decompress."""
        if self._inflater is None:
            self._take(chunk)
            return
        try:
            for step in self._inflater.steps(chunk):
                self._take(step)
        except ValueError as exc:
            raise self.request.error(self.status, f"the answer is unreadable: {exc}") from None

    def _take(self, data: bytes) -> None:
        self.size += len(data)
        if self.limit is not None and self.size > self.limit:
            raise self.request.error(
                self.status,
                f"the answer is larger than {self.limit} bytes, more than any answer of this call; "
                "it was not read further (is the host the API base URL?)",
            )
        if self.sink is not None:
            self.sink.write(data)
        else:
            self._chunks.append(data)

    def finish(self) -> None:
        """The answer's last byte arrived: what the inflater still holds, or the error of a compressed
        stream cut short (an answer cut short is never read as a shorter one)."""
        if self._inflater is not None:
            inflater, self._inflater = self._inflater, None
            try:
                self._take(inflater.end())
            except ValueError as exc:
                raise self.request.error(self.status, f"the answer is unreadable: {exc}") from None

    @property
    def content(self) -> bytes:
        self.finish()
        return b"".join(self._chunks)


def timed_out_detail(budget_s: float) -> str:
    """The failure text for a try cut by its total deadline (a server or proxy trickling bytes)."""
    return f"no complete answer within {budget_s:.1f} s (the whole-request bound)"


def _redirect_detail(status: int, location: str | None) -> str:
    host = urlsplit(location or "").hostname or "(no Location)"
    return (
        f"the service answered with a redirect to host {host!r}; API calls do not follow redirects "
        "(set the connection's host to the API base URL the redirect points at, if you trust it)"
    )


def decode_answer(
    request: ApiRequest[T],
    status: int,
    content_type: str | None,
    body: bytes,
    secret: str | None,
    location: str | None = None,
    conn_id: str | None = None,
) -> T:
    """Turn an HTTP answer into ``T``, or raise the package's error saying what went wrong
    (``conn_id``: the connection a refused key is named by)."""
    if 300 <= status < 400:
        raise request.error(status, _redirect_detail(status, location))
    if status >= 400:
        text = trim_service_text(body.decode("utf-8", "replace"), secret)
        raise request.error(status, _status_detail(status, text, conn_id))
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
    if len(body) < COLLECTOR_PAUSE_MIN_BYTES:
        return _decode_json(request, status, content_type, body, secret)
    with _COLLECTOR_PAUSE:
        return _decode_json(request, status, content_type, body, secret)


def _decode_json(
    request: ApiRequest[T], status: int, content_type: str | None, body: bytes, secret: str | None
) -> T:
    """A JSON answer as ``T``: straight from the bytes when the call can, else (or when that refuses
    the answer) decoded first and read by ``parse``, whose errors say what is wrong."""
    if request.parse_json is not None:
        try:
            return request.parse_json(body)
        except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
            pass  # refused: the reading below tolerates what it can, or says what is wrong
    try:
        document = json.loads(body)
    except RecursionError:
        raise request.error(status, "the answer is JSON nested too deeply to read") from None
    except ValueError:
        kind = (content_type or "unknown content type").split(";")[0]
        snippet = trim_service_text(body.decode("utf-8", "replace"), secret, limit=200)
        raise request.error(
            status, f"the answer is not JSON ({kind}); is the host the API base URL? It starts: {snippet}"
        ) from None
    try:
        return request.parse(document)
    except RecursionError:
        raise request.error(status, "the answer is JSON nested too deeply to read") from None
    except ValueError as exc:  # pydantic's ValidationError is one
        problems = describe_errors(exc) if isinstance(exc, ValidationError) else str(exc)
        raise request.error(
            status, f"the answer does not have the expected shape: {trim_service_text(problems, secret)}"
        ) from None


#: Answers at least this large are read with the garbage collector paused (see ``_CollectorPause``).
COLLECTOR_PAUSE_MIN_BYTES = 64 * 2**10


class _CollectorPause:
    """Pauses Python's cyclic garbage collector while a large answer becomes models.

    Reading 1,000 report templates makes hundreds of thousands of container objects, all of which
    survive. The collector, started by allocation counts, traverses them again and again while they
    are being built (and, in its full collections, every other object of the process): more than half
    the time of the reading. Paused, it runs once when the reading ends, over the new objects once
    (``benchmarks/models_parse.py`` counts that pass in the reading's time). The pause is bounded by
    one answer's reading (answers are bounded by ``MAX_ANSWER_BYTES``) and the objects it makes hold
    no garbage cycles. Overlapping pauses (threads) are counted: the last one ending turns the
    collector back on, and only if it was on when the first began. A child forked meanwhile keeps
    only the forking thread's pauses (the other threads did not come along to end theirs).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False
        self._mine = threading.local()  # this thread's pauses, for a forked child's count

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
            self._mine.depth = getattr(self._mine, "depth", 0) + 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            self._mine.depth -= 1
            if self._depth == 0 and self._was_enabled:
                gc.enable()

    def after_fork_in_child(self) -> None:
        """Keep only the forking thread's pauses; the collector back on if none is left."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        paused, self._depth = self._depth, getattr(self._mine, "depth", 0)
        if paused and self._depth == 0 and self._was_enabled:  # else the collector is as it was
            gc.enable()


_COLLECTOR_PAUSE = _CollectorPause()
os.register_at_fork(after_in_child=_COLLECTOR_PAUSE.after_fork_in_child)


@cache
def _adapter(kind: Any) -> ApiAdapter[Any]:
    return ApiAdapter(kind)


def _parse_list(kind: Any) -> Callable[[Any], Any]:
    return lambda document: _adapter(list[kind]).validate_python(document)


def _parse_list_json(kind: Any) -> Callable[[bytes], Any]:
    return lambda body: _adapter(list[kind]).read_json(body)


# --- runtime ------------------------------------------------------------------------------------


def run_scenario(
    scenario_id: str,
    *,
    template_id: str | None = None,
    name: str | None = None,
    properties: Mapping[str, str] | None = None,
    subscription_id: str | None = None,
) -> ApiRequest[BenchReport]:
    """``POST /runtime/scenarios/run/{scenarioId}``: start a load test (costly: never sent twice blindly).

    ``subscription_id`` (query ``subscriptionId``, seen in users' scripts) picks the subscription that
    pays for the run, for accounts with several.
    """
    params: dict[str, str] = {}
    if template_id is not None:
        params["templateId"] = validate_path_id("template_id", template_id)
    if subscription_id is not None:
        params["subscriptionId"] = validate_path_id("subscription_id", subscription_id)
    if name:
        params["name"] = name
    return ApiRequest(
        operation="Start a run of scenario " + repr(scenario_id),
        method="POST",
        path=f"/runtime/scenarios/run/{_segment('scenario_id', scenario_id)}",
        params=params,
        json_body={"map": {str(k): str(v) for k, v in properties.items()}} if properties else None,
        parse=BenchReport.from_api,
        parse_json=BenchReport.model_validate_json,
        retry=RetrySafety.ONLY_IF_NOT_SENT,
    )


def get_bench_result(bench_result_id: str) -> ApiRequest[BenchResult]:
    """``GET /runtime/bench-results/{id}``: the run's state."""
    return ApiRequest(
        operation="Read the state of run " + repr(bench_result_id),
        method="GET",
        path=f"/runtime/bench-results/{_segment('bench_result_id', bench_result_id)}",
        parse=BenchResult.from_api,
        parse_json=BenchResult.read_json,
    )


def get_progress(bench_result_id: str) -> ApiRequest[Progress]:
    """``GET /runtime/bench-results/progress/{id}``: how far the run is (not an end signal)."""
    return ApiRequest(
        operation="Read the progress of run " + repr(bench_result_id),
        method="GET",
        path=f"/runtime/bench-results/progress/{_segment('bench_result_id', bench_result_id)}",
        parse=Progress.from_api,
        parse_json=Progress.read_json,
    )


def stop_run(bench_result_id: str) -> ApiRequest[BenchResult | None]:
    """``POST /runtime/bench-results/stop/{id}``: abort a run (idempotent, so retried like a read).

    Answers the run's BenchResult (the Maven plugin reads it so). The stop is what matters: an answer
    that is empty or not a BenchResult still means the service accepted it, and reads as ``None``.
    """
    return ApiRequest(
        operation="Stop run " + repr(bench_result_id),
        method="POST",
        path=f"/runtime/bench-results/stop/{_segment('bench_result_id', bench_result_id)}",
        parse=_optional_bench_result,
        answer="bytes",
    )


def _optional_bench_result(body: bytes) -> BenchResult | None:
    try:
        return BenchResult.read_json(body)
    except ValueError:  # not JSON, or not a BenchResult: the stop was accepted all the same
        return None


def _read_one(
    what: str, collection: str, parameter: str, value: str, model: type[M], *, written_back: bool = False
) -> ApiRequest[M]:
    """``GET {collection}/{id}``: one document of the service, read by its id. A document that may be
    ``written_back`` remembers its input for an exact ``to_api``; one only read costs less."""
    return ApiRequest(
        operation=f"Read {what} {value!r}",
        method="GET",
        path=f"{collection}/{_segment(parameter, value)}",
        parse=model.from_api,
        parse_json=model.model_validate_json if written_back else model.read_json,
    )


def get_scenario(scenario_id: str) -> ApiRequest[Scenario]:
    """``GET /runtime/scenarios/{id}``: the scenario, whose ``projectId`` leads to its workspace."""
    return _read_one("scenario", "/runtime/scenarios", "scenario_id", scenario_id, Scenario)


def get_design_project(project_id: str) -> ApiRequest[DesignProject]:
    """``GET /design/projects/{id}``: a design project, which names its ``workspaceId``."""
    return _read_one("design project", "/design/projects", "project_id", project_id, DesignProject)


def list_design_projects(workspace_id: str) -> ApiRequest[list[DesignProject]]:
    """``GET /design/projects/by-workspace/{workspaceId}/DESIGN``: the workspace's design projects (where
    scenarios live), as the service's third-party clients list them to find a scenario by name."""
    return ApiRequest(
        operation=f"List the design projects of workspace {workspace_id!r}",
        method="GET",
        path=f"/design/projects/by-workspace/{_segment('workspace_id', workspace_id)}/DESIGN",
        parse=_parse_list(DesignProject),
        parse_json=_parse_list_json(DesignProject),
    )


def list_scenarios(project_id: str) -> ApiRequest[list[Scenario]]:
    """``GET /runtime/scenarios/by-project/{projectId}``: the scenarios of a design project (ids and
    names are all that choosing one reads)."""
    return ApiRequest(
        operation=f"List the scenarios of project {project_id!r}",
        method="GET",
        path=f"/runtime/scenarios/by-project/{_segment('project_id', project_id)}",
        parse=_parse_list(Scenario),
        parse_json=_parse_list_json(Scenario),
    )


# --- analysis -----------------------------------------------------------------------------------


def list_templates(workspace_id: str) -> ApiRequest[list[AnyReportTemplate]]:
    """``GET /analysis/bench-report-templates/by-workspace/{workspaceId}``; a template that does not
    match the models is kept as an opaque one (id and name), never failing the whole list."""
    return _templates_of(workspace_id, parse_template_list, _template_list_json)


def list_template_refs(workspace_id: str) -> ApiRequest[list[TemplateRef]]:
    """The same call as :func:`list_templates`, reading only each template's id and name: all that
    choosing one needs (the rest of each template is skipped, never built)."""
    return _templates_of(workspace_id, parse_template_refs, _template_refs_json)


def _templates_of(
    workspace_id: str, parse: Callable[[Any], T], parse_json: Callable[[bytes], T]
) -> ApiRequest[T]:
    return ApiRequest(
        operation="List the report templates of workspace " + repr(workspace_id),
        method="GET",
        path=f"/analysis/bench-report-templates/by-workspace/{_segment('workspace_id', workspace_id)}",
        parse=parse,
        parse_json=parse_json,
    )


def _template_refs_json(body: bytes) -> list[TemplateRef]:
    refs: list[TemplateRef] = TemplateRefListAdapter.validator.validate_json(body)
    return refs


def _template_list_json(body: bytes) -> list[AnyReportTemplate]:
    # Every template matching the models, in one pass over the bytes; else (one does not match, or
    # the answer is not a list of objects) parse_template_list reads them one by one, and says once
    # what it meets.
    with HeldWarnings():
        return list(ReportTemplateListAdapter.validate_json(body))


def get_bench_report(report_id: str) -> ApiRequest[BenchReport]:
    """``GET /analysis/bench-reports/{id}``: a report, whose first ``benchResultIds`` entry is its run."""
    return _read_one(
        "report", "/analysis/bench-reports", "report_id", report_id, BenchReport, written_back=True
    )


def get_global_metrics(bench_result_id: str) -> ApiRequest[GlobalMetrics]:
    """``GET /analysis/metrics/global/{id}``: live headline figures (hits, errors, response time)."""
    return ApiRequest(
        operation="Read the global metrics of run " + repr(bench_result_id),
        method="GET",
        path=f"/analysis/metrics/global/{_segment('bench_result_id', bench_result_id)}",
        # An object is read as it is (``{}``: no metrics). Anything else (an empty body, ``null``, a
        # list) is not this answer, and is never read as "no metrics".
        parse=_global_metrics,
        parse_json=GlobalMetrics.read_json,
    )


def _global_metrics(document: Any) -> GlobalMetrics:
    if not isinstance(document, dict):
        raise ValueError(f"expected an object of metrics, got {_kind_of(document)}")
    return GlobalMetrics.from_api(document)


def _kind_of(document: Any) -> str:
    return "null" if document is None else type(document).__name__


def get_threshold_alarms(bench_result_id: str) -> ApiRequest[list[ThresholdAlarm]]:
    """``POST /analysis/threshold-alarms``: a read despite the verb, so retried like one.

    The body is the one the official Maven plugin sends: an item with a ``name`` and a metric carrying
    its own ``@type``, ``type``, ``filters`` and ``id`` besides the run's id (a Jackson server needs the
    metric's ``@type`` to pick its class).
    """
    validate_path_id("bench_result_id", bench_result_id)
    item = ThresholdAlarmReportItem.from_api(
        {
            "@type": "ThresholdAlarmReportItem",
            "metric": {
                "@type": MetricType.MONITORING_METRIC,
                "benchResultId": bench_result_id,
                "filters": [],
                "id": "",
                "type": SampleType.NUMBER_COUNTER,
            },
            "name": "",
        }
    )
    return ApiRequest(
        operation="Read the threshold alarms of run " + repr(bench_result_id),
        method="POST",
        path="/analysis/threshold-alarms",
        json_body=item.to_api(),
        parse=_alarms,
        parse_json=ThresholdAlarmListAdapter.read_json,
    )


def _alarms(document: Any) -> list[ThresholdAlarm]:
    """A list of alarms, and nothing else: an empty body, ``null`` or an object is never "no alarms"
    (a gate would pass a run the service flagged)."""
    if not isinstance(document, list):
        raise ValueError(f"expected a list of alarms, got {_kind_of(document)}")
    alarms: list[ThresholdAlarm] = ThresholdAlarmListAdapter.validate_python(document)
    return alarms


def summary_metric_values(
    bench_result_id: str, metrics: list[dict[str, Any]]
) -> ApiRequest[list[float | None]]:
    """``POST /analysis/metrics/summary`` with a ``SummaryReportItem``: one value per metric, in order.

    A read despite the verb, so retried like one. A value that is not a number reads as missing rather
    than failing the whole call; an answer that is not a list (an empty body, ``null``) is an error,
    never "no values".
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
        parse_json=_summary_values_json,
    )


#: Summary values when they are all numbers or nulls (strict: ``true`` or ``"1"`` is refused, and
#: ``_summary_values`` then reads it as missing); an integer becomes a float, as there.
_SUMMARY_VALUES: TypeAdapter[list[float | None]] = TypeAdapter(list[StrictFloat | None])


def _summary_values_json(body: bytes) -> list[float | None]:
    values: list[float | None] = _SUMMARY_VALUES.validator.validate_json(body)
    return values


def _summary_values(document: Any) -> list[float | None]:
    if not isinstance(document, list):
        raise ValueError(f"expected a list of numbers, got {_kind_of(document)}")
    return [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None for v in document]


def get_junit_report(bench_result_id: str) -> ApiRequest[str]:
    """``GET /analysis/junit-reports/{id}``: the run as JUnit XML, for CI-style consumers."""
    return ApiRequest(
        operation="Read the JUnit report of run " + repr(bench_result_id),
        method="GET",
        path=f"/analysis/junit-reports/{_segment('bench_result_id', bench_result_id)}",
        parse=str,
        answer="text",
        # XML, not JSON: a server that honours Accept answers 406 to "application/json" here.
        accept="application/xml, text/xml, */*",
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
            # Not cut here: the message is cut once the key is blanked out (else part of it shows).
            raise ValueError(f"expected file names, got {entry!r}")
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
        parse_json=_task_envelope_json,
        empty_answer_note="still pending (older servers)",
    )


def _task_envelope_json(body: bytes) -> TaskStatusEnvelope:
    # The 17.1.0+ envelope (it has a ``status``) straight from the bytes; any other shape (an older
    # server's bare task result, ``{}``) is left to ``from_poll_body``.
    envelope = TaskStatusEnvelope.read_json(body)
    if "status" not in envelope.model_fields_set:
        raise _NotThisShape  # never shown: decode_answer then reads it with from_poll_body
    return envelope


class _NotThisShape(ValueError):
    """A fast reading (``parse_json``) does not apply to this answer; ``parse`` reads it instead."""


# --- account ------------------------------------------------------------------------------------


def member_workspaces() -> ApiRequest[list[Workspace]]:
    """``GET /workspaces/member-of``: cheap and authenticated, hence the connection test."""
    return ApiRequest(
        operation="List the workspaces of the API key's user",
        method="GET",
        path="/workspaces/member-of",
        parse=_parse_list(Workspace),
        parse_json=_parse_list_json(Workspace),
    )
