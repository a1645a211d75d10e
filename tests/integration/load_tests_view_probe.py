"""Run inside an Airflow home by tests/integration/test_load_tests_view_access.py: builds Airflow's own
API app (our plugin mounted by Airflow, from its entry point), asks the view as several users, prints
what each got as one JSON line.

``OneDagAuthManager`` is Airflow's simple auth manager, except that the user "stranger" may read no
DAG: the simple auth manager alone gives every role read access to every DAG.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

DAG_ID = "loadtest_release_gate"
TASK_ID = "run_load_test"
STRANGER = "stranger"


class OneDagAuthManager(SimpleAuthManager):
    """The simple auth manager, with one user allowed no DAG at all."""

    def is_authorized_dag(
        self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        if user.get_name() == STRANGER:
            return False
        return bool(
            super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
        )


def add_running_night() -> None:
    """A later night whose task is still running: only its run record exists (no ``return_value``)."""
    from datetime import UTC, datetime

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    at, run_id = datetime(2030, 1, 1, tzinfo=UTC), "manual__still_running"
    record = {"bench_result_id": "br-running", "report_url": "http://127.0.0.1:9/ui/report/r-running"}
    with create_session() as session:
        session.execute(
            DagRun.__table__.insert(),
            [{"dag_id": DAG_ID, "run_id": run_id, "logical_date": at, "run_after": at, "run_type": "manual"}],
        )
        session.execute(
            TaskInstance.__table__.insert(),
            [
                {"dag_id": DAG_ID, "task_id": TASK_ID, "run_id": run_id, "map_index": -1}
                | {"state": "running", "try_number": 1, "pool": "default_pool", "pool_slots": 1}
            ],
        )
        dag_run_id = session.scalar(
            DagRun.__table__.select()
            .with_only_columns(DagRun.__table__.c.id)
            .where(DagRun.__table__.c.run_id == run_id)
        )
        session.execute(
            XComModel.__table__.insert(),
            [
                {"dag_run_id": dag_run_id, "task_id": TASK_ID, "map_index": -1, "key": "loadtest_run"}
                | {"dag_id": DAG_ID, "run_id": run_id, "value": record}
            ],
        )


def main(secret: str) -> None:
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    app = create_app()
    manager = get_auth_manager()
    assert isinstance(manager, OneDagAuthManager), type(manager)
    tokens = {
        name: manager.generate_jwt(SimpleAuthManagerUser(username=name, role="viewer"))
        for name in ("reader", STRANGER)
    }
    paths = {
        "dag": f"/loadtest/dags/{DAG_ID}",
        "task": f"/loadtest/dags/{DAG_ID}/tasks/{TASK_ID}",
        "data": f"/loadtest/api/dags/{DAG_ID}/tasks/{TASK_ID}",
        "other_dag": "/loadtest/dags/loadtest_release_deploy",
        "bad_id": "/loadtest/dags/..%2F..%2Fetc",
        "missing_dag": "/loadtest/dags/no_such_dag",
    }
    credentials: dict[str, dict[str, str]] = {
        "nobody": {},
        "garbage": {"Authorization": "Bearer not-a-jwt"},
        "stranger": {"Authorization": f"Bearer {tokens[STRANGER]}"},
        "reader": {"Authorization": f"Bearer {tokens['reader']}"},
    }
    found: dict[str, Any] = {}
    with TestClient(app) as client:
        for who, headers in credentials.items():
            for what, path in paths.items():
                answer = client.get(path, headers=headers)
                found[f"{who} {what}"] = {
                    "status": answer.status_code,
                    "has_data": secret in answer.text,
                    "cache_control": answer.headers.get("cache-control"),
                    "vary": answer.headers.get("vary"),
                }
        add_running_night()
        data = client.get(paths["data"], headers=credentials["reader"]).json()
        found["reader running night"] = [
            (n["verdict"], n["bench_result_id"], n["report_url"]) for n in data["nights"]
        ]
        # the login cookie works like the header (Airflow 3.1.1+ keeps the UI's token in it)
        client.cookies.set("_token", tokens["reader"])
        answer = client.get(paths["dag"])
        found["reader by cookie dag"] = {"status": answer.status_code, "has_data": secret in answer.text}
    print("PROBE:" + json.dumps(found))
