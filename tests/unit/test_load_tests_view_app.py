"""The view's HTTP layer without a database: ids checked before anything is read, private answers
(no-store, Vary, CSP), refusals without data, static files by name only.

Airflow's access checks are replaced by a switch here (they need Airflow's database); the real checks,
with a real auth manager and real XCom, are in tests/integration/test_load_tests_view_access.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import Depends, HTTPException
from fastapi.testclient import TestClient

from airflow_provider_loadtest.plugins import app as view_app
from airflow_provider_loadtest.plugins import store
from airflow_provider_loadtest.plugins.history import Night
from airflow_provider_loadtest.plugins.rows import RunResult

DAG = "loadtest_release_gate"
TASK = "run_load_test"
SECRET = "br-secret-17"


class Switch:
    allowed = True


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, list[str]]]:
    reads: list[str] = []

    def allow() -> None:
        if not Switch.allowed:
            raise HTTPException(403, "Forbidden")

    def nights(session: Any, dag_id: str, task_id: str, limit: int) -> list[Night]:
        reads.append(f"nights {dag_id} {task_id} {limit}")
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
    monkeypatch.setattr(store, "gated_task_ids", lambda session, dag_id: [TASK])
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
    assert reads == [f"nights {DAG} {TASK} 90", f"nights {DAG} {TASK} 365", f"nights {DAG} {TASK} 365"]
    data = http.get(f"/api/dags/{DAG}/tasks/{TASK}?nights=7").json()
    assert data["nights"][0]["verdict"] == "pass" and data["nights"][0]["rows"][0]["status"] == "pass"
    assert reads[-1] == f"nights {DAG} {TASK} 7"


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


def test_static_files_by_name_only(client: tuple[TestClient, list[str]]) -> None:
    http, _ = client
    css = http.get("/static/view.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert http.get("/static/view.js").headers["content-type"].startswith("text/javascript")
    for name in ("app.py", "..%2Fapp.py", "..%2F..%2Fget_provider_info.py"):
        assert http.get(f"/static/{name}").status_code == 404
