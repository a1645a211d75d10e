"""One rule for a refused key (HTTP 401) in every task of the package, deferred or not: the task fails at
once (``AirflowFailException``: Airflow's retries do not run, the task does not go up_for_retry),
naming the status, never showing the key. A key the service refuses now is refused on every retry.

Each case runs the task as Airflow would: synchronously against requests-mock, or deferred: the task
defers, its real trigger meets the 401 through the async client, and the task resumes with the event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowFailException, TaskDeferred
from airflow_provider_loadtest.operators.report import DownloadReportOperator, DownloadRunFilesOperator
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from airflow_provider_loadtest.sensors.run import LoadTestRunSensor
from airflow_provider_loadtest.sensors.template import TemplateSensor
from tests.conftest import API_KEY
from tests.unit.test_deferrable_waits import (
    _fire,
    service,  # noqa: F401 - the fixture, asked for by name below
)
from tests.unit.test_hook import TEMPLATES_URL
from tests.unit.test_run_lifecycle import STATE_URL, _context, _saved_record, _service

REFUSAL = {"message": f"Invalid or expired API key {API_KEY}"}


def _refuse_everything(requests_mock: rm.Mocker) -> None:
    requests_mock.register_uri(rm.ANY, rm.ANY, status_code=401, json=REFUSAL)


def _assert_fails_at_once(call: Callable[[], Any]) -> None:
    with pytest.raises(AirflowFailException) as caught:
        call()
    message = str(caught.value)
    assert "HTTP 401" in message, message
    assert API_KEY not in message


# --- synchronous --------------------------------------------------------------------------------


def _sync_tasks(tmp_path: Path) -> dict[str, Any]:
    return {
        "RunScenarioOperator": RunScenarioOperator(task_id="t", scenario_id="sc-1", retries=3),
        "LoadTestRunSensor": LoadTestRunSensor(task_id="t", bench_result_id="br-1", retries=3),
        "TemplateSensor": TemplateSensor(task_id="t", workspace_id="ws-1", template_name="x", retries=3),
        "DownloadReportOperator": DownloadReportOperator(
            task_id="t", run=_saved_record(), destination=str(tmp_path / "r.pdf"), retries=3
        ),
        "DownloadRunFilesOperator": DownloadRunFilesOperator(
            task_id="t", bench_result_id="br-1", destination=str(tmp_path / "files"), retries=3
        ),
    }


@pytest.mark.parametrize(
    "name",
    [
        "RunScenarioOperator",
        "LoadTestRunSensor",
        "TemplateSensor",
        "DownloadReportOperator",
        "DownloadRunFilesOperator",
    ],
)
def test_a_refused_key_fails_every_task_at_once(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path, name: str
) -> None:
    _refuse_everything(requests_mock)
    task = _sync_tasks(tmp_path)[name]
    _assert_fails_at_once(lambda: task.execute(_context()))


def test_a_key_refused_at_a_later_look_fails_the_run_sensor_at_once(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """The first look found the run going; the key was revoked before the next one (poke mode)."""
    _service(requests_mock, ["RUNNING"])
    requests_mock.get(
        STATE_URL, [{"json": {"id": "br-1", "state": "RUNNING"}}, {"status_code": 401, "json": REFUSAL}]
    )
    sensor = LoadTestRunSensor(task_id="t", bench_result_id="br-1", poke_interval=0.01, retries=3)
    context = _context()
    assert not sensor.poke(context).is_done  # type: ignore[arg-type]
    _assert_fails_at_once(lambda: sensor.poke(context))  # type: ignore[arg-type]


def test_a_key_refused_at_a_later_look_fails_the_template_sensor_at_once(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    requests_mock.get(TEMPLATES_URL, [{"json": []}, {"status_code": 401, "json": REFUSAL}])
    sensor = TemplateSensor(task_id="t", workspace_id="ws-1", template_name="x", retries=3)
    assert not sensor.poke({}).is_done  # type: ignore[arg-type]
    _assert_fails_at_once(lambda: sensor.poke({}))  # type: ignore[arg-type]


# --- deferred ------------------------------------------------------------------------------------


def _resume(task: Any, context: dict[str, Any], request: pytest.FixtureRequest) -> Callable[[], Any]:
    """Run ``task`` until it defers, fire its trigger against a service refusing the key, and hand back
    the resumption Airflow would call."""
    handlers: list[Any] = request.getfixturevalue("service")  # the async client's mock service
    with pytest.raises(TaskDeferred) as deferred:
        task.execute(context)
    handlers.append(lambda request: httpx.Response(401, json=REFUSAL))
    _, kwargs = deferred.value.trigger.serialize()
    trigger = type(deferred.value.trigger)(**json.loads(json.dumps(kwargs)))  # as the triggerer builds it
    event = _fire(trigger)
    assert API_KEY not in json.dumps(event)
    return lambda: getattr(task, deferred.value.method_name)(context, event)


def test_deferred_run_scenario_operator(
    loadtest_conn: str, requests_mock: rm.Mocker, request: pytest.FixtureRequest
) -> None:
    _service(requests_mock, ["RUNNING"])
    task = RunScenarioOperator(task_id="t", scenario_id="sc-1", deferrable=True, retries=3)
    _assert_fails_at_once(_resume(task, _context(), request))


def test_deferred_run_sensor(
    loadtest_conn: str, requests_mock: rm.Mocker, request: pytest.FixtureRequest
) -> None:
    _service(requests_mock, ["RUNNING"])
    task = LoadTestRunSensor(task_id="t", bench_result_id="br-1", deferrable=True, retries=3)
    _assert_fails_at_once(_resume(task, _context(), request))


def test_deferred_template_sensor(
    loadtest_conn: str, requests_mock: rm.Mocker, request: pytest.FixtureRequest
) -> None:
    requests_mock.get(TEMPLATES_URL, json=[])
    task = TemplateSensor(task_id="t", workspace_id="ws-1", template_name="x", deferrable=True, retries=3)
    _assert_fails_at_once(_resume(task, _context(), request))


def test_deferred_report_operator(
    loadtest_conn: str, requests_mock: rm.Mocker, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    task = DownloadReportOperator(
        task_id="t", run=_saved_record(), destination=str(tmp_path / "r.pdf"), deferrable=True, retries=3
    )
    _assert_fails_at_once(_resume(task, _context(), request))
    assert not (tmp_path / "r.pdf").exists()


def test_a_key_refused_after_the_deferred_print_fails_at_once(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    """The PDF was printed in the triggerer; the download on the worker meets the refused key."""
    _refuse_everything(requests_mock)
    task = DownloadReportOperator(task_id="t", run=_saved_record(), destination=str(tmp_path / "r.pdf"))
    event = {"status": "done", "report_id": "rep-1", "bench_result_id": "br-1", "filename": "rep-1.pdf"}
    _assert_fails_at_once(lambda: task.execute_complete(_context(), event))  # type: ignore[arg-type]
