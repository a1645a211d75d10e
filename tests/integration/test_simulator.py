"""The local service simulator, over real HTTP (uvicorn on a free loopback port)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import requests

from airflow_provider_loadtest.simulator import FakeClock, SimulatorHandle, load_seed, run_simulator

# The plugin's fixtures, imported rather than registered with ``pytest_plugins``: the package's pytest11
# entry point registers the same module, and pluggy refuses a module registered under two names.
from airflow_provider_loadtest.simulator.pytest_plugin import (  # noqa: F401
    loadtest_connection_env,
    loadtest_simulator,
)

pytestmark = pytest.mark.integration

TIMEOUT = 30  # seconds, for every HTTP call (a generated JTL on a machine busy with other jobs took over 5)
FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures"
DURATION = 6.0  # the default seed's run duration, walked with a fake clock


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[SimulatorHandle]:
    """One server for the module (starting and stopping uvicorn costs ~0.2 s); each test resets it."""
    with run_simulator(clock=FakeClock()) as handle:
        yield handle


@pytest.fixture
def clock(shared_sim: SimulatorHandle) -> FakeClock:
    fake = FakeClock()
    shared_sim.reset()
    shared_sim.state.clock = fake
    return fake


@pytest.fixture
def sim(shared_sim: SimulatorHandle, clock: FakeClock) -> SimulatorHandle:
    return shared_sim


@pytest.fixture
def http(sim: SimulatorHandle) -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.headers.update(sim.headers())
        yield session


def _get(http: requests.Session, sim: SimulatorHandle, path: str, **kwargs: Any) -> requests.Response:
    return http.get(sim.url + path, timeout=TIMEOUT, **kwargs)


def _post(http: requests.Session, sim: SimulatorHandle, path: str, **kwargs: Any) -> requests.Response:
    return http.post(sim.url + path, timeout=TIMEOUT, **kwargs)


def _start(
    http: requests.Session, sim: SimulatorHandle, scenario: str = "demo-scenario", **params: str
) -> Any:
    response = _post(http, sim, f"/runtime/scenarios/run/{scenario}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _state(http: requests.Session, sim: SimulatorHandle, run_id: str) -> str:
    response = _get(http, sim, f"/runtime/bench-results/{run_id}")
    assert response.status_code == 200, response.text
    return str(response.json()["state"])


def _official_body(name: str, **ids: str) -> Any:
    """A request body of an official client (tests/unit/fixtures), its ``<placeholders>`` filled in."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    for placeholder, value in ids.items():
        text = text.replace(f"<{placeholder}>", value)
    return json.loads(text)


def _alarm_body(run_id: str) -> dict[str, Any]:
    """The official Maven plugin's body, verbatim but for the run id (beyond-the-spec)."""
    body: dict[str, Any] = _official_body("maven_threshold_alarm_body.json", id=run_id)
    return body


def _summary_body(run_id: str, metric_ids: list[str], item_type: str | None = "SummaryReportItem") -> Any:
    """A summary request as the spec's third-party client sends it (metrics without ``@type``)."""
    metrics = [
        {"id": metric_id, "type": "HIT", "filters": [], "benchResultId": run_id, "configs": []}
        for metric_id in metric_ids
    ]
    body: dict[str, Any] = {"id": "", "name": "Gate", "metrics": metrics}
    return {"@type": item_type, **body} if item_type else body


def _alarms(http: requests.Session, sim: SimulatorHandle, run_id: str) -> list[dict[str, Any]]:
    response = _post(http, sim, "/analysis/threshold-alarms", json=_alarm_body(run_id))
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()
    return result


# --- strictness ------------------------------------------------------------------------------------


def test_missing_or_wrong_key_is_refused(sim: SimulatorHandle) -> None:
    url = sim.url + "/workspaces/member-of"
    for headers in ({}, {"Authorization": "Bearer wrong-key"}, {"Authorization": f"Basic {sim.api_key}"}):
        response = requests.get(url, headers=headers, timeout=TIMEOUT)
        assert response.status_code == 401
        assert response.text == "Invalid or expired API key"
    response = requests.post(sim.url + "/runtime/scenarios/run/demo-scenario", timeout=TIMEOUT)
    assert response.status_code == 401
    assert sim.runs() == []
    ok = requests.get(url, headers=sim.headers(), timeout=TIMEOUT)
    assert ok.status_code == 200
    assert [w["id"] for w in ok.json()] == ["demo-workspace", "other-workspace"]
    assert ok.json()[0]["name"] == "Demo workspace"


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        ("POST", "/runtime/scenarios/run/no-such-scenario", {}),
        ("POST", "/runtime/scenarios/run/demo-scenario", {"templateId": "no-such-template"}),
        ("POST", "/runtime/scenarios/run/demo-scenario", {"templateId": "tpl-other"}),
        ("GET", "/runtime/bench-results/br-999", {}),
        ("GET", "/runtime/bench-results/progress/br-999", {}),
        ("GET", "/analysis/metrics/global/br-999", {}),
        ("POST", "/runtime/bench-results/stop/br-999", {}),
        ("GET", "/analysis/junit-reports/br-999", {}),
        ("GET", "/analysis/bench-report-templates/by-workspace/no-such-workspace", {}),
        ("GET", "/tasks/task-999/result", {}),
        ("GET", "/analysis/logs/list/br-999", {}),
        ("GET", "/analysis/logs/br-999", {"filename": "jmeter.log"}),
    ],
)
def test_unknown_ids_answer_404_with_text(
    http: requests.Session, sim: SimulatorHandle, method: str, path: str, params: dict[str, str]
) -> None:
    response = http.request(method, sim.url + path, params=params, timeout=TIMEOUT)
    assert response.status_code == 404
    assert response.text
    assert len(response.text) < 200
    assert not response.headers["content-type"].startswith("application/json")


def test_unknown_file_of_a_known_run_is_404(http: requests.Session, sim: SimulatorHandle) -> None:
    run_id = _start(http, sim)["benchResultIds"][0]
    response = _get(http, sim, f"/analysis/logs/{run_id}", params={"filename": "nope.pdf"})
    assert response.status_code == 404
    assert (
        _post(
            http, sim, "/tasks", json={"@type": "PrintReportTask", "benchReportId": "report-999"}
        ).status_code
        == 404
    )


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/analysis/threshold-alarms", b"not json"),
        ("/analysis/threshold-alarms", b""),
        ("/analysis/threshold-alarms", json.dumps({"@type": "TextReportItem"}).encode()),
        ("/analysis/threshold-alarms", json.dumps({"@type": "ThresholdAlarmReportItem"}).encode()),
        (
            "/analysis/threshold-alarms",
            json.dumps({"@type": "ThresholdAlarmReportItem", "metric": 3}).encode(),
        ),
        (
            "/analysis/threshold-alarms",
            json.dumps({"@type": "ThresholdAlarmReportItem", "metric": {"@type": "HitMetric"}}).encode(),
        ),
        ("/tasks", b""),
        ("/tasks", json.dumps({"benchReportId": "report-1"}).encode()),
        ("/tasks", json.dumps({"@type": "PrintReportTask"}).encode()),
        ("/tasks", json.dumps([1, 2]).encode()),
        ("/analysis/threshold-alarms", json.dumps({"metric": _alarm_body("br-1")["metric"]}).encode()),
        (
            "/analysis/metrics/summary",
            json.dumps(_summary_body("br-1", ["HITS_TOTAL"], item_type=None)).encode(),
        ),
        ("/analysis/metrics/summary", json.dumps(_summary_body("br-1", ["NO_SUCH_METRIC"])).encode()),
        ("/analysis/metrics/summary", json.dumps(_summary_body("br-1", [])).encode()),
        ("/analysis/metrics/summary", json.dumps(_summary_body("", ["HITS_TOTAL"])).encode()),
        ("/runtime/scenarios/run/demo-scenario", b"[1]"),
        ("/runtime/scenarios/run/demo-scenario", json.dumps({"map": {"USERS": 3}}).encode()),
        ("/runtime/scenarios/run/demo-scenario", b"{broken"),
    ],
)
def test_bad_bodies_answer_400(http: requests.Session, sim: SimulatorHandle, path: str, body: bytes) -> None:
    response = _post(http, sim, path, data=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.text
    assert sim.runs() == []


def test_download_needs_a_filename(http: requests.Session, sim: SimulatorHandle) -> None:
    run_id = _start(http, sim)["benchResultIds"][0]
    assert _get(http, sim, f"/analysis/logs/{run_id}").status_code == 400


# --- templates and starts --------------------------------------------------------------------------


def test_templates_by_workspace(http: requests.Session, sim: SimulatorHandle) -> None:
    demo = _get(http, sim, "/analysis/bench-report-templates/by-workspace/demo-workspace").json()
    assert [(t["id"], t["name"]) for t in demo] == [
        ("tpl-nightly", "Nightly SLA report"),
        ("tpl-smoke", "Smoke report"),
    ]
    assert all(t["workspaceId"] == "demo-workspace" for t in demo)
    other = _get(http, sim, "/analysis/bench-report-templates/by-workspace/other-workspace").json()
    assert [(t["id"], t["name"]) for t in other] == [("tpl-other", "Nightly SLA report")]


def test_start_answers_a_bench_report_from_the_template(http: requests.Session, sim: SimulatorHandle) -> None:
    first = _start(http, sim, templateId="tpl-nightly")
    assert first["id"] == "report-1"
    assert first["benchResultIds"] == ["br-1"]
    assert first["projectId"] == "demo-project"
    assert first["name"] == "Nightly SLA report"
    assert [c["@type"] for c in first["configs"]] == ["ApdexReportConfig", "ExportReportConfig"]
    alarm_item = next(i for i in first["items"] if i["@type"] == "ThresholdAlarmReportItem")
    assert alarm_item["metric"]["benchResultId"] == "br-1"
    response = _post(
        http,
        sim,
        "/runtime/scenarios/run/warning-scenario",
        params={"name": "Nightly 42"},
        json={"map": {"USERS": "50"}},
    )
    second = response.json()
    assert (second["id"], second["benchResultIds"], second["name"]) == ("report-2", ["br-2"], "Nightly 42")
    assert second["configs"] == []
    (summary,) = second["items"]  # without a template, the service builds a summary of its own
    assert summary["@type"] == "SummaryReportItem"
    assert {m["id"] for m in summary["metrics"]} >= {"HITS_TOTAL", "RESPONSE_TIME_PERCENTILE_95"}
    assert {(m["@type"], m["benchResultId"]) for m in summary["metrics"]} == {("HitMetric", "br-2")}
    assert sim.state.runs["br-2"].properties == {"USERS": "50"}
    result = _get(http, sim, "/runtime/bench-results/br-2").json()
    assert result == {
        "id": "br-2",
        "batchId": "batch-2",
        "scenarioId": "warning-scenario",
        "designProjectId": "demo-project",
        "resultProjectId": "demo-project",
        "state": "CREATED",
    }


# --- the state machine -----------------------------------------------------------------------------


def test_run_walks_to_finished(http: requests.Session, sim: SimulatorHandle, clock: FakeClock) -> None:
    run_id = _start(http, sim)["benchResultIds"][0]
    seen: list[str] = []
    progress: list[float] = []
    hits: list[float] = []
    for _ in range(40):
        state = _state(http, sim, run_id)
        if not seen or seen[-1] != state:
            seen.append(state)
        progress.append(_get(http, sim, f"/runtime/bench-results/progress/{run_id}").json()["value"])
        metrics = _get(http, sim, f"/analysis/metrics/global/{run_id}").json()["metrics"]
        hits.append(next(m["value"] for m in metrics if m["name"] == "Hits"))
        clock.advance(DURATION / 25)
    assert seen == ["CREATED", "PENDING", "SCALING", "PREPARING", "INITIALIZING", "RUNNING", "FINISHED"]
    assert progress[0] == 0 and progress[-1] == 100
    assert progress == sorted(progress)
    assert hits == sorted(hits) and hits[-1] > 10_000
    final = {m["name"]: m for m in _get(http, sim, f"/analysis/metrics/global/{run_id}").json()["metrics"]}
    assert set(final) == {"Hits", "Errors", "Average response time", "Hit rate", "Throughput"}
    assert final["Average response time"]["unit"] == "ms"
    assert 0 < final["Errors"]["value"] < final["Hits"]["value"]


def test_run_finishes_in_real_time() -> None:
    with run_simulator(run_seconds=0.6) as sim, requests.Session() as http:
        http.headers.update(sim.headers())
        run_id = _start(http, sim)["benchResultIds"][0]
        deadline = time.monotonic() + 5
        state = _state(http, sim, run_id)
        while state != "FINISHED" and time.monotonic() < deadline:
            time.sleep(0.05)
            state = _state(http, sim, run_id)
        assert state == "FINISHED"


def test_slow_scenario_takes_ten_times_longer(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    run_id = _start(http, sim, "slow-scenario")["benchResultIds"][0]
    clock.advance(DURATION * 3)
    assert _state(http, sim, run_id) == "RUNNING"
    clock.advance(DURATION * 6.9)
    assert _state(http, sim, run_id) == "RUNNING"
    clock.advance(DURATION * 0.1)
    assert _state(http, sim, run_id) == "FINISHED"


def test_failing_scenario_ends_in_error_after_preparing(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    run_id = _start(http, sim, "failing-scenario")["benchResultIds"][0]
    clock.advance(DURATION * 0.16)
    assert _state(http, sim, run_id) == "PREPARING"
    clock.advance(DURATION * 0.1)
    assert _state(http, sim, run_id) == "ERROR"
    clock.advance(DURATION)
    assert _state(http, sim, run_id) == "ERROR"
    assert _get(http, sim, f"/runtime/bench-results/progress/{run_id}").json() == {"value": 0.0}
    assert _alarms(http, sim, run_id) == []


def test_stop_aborts_an_active_run_and_leaves_a_finished_one(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    active = _start(http, sim)["benchResultIds"][0]
    done = _start(http, sim)["benchResultIds"][0]
    clock.advance(DURATION * 0.5)
    assert _state(http, sim, active) == "RUNNING"
    stopped = _post(http, sim, f"/runtime/bench-results/stop/{active}")
    assert stopped.status_code == 200
    assert stopped.json() == _get(http, sim, f"/runtime/bench-results/{active}").json()  # its BenchResult
    assert stopped.json()["state"] == "ABORTED" and stopped.json()["id"] == active
    frozen = _get(http, sim, f"/runtime/bench-results/progress/{active}").json()["value"]
    assert 0 < frozen < 100
    clock.advance(DURATION)
    assert _state(http, sim, active) == "ABORTED"
    assert _get(http, sim, f"/runtime/bench-results/progress/{active}").json()["value"] == frozen
    assert _state(http, sim, done) == "FINISHED"
    assert _post(http, sim, f"/runtime/bench-results/stop/{done}").json()["state"] == "FINISHED"
    assert _post(http, sim, f"/runtime/bench-results/stop/{active}").json()["state"] == "ABORTED"
    assert _state(http, sim, done) == "FINISHED"


def test_progress_scales(http: requests.Session, sim: SimulatorHandle, clock: FakeClock) -> None:
    run_id = _start(http, sim)["benchResultIds"][0]
    clock.advance(DURATION * 0.625)  # half-way through RUNNING
    percent = _get(http, sim, f"/runtime/bench-results/progress/{run_id}").json()["value"]
    assert percent == 50.0 and isinstance(percent, float)  # a Java double on a 0-100 scale
    clock.advance(DURATION * 0.001)
    assert _get(http, sim, f"/runtime/bench-results/progress/{run_id}").json()["value"] == 50.1
    requests.post(sim.url + "/_simulator/settings", json={"progressScale": "fraction"}, timeout=TIMEOUT)
    assert _get(http, sim, f"/runtime/bench-results/progress/{run_id}").json()["value"] == 0.501


# --- pass or fail ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("demo-scenario", {"alarm-rt": "PASSED", "alarm-errors": "PASSED"}),
        ("warning-scenario", {"alarm-rt": "PASSED", "alarm-errors": "WARNING"}),
        ("critical-scenario", {"alarm-rt": "CRITICAL", "alarm-errors": "PASSED"}),
    ],
)
def test_alarms_per_scenario(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock, scenario: str, expected: dict[str, str]
) -> None:
    run_id = _start(http, sim, scenario)["benchResultIds"][0]
    assert _alarms(http, sim, run_id) == []  # not RUNNING yet
    clock.advance(DURATION * 0.6)
    alarms = _alarms(http, sim, run_id)
    assert {a["id"]: a["severity"] for a in alarms} == expected
    assert all(a["name"] and a["message"] for a in alarms)
    clock.advance(DURATION)
    root = ET.fromstring(_get(http, sim, f"/analysis/junit-reports/{run_id}").content)
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(expected)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert len(failed) == sum(1 for s in expected.values() if s == "CRITICAL")
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == str(len(failed))
    if scenario == "critical-scenario":
        assert failed == {"Average response time < 1000 ms"}


# --- print tasks and files -------------------------------------------------------------------------


def _finished_report(http: requests.Session, sim: SimulatorHandle, clock: FakeClock, scenario: str) -> Any:
    report = _start(http, sim, scenario, templateId="tpl-nightly")
    clock.advance(DURATION)
    return report


def _create_task(http: requests.Session, sim: SimulatorHandle, report_id: str) -> str:
    body = _official_body("maven_print_task_body.json", reportId=report_id)  # the Maven plugin's
    response = _post(http, sim, "/tasks", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def test_print_task_legacy_shape_and_pdf(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    from pypdf import PdfReader

    report = _finished_report(http, sim, clock, "critical-scenario")
    run_id = report["benchResultIds"][0]
    task_id = _create_task(http, sim, report["id"])
    assert task_id == "task-1"
    polls = [_get(http, sim, f"/tasks/{task_id}/result") for _ in range(3)]
    assert [p.status_code for p in polls] == [200, 200, 200]
    assert polls[0].content == b"" and polls[1].content == b""
    assert polls[2].json() == {"@type": "PrintReportTaskResult", "filename": "Nightly SLA report.pdf"}
    files = _get(http, sim, f"/analysis/logs/list/{run_id}").json()
    assert files == ["Nightly SLA report.pdf", "jmeter.log", "lg-1-agent.log", "lg-1.jtl.gz"]
    pdf = _get(http, sim, f"/analysis/logs/{run_id}", params={"filename": "Nightly SLA report.pdf"})
    assert pdf.status_code == 200
    assert pdf.headers["content-type"] == "application/octet-stream"
    assert pdf.content.startswith(b"%PDF-")
    reader = PdfReader(io.BytesIO(pdf.content), strict=True)
    assert len(reader.pages) >= 1
    text = reader.pages[0].extract_text()
    for expected in (
        "Nightly SLA report",
        "Critical scenario",
        "FINISHED",
        "Hits",
        "Average response time",
        "CRITICAL",
    ):
        assert expected in text
    for name in ("jmeter.log", "lg-1-agent.log"):
        log = _get(http, sim, f"/analysis/logs/{run_id}", params={"filename": name})
        assert log.status_code == 200 and log.content.decode().startswith(name)


def test_print_task_envelope_shape(http: requests.Session, sim: SimulatorHandle, clock: FakeClock) -> None:
    settings = requests.post(
        sim.url + "/_simulator/settings",
        json={"taskResultShape": "envelope", "taskPendingPolls": 1},
        timeout=TIMEOUT,
    )
    assert settings.status_code == 200, settings.text
    report = _finished_report(http, sim, clock, "demo-scenario")
    task_id = _create_task(http, sim, report["id"])
    run_id = report["benchResultIds"][0]
    pending = _get(http, sim, f"/tasks/{task_id}/result").json()
    assert pending == {"taskId": task_id, "status": "PENDING", "message": "Printing the report"}
    assert not any(f.endswith(".pdf") for f in _get(http, sim, f"/analysis/logs/list/{run_id}").json())
    done = _get(http, sim, f"/tasks/{task_id}/result").json()
    assert set(done) == {"taskId", "status", "message"}  # no file name: the PDF is in the run's files
    assert (done["taskId"], done["status"]) == (task_id, "SUCCESS")
    (pdf_name,) = [f for f in _get(http, sim, f"/analysis/logs/list/{run_id}").json() if f.endswith(".pdf")]
    assert pdf_name == "Nightly SLA report.pdf"
    pdf = _get(http, sim, f"/analysis/logs/{run_id}", params={"filename": pdf_name})
    assert pdf.content.startswith(b"%PDF-")


@pytest.mark.parametrize("shape", ["legacy", "envelope"])
def test_print_task_failure(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock, shape: str
) -> None:
    sim.state.settings = sim.state.settings.model_copy(
        update={"task_result_shape": shape, "task_fails": True, "task_pending_polls": 0}
    )
    report = _finished_report(http, sim, clock, "demo-scenario")
    answer = _get(http, sim, f"/tasks/{_create_task(http, sim, report['id'])}/result").json()
    if shape == "legacy":
        assert answer["@type"] == "FailedTaskResult"
        assert len(answer["stackTrace"]) > 2000
    else:
        assert answer["status"] == "FAILED"
        assert answer["message"]
    assert not any(
        f.endswith(".pdf")
        for f in _get(http, sim, f"/analysis/logs/list/{report['benchResultIds'][0]}").json()
    )


# --- faults ----------------------------------------------------------------------------------------


def test_fault_rate_limit_with_retry_after(http: requests.Session, sim: SimulatorHandle) -> None:
    sim.set_fault("rate_limit", route="member_of", count=2, retry_after=3)
    answers = [_get(http, sim, "/workspaces/member-of") for _ in range(3)]
    assert [a.status_code for a in answers] == [429, 429, 200]
    assert answers[0].headers["Retry-After"] == "3"
    assert _get(http, sim, "/analysis/bench-report-templates/by-workspace/demo-workspace").status_code == 200


@pytest.mark.parametrize("status", [502, 503, 504])
def test_fault_server_errors(http: requests.Session, sim: SimulatorHandle, status: int) -> None:
    sim.set_fault("error", path_prefix="/runtime/bench-results/", status=status, count=1)
    run_id = _start(http, sim)["benchResultIds"][0]
    assert _get(http, sim, f"/runtime/bench-results/{run_id}").status_code == status
    assert _get(http, sim, f"/runtime/bench-results/{run_id}").status_code == 200


def test_fault_per_scenario_only_hits_that_scenario(http: requests.Session, sim: SimulatorHandle) -> None:
    response = requests.post(
        sim.url + "/_simulator/faults",
        json={"kind": "error", "status": 503, "scenarioId": "warning-scenario"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200, response.text
    demo = _start(http, sim)["benchResultIds"][0]
    assert _post(http, sim, "/runtime/scenarios/run/warning-scenario").status_code == 503
    assert _get(http, sim, f"/runtime/bench-results/{demo}").status_code == 200
    sim.clear_faults()
    warning = _start(http, sim, "warning-scenario")["benchResultIds"][0]
    sim.set_fault("error", scenario_id="warning-scenario")
    assert _get(http, sim, f"/runtime/bench-results/{warning}").status_code == 503
    assert _post(http, sim, "/analysis/threshold-alarms", json=_alarm_body(warning)).status_code == 503
    assert _post(http, sim, "/analysis/threshold-alarms", json=_alarm_body(demo)).status_code == 200


def test_fault_probability_is_reproducible() -> None:
    def pattern() -> list[int]:
        with run_simulator() as sim, requests.Session() as http:
            http.headers.update(sim.headers())
            sim.set_fault("error", route="member_of", probability=0.5)
            return [_get(http, sim, "/workspaces/member-of").status_code for _ in range(16)]

    first = pattern()
    assert first == pattern()
    assert {200, 503} == set(first)


def test_fault_delay(http: requests.Session, sim: SimulatorHandle) -> None:
    sim.set_fault("delay", route="member_of", delay_seconds=0.4, count=1)
    started = time.monotonic()
    assert _get(http, sim, "/workspaces/member-of").status_code == 200
    assert time.monotonic() - started >= 0.4
    sim.set_fault("delay", route="member_of", delay_seconds=1.0, count=1)
    with pytest.raises(requests.Timeout):
        http.get(sim.url + "/workspaces/member-of", timeout=0.3)
    # The server still answers the abandoned request; wait for it so the next test starts clean.
    deadline = time.monotonic() + 5
    while len(sim.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r.fault for r in sim.requests] == ["delay", "delay"]


def test_fault_drop_is_a_connection_error(http: requests.Session, sim: SimulatorHandle) -> None:
    sim.set_fault("drop", route="member_of", count=1)
    with pytest.raises(requests.ConnectionError):
        _get(http, sim, "/workspaces/member-of")
    assert _get(http, sim, "/workspaces/member-of").status_code == 200
    dropped = [r for r in sim.requests if r.fault == "drop"]
    assert len(dropped) == 1 and dropped[0].status is None


def test_fault_drop_on_start_creates_no_run(http: requests.Session, sim: SimulatorHandle) -> None:
    sim.set_fault("drop", route="run_scenario", count=1)
    with pytest.raises(requests.ConnectionError):
        _post(http, sim, "/runtime/scenarios/run/demo-scenario")
    assert sim.runs() == []


def test_fault_accept_then_drop_creates_exactly_one_run(http: requests.Session, sim: SimulatorHandle) -> None:
    sim.set_fault("accept_then_drop", route="run_scenario", scenario_id="demo-scenario", count=1)
    with pytest.raises(requests.ConnectionError):
        _post(http, sim, "/runtime/scenarios/run/demo-scenario", params={"templateId": "tpl-smoke"})
    assert [r.id for r in sim.runs("demo-scenario")] == ["br-1"]
    assert len(sim.starts("demo-scenario")) == 1
    assert sim.starts()[0].status is None and sim.starts()[0].fault == "accept_then_drop"
    assert _state(http, sim, "br-1") == "CREATED"


def test_bad_fault_rule_is_refused(sim: SimulatorHandle) -> None:
    response = requests.post(sim.url + "/_simulator/faults", json={"kind": "explode"}, timeout=TIMEOUT)
    assert response.status_code == 400
    response = requests.post(
        sim.url + "/_simulator/faults", json={"kind": "error", "status": 404}, timeout=TIMEOUT
    )
    assert response.status_code == 400


# --- recorder and administration -------------------------------------------------------------------


def test_recorder(http: requests.Session, sim: SimulatorHandle) -> None:
    _start(http, sim, "critical-scenario", templateId="tpl-nightly")
    _post(http, sim, "/analysis/threshold-alarms", json=_alarm_body("br-1"))
    requests.get(sim.url + "/workspaces/member-of", headers={"Authorization": "Bearer nope"}, timeout=TIMEOUT)
    requests.get(sim.url + "/_simulator/requests", timeout=TIMEOUT)  # admin: not recorded
    recorded = sim.requests
    assert [(r.method, r.path, r.status, r.authorized) for r in recorded] == [
        ("POST", "/runtime/scenarios/run/critical-scenario", 200, True),
        ("POST", "/analysis/threshold-alarms", 200, True),
        ("GET", "/workspaces/member-of", 401, False),
    ]
    assert recorded[0].query == {"templateId": "tpl-nightly"}
    assert recorded[1].body == _alarm_body("br-1")
    assert recorded[0].time <= recorded[2].time
    assert [s.path_params for s in sim.starts("critical-scenario")] == [{"scenario_id": "critical-scenario"}]
    assert sim.starts("demo-scenario") == []
    listed = requests.get(sim.url + "/_simulator/requests", timeout=TIMEOUT).json()
    assert [r["path"] for r in listed] == [r.path for r in recorded]
    assert sim.api_key not in json.dumps(listed)
    assert sim.api_key not in repr(recorded)


def test_reset_route(http: requests.Session, sim: SimulatorHandle) -> None:
    _start(http, sim)
    sim.set_fault("error", route="member_of")
    assert requests.post(sim.url + "/_simulator/reset", timeout=TIMEOUT).status_code == 204
    assert sim.requests == [] and sim.runs() == [] and sim.state.faults.rules == []
    assert _start(http, sim)["id"] == "report-1"


def test_docs_and_swagger_redirect(sim: SimulatorHandle) -> None:
    assert requests.get(sim.url + "/openapi.json", timeout=TIMEOUT).json()["paths"]
    response = requests.get(sim.url + "/swagger-ui.html", timeout=TIMEOUT)
    assert response.status_code == 200 and response.url.endswith("/docs")
    assert "swagger" in response.text.lower()
    assert sim.requests == []


def test_only_loopback_unless_allowed() -> None:
    with pytest.raises(ValueError, match="loopback"), run_simulator(host="0.0.0.0"):
        pass


def test_seed_is_checked() -> None:
    seed = load_seed().model_dump(by_alias=True)
    seed["scenarios"][0]["projectId"] = "nowhere"
    with pytest.raises(ValueError, match="unknown project"):
        load_seed(seed)


def test_custom_seed_file_with_faults_and_an_aborting_scenario(tmp_path: Any) -> None:
    seed = load_seed().model_dump(by_alias=True, mode="json")
    seed["apiKeys"] = ["other-key"]
    seed["scenarios"].append(
        {"id": "abort-scenario", "projectId": "demo-project", "name": "Aborts", "outcome": "ABORTED"}
    )
    seed["faults"] = [{"kind": "rate_limit", "route": "member_of", "count": 1, "retryAfter": 7}]
    path = tmp_path / "seed.json"
    path.write_text(json.dumps(seed), encoding="utf-8")
    clock = FakeClock()
    with run_simulator(seed=str(path), clock=clock, run_seconds=1) as sim, requests.Session() as http:
        assert sim.api_key == "other-key"
        http.headers.update(sim.headers())
        first = _get(http, sim, "/workspaces/member-of")
        assert (first.status_code, first.headers["Retry-After"]) == (429, "7")
        assert _get(http, sim, "/workspaces/member-of").status_code == 200
        run_id = _start(http, sim, "abort-scenario")["benchResultIds"][0]
        clock.advance(0.5)
        assert _state(http, sim, run_id) == "RUNNING"
        clock.advance(0.2)
        assert _state(http, sim, run_id) == "ABORTED"
        sim.reset()
        assert _get(http, sim, "/workspaces/member-of").status_code == 429  # the seed's faults come back


def test_concurrent_clients(sim: SimulatorHandle) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with requests.Session() as session:
                session.headers.update(sim.headers())
                for _ in range(5):
                    _start(session, sim)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []
    assert sorted(int(r.id[3:]) for r in sim.runs()) == list(range(1, 21))


# --- pytest plugin, CLI, import cost ---------------------------------------------------------------


def test_pytest_plugin_fixtures(loadtest_connection_env: SimulatorHandle) -> None:  # noqa: F811
    conn = json.loads(os.environ["AIRFLOW_CONN_LOADTEST_DEFAULT"])
    assert conn["host"] == loadtest_connection_env.url
    assert conn["password"] == "sim-api-key"
    response = requests.get(
        conn["host"] + "/workspaces/member-of",
        headers={"Authorization": f"Bearer {conn['password']}"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200


def test_cli_prints_url_and_key_and_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "airflow_provider_loadtest.simulator", "--port", "0", "--run-seconds", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda: (
                lines.extend(process.stdout.readline() for _ in range(2)) if process.stdout else None
            )
        )
        reader.start()
        reader.join(20)
        assert len(lines) == 2, f"no URL line from the CLI; stderr: {process.stderr}"
        url_key, url = lines[0].strip().split("=", 1)
        key_key, key = lines[1].strip().split("=", 1)
        assert (url_key, key_key) == ("LOADTEST_SIMULATOR_URL", "LOADTEST_SIMULATOR_API_KEY")
        assert url.startswith("http://127.0.0.1:") and key == "sim-api-key"
        response = requests.get(
            url + "/workspaces/member-of", headers={"Authorization": f"Bearer {key}"}, timeout=TIMEOUT
        )
        assert response.status_code == 200
    finally:
        process.terminate()
        try:
            assert process.wait(10) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(5)
            for stream in (process.stdout, process.stderr):
                if stream:
                    stream.close()


def test_cli_refuses_non_loopback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "airflow_provider_loadtest.simulator", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert result.returncode == 2
    assert "loopback" in result.stderr


def test_import_is_lazy_and_airflow_free() -> None:
    code = (
        "import sys, airflow_provider_loadtest.simulator, airflow_provider_loadtest.simulator.pytest_plugin\n"
        "heavy = sorted(m for m in ('fastapi', 'uvicorn', 'starlette', 'airflow') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "from airflow_provider_loadtest.simulator import SimulatorState\n"
        "from airflow_provider_loadtest.simulator.app import create_app\n"
        "create_app(SimulatorState())\n"
        "assert 'airflow' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr


# --- strict like Spring/Jackson: 406, 415, 400 (issue 9) -------------------------------------------


@pytest.mark.parametrize(
    ("path", "accept", "status"),
    [
        ("/analysis/junit-reports/br-1", "application/json", 406),  # what our client sent before issue 9
        ("/analysis/junit-reports/br-1", "text/xml", 406),
        ("/analysis/junit-reports/br-1", "application/xml, text/xml, */*", 200),
        ("/analysis/junit-reports/br-1", "application/*", 200),
        ("/analysis/junit-reports/br-1", "*/*", 200),
        ("/analysis/junit-reports/br-1", "application/xml;q=0, */*", 406),
        ("/analysis/logs/br-1?filename=jmeter.log", "application/json", 406),
        ("/analysis/logs/br-1?filename=jmeter.log", "text/plain", 406),
        ("/analysis/logs/br-1?filename=jmeter.log", "*/*", 200),
        ("/runtime/bench-results/br-1", "application/xml", 406),
        ("/runtime/bench-results/br-1", "text/html, application/json;q=0.9", 200),
        ("/analysis/logs/list/br-1", "text/*", 406),
    ],
)
def test_accept_excluding_what_an_endpoint_produces_is_406(
    http: requests.Session, sim: SimulatorHandle, path: str, accept: str, status: int
) -> None:
    _start(http, sim)
    response = _get(http, sim, path, headers={"Accept": accept})
    assert response.status_code == status, response.text
    if status == 406:
        assert "produces" in response.text


def test_no_accept_header_accepts_anything_and_the_key_is_checked_first(
    http: requests.Session, sim: SimulatorHandle
) -> None:
    _start(http, sim)
    bare = requests.Request("GET", sim.url + "/analysis/junit-reports/br-1", headers=sim.headers()).prepare()
    assert "Accept" not in bare.headers  # a prepared request carries only the headers it was given
    assert http.send(bare, timeout=TIMEOUT).status_code == 200
    wrong_key = requests.get(
        sim.url + "/analysis/junit-reports/br-1",
        headers={"Authorization": "Bearer nope", "Accept": "application/json"},
        timeout=TIMEOUT,
    )
    assert wrong_key.status_code == 401


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/analysis/threshold-alarms", json.dumps(_alarm_body("br-1")).encode(), "text/plain"),
        ("/analysis/threshold-alarms", json.dumps(_alarm_body("br-1")).encode(), None),
        (
            "/analysis/threshold-alarms",
            json.dumps(_alarm_body("br-1")).encode(),
            "application/x-www-form-urlencoded",
        ),
        (
            "/tasks",
            json.dumps({"@type": "PrintReportTask", "benchReportId": "report-1"}).encode(),
            "text/plain",
        ),
        ("/analysis/metrics/summary", json.dumps(_summary_body("br-1", ["HITS_TOTAL"])).encode(), None),
        ("/runtime/scenarios/run/demo-scenario", b'{"map": {}}', "text/plain"),
        ("/runtime/scenarios/run/demo-scenario", b"", "text/plain"),
    ],
)
def test_json_body_without_a_json_content_type_is_415(
    http: requests.Session, sim: SimulatorHandle, path: str, body: bytes, content_type: str | None
) -> None:
    _start(http, sim)
    request = requests.Request("POST", sim.url + path, data=body, headers=sim.headers()).prepare()
    if content_type is None:
        request.headers.pop("Content-Type", None)
    else:
        request.headers["Content-Type"] = content_type
    response = http.send(request, timeout=TIMEOUT)
    assert response.status_code == 415, response.text
    assert [r.id for r in sim.runs()] == ["br-1"]  # a refused start starts nothing


def test_json_content_types_and_a_bodyless_start_are_accepted(
    http: requests.Session, sim: SimulatorHandle
) -> None:
    bare = requests.Request("POST", sim.url + "/runtime/scenarios/run/demo-scenario", headers=sim.headers())
    prepared = bare.prepare()
    assert "Content-Type" not in prepared.headers  # the Jenkins plugin sends no body
    assert http.send(prepared, timeout=TIMEOUT).status_code == 200
    for content_type in ("application/json;charset=UTF-8", "application/vnd.octoperf+json"):
        response = _post(
            http,
            sim,
            "/analysis/threshold-alarms",
            data=json.dumps(_alarm_body("br-1")),
            headers={"Content-Type": content_type},
        )
        assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        (
            {"metric": {"@type": "MonitoringMetric", "benchResultId": "br-1"}, "name": ""},
            "ThresholdAlarmReportItem",
        ),
        (
            {"@type": "ThresholdAlarmReportItem", "metric": {"benchResultId": "br-1"}, "name": ""},
            "MonitoringMetric",
        ),
        (
            {"@type": "ThresholdAlarmReportItem", "metric": {"@type": "Metric", "benchResultId": "br-1"}},
            "HitMetric",
        ),
    ],
)
def test_alarm_body_without_its_types_is_400(
    http: requests.Session, sim: SimulatorHandle, body: dict[str, Any], missing: str
) -> None:
    """Our client sent the metric without ``@type`` before issue 9: the real service would refuse it."""
    _start(http, sim)
    response = _post(http, sim, "/analysis/threshold-alarms", json=body)
    assert response.status_code == 400
    assert missing in response.text and "type" in response.text


@pytest.mark.parametrize("fixture", ["maven_threshold_alarm_body.json", "jenkins_threshold_alarm_body.json"])
def test_alarm_bodies_of_the_official_clients_are_accepted(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock, fixture: str
) -> None:
    run_id = _start(http, sim, "warning-scenario")["benchResultIds"][0]
    clock.advance(DURATION)
    body = _official_body(fixture, id=run_id)
    response = _post(http, sim, "/analysis/threshold-alarms", json=body)
    assert response.status_code == 200, response.text
    assert {a["id"]: a["severity"] for a in response.json()} == {
        "alarm-rt": "PASSED",
        "alarm-errors": "WARNING",
    }


# --- lookups the official clients make (issue 9) ---------------------------------------------------


def test_scenario_project_and_report_lookups(http: requests.Session, sim: SimulatorHandle) -> None:
    report = _start(http, sim, templateId="tpl-nightly")
    scenario = _get(http, sim, "/runtime/scenarios/demo-scenario").json()
    assert scenario == {
        "id": "demo-scenario",
        "name": "Demo scenario",
        "description": "",
        "projectId": "demo-project",
    }
    project = _get(http, sim, f"/design/projects/{scenario['projectId']}").json()
    assert project == {"id": "demo-project", "name": "Demo project", "workspaceId": "demo-workspace"}
    assert _get(http, sim, f"/analysis/bench-reports/{report['id']}").json() == report
    for path in ("/runtime/scenarios/nope", "/design/projects/nope", "/analysis/bench-reports/nope"):
        assert _get(http, sim, path).status_code == 404


# --- files as the service names them (issue 9) -----------------------------------------------------


def test_run_files_per_load_generator_and_gzipped_jtl(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    import gzip

    run_id = _start(http, sim, "slow-scenario")["benchResultIds"][0]  # two load generators
    clock.advance(DURATION * 10)
    files = _get(http, sim, f"/analysis/logs/list/{run_id}").json()
    assert files == ["jmeter.log", "lg-1-agent.log", "lg-1.jtl.gz", "lg-2-agent.log", "lg-2.jtl.gz"]
    jtl = _get(
        http, sim, f"/analysis/logs/{run_id}", params={"filename": "lg-2.jtl.gz"}, headers={"Accept": "*/*"}
    )
    assert jtl.content[:2] == b"\x1f\x8b"  # really gzipped, not labelled so
    import csv
    import io

    # Records, not lines: an assertion's failure message may span lines, as JMeter writes it.
    rows = list(csv.DictReader(io.StringIO(gzip.decompress(jtl.content).decode(), newline="")))
    assert rows and list(rows[0])[:4] == ["timeStamp", "elapsed", "label", "responseCode"]
    assert len(rows) > 1000 and all(row["threadName"].startswith("lg-2 Shop users ") for row in rows)
    assert _get(http, sim, f"/analysis/logs/{run_id}", params={"filename": "lg-3.jtl.gz"}).status_code == 404


def test_printed_pdf_is_named_after_the_report(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    sim.state.settings = sim.state.settings.model_copy(update={"task_pending_polls": 0})
    report = _start(http, sim, name="Q3/rollout: nightly")
    clock.advance(DURATION)
    task_id = _create_task(http, sim, report["id"])
    assert _get(http, sim, f"/tasks/{task_id}/result").json()["filename"] == "Q3_rollout_ nightly.pdf"
    files = _get(http, sim, f"/analysis/logs/list/{report['benchResultIds'][0]}").json()
    assert files[0] == "Q3_rollout_ nightly.pdf"


# --- figures that add up, summary values, a regression to show (issues 9 and 12) --------------------


def test_headline_metrics_add_up(http: requests.Session, sim: SimulatorHandle, clock: FakeClock) -> None:
    run_id = _start(http, sim)["benchResultIds"][0]
    profile = sim.state.seed.scenario("demo-scenario").metrics  # type: ignore[union-attr]
    for step in (0.625, 1.0):  # half-way through RUNNING, then finished
        clock.advance(DURATION * step - clock.now())
        metrics = {
            m["name"]: m for m in _get(http, sim, f"/analysis/metrics/global/{run_id}").json()["metrics"]
        }
        progress = _get(http, sim, f"/runtime/bench-results/progress/{run_id}").json()["value"]
        seconds = profile.simulated_seconds * progress / 100
        hits, errors = metrics["Hits"]["value"], metrics["Errors"]["value"]
        assert isinstance(hits, int) and isinstance(errors, int)
        assert metrics["Hit rate"]["value"] == pytest.approx(hits / seconds, abs=0.001)
        assert errors == int(hits * profile.error_rate)
        throughput = hits * profile.response_kb * 1024 / seconds / 1024**2
        assert metrics["Throughput"]["value"] == pytest.approx(throughput, abs=0.001)


def _summary(http: requests.Session, sim: SimulatorHandle, body: Any) -> Any:
    response = _post(http, sim, "/analysis/metrics/summary", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_summary_values_once_the_run_is_over_aligned_and_deterministic(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    from airflow_provider_loadtest.models.enums import MetricId

    ids = ["RESPONSE_TIME_PERCENTILE_95", "HITS_TOTAL", "ERRORS_PERCENT", "HITS_RATE", "RESPONSE_TIME_AVG"]
    first = _start(http, sim)["benchResultIds"][0]
    clock.advance(DURATION / 2)
    assert _summary(http, sim, _summary_body(first, ids)) == []  # values exist once the run is terminal
    clock.advance(DURATION)
    values = _summary(http, sim, _summary_body(first, ids))
    p95, hits, errors_percent, hit_rate, average = values
    assert p95 > average > 0 and isinstance(hits, int)
    headline = {
        m["name"]: m["value"] for m in _get(http, sim, f"/analysis/metrics/global/{first}").json()["metrics"]
    }
    assert (hits, hit_rate, average) == (
        headline["Hits"],
        headline["Hit rate"],
        headline["Average response time"],
    )
    assert errors_percent == pytest.approx(100 * headline["Errors"] / hits, abs=0.001)
    assert _summary(http, sim, _summary_body(first, list(reversed(ids)))) == list(reversed(values))
    second = _start(http, sim)["benchResultIds"][0]
    clock.advance(DURATION)
    assert _summary(http, sim, _summary_body(second, ids)) == values  # same scenario, same figures
    every = _summary(http, sim, _summary_body(second, [m.value for m in MetricId]))
    assert len(every) == len(MetricId) and all(isinstance(v, int | float) for v in every)
    assert _post(http, sim, "/analysis/metrics/summary", json=_summary_body("br-99", ids)).status_code == 404


def test_summary_of_the_runs_own_report_item(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    report = _start(http, sim)
    clock.advance(DURATION)
    (item,) = [i for i in report["items"] if i["@type"] == "SummaryReportItem"]
    values = _summary(http, sim, item)
    assert len(values) == len(item["metrics"]) and all(v > 0 for v in values)


def test_summary_of_a_run_without_load_is_empty(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    run_id = _start(http, sim, "failing-scenario")["benchResultIds"][0]
    clock.advance(DURATION)
    assert _state(http, sim, run_id) == "ERROR"
    assert _summary(http, sim, _summary_body(run_id, ["HITS_TOTAL"])) == []


def test_slower_scenario_gets_twenty_percent_slower_at_every_run(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    ids = ["RESPONSE_TIME_AVG", "RESPONSE_TIME_PERCENTILE_95", "HITS_TOTAL"]
    runs = [_start(http, sim, "slower-scenario")["benchResultIds"][0] for _ in range(3)]
    _start(http, sim)  # another scenario's run does not count
    clock.advance(DURATION)
    (avg1, p95_1, hits1), (avg2, p95_2, hits2), (avg3, _, _) = (
        _summary(http, sim, _summary_body(r, ids)) for r in runs
    )
    from airflow_provider_loadtest.simulator.figures import run_noise

    # 20 % slower at each run, times its few percent of run-to-run noise (deterministic per run)
    noise = [run_noise(3, i) for i in (1, 2, 3)]
    assert noise[0] != noise[1] and all(0.9 < n < 1.1 for n in noise)
    assert avg1 == pytest.approx(400 * noise[0], abs=0.1)
    assert avg2 / avg1 == pytest.approx(1.2 * noise[1] / noise[0], rel=0.001)
    assert avg3 / avg2 == pytest.approx(1.2 * noise[2] / noise[1], rel=0.001)
    assert p95_2 / p95_1 == pytest.approx(1.2 * noise[1] / noise[0], rel=0.001)
    assert hits1 == hits2
    both = _summary(
        http,
        sim,
        {
            **_summary_body(runs[0], ids[:1]),
            "metrics": [
                _summary_body(runs[0], ids[:1])["metrics"][0],
                _summary_body(runs[1], ids[:1])["metrics"][0],
            ],
        },
    )
    assert both == [avg1, avg2]  # one call may compare a run with its baseline
    sim.reset()
    again = _start(http, sim, "slower-scenario")["benchResultIds"][0]
    clock.advance(DURATION)
    assert _summary(http, sim, _summary_body(again, ids[:1])) == [avg1]  # counted since the last reset


# --- the web UI's report page (issue 9) ------------------------------------------------------------


def test_report_page_at_the_web_ui_path(
    sim: SimulatorHandle, http: requests.Session, clock: FakeClock
) -> None:
    report = _start(http, sim, "critical-scenario", templateId="tpl-nightly")
    clock.advance(DURATION)
    page_url = (
        f"{sim.url}/ui/workspace/demo-workspace/project/{report['projectId']}/analysis/report/{report['id']}"
    )
    recorded = len(sim.requests)
    page = requests.get(page_url, timeout=TIMEOUT)  # a browser: no API key
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for expected in (
        "Nightly SLA report",
        "FINISHED",
        "Hit rate",
        "CRITICAL",
        "Average response time 1850 ms",
        "lg-1.jtl.gz",
    ):
        assert expected in page.text
    link = page.text.split('href="', 1)[1].split('"', 1)[0]
    file = requests.get(requests.compat.urljoin(page_url, link), timeout=TIMEOUT)
    assert file.status_code == 200 and file.content.decode().startswith("jmeter.log of br-1")
    wrong = page_url.replace("demo-workspace", "other-workspace")
    assert requests.get(wrong, timeout=TIMEOUT).status_code == 404  # a wrongly built link fails here
    assert len(sim.requests) == recorded  # the web UI is not the API: not recorded


def test_scenario_scoped_faults_reach_the_new_routes(
    http: requests.Session, sim: SimulatorHandle, clock: FakeClock
) -> None:
    report = _start(http, sim, "warning-scenario")
    demo = _start(http, sim)
    clock.advance(DURATION)
    sim.set_fault("error", scenario_id="warning-scenario", status=502)
    run_id = report["benchResultIds"][0]
    assert _get(http, sim, "/runtime/scenarios/warning-scenario").status_code == 502
    assert _get(http, sim, f"/analysis/bench-reports/{report['id']}").status_code == 502
    summary = _summary_body(run_id, ["HITS_TOTAL"])
    assert _post(http, sim, "/analysis/metrics/summary", json=summary).status_code == 502
    assert _summary(http, sim, _summary_body(demo["benchResultIds"][0], ["HITS_TOTAL"]))
