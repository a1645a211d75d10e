"""The view's FastAPI app, mounted by Airflow's API server under ``/loadtest``.

Routes (all read-only):

- ``GET /``: every gate at a glance, the gated tasks of every DAG the user may read (``overview``;
  ``?tag=``, ``?owner=``, ``?page=``);
- ``GET /dags/{dag_id}``: the DAG's "Load tests" tab, every gated task of the DAG (``?nights=``, the
  newest nights per task, default 90);
- ``GET /dags/{dag_id}/tasks/{task_id}``: one task's tab (default 365 nights; ``?transaction=`` draws
  that transaction's charts; ``?compare=`` and ``?with=`` set two nights side by side, ``plugins.compare``);
- ``GET /api/dags/{dag_id}/tasks/{task_id}``: the same history as JSON, paged (``?nights=`` per answer,
  ``?offset=`` past the newest; at most ``bounds.JSON_BYTES``, then ``next`` links the rest);
- ``GET /static/{name}``: the stylesheet, the script that follows Airflow's theme, the icons.

Access is Airflow's: the user comes from Airflow's own dependency (the JWT in the ``Authorization``
header or Airflow's login cookie) and must be allowed, by the configured auth manager, to read the DAG's
task instances and XCom; anyone else gets 401 or 403 and no data. Ids are checked before anything is
read. Every answer with data is ``Cache-Control: no-store`` (and ``Vary: Authorization, Cookie``), under
a Content Security Policy that allows only this app's own stylesheet and script and framing by Airflow.
A DAG Airflow does not know is 404 (after the access checks: a user refused a DAG learns nothing of it).

The pages are streamed as they are built and bounded whatever XCom holds (``bounds``): building one is
linear in the rows read, and stops with the page's byte budget or when the viewer hangs up. Each task
is read and built only when the page reaches it (a DAG of 300 gated tasks reads the few the page has
room for), each read in a short session of its own (never the request's session held for the whole
stream: Airflow 3.1's ``SessionDep`` closes only once the answer is sent), and at most
``slots.VIEW_SLOTS`` answers are built at once (503 with ``Retry-After`` past a short wait).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import fields
from functools import cache
from importlib.resources import files
from typing import Annotated, Any
from urllib.parse import urlencode

from airflow.api_fastapi.core_api.security import GetUserDep
from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from jinja2 import Environment, FileSystemLoader, Template, select_autoescape
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.plugins import URL_PREFIX
from airflow_provider_loadtest.plugins.bounds import JSON_BYTES, JSON_ROWS, LINKED_NAME_CHARS, PageBudget
from airflow_provider_loadtest.plugins.compare import KEY_CHARS
from airflow_provider_loadtest.plugins.history import Night, TaskHistory, build
from airflow_provider_loadtest.plugins.overview import FILTER_CHARS
from airflow_provider_loadtest.plugins.page import GATE_EXAMPLE, TaskView, task_view
from airflow_provider_loadtest.plugins.rows import Row
from airflow_provider_loadtest.plugins.slots import SLOTS

#: Nights per task shown by default on a DAG's tab and on a task's tab, and the most one may ask for.
DAG_NIGHTS, TASK_NIGHTS, MAX_NIGHTS = 90, 365, 2000
#: The furthest ``?offset=`` of the JSON answer, and the nights it reads at a time (one short session each).
MAX_OFFSET, JSON_BATCH = 10**6, 50
#: The overview's last page one may ask for (its pages hold ``overview.PAGE_LINES`` gates each).
MAX_PAGE = 10_000

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'self'",
        "base-uri 'none'",
        "form-action 'none'",
    ]
)
PRIVATE = {
    "Cache-Control": "no-store",
    "Vary": "Authorization, Cookie",
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
_STATIC = {
    "view.css": "text/css; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "icon.svg": "image/svg+xml",
    "icon-dark.svg": "image/svg+xml",
}
_PACKAGE = files("airflow_provider_loadtest.plugins")


@cache
def _page() -> Template:
    env = Environment(
        loader=FileSystemLoader(str(_PACKAGE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["gate_example"] = GATE_EXAMPLE
    return env.get_template("page.html.j2")


def render_html(static: str, code: int, **context: Any) -> str:
    """The page (``tasks``: task views; or ``heading`` and ``message`` for a refusal)."""
    return "".join(render_parts(static, code, PageBudget(), **context))


def render_parts(static: str, code: int, budget: PageBudget, **context: Any) -> Iterator[str]:
    """The page in the pieces the template yields, each counted against ``budget`` as it comes: the
    charts and table rows are built as the template reaches them and stop once the page is full."""
    for part in _page().generate(static=static, version=__version__, status=code, budget=budget, **context):
        budget.add(part)
        yield part


#: Bytes gathered before each write to the viewer (the template yields many small pieces).
CHUNK_BYTES = 64 * 1024


def _chunks(parts: Iterator[str]) -> Iterator[bytes]:
    """``parts`` as UTF-8 chunks of about ``CHUNK_BYTES``. Starlette pulls each from a worker thread and
    stops pulling when the viewer hangs up (it listens for the disconnect, or its write fails), so the
    page is built no further than the chunk being written then."""
    pending: list[str] = []
    size = 0
    for part in parts:
        pending.append(part)
        size += len(part)
        if size >= CHUNK_BYTES:
            yield "".join(pending).encode()
            pending.clear()
            size = 0
    if pending:
        yield "".join(pending).encode()


# --- checks, in the order they run: ids, then the user's access ---------------------------------------


def checked_id(kind: str, value: str) -> str:
    """A DAG or task id as Airflow allows them (letters, digits, ``_.-``, at most 250): anything else
    cannot name a DAG, so the answer is 404 before any access check or database read."""
    from airflow.utils.helpers import validate_key

    try:
        validate_key(value)
    except Exception:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"not a valid {kind} id") from None
    return value


def valid_dag_id(dag_id: str) -> str:
    return checked_id("DAG", dag_id)


def valid_task_id(task_id: str) -> str:
    return checked_id("task", task_id)


def _access_dependencies() -> list[Any]:
    """Airflow's own checks, as its XCom and task instance endpoints make them: the configured auth
    manager decides whether this user may read this DAG's task instances and XCom."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return [
        Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE)),
        Depends(requires_access_dag("GET", DagAccessEntity.XCOM)),
    ]


# --- reading -------------------------------------------------------------------------------------------


def reading() -> AbstractContextManager[Any]:
    """A short session of Airflow's, for one read: its connection goes back to the pool when the read
    is done, not when the answer is sent."""
    from airflow.utils.session import create_session

    return create_session(scoped=False)


def _read_nights(dag_id: str, task_id: str, limit: int, offset: int = 0) -> list[Night]:
    from airflow_provider_loadtest.plugins import store

    with reading() as session:
        return store.nights(session, dag_id, task_id, limit, offset)


def task_views(
    dag_id: str,
    totals: dict[str, int],
    nights: int,
    base: str,
    budget: PageBudget,
    transaction: str | None = None,
    picks: tuple[str | None, str | None] | None = None,
) -> Iterator[TaskView]:
    """The view of each task of ``totals`` (task id: its nights in all), each read and built only when
    the page reaches it and has room for it: the page's cost is that of the tasks it shows. ``picks``:
    the two nights a task's page compares (``page.task_view``)."""
    for task_id, total in totals.items():
        if budget.full:
            return
        read = _read_nights(dag_id, task_id, nights)
        yield task_view(build(dag_id, task_id, read, total, transaction=transaction), base, picks)


def _known_dag(session: Any, dag_id: str) -> None:
    """404 for a DAG Airflow does not know, asked only when it left no load test (a DAG with nights
    exists, or existed: its history still shows). Airflow's access checks ran before: a user who may
    not read ``dag_id`` was refused whether or not it exists, and learns nothing here."""
    from airflow_provider_loadtest.plugins.store import dag_exists

    if not dag_exists(session, dag_id):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"No DAG named {dag_id!r} in this Airflow.")


def _count(dag_id: str, task_id: str) -> int:
    """How many nights ``task_id`` has (404 for a DAG Airflow does not know, when it has none), read
    holding a slot (503 when none frees up in time)."""
    from airflow_provider_loadtest.plugins import store

    with SLOTS.held(), reading() as session:
        total = store.count_nights(session, dag_id, task_id)
        if not total:
            _known_dag(session, dag_id)
    return total


def airflow_base(request: Request) -> str:
    """Airflow's path prefix (``[api] base_url``'s path), for links into its UI: the mount's root
    path without this app's own prefix."""
    root = str(request.scope.get("root_path") or "").rstrip("/")
    return root.removesuffix(URL_PREFIX)


def _app_path(request: Request) -> str:
    """The request's path inside this app (Starlette versions differ on whether a mounted app's
    ``path`` keeps the mount's prefix)."""
    path, root = str(request.scope.get("path", "")), str(request.scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def _static_root(request: Request) -> str:
    return airflow_base(request) + URL_PREFIX + "/static"


# --- the app -------------------------------------------------------------------------------------------


def static_file(name: str) -> Response:
    """The stylesheet, the script and the icons: the same bytes for everyone, and no data, so cacheable
    (the pages add ``?v=<version>``)."""
    media = _STATIC.get(name)
    if media is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such file")
    body = (_PACKAGE / "static" / name).read_bytes()
    return Response(
        body,
        media_type=media,
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )


def create_app() -> FastAPI:
    """The app Airflow mounts (built on the API server's first request for its plugins' apps)."""
    _page()  # a template error shows when the API server starts, not on the first visit
    access = _access_dependencies()
    # Ids first (404 before anything is read), then Airflow's access checks, then the endpoint.
    dag_checks = [Depends(valid_dag_id), *access]
    task_checks = [Depends(valid_dag_id), Depends(valid_task_id), *access]
    app = FastAPI(title="Load tests view", docs_url=None, redoc_url=None, openapi_url=None)

    def render(request: Request, code: int, **context: Any) -> HTMLResponse:
        html = render_html(_static_root(request), code, **context)
        return HTMLResponse(html, status_code=code, headers=PRIVATE)

    def stream(request: Request, budget: PageBudget, **context: Any) -> StreamingResponse:
        """A page with data, streamed as it is built (``_chunks``), bounded by ``budget``, each piece
        built holding one of the process's slots (``slots.SLOTS``: none while the viewer takes it)."""
        parts = render_parts(_static_root(request), 200, budget, **context)
        pieces = SLOTS.pieces(_chunks(parts), budget.stop)
        return StreamingResponse(pieces, media_type="text/html; charset=utf-8", headers=PRIVATE)

    @app.get("/dags/{dag_id}", response_class=HTMLResponse, dependencies=dag_checks)
    def dag_page(
        request: Request,
        dag_id: str,
        nights: Annotated[int, Query(ge=1, le=MAX_NIGHTS)] = DAG_NIGHTS,
    ) -> StreamingResponse:
        from airflow_provider_loadtest.plugins import store

        with SLOTS.held(), reading() as session:
            totals = store.gated_tasks(session, dag_id)
            if not totals:
                _known_dag(session, dag_id)
        budget = PageBudget()
        return stream(
            request,
            budget,
            title=f"Load tests · {dag_id}",
            subject=dag_id,
            single=False,
            tasks=task_views(dag_id, totals, nights, airflow_base(request), budget) if totals else [],
        )

    @app.get("/dags/{dag_id}/tasks/{task_id}", response_class=HTMLResponse, dependencies=task_checks)
    def task_page(
        request: Request,
        dag_id: str,
        task_id: str,
        nights: Annotated[int, Query(ge=1, le=MAX_NIGHTS)] = TASK_NIGHTS,
        transaction: Annotated[str | None, Query(min_length=1, max_length=LINKED_NAME_CHARS)] = None,
        compare: Annotated[str | None, Query(max_length=KEY_CHARS)] = None,
        with_: Annotated[str | None, Query(alias="with", max_length=KEY_CHARS)] = None,
    ) -> StreamingResponse:
        total = _count(dag_id, task_id)
        budget = PageBudget()
        base, picks = airflow_base(request), (compare, with_)
        views = task_views(dag_id, {task_id: total}, nights, base, budget, transaction, picks)
        return stream(
            request,
            budget,
            title=f"Load tests · {dag_id} · {task_id}",
            subject=f"{dag_id} · {task_id}",
            single=True,
            tasks=views if total else [],
        )

    @app.get("/api/dags/{dag_id}/tasks/{task_id}", dependencies=task_checks)
    def task_data(
        request: Request,
        dag_id: str,
        task_id: str,
        nights: Annotated[int, Query(ge=1, le=MAX_NIGHTS)] = TASK_NIGHTS,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> Response:
        total = _count(dag_id, task_id)
        with SLOTS.held():
            body = json_answer(request.url.path, dag_id, task_id, total, nights, offset)
        return Response(body, media_type="application/json", headers=PRIVATE)

    @app.get("/", response_class=HTMLResponse)
    def overview(
        request: Request,
        user: GetUserDep,
        tag: Annotated[str | None, Query(min_length=1, max_length=FILTER_CHARS)] = None,
        owner: Annotated[str | None, Query(min_length=1, max_length=FILTER_CHARS)] = None,
        page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    ) -> StreamingResponse:
        """Every gate the user may read (``overview_page``: the access checks are made per DAG there)."""
        from airflow_provider_loadtest.plugins import overview_page

        base = airflow_base(request)
        with SLOTS.held(), reading() as session:  # read in one short session, as the tabs do
            model = overview_page.overview(session, user, base, tag=tag, owner=owner, page=page)
        return overview_page.respond(model, _static_root(request))

    app.get("/static/{name}")(static_file)

    async def refused(request: Request, exc: Exception) -> Response:
        """401/403/404/422 as a short page (or JSON for the API route): never any data."""
        code = exc.status_code if isinstance(exc, StarletteHTTPException) else 404
        detail = exc.detail if isinstance(exc, StarletteHTTPException) else "not found"
        if code == 422 or isinstance(exc, RequestValidationError):
            code, detail = 400, "bad request"
        headers = {**PRIVATE, **(getattr(exc, "headers", None) or {})}
        if _app_path(request).startswith("/api/"):
            return JSONResponse({"detail": detail}, status_code=code, headers=headers)
        heading = {401: "Not logged in", 403: "Not allowed", 404: "Not found", 503: "Busy"}.get(
            code, "Bad request"
        )
        message = {
            401: "Log in to Airflow to see its load tests.",
            403: "Your Airflow role does not allow reading this DAG's task instances and XCom.",
        }.get(code, str(detail))
        response = render(request, code, title=heading, heading=heading, message=message, tasks=[])
        response.headers.update(headers)
        return response

    app.add_exception_handler(StarletteHTTPException, refused)
    app.add_exception_handler(RequestValidationError, refused)
    return app


_ROW_FIELDS = tuple(f.name for f in fields(Row))


def _row_json(row: Row) -> dict[str, Any]:
    """A row as JSON; ``dataclasses.asdict`` deep-copies every value (1,460 rows: 20 ms, here 1.6 ms)."""
    data = {name: getattr(row, name) for name in _ROW_FIELDS}
    data["accepted"] = row.accepted
    return data


def night_json(night: Night, room: int, room_bytes: int | None = None) -> dict[str, Any]:
    """A night as JSON, with at most ``room`` of its rows, and with ``room_bytes``, only the rows that
    fit in about that many bytes (the others counted in ``rows_left_out``: a night of 1,000 rows of long
    texts would be 30 MB)."""
    result = night.result
    rows: list[dict[str, Any]] = []
    used = 0
    for i in range(min(max(room, 0), len(result.entries))):
        row = _row_json(result.row(i))
        if room_bytes is not None:
            used += len(_encoded(row)) + 1
            if used > room_bytes:
                break
        rows.append(row)
    return {
        "run_id": night.run_id,
        "map_index": night.map_index,
        "run_after": night.run_after.isoformat(),
        "logical_date": night.logical_date.isoformat() if night.logical_date else None,
        "task_state": night.ti_state,
        "verdict": night.verdict.value,
        "bench_result_id": result.bench_result_id,
        "report_url": result.report_url,
        "state": result.state,
        "rows": rows,
        "rows_left_out": result.left_out + len(result.entries) - len(rows),
        "night_effect": None if result.night_effect is None else result.night_effect.to_xcom(),
    }


def history_json(history: TaskHistory) -> dict[str, Any]:
    """A task's history as JSON: the nights, newest first, with their verdicts and rows (at most
    ``bounds.JSON_ROWS`` in all: the nights past them keep their verdict, and say how many rows they
    left out)."""
    room, nights = JSON_ROWS, []
    for night in history.nights:
        nights.append(night_json(night, room))
        room -= len(nights[-1]["rows"])
    return {
        "dag_id": history.dag_id,
        "task_id": history.task_id,
        "total": history.total,
        "nights": nights,
        "generated_at": time.time(),
    }


#: Room kept in a JSON answer for a night's own fields (run id, link, night effect), beside its rows.
JSON_NIGHT_BYTES = 16 * 1024


def _encoded(value: Any) -> bytes:
    """JSON as Starlette's ``JSONResponse`` writes it (no NaN: every number the view reads is finite)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def json_answer(path: str, dag_id: str, task_id: str, total: int, limit: int, offset: int) -> bytes:
    """One page of a task's history as JSON: its nights from ``offset`` (newest first), at most ``limit``
    of them, ``bounds.JSON_ROWS`` rows and about ``bounds.JSON_BYTES`` (a night is never split across
    answers: the first always shows, with as many of its rows as fit, the rest counted in
    ``rows_left_out``). Read ``JSON_BATCH`` nights at a time, each in a short session, and no further
    than the answer has room for; ``next`` links the following page while nights remain."""
    room, size, parts = JSON_ROWS, 0, list[bytes]()
    end = min(offset + limit, total)
    at = offset
    while at < end and size < JSON_BYTES:
        batch = _read_nights(dag_id, task_id, min(JSON_BATCH, end - at), at)
        if not batch:
            break
        for night in batch:
            # The first night always shows: its rows as many as fit beside its own bounded fields (ids, a
            # link, a night effect). A later night shows whole, or opens the next answer.
            first = max(JSON_BYTES - JSON_NIGHT_BYTES, JSON_BYTES // 2)
            data = night_json(night, room, None if parts else first)
            encoded = _encoded(data)
            if parts and size + len(encoded) > JSON_BYTES:
                size = JSON_BYTES  # full: this night opens the next page
                break
            room -= len(data["rows"])
            parts.append(encoded)
            size += len(encoded) + 1
            at += 1
    following = f"{path}?{urlencode({'nights': limit, 'offset': at})}" if at < total else None
    head = {
        "dag_id": dag_id,
        "task_id": task_id,
        "total": total,
        "offset": offset,
        "next": following,
        "generated_at": time.time(),
    }
    return _encoded(head)[:-1] + b',"nights":[' + b",".join(parts) + b"]}"
