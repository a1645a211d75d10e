"""Deferrable TemplateSensor and DownloadReportOperator: they defer, their triggers run with the async
client (on aiohttp's session, answered by ``tests.aio_service``), and execute_complete turns the event
into the same result or error."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    TaskDeferred,
)
from airflow_provider_loadtest.hooks import async_client
from airflow_provider_loadtest.operators.report import DownloadReportOperator
from airflow_provider_loadtest.sensors.template import TemplateSensor
from airflow_provider_loadtest.triggers.report import ReportPrintTrigger
from airflow_provider_loadtest.triggers.template import TemplateTrigger
from tests.aio_service import answer_with
from tests.conftest import API_KEY
from tests.unit.test_hook import TEMPLATES, TEMPLATES_URL
from tests.unit.test_report import FILE_URL, LIST_URL, PDF, RESULT_URL, TASKS_URL, _print_service

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Handler]]:
    """The service answers the async client on aiohttp's own session with the handler appended to
    the list (``tests.aio_service``); the async sleeps are no-ops."""
    handlers: list[Handler] = []

    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(async_client, "_sleep", no_sleep)
    answer_with(lambda request: handlers[0](request))  # noqa: PLW0108 - the handler comes later
    yield handlers


def _fire(trigger: Any) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger fired no event")

    return asyncio.run(first())


def _templates_in_turn(*answers: list[dict[str, Any]]) -> tuple[Handler, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        assert str(request.url) == TEMPLATES_URL
        return httpx.Response(200, json=queue.pop(0) if len(queue) > 1 else queue[0])

    return handler, seen


def _roundtrip(trigger: Any) -> Any:
    """What the triggerer does: rebuild the trigger from its serialized form."""
    path, kwargs = trigger.serialize()
    assert path == f"{type(trigger).__module__}.{type(trigger).__qualname__}"
    return type(trigger)(**json.loads(json.dumps(kwargs)))


def _template_trigger(conn_id: str, **overrides: Any) -> TemplateTrigger:
    values: dict[str, Any] = {
        "loadtest_conn_id": conn_id,
        "workspace_id": "ws-1",
        "template_name": None,
        "template_id": None,
        "poke_interval": 60,
        "deadline": time.time() + 600,
    }
    return TemplateTrigger(**{**values, **overrides})


# --- TemplateSensor -------------------------------------------------------------------------------


def test_deferrable_is_off_unless_asked() -> None:
    assert TemplateSensor(task_id="s", workspace_id="ws-1", template_name="a").deferrable is False
    assert TemplateSensor(task_id="s", workspace_id="ws-1", template_name="a", deferrable=True).deferrable


def test_sensor_found_at_once_does_not_defer(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="Smoke", deferrable=True)
    assert sensor.execute({}) == "t-3"  # type: ignore[arg-type]


def test_sensor_defers_then_the_trigger_finds_the_template(
    loadtest_conn: str, requests_mock: rm.Mocker, service: list[Handler]
) -> None:
    requests_mock.get(TEMPLATES_URL, json=[])
    sensor = TemplateSensor(
        task_id="s", workspace_id="ws-1", template_name="nightly SLA", deferrable=True, poke_interval=30
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    trigger = _roundtrip(deferred.value.trigger)
    assert isinstance(trigger, TemplateTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert trigger.poke_interval == 30.0
    assert trigger.deadline > time.time() + sensor.timeout - 60

    handler, seen = _templates_in_turn([], TEMPLATES[2:3], TEMPLATES[:1])
    service.append(handler)
    event = _fire(trigger)
    assert event == {"status": "done", "template_id": "t-1", "template_name": "Nightly SLA"}
    assert len(seen) == 3
    assert all(r.headers["Authorization"] == f"Bearer {API_KEY}" for r in seen)
    assert sensor.execute_complete({}, event) == "t-1"  # type: ignore[arg-type]


def test_trigger_gives_up_at_the_deadline_as_a_sensor_timeout(
    service: list[Handler], loadtest_conn: str
) -> None:
    handler, seen = _templates_in_turn(TEMPLATES[2:3])
    service.append(handler)
    trigger = _template_trigger(loadtest_conn, template_name="Nightly SLA", deadline=time.time() - 1)
    event = _fire(trigger)
    assert event["status"] == "error"
    assert event["error"] == "TemplateWaitTimeout"
    assert "it has: 'Smoke' (id 't-3')" in event["message"]
    assert len(seen) == 1
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="Nightly SLA", deferrable=True)
    with pytest.raises(AirflowException, match="gave up waiting") as timed_out:
        sensor.execute_complete({}, event)  # type: ignore[arg-type]
    assert type(timed_out.value).__name__ == "AirflowSensorTimeout"
    sensor.soft_fail = True
    with pytest.raises(AirflowSkipException):
        sensor.execute_complete({}, event)  # type: ignore[arg-type]


def test_trigger_ambiguous_name_fails_without_retry(service: list[Handler], loadtest_conn: str) -> None:
    handler, _ = _templates_in_turn(TEMPLATES)
    service.append(handler)
    trigger = _template_trigger(loadtest_conn, template_name="dup")
    event = _fire(trigger)
    assert event["error"] == "AmbiguousTemplateError"
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="dup", deferrable=True)
    with pytest.raises(AirflowFailException, match="named 'dup'"):
        sensor.execute_complete({}, event)  # type: ignore[arg-type]


def test_trigger_bad_key_fails_without_retry_and_without_the_key(
    service: list[Handler], loadtest_conn: str
) -> None:
    service.append(lambda r: httpx.Response(401, json={"message": f"bad key {API_KEY}"}))
    trigger = _template_trigger(loadtest_conn, template_id="t-9")
    event = _fire(trigger)
    assert event["never_succeeds"] is True
    assert API_KEY not in json.dumps(event)
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_id="t-9", deferrable=True)
    with pytest.raises(AirflowFailException, match="HTTP 401"):
        sensor.execute_complete({}, event)  # type: ignore[arg-type]


def test_trigger_service_unavailable_fails_with_retries(service: list[Handler], loadtest_conn: str) -> None:
    service.append(lambda r: httpx.Response(503))
    trigger = _template_trigger(loadtest_conn, template_name="a")
    event = _fire(trigger)
    assert event["never_succeeds"] is False
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="a", deferrable=True)
    with pytest.raises(AirflowException) as raised:
        sensor.execute_complete({}, event)  # type: ignore[arg-type]
    assert not isinstance(raised.value, AirflowFailException)


# --- DownloadReportOperator -----------------------------------------------------------------------


RUN = {"report_id": "rep-1", "bench_result_id": "br-1"}


def _print_handler(polls: list[httpx.Response]) -> tuple[Handler, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if str(request.url) == LIST_URL:  # the PDFs before printing, to tell the new one apart
            return httpx.Response(200, json=[])
        if str(request.url) == TASKS_URL:
            return httpx.Response(200, text="task-1", headers={"Content-Type": "text/plain"})
        assert str(request.url) == RESULT_URL, request.url
        return polls.pop(0)

    return handler, seen


def test_report_defers_waits_in_the_trigger_and_downloads_on_the_worker(
    loadtest_conn: str, requests_mock: rm.Mocker, service: list[Handler], tmp_path: Path
) -> None:
    target = tmp_path / "report.pdf"
    operator = DownloadReportOperator(
        task_id="pdf",
        run=RUN,
        destination=str(target),
        export_config={"pageFormat": "A4"},
        check_interval=2,
        deferrable=True,
    )
    with pytest.raises(TaskDeferred) as deferred:
        operator.execute({})  # type: ignore[arg-type]
    assert requests_mock.call_count == 0  # the worker did not start the print task
    trigger = _roundtrip(deferred.value.trigger)
    assert isinstance(trigger, ReportPrintTrigger)

    handler, seen = _print_handler(
        [
            httpx.Response(200, json={"status": "PENDING", "result": None}),
            httpx.Response(200, json={"@type": "PrintReportTaskResult", "filename": "rep-1.pdf"}),
        ]
    )
    service.append(handler)
    event = _fire(trigger)
    assert event == {
        "status": "done",
        "filename": "rep-1.pdf",
        "report_id": "rep-1",
        "bench_result_id": "br-1",
    }
    (start,) = [r for r in seen if r.method == "POST"]
    assert json.loads(start.content)["config"]["pageFormat"] == "A4"
    assert not target.exists()

    _print_service(requests_mock, [])
    result = operator.execute_complete({}, event)  # type: ignore[arg-type]
    assert result == {"path": str(target), "size": len(PDF), "report_id": "rep-1", "bench_result_id": "br-1"}
    assert target.read_bytes() == PDF
    assert [r.url.split("?")[0] for r in requests_mock.request_history] == [FILE_URL]


def test_report_trigger_failure_fails_the_task_and_writes_nothing(
    loadtest_conn: str, service: list[Handler], tmp_path: Path
) -> None:
    handler, _ = _print_handler(
        [httpx.Response(200, json={"@type": "FailedTaskResult", "message": f"Chrome crashed {API_KEY}"})]
    )
    service.append(handler)
    trigger = ReportPrintTrigger(
        loadtest_conn_id=loadtest_conn,
        report_id="rep-1",
        bench_result_id="br-1",
        export_config=None,
        timeout=60,
        poll_interval=5,
    )
    event = _fire(trigger)
    assert event["status"] == "error"
    assert "the print task failed: Chrome crashed" in event["message"]
    assert API_KEY not in event["message"]
    target = tmp_path / "report.pdf"
    operator = DownloadReportOperator(task_id="pdf", run=RUN, destination=str(target), deferrable=True)
    with pytest.raises(AirflowException, match="Printing report rep-1 to PDF failed in the triggerer"):
        operator.execute_complete({}, event)  # type: ignore[arg-type]
    assert not target.exists()


def test_report_bad_export_config_fails_before_deferring(loadtest_conn: str, tmp_path: Path) -> None:
    operator = DownloadReportOperator(
        task_id="pdf",
        run=RUN,
        destination=str(tmp_path / "r.pdf"),
        export_config={"pagefmt": "A4"},
        deferrable=True,
    )
    with pytest.raises(AirflowFailException, match="unknown settings"):  # bad input: never retried
        operator.execute({})  # type: ignore[arg-type]


def test_downloaded_file_that_is_not_a_pdf_is_refused(
    loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    requests_mock.get(FILE_URL, text="<html>login</html>")
    target = tmp_path / "r.pdf"
    operator = DownloadReportOperator(task_id="pdf", run=RUN, destination=str(target), deferrable=True)
    with pytest.raises(AirflowException, match="not a PDF"):
        operator.execute_complete(  # type: ignore[arg-type]
            {}, {"status": "done", "filename": "rep-1.pdf", "report_id": "rep-1", "bench_result_id": "br-1"}
        )
    assert not target.exists()


def test_poke_mode_timeout_ends_with_the_name_and_the_workspaces_templates(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """Airflow's own "Sensor has timed out" named neither the template nor what the workspace has."""
    from airflow_provider_loadtest.decisions.templates import LISTED_TEMPLATES

    many = [{"id": f"t-{i:03}", "name": f"Report {i:03}", "workspaceId": "ws-1"} for i in range(45)]
    requests_mock.get(TEMPLATES_URL, json=many)
    sensor = TemplateSensor(
        task_id="s", workspace_id="ws-1", template_name="Nightly SLA", timeout=0, poke_interval=0
    )
    with pytest.raises(AirflowException) as timed_out:
        sensor.execute({})  # type: ignore[arg-type]
    message = str(timed_out.value)
    assert type(timed_out.value).__name__ == "AirflowSensorTimeout"
    assert message.startswith("gave up waiting for the report template (Sensor has timed out"), message
    assert "has no report template named 'Nightly SLA'; it has: 'Report 000' (id 't-000')" in message
    assert message.endswith(
        f"'Report {LISTED_TEMPLATES - 1:03}' (id 't-{LISTED_TEMPLATES - 1:03}') and 25 more"
    )
    sensor.soft_fail = True
    with pytest.raises(AirflowSkipException, match="named 'Nightly SLA'; it has: 'Report 000'"):
        sensor.execute({})  # type: ignore[arg-type]


def test_deferred_timeout_ends_with_the_name_and_a_bounded_list(
    service: list[Handler], loadtest_conn: str
) -> None:
    many = [{"id": f"t-{i:03}", "name": f"Report {i:03}", "workspaceId": "ws-1"} for i in range(45)]
    handler, _ = _templates_in_turn(many)
    service.append(handler)
    event = _fire(_template_trigger(loadtest_conn, template_name="Nightly SLA", deadline=time.time() - 1))
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="Nightly SLA", deferrable=True)
    with pytest.raises(AirflowException) as timed_out:
        sensor.execute_complete({}, event)  # type: ignore[arg-type]
    message = str(timed_out.value)
    assert type(timed_out.value).__name__ == "AirflowSensorTimeout"
    assert "has no report template named 'Nightly SLA'; it has: 'Report 000' (id 't-000')" in message
    assert message.endswith("'Report 019' (id 't-019') and 25 more"), message
