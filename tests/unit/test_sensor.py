from __future__ import annotations

import pytest
import requests_mock as rm

from airflow_provider_loadtest.api.errors import AmbiguousTemplateError
from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.sensors.template import TemplateSensor
from tests.unit.test_hook import TEMPLATES, TEMPLATES_URL


def test_poke_false_until_the_template_appears(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, [{"json": []}, {"json": TEMPLATES[2:3]}, {"json": TEMPLATES}])
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="Nightly SLA")
    assert sensor.poke({}).is_done is False  # type: ignore[arg-type]
    assert sensor.poke({}).is_done is False  # type: ignore[arg-type]
    found = sensor.poke({})  # type: ignore[arg-type]
    assert found.is_done is True
    assert found.xcom_value == "t-1"


def test_poke_by_id(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    assert TemplateSensor(task_id="s", workspace_id="ws-1", template_id="t-3").poke({}).xcom_value == "t-3"  # type: ignore[arg-type]
    assert TemplateSensor(task_id="s", workspace_id="ws-1", template_id="t-0").poke({}).is_done is False  # type: ignore[arg-type]


def test_poke_case_insensitive_and_ambiguous(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    requests_mock.get(TEMPLATES_URL, json=TEMPLATES)
    assert (
        TemplateSensor(task_id="s", workspace_id="ws-1", template_name="SMOKE").poke({}).xcom_value == "t-3"
    )  # type: ignore[arg-type]
    with pytest.raises(AirflowFailException) as caught:  # fails at once: no retry can choose for you
        TemplateSensor(task_id="s", workspace_id="ws-1", template_name="dup").poke({})  # type: ignore[arg-type]
    assert isinstance(caught.value.__cause__, AmbiguousTemplateError)


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        TemplateSensor(task_id="s", workspace_id="ws-1")
    with pytest.raises(ValueError, match="exactly one"):
        TemplateSensor(task_id="s", workspace_id="ws-1", template_name="a", template_id="b")
    with pytest.raises(ValueError, match="workspace_id"):
        TemplateSensor(task_id="s", workspace_id="a/b", template_name="a")


def test_rendered_bad_workspace_fails_before_http(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    sensor = TemplateSensor(task_id="s", workspace_id="{{ w }}", template_name="a")
    sensor.workspace_id = "../x"
    with pytest.raises(AirflowFailException, match="workspace_id"):  # bad input: never retried
        sensor.poke({})  # type: ignore[arg-type]
    assert requests_mock.call_count == 0
