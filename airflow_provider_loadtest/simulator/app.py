"""The simulator's HTTP face: FastAPI routes over :class:`SimulatorState`, with the service's JSON.

Request and response bodies go through the client's own models (``Model.from_api`` / ``to_api``), so the
simulator and the client cannot drift apart silently. The outermost layer (:class:`SimulatorApp`'s
``__call__``) records every API request and injects faults before FastAPI sees the request.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Message, Receive, Scope, Send

from airflow_provider_loadtest.models import (
    BenchReport,
    BenchResult,
    FailedTaskResult,
    GlobalMetrics,
    PrintReportTask,
    PrintReportTaskResult,
    Progress,
    ReportDefinition,
    SummaryReportItem,
    TaskStatusEnvelope,
    ThresholdAlarm,
    ThresholdAlarmReportItem,
    Workspace,
)
from airflow_provider_loadtest.models.enums import MetricId, SampleType
from airflow_provider_loadtest.simulator.faults import FaultSpec, RequestTarget, hang_up, hold, rewriting_send
from airflow_provider_loadtest.simulator.recorder import RecordedRequest
from airflow_provider_loadtest.simulator.seed import ProjectSpec, ScenarioSpec, SettingsSpec
from airflow_provider_loadtest.simulator.state import (
    FAILED_STACK_TRACE,
    Report,
    Run,
    SimulatorError,
    SimulatorState,
)
from airflow_provider_loadtest.simulator.strict import (
    JSON,
    METRIC_TYPES,
    OCTET_STREAM,
    TEXT,
    XML,
    check_accept,
    check_json_body,
    require_type,
)
from airflow_provider_loadtest.simulator.ui import UI_PREFIX, add_ui_routes, file_response

ADMIN_PREFIX = "/_simulator/"
UNRECORDED_PATHS = frozenset(
    {"/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc", "/swagger-ui.html"}
)
INVALID_KEY_TEXT = "Invalid or expired API key"
#: What each API route produces when it is not JSON (Spring's ``produces``; see ``strict.py``).
PRODUCES: dict[str, str] = {"junit_report": XML, "download_log": OCTET_STREAM, "create_task": TEXT}
#: Sample types a metric may name: the spec's, and those of the service's documentation.
#: The project types of ``GET /design/projects/by-workspace/{id}/{type}``.
PROJECT_TYPES = ("DESIGN", "RESULT")
SAMPLE_TYPES = frozenset({t.value for t in SampleType} | {"HIT", "CONTAINER"})


# --- the outermost layer: recorder and faults -------------------------------------------------------


class SimulatorApp(FastAPI):
    """FastAPI, plus recording and fault injection around every API request."""

    sim_state: SimulatorState

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if (
            scope["type"] != "http"
            or path.startswith(ADMIN_PREFIX)
            or path.startswith(UI_PREFIX)
            or path in UNRECORDED_PATHS
            or path.startswith("/swagger-ui")
        ):
            await super().__call__(scope, receive, send)
            return
        state = self.sim_state
        body = await _read_body(receive)
        replay = _replay(body, receive)
        route, params = self._route_of(scope)
        body_value = _body_value(body)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        authorized = _bearer_key_valid(headers.get("authorization"), state)
        query = {k: v for k, v in _query_pairs(scope)}
        scenario_id = state.scenario_of(route, params, body_value)
        fault = state.faults.draw(RequestTarget(str(scope["method"]), path, route, scenario_id))
        status_seen: list[int] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(int(message["status"]))
            await send(message)

        def record(status: int | None) -> None:
            state.recorder.add(
                RecordedRequest(
                    method=str(scope["method"]),
                    path=path,
                    query=query,
                    authorized=authorized,
                    body=body_value,
                    time=time.time(),
                    status=status,
                    route=route,
                    path_params=params,
                    fault=fault.kind if fault else None,
                )
            )

        if fault is not None and fault.kind in ("rate_limit", "error", "unavailable"):
            await _send_fault_response(fault, send)
            record(fault.status)
            return
        if fault is not None and fault.kind == "hang":
            await hold(fault, send)
            record(None)
            await _drop_connection(send)
            return
        if fault is not None and fault.kind in ("garbage", "trickle"):
            await super().__call__(scope, replay, rewriting_send(fault, send, status_seen.append))
            record(status_seen[0] if status_seen else None)
            return
        if fault is not None and fault.kind == "drop":
            record(None)
            await _drop_connection(send)
            return
        if fault is not None and fault.kind == "delay":
            await asyncio.sleep(fault.delay_seconds)
        if fault is not None and fault.kind == "accept_then_drop":

            async def swallow(message: Message) -> None:
                return None

            await super().__call__(scope, replay, swallow)
            record(None)
            await _drop_connection(send)
            return
        if route is None and not authorized:
            # Spring Security answers before the dispatcher looks for a handler: a bad key on a path the
            # service does not serve is 401, not 404 (clients probing calls learn the key is wrong first).
            await _send_plain(send, 401, INVALID_KEY_TEXT)
            record(401)
            return
        await super().__call__(scope, replay, capture)
        record(status_seen[0] if status_seen else None)

    def _route_of(self, scope: Scope) -> tuple[str | None, dict[str, str]]:
        for candidate in self.router.routes:
            match, child = candidate.matches(scope)
            if match == Match.FULL:
                name = getattr(candidate, "name", None)
                params = {k: str(v) for k, v in child.get("path_params", {}).items()}
                return (str(name) if name else None), params
        return None, {}


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _body_value(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


def _query_pairs(scope: Scope) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    raw = scope.get("query_string", b"")
    return parse_qsl(raw.decode("latin-1"), keep_blank_values=True)


def _bearer_key_valid(header: str | None, state: SimulatorState) -> bool:
    if not header:
        return False
    scheme, _, key = header.partition(" ")
    return scheme.lower() == "bearer" and bool(key.strip()) and state.is_valid_key(key.strip())


async def _send_fault_response(fault: FaultSpec, send: Send) -> None:
    status = fault.status or 503
    texts = {429: "Too many requests", 502: "Bad gateway", 503: "Service unavailable", 504: "Gateway timeout"}
    extra = (
        [(b"retry-after", str(fault.retry_after).encode())]
        if status == 429 or fault.kind == "unavailable"
        else []
    )
    await _send_plain(send, status, texts.get(status, "Injected fault"), extra)


async def _send_plain(
    send: Send, status: int, text: str, extra_headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    headers.extend(extra_headers or [])
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _drop_connection(send: Send) -> None:
    """Close the connection without an answer, so the client sees a connection error.

    uvicorn's ``send`` is a bound method of its request cycle, which holds the socket's transport:
    closing it (and marking the cycle disconnected, so uvicorn does not try to answer 500) is the one
    way to make an ASGI app hang up. Without it, fall back to a truncated answer.
    """
    if hang_up(send):
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1000")]})
    await send({"type": "http.response.body", "body": b"{", "more_body": True})
    raise ConnectionAbortedError("simulated dropped connection")


# --- helpers ---------------------------------------------------------------------------------------


def _json(content: Any) -> JSONResponse:
    return JSONResponse(content)


async def _json_body(request: Request, *, required: bool) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise SimulatorError(400, "A JSON body is required")
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise SimulatorError(400, "The body is not valid JSON") from None


def _short(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid"
    where = ".".join(str(p) for p in errors[0]["loc"])
    return f"{where}: {errors[0]['msg']}" if where else errors[0]["msg"]


# --- the app ---------------------------------------------------------------------------------------


def create_app(state: SimulatorState) -> SimulatorApp:
    """The simulator's FastAPI application over ``state``."""
    app = SimulatorApp(
        title="Load-testing service simulator",
        description="A local, deterministic stand-in for the load-testing service (OctoPerf-compatible API).",
        version="1.0",
    )
    app.sim_state = state
    _add_error_handlers(app)

    def require_key(request: Request) -> None:
        if not _bearer_key_valid(request.headers.get("authorization"), state):
            raise SimulatorError(401, INVALID_KEY_TEXT)

    async def negotiate(request: Request) -> None:
        """406 and 415 as Spring answers them, after the key check (Spring Security comes first)."""
        route = request.scope.get("route")
        check_accept(request.headers.get("accept"), PRODUCES.get(getattr(route, "name", ""), JSON))
        if request.method == "POST":
            check_json_body(request.headers.get("content-type"), await request.body())

    api = APIRouter(dependencies=[Depends(require_key), Depends(negotiate)])
    _add_runtime_routes(api, state)
    _add_analysis_routes(api, state)
    _add_summary_route(api, state)
    _add_task_routes(api, state)
    app.include_router(api)
    add_ui_routes(app, state)

    @app.get("/swagger-ui.html", include_in_schema=False)
    @app.get("/swagger-ui/index.html", include_in_schema=False)
    async def swagger_ui() -> Response:
        return RedirectResponse("/docs")

    app.include_router(_admin_router(state))
    return app


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SimulatorError)
    async def _simulator_error(_: Request, exc: SimulatorError) -> Response:
        return PlainTextResponse(exc.message, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        if not errors:
            return PlainTextResponse("Bad request", status_code=400)
        where = ".".join(str(p) for p in errors[0].get("loc", ()))
        return PlainTextResponse(f"Bad request: {where}: {errors[0].get('msg', 'invalid')}", status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> Response:
        return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)


def _add_runtime_routes(api: APIRouter, state: SimulatorState) -> None:
    @api.post("/runtime/scenarios/run/{scenario_id}", name="run_scenario", tags=["runtime"])
    async def run_scenario(
        scenario_id: str,
        request: Request,
        template_id: str | None = Query(default=None, alias="templateId"),
        name: str | None = Query(default=None),
    ) -> Response:
        body = await _json_body(request, required=False)
        properties: dict[str, str] = {}
        if body is not None:
            if not isinstance(body, dict):
                raise SimulatorError(400, 'The body must be a JSON object such as {"map": {...}}')
            mapping = body.get("map", {})
            if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
                raise SimulatorError(400, '"map" must be an object of string values')
            properties = {str(k): v for k, v in mapping.items()}
        _, report = state.start_run(scenario_id, template_id=template_id, name=name, properties=properties)
        return _json(_report_document(report))

    @api.get("/runtime/scenarios/{scenario_id}", name="get_scenario", tags=["runtime"])
    async def get_scenario(scenario_id: str) -> Response:
        return _json(_scenario_document(state.scenario(scenario_id)))

    @api.get("/runtime/scenarios/by-project/{project_id}", name="list_scenarios", tags=["runtime"])
    async def list_scenarios(project_id: str) -> Response:
        """The scenarios of a design project: how the service's clients find a scenario's id by name."""
        return _json([_scenario_document(scenario) for scenario in state.scenarios_of(project_id)])

    @api.get("/runtime/bench-results/progress/{bench_result_id}", name="get_progress", tags=["runtime"])
    async def get_progress(bench_result_id: str) -> Response:
        percent = float(state.run(bench_result_id).progress(state.now()))
        value = round(percent / 100, 4) if state.settings.progress_scale == "fraction" else percent
        return _json(Progress.from_api({"value": value}).to_api())

    @api.get("/runtime/bench-results/{bench_result_id}", name="get_bench_result", tags=["runtime"])
    async def get_bench_result(bench_result_id: str) -> Response:
        return _json(_bench_result_document(state.run(bench_result_id), state))

    @api.post("/runtime/bench-results/stop/{bench_result_id}", name="stop_run", tags=["runtime"])
    async def stop_run(bench_result_id: str) -> Response:
        """Aborts an active run; answers the run's BenchResult (as the Maven plugin reads it)."""
        state.stop(bench_result_id)
        return _json(_bench_result_document(state.run(bench_result_id), state))

    @api.get("/design/projects/{project_id}", name="get_project", tags=["design"])
    async def get_project(project_id: str) -> Response:
        return _json(_project_document(state.project(project_id)))

    @api.get(
        "/design/projects/by-workspace/{workspace_id}/{project_type}", name="list_projects", tags=["design"]
    )
    async def list_projects(workspace_id: str, project_type: str) -> Response:
        """A workspace's projects of one type: ``DESIGN`` (where scenarios live) or ``RESULT`` (none
        here: the simulator keeps results with their runs)."""
        if project_type not in PROJECT_TYPES:
            raise SimulatorError(
                400, f"Unknown project type: {project_type} (known: {', '.join(PROJECT_TYPES)})"
            )
        projects = state.projects_of(workspace_id) if project_type == "DESIGN" else []
        return _json([_project_document(project) for project in projects])


def _scenario_document(scenario: ScenarioSpec) -> dict[str, Any]:
    return {
        "id": scenario.id,
        "name": scenario.name,
        "description": scenario.description,
        "projectId": scenario.project_id,
    }


def _project_document(project: ProjectSpec) -> dict[str, Any]:
    return {"id": project.id, "name": project.name, "workspaceId": project.workspace_id}


def _add_analysis_routes(api: APIRouter, state: SimulatorState) -> None:
    @api.get(
        "/analysis/bench-report-templates/by-workspace/{workspace_id}",
        name="list_templates",
        tags=["analysis"],
    )
    async def list_templates(workspace_id: str) -> Response:
        return _json([ReportDefinition.from_api(t).to_api() for t in state.templates_of(workspace_id)])

    @api.get("/workspaces/member-of", name="member_of", tags=["workspaces"])
    async def member_of() -> Response:
        return _json(
            [
                Workspace.from_api({"id": w.id, "name": w.name, "description": w.description}).to_api()
                for w in state.seed.workspaces
            ]
        )

    @api.get("/analysis/metrics/global/{bench_result_id}", name="global_metrics", tags=["analysis"])
    async def global_metrics(bench_result_id: str) -> Response:
        metrics = [{"name": m.name, "value": m.value, "unit": m.unit} for m in state.metrics(bench_result_id)]
        return _json(GlobalMetrics.from_api({"metrics": metrics}).to_api())

    @api.post("/analysis/threshold-alarms", name="threshold_alarms", tags=["analysis"])
    async def threshold_alarms(request: Request) -> Response:
        body = await _json_body(request, required=True)
        require_type(body, "ThresholdAlarmReportItem", "The body")
        require_type(body.get("metric"), METRIC_TYPES, "metric")
        try:
            item = ThresholdAlarmReportItem.from_api(body)
        except ValidationError as exc:
            raise SimulatorError(400, f"Bad ThresholdAlarmReportItem: {_short(exc)}") from None
        run_id = item.metric.bench_result_id if item.metric is not None else None
        if not run_id:
            raise SimulatorError(400, "metric.benchResultId is required")
        alarms = state.alarms(run_id)
        return _json(
            [
                ThresholdAlarm.from_api(
                    {"id": a.id, "severity": a.severity, "name": a.name, "message": a.message}
                ).to_api()
                for a in alarms
            ]
        )

    @api.get("/analysis/junit-reports/{bench_result_id}", name="junit_report", tags=["analysis"])
    async def junit_report(bench_result_id: str) -> Response:
        return Response(state.junit_xml(bench_result_id), media_type=XML)

    @api.get("/analysis/bench-reports/{report_id}", name="get_bench_report", tags=["analysis"])
    async def get_bench_report(report_id: str) -> Response:
        return _json(_report_document(state.report(report_id)))

    @api.get("/analysis/logs/list/{bench_result_id}", name="list_logs", tags=["analysis"])
    async def list_logs(bench_result_id: str) -> Response:
        return _json(state.log_files(bench_result_id))

    @api.get("/analysis/logs/{bench_result_id}", name="download_log", tags=["analysis"])
    async def download_log(bench_result_id: str, filename: str | None = Query(default=None)) -> Response:
        if not filename:
            raise SimulatorError(400, "Query parameter filename is required")
        return file_response(state.log_file(bench_result_id, filename), filename)


def _add_task_routes(api: APIRouter, state: SimulatorState) -> None:
    @api.post("/tasks", name="create_task", tags=["tasks"])
    async def create_task(request: Request) -> Response:
        body = await _json_body(request, required=True)
        require_type(body, "PrintReportTask", "The body")
        try:
            task_request = PrintReportTask.from_api(body)
        except ValidationError as exc:
            raise SimulatorError(400, f"Bad PrintReportTask: {_short(exc)}") from None
        if not task_request.bench_report_id:
            raise SimulatorError(400, "benchReportId is required")
        task = state.create_print_task(task_request.bench_report_id)
        return PlainTextResponse(task.id)

    @api.get("/tasks/{task_id}/result", name="task_result", tags=["tasks"])
    async def task_result(task_id: str) -> Response:
        task, status = state.poll_task(task_id)
        if task.shape == "envelope":
            # The agent documentation's shape: no file name, the PDF is found in the run's file list.
            messages = {
                "PENDING": "Printing the report",
                "SUCCESS": "Report printed and attached to its first bench result",
                "FAILED": "Report rendering failed: headless browser timed out",
            }
            envelope = {"taskId": task.id, "status": status, "message": messages[status]}
            return _json(TaskStatusEnvelope.from_api(envelope).to_api())
        if status == "PENDING":
            return Response(status_code=200)
        if status == "SUCCESS":
            return _json(PrintReportTaskResult(filename=str(task.filename)).to_api())
        return _json(FailedTaskResult(stack_trace=FAILED_STACK_TRACE).to_api())


def _add_summary_route(api: APIRouter, state: SimulatorState) -> None:
    @api.post("/analysis/metrics/summary", name="metrics_summary", tags=["analysis"])
    async def metrics_summary(request: Request) -> Response:
        """A SummaryReportItem in, its metrics' values out (aligned); ``[]`` until the runs are over."""
        body = await _json_body(request, required=True)
        require_type(body, "SummaryReportItem", "The body")
        metrics = body.get("metrics")
        if not isinstance(metrics, list) or not metrics:
            raise SimulatorError(400, "metrics: a non-empty list of metrics is required")
        wanted: list[tuple[str, MetricId]] = []
        for index, metric in enumerate(metrics):
            wanted.append(_summary_metric(metric, f"metrics[{index}]"))
        try:
            SummaryReportItem.from_api(body)
        except ValidationError as exc:
            raise SimulatorError(400, f"Bad SummaryReportItem: {_short(exc)}") from None
        return _json(state.summary_values(wanted))


def _summary_metric(metric: Any, where: str) -> tuple[str, MetricId]:
    """(run id, metric id) of one metric of a summary body; 400 for what Jackson could not read."""
    if not isinstance(metric, dict):
        raise SimulatorError(400, f"{where} must be a JSON object")
    if "@type" in metric:  # the service's own metrics carry one; the third-party client's do not
        require_type(metric, METRIC_TYPES, where)
    run_id = metric.get("benchResultId")
    if not isinstance(run_id, str) or not run_id:
        raise SimulatorError(400, f"{where}.benchResultId is required")
    try:
        metric_id = MetricId(str(metric.get("id")))
    except ValueError:
        raise SimulatorError(400, f"{where}.id: unknown metric id {metric.get('id')!r}") from None
    sample_type = metric.get("type")
    if sample_type is not None and sample_type not in SAMPLE_TYPES:
        raise SimulatorError(400, f"{where}.type: unknown sample type {sample_type!r}")
    return run_id, metric_id


def _report_document(report: Report) -> dict[str, Any]:
    """A BenchReport as the start call and ``GET /analysis/bench-reports/{id}`` answer it."""
    return BenchReport.from_api(
        {
            "id": report.id,
            "projectId": report.project_id,
            "name": report.name,
            "description": report.description,
            "benchResultIds": [report.run_id],
            "created": report.created,
            "configs": report.configs,
            "items": report.items,
        }
    ).to_api()


def _bench_result_document(run: Run, state: SimulatorState) -> dict[str, Any]:
    project = run.scenario.project_id
    return BenchResult.from_api(
        {
            "id": run.id,
            "batchId": f"batch-{run.number}",
            "scenarioId": run.scenario.id,
            "designProjectId": project,
            "resultProjectId": project,
            "state": state.state_of(run),
        }
    ).to_api()


def _admin_router(state: SimulatorState) -> APIRouter:
    admin = APIRouter(prefix="/_simulator", tags=["simulator administration (no key, not recorded)"])

    @admin.get("/requests", name="admin_requests")
    async def admin_requests() -> Response:
        return _json([r.to_json() for r in state.recorder.requests])

    @admin.get("/faults", name="admin_faults")
    async def admin_faults() -> Response:
        return _json([f.model_dump(mode="json", by_alias=True) for f in state.faults.rules])

    @admin.post("/faults", name="admin_add_faults")
    async def admin_add_faults(request: Request) -> Response:
        """Body: one fault rule, or a list of them (see ``faults.py``); ``{"clear": true}`` clears."""
        body = await _json_body(request, required=True)
        if isinstance(body, dict) and body.get("clear") is True and len(body) == 1:
            state.faults.clear()
            return _json([])
        rules = body if isinstance(body, list) else [body]
        try:
            parsed = [FaultSpec.model_validate(rule) for rule in rules]
        except ValidationError as exc:
            raise SimulatorError(400, f"Bad fault rule: {_short(exc)}") from None
        for rule in parsed:
            state.add_fault(rule)
        return _json([f.model_dump(mode="json", by_alias=True) for f in parsed])

    @admin.delete("/faults", name="admin_clear_faults")
    async def admin_clear_faults() -> Response:
        state.faults.clear()
        return Response(status_code=204)

    @admin.post("/settings", name="admin_settings")
    async def admin_settings(request: Request) -> Response:
        """Body: any of runSeconds, taskResultShape, taskPendingPolls, taskFails (camelCase)."""
        body = await _json_body(request, required=True)
        if not isinstance(body, dict):
            raise SimulatorError(400, "The body must be a JSON object")
        try:
            merged = SettingsSpec.model_validate({**state.settings.model_dump(by_alias=True), **body})
        except ValidationError as exc:
            raise SimulatorError(400, f"Bad settings: {_short(exc)}") from None
        state.settings = merged
        return _json(merged.model_dump(mode="json", by_alias=True))

    @admin.post("/reset", name="admin_reset")
    async def admin_reset() -> Response:
        state.reset()
        return Response(status_code=204)

    return admin
