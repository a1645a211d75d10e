"""The simulator answers what the service's third-party clients ask to find ids by name (a workspace's
design projects, a project's scenarios), refuses a bad key before it looks for a route (as Spring
Security does), and prints a connection line that works as pasted."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
import requests

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from airflow_provider_loadtest.simulator.__main__ import connection_uri

TIMEOUT = 5


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorHandle]:
    with run_simulator(run_seconds=1) as handle:
        yield handle


def _get(sim: SimulatorHandle, path: str, key: str | None = None, method: str = "GET") -> requests.Response:
    headers = {"Authorization": f"Bearer {key or sim.api_key}"}
    return requests.request(method, sim.url + path, headers=headers, timeout=TIMEOUT)


def test_a_workspaces_design_projects(sim: SimulatorHandle) -> None:
    answer = _get(sim, "/design/projects/by-workspace/demo-workspace/DESIGN")
    assert answer.status_code == 200
    assert [(p["id"], p["name"], p["workspaceId"]) for p in answer.json()] == [
        ("demo-project", "Demo project", "demo-workspace")
    ]
    assert _get(sim, "/design/projects/by-workspace/demo-workspace/RESULT").json() == []
    assert _get(sim, "/design/projects/by-workspace/nope/DESIGN").status_code == 404
    assert _get(sim, "/design/projects/by-workspace/demo-workspace/OTHER").status_code == 400


def test_a_projects_scenarios(sim: SimulatorHandle) -> None:
    answer = _get(sim, "/runtime/scenarios/by-project/demo-project")
    assert answer.status_code == 200
    names = {s["id"]: s["name"] for s in answer.json()}
    seeded = {s.id: s.name for s in sim.state.seed.scenarios if s.project_id == "demo-project"}
    assert names == seeded and names["slower-scenario"] == "Slower scenario"
    assert all(s["projectId"] == "demo-project" for s in answer.json())
    assert _get(sim, "/runtime/scenarios/by-project/other-project").json() == []
    assert _get(sim, "/runtime/scenarios/by-project/nope").status_code == 404


@pytest.mark.parametrize(("method", "path"), [("GET", "/no/such/path"), ("DELETE", "/workspaces/member-of")])
def test_a_bad_key_is_refused_before_routing(sim: SimulatorHandle, method: str, path: str) -> None:
    assert _get(sim, path, key="wrong", method=method).status_code == 401
    assert _get(sim, path, method=method).status_code in (404, 405)  # the key is good: now the route


def test_the_printed_connection_line_works_as_pasted(
    sim: SimulatorHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

    uri = connection_uri(sim.url, sim.api_key)
    assert uri.endswith("/http") and uri.startswith("loadtest://:sim-api-key@127.0.0.1:")
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", uri)
    ok, message = LoadTestHook().test_connection()
    assert ok, message
    assert connection_uri("http://127.0.0.1:1", "a/b+c") == "loadtest://:a%2Fb%2Bc@127.0.0.1:1/http"


def test_the_cli_prints_the_export_line() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow_provider_loadtest.simulator", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    try:
        reader = threading.Thread(
            target=lambda: (
                lines.extend(process.stdout.readline() for _ in range(4)) if process.stdout else None
            ),
            daemon=True,
        )
        reader.start()
        reader.join(30)
        url = lines[0].strip().partition("=")[2]
        assert (
            lines[3].strip() == f"export AIRFLOW_CONN_LOADTEST_DEFAULT='{connection_uri(url, 'sim-api-key')}'"
        )
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout:
            process.stdout.close()


def test_the_operator_finds_a_scenario_by_name_in_the_simulator(
    sim: SimulatorHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_uri(sim.url, sim.api_key))
    before = len(sim.starts("slower-scenario"))
    op = RunScenarioOperator(
        task_id="t", scenario_name="slower SCENARIO", workspace_id="demo-workspace", wait_for_completion=False
    )
    context: dict[str, Any] = {"ti": mock.MagicMock(name="ti")}
    assert op.execute(context)["scenario_id"] == "slower-scenario"  # type: ignore[arg-type]
    assert len(sim.starts("slower-scenario")) == before + 1
