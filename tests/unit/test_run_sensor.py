"""LoadTestRunSensor: waits for a run it did not start, judges it like the operator, stops it if asked."""

from __future__ import annotations

from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowFailException, TaskDeferred
from airflow_provider_loadtest.links.report import REPORT_URL_XCOM_KEY
from airflow_provider_loadtest.sensors.run import LoadTestRunSensor
from tests.conftest import BASE_URL
from tests.unit.test_run_lifecycle import (
    RUN_URL,
    STATE_URL,
    STOP_URL,
    _context,
    _posts,
    _pushed,
    _saved_record,
    _service,
)


def _sensor(**kwargs: Any) -> LoadTestRunSensor:
    kwargs.setdefault("bench_result_id", "br-1")
    kwargs.setdefault("poke_interval", 0.01)
    kwargs.setdefault("deferrable", False)
    return LoadTestRunSensor(task_id="wait", **kwargs)


def _states(requests_mock: rm.Mocker, states: list[str], **kwargs: Any) -> None:
    _service(requests_mock, states, **kwargs)
    requests_mock.get(
        STATE_URL,
        [
            {"json": {"id": "br-1", "state": s, "scenarioId": "sc-9", "resultProjectId": "proj-1"}}
            for s in states
        ],
    )


def test_waits_for_a_run_by_id_and_judges_it(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _states(requests_mock, ["RUNNING", "RUNNING", "RUNNING", "FINISHED"])
    result = _sensor(workspace_id="ws-1", report_id="rep-1").execute(_context())  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert result["scenario_id"] == "sc-9"
    assert result["report_url"] == f"{BASE_URL}/ui/workspace/ws-1/project/proj-1/analysis/report/rep-1"
    assert (_posts(requests_mock, RUN_URL), _posts(requests_mock, STOP_URL)) == (0, 0)


def test_takes_the_operators_dict_and_shows_its_report_link(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _states(requests_mock, ["RUNNING", "FINISHED"])
    context = _context()
    result = _sensor(bench_result_id=_saved_record()).execute(context)  # type: ignore[arg-type]
    assert result["state"] == "FINISHED"
    assert _pushed(context)[REPORT_URL_XCOM_KEY] == _saved_record()["report_url"]


def test_fails_on_a_broken_alarm_gate(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _states(requests_mock, ["FINISHED"], alarms=[{"id": "a", "severity": "CRITICAL", "name": "p95"}])
    with pytest.raises(AirflowFailException, match="broke the quality gate"):
        _sensor(fail_on_alarm_severity="CRITICAL").execute(_context())  # type: ignore[arg-type]


def test_a_run_that_failed_in_the_service_fails_the_task_for_good(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _states(requests_mock, ["ERROR"])
    with pytest.raises(AirflowFailException, match="failed in the service"):
        _sensor().execute(_context())  # type: ignore[arg-type]


@pytest.mark.parametrize(("stop_on_timeout", "stops"), [(False, 0), (True, 1)])
def test_its_timeout_leaves_the_run_going_unless_asked(
    loadtest_conn: str, requests_mock: rm.Mocker, stop_on_timeout: bool, stops: int
) -> None:
    from airflow_provider_loadtest.compat import AirflowSensorTimeout

    _states(requests_mock, ["RUNNING"] * 200)
    sensor = _sensor(timeout=0.2, stop_on_timeout=stop_on_timeout)
    with pytest.raises(AirflowSensorTimeout):
        sensor.execute(_context())  # type: ignore[arg-type]
    assert _posts(requests_mock, STOP_URL) == stops


def test_a_person_ending_the_sensor_never_stops_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_loadtest.lifecycle import support as run_lifecycle  # where on_kill asks

    monkeypatch.setattr(run_lifecycle, "task_instance_state", lambda ti: (True, "failed"))
    _states(requests_mock, ["RUNNING"])
    sensor = _sensor()
    context = _context()
    sensor._ti = context["ti"]
    sensor._adopt(context, sensor._resolve_run(context))
    sensor.on_kill()
    assert _posts(requests_mock, STOP_URL) == 0


def test_deferrable_waits_in_the_triggerer_without_a_stop_on_timeout(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _states(requests_mock, ["RUNNING", "RUNNING"])
    with pytest.raises(TaskDeferred) as caught:
        _sensor(deferrable=True, timeout=600).execute(_context())  # type: ignore[arg-type]
    trigger = caught.value.trigger
    assert trigger.options["stop_on_timeout"] is False
    assert trigger.options["deadline"] is not None
    outcome = {
        "bench_result_id": "br-1",
        "state": "FINISHED",
        "reason": "finished",
        "succeeded": True,
        "message": "Run br-1 FINISHED",
        "duration_s": 5.0,
    }
    done = _sensor(deferrable=True).execute_complete(
        _context(), {"status": "done", "run": trigger.run_record, "outcome": outcome}
    )  # type: ignore[arg-type]
    assert done["state"] == "FINISHED"


def test_an_unknown_run_fails_at_once(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(STATE_URL, status_code=404, text="no such result")
    with pytest.raises(AirflowFailException, match="not retried"):
        _sensor().execute(_context())  # type: ignore[arg-type]


def test_bad_input_fails_at_parse_time() -> None:
    with pytest.raises(ValueError, match="bench_result_id"):
        _sensor(bench_result_id="br/../1")
    with pytest.raises(ValueError, match="bench_result_id must be"):
        _sensor(bench_result_id=42)
    with pytest.raises(ValueError, match="stop_on_alarm needs"):
        _sensor(stop_on_alarm=True)


def test_a_pdf_needs_the_report(loadtest_conn: str, requests_mock: rm.Mocker, tmp_path: Any) -> None:
    _states(requests_mock, ["RUNNING"])
    with pytest.raises(AirflowFailException, match="report_pdf_destination needs the run's report"):
        _sensor(report_pdf_destination=str(tmp_path / "r.pdf")).execute(_context())  # type: ignore[arg-type]
