"""The view's HTTP layer without a database: ids checked before anything is read, private answers
(no-store, Vary, CSP), refusals without data, static files by name only.

Airflow's access checks are replaced by a switch here (they need Airflow's database); the real checks,
with a real auth manager and real XCom, are in tests/integration/test_load_tests_view_access.py.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import Depends, HTTPException
from fastapi.testclient import TestClient

from airflow_provider_loadtest.plugins import app as view_app
from airflow_provider_loadtest.plugins import bounds, store
from airflow_provider_loadtest.plugins.history import Night
from airflow_provider_loadtest.plugins.rows import RunResult

DAG = "loadtest_release_gate"
TASK = "run_load_test"
SECRET = "br-secret-17"
DAY = timedelta(days=1)


class Switch:
    allowed = True


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, list[str]]]:
    reads: list[str] = []

    def allow() -> None:
        if not Switch.allowed:
            raise HTTPException(403, "Forbidden")

    def nights(session: Any, dag_id: str, task_id: str, limit: int, offset: int = 0) -> list[Night]:
        reads.append(f"nights {dag_id} {task_id} {limit}")
        if offset:
            return []
        result = {
            "bench_result_id": SECRET,
            "report_url": "https://saas.example/r/1",
            "state": "FINISHED",
            "gate": [{"metric": "RESPONSE_TIME_PERCENTILE_95", "value": 468.0, "passed": True}],
        }
        at = datetime(2026, 3, 1, tzinfo=UTC)
        return [Night("scheduled__1", -1, at, at, "success", RunResult.from_xcom(result))]

    monkeypatch.setattr(view_app, "_access_dependencies", lambda: [Depends(allow)])
    monkeypatch.setattr(store, "nights", nights)
    monkeypatch.setattr(store, "count_nights", lambda session, dag_id, task_id: 1)
    monkeypatch.setattr(store, "gated_tasks", lambda session, dag_id: {TASK: 1})
    app = view_app.create_app()
    from airflow.api_fastapi.common.db.common import _get_session

    app.dependency_overrides[_get_session] = lambda: None
    Switch.allowed = True
    with TestClient(app) as test_client:
        yield test_client, reads


def assert_private(headers: Any) -> None:
    assert headers["cache-control"] == "no-store"
    assert headers["vary"] == "Authorization, Cookie"
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'self'" in csp
    assert "unsafe-inline" not in csp


def test_the_dag_page_the_task_page_and_the_data_are_private(client: tuple[TestClient, list[str]]) -> None:
    http, reads = client
    for path in (f"/dags/{DAG}", f"/dags/{DAG}/tasks/{TASK}", f"/api/dags/{DAG}/tasks/{TASK}"):
        answer = http.get(path)
        assert answer.status_code == 200, path
        assert SECRET in answer.text
        assert_private(answer.headers)
    # The JSON reads what it answers: the task has 1 night (issue 35: in batches, no further than that).
    assert reads == [f"nights {DAG} {TASK} 90", f"nights {DAG} {TASK} 365", f"nights {DAG} {TASK} 1"]
    data = http.get(f"/api/dags/{DAG}/tasks/{TASK}?nights=7").json()
    assert data["nights"][0]["verdict"] == "pass" and data["nights"][0]["rows"][0]["status"] == "pass"
    assert data["next"] is None and data["total"] == 1


def test_a_refused_user_gets_no_data(client: tuple[TestClient, list[str]]) -> None:
    http, reads = client
    Switch.allowed = False
    page = http.get(f"/dags/{DAG}")
    data = http.get(f"/api/dags/{DAG}/tasks/{TASK}")
    assert (page.status_code, data.status_code) == (403, 403)
    assert SECRET not in page.text + data.text and reads == []
    assert "Not allowed" in page.text and data.json() == {"detail": "Forbidden"}
    assert_private(page.headers)


@pytest.mark.parametrize(
    "path",
    [
        "/dags/bad%20id",
        "/dags/..%2Fetc",
        f"/dags/{'x' * 251}",
        f"/dags/{DAG}/tasks/t%3Cscript%3E",
        f"/api/dags/{DAG}/tasks/a%2Fb",
    ],
)
def test_ids_airflow_cannot_have_are_404_before_anything_is_read(
    client: tuple[TestClient, list[str]], path: str
) -> None:
    http, reads = client
    Switch.allowed = False  # the id check comes first: 404, not 403
    answer = http.get(path)
    assert answer.status_code == 404
    assert reads == [] and "<script>" not in answer.text
    assert_private(answer.headers)


def test_a_bad_nights_parameter_is_a_400(client: tuple[TestClient, list[str]]) -> None:
    http, reads = client
    for query in ("nights=0", "nights=100000", "nights=many"):
        assert http.get(f"/dags/{DAG}?{query}").status_code == 400
    assert reads == []


def test_a_bad_comparison_pick_is_said_on_the_page_and_an_overlong_one_is_a_400(
    client: tuple[TestClient, list[str]],
) -> None:
    """Issue 35: ``?compare=`` and ``?with=`` name nights by a short key (``plugins.compare``); a pick that
    names no night is said in the page (200, the rest of the page shown), never a 500."""
    http, _ = client
    for query in ("compare=nonsense", "with=2026-03-01.0123456789", "compare=&with="):
        answer = http.get(f"/dags/{DAG}/tasks/{TASK}?{query}")
        assert answer.status_code == 200 and SECRET in answer.text, query
        assert 'id="compare"' in answer.text
    said = http.get(f"/dags/{DAG}/tasks/{TASK}?compare=nonsense").text
    assert "is not a night&#39;s key" in said
    assert "Only one night of this task has gate rows" in http.get(f"/dags/{DAG}/tasks/{TASK}").text
    assert http.get(f"/dags/{DAG}/tasks/{TASK}?compare={'x' * 65}").status_code == 400


def test_static_files_by_name_only(client: tuple[TestClient, list[str]]) -> None:
    http, _ = client
    css = http.get("/static/view.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert http.get("/static/view.js").headers["content-type"].startswith("text/javascript")
    for name in ("app.py", "..%2Fapp.py", "..%2F..%2Fget_provider_info.py"):
        assert http.get(f"/static/{name}").status_code == 404


# --- a DAG Airflow does not know (issue 29) -------------------------------------------------------------


@pytest.mark.parametrize(
    "path", [f"/dags/{DAG}", f"/dags/{DAG}/tasks/{TASK}", f"/api/dags/{DAG}/tasks/{TASK}"]
)
def test_a_dag_airflow_does_not_know_is_404_and_one_it_knows_without_load_tests_is_200(
    client: tuple[TestClient, list[str]], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    http, _ = client
    known: set[str] = set()
    monkeypatch.setattr(store, "gated_tasks", lambda session, dag_id: {})
    monkeypatch.setattr(store, "nights", lambda session, dag_id, task_id, limit, offset=0: [])
    monkeypatch.setattr(store, "count_nights", lambda session, dag_id, task_id: 0)
    monkeypatch.setattr(store, "dag_exists", lambda session, dag_id: dag_id in known)
    missing = http.get(path)
    assert missing.status_code == 404, missing.text[:300]
    assert_private(missing.headers)
    assert "No DAG named" in missing.text
    known.add(DAG)
    present = http.get(path)
    assert present.status_code == 200
    if not path.startswith("/api/"):
        assert "No load test in this" in present.text


def test_a_user_refused_the_dag_learns_nothing_of_whether_it_exists(
    client: tuple[TestClient, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    http, _ = client
    asked: list[str] = []

    def exists(session: Any, dag_id: str) -> bool:
        asked.append(dag_id)
        return False

    monkeypatch.setattr(store, "gated_tasks", lambda session, dag_id: {})
    monkeypatch.setattr(store, "dag_exists", exists)
    Switch.allowed = False
    assert http.get(f"/dags/{DAG}").status_code == http.get("/dags/no_such_dag").status_code == 403
    assert asked == []  # refused before anything is read


# --- the page is built as it is sent, and no further once the viewer goes --------------------------------


def _many_nights(session: Any, dag_id: str, task_id: str, limit: int, offset: int = 0) -> list[Night]:
    rows = [
        {"metric": "RESPONSE_TIME_PERCENTILE_95", "value": 400.0 + i, "passed": True, "transaction": f"T{i}"}
        for i in range(40)
    ]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        Night(
            f"scheduled__{d}",
            -1,
            start + d * DAY,
            start + d * DAY,
            "success",
            RunResult.from_xcom({"gate": rows}),
        )
        for d in range(365)
    ]


@pytest.mark.parametrize("asgi", ["2.3", "2.4"])
def test_the_page_stops_being_built_when_the_viewer_hangs_up(
    client: tuple[TestClient, list[str]], monkeypatch: pytest.MonkeyPatch, asgi: str
) -> None:
    """Starlette stops pulling a streamed body when the client disconnects: before ASGI 2.4 it listens
    for ``http.disconnect``, from 2.4 the server's ``send`` raises. Either way no further chart is built
    than the one being written (before: the whole page was built, then sent)."""
    import asyncio

    from airflow.api_fastapi.common.db.common import _get_session

    from airflow_provider_loadtest.plugins import charts
    from airflow_provider_loadtest.plugins import page as view_page

    monkeypatch.setattr(store, "nights", _many_nights)
    built: list[str] = []
    real_chart = charts.chart

    def counted(*args: Any) -> Any:
        built.append("chart")
        return real_chart(*args)

    monkeypatch.setattr(view_page, "chart", counted)
    app = view_app.create_app()
    app.dependency_overrides[_get_session] = lambda: None
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": asgi},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"/dags/{DAG}/tasks/{TASK}",
        "raw_path": f"/dags/{DAG}/tasks/{TASK}".encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }

    async def scenario() -> list[bytes]:
        gone = asyncio.Event()
        request = [{"type": "http.request", "body": b"", "more_body": False}]
        bodies: list[bytes] = []

        async def receive() -> MutableMapping[str, Any]:
            if request:
                return request.pop(0)
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] != "http.response.body":
                return
            if gone.is_set() and asgi == "2.4":
                raise OSError("the viewer hung up")
            bodies.append(message.get("body", b""))
            gone.set()  # the viewer reads the first chunk and leaves
            await asyncio.sleep(0.2)  # the server notices a moment later

        await asyncio.wait_for(app(scope, receive, send), timeout=30)
        return bodies

    try:
        bodies = asyncio.run(scenario())
    except OSError:  # Starlette (2.4) re-raises the failed send as ClientDisconnect: the request ends
        bodies = [b"x"]
    except Exception as exc:
        assert type(exc).__name__ == "ClientDisconnect", repr(exc)
        bodies = [b"x"]
    drawn = bounds.SERIES_DRAWN  # charts drawn when the page is read to its end
    assert bodies and len(built) < drawn // 2, built
    full = http_full_page(monkeypatch)
    assert full.count('<figure class="chart"') == drawn


def http_full_page(monkeypatch: pytest.MonkeyPatch) -> str:
    from airflow.api_fastapi.common.db.common import _get_session

    app = view_app.create_app()
    app.dependency_overrides[_get_session] = lambda: None
    with TestClient(app) as test_client:
        answer = test_client.get(f"/dags/{DAG}/tasks/{TASK}")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    return str(answer.text)
