"""Reading answers at the cost of JSON (issue 13, "Cheaper answers").

* answers are read straight from their bytes (no ``json.loads`` first) and give what the document path
  (``json.loads`` then ``parse``) gives: the same models, the same errors;
* documents that are written back keep the round trip through the bytes path too (int vs float,
  explicit nulls, unknown fields, unknown ``@type``; key order aside: JSON objects are unordered);
* a large answer is read with the garbage collector paused, and its state is always put back;
* validation errors read as a person would read them (no union branch labels).
"""

from __future__ import annotations

import copy
import gc
import json
import logging
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest import models as m
from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError

FIXTURE = Path(__file__).parent / "fixtures" / "report_template_full.json"
SECRET = "k3y-0123456789abcdef0123"
LOGGER = "airflow_provider_loadtest.models"


def decode(request: endpoints.ApiRequest[Any], body: bytes) -> Any:
    return endpoints.decode_answer(request, 200, "application/json", body, SECRET)


def full_template() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(FIXTURE.read_text())
    return document


@pytest.fixture
def no_json_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the answer is decoded with ``json.loads`` (the second pass the issue removes)."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("json.loads was called: the answer was not read straight from its bytes")

    monkeypatch.setattr(endpoints.json, "loads", refuse)


# --- straight from the bytes --------------------------------------------------------------------------

WATCH_ANSWERS: list[tuple[endpoints.ApiRequest[Any], Any]] = [
    (endpoints.get_bench_result("br-1"), {"state": "RUNNING", "id": "br-1", "futureField": [1, None]}),
    (endpoints.get_progress("br-1"), {"value": 42.5}),
    (endpoints.get_global_metrics("br-1"), {"metrics": [{"name": "Hits", "value": 12, "unit": ""}]}),
    (endpoints.get_threshold_alarms("br-1"), [{"id": "a1", "severity": "WARNING", "extra": {"x": 1}}]),
    (endpoints.get_print_task_result("t-1"), {"status": "PENDING"}),
    (endpoints.list_templates("ws-1"), [full_template(), {"id": "t2", "name": "Empty"}]),
    (endpoints.run_scenario("sc-1"), {"id": "r-1", "benchResultIds": ["br-1"], "items": []}),
    (endpoints.get_scenario("sc-1"), {"id": "sc-1", "projectId": "p-1", "x": True}),
    (endpoints.get_design_project("p-1"), {"id": "p-1", "workspaceId": "ws-1"}),
    (endpoints.get_bench_report("r-1"), {"id": "r-1", "benchResultIds": ["br-1"]}),
    (endpoints.member_workspaces(), [{"id": "ws-1", "name": "Main", "userId": "u"}]),
    (endpoints.summary_metric_values("br-1", [{"id": "HITS_TOTAL"}]), [812.5, 3, None]),
]


@pytest.mark.parametrize(("request_", "document"), WATCH_ANSWERS, ids=lambda v: getattr(v, "operation", ""))
def test_answers_are_read_straight_from_the_bytes(
    request_: endpoints.ApiRequest[Any], document: Any, no_json_loads: None
) -> None:
    assert request_.parse_json is not None
    decode(request_, json.dumps(document).encode())


@pytest.mark.parametrize(("request_", "document"), WATCH_ANSWERS, ids=lambda v: getattr(v, "operation", ""))
def test_the_bytes_path_gives_what_the_document_path_gives(
    request_: endpoints.ApiRequest[Any], document: Any
) -> None:
    fast = decode(request_, json.dumps(document).encode())
    slow = request_.parse(copy.deepcopy(document))
    assert fast == slow
    assert _written(fast) == _written(slow)


def _written(value: Any) -> Any:
    """What a value writes back, key order aside (answers only read keep declaration order)."""
    if isinstance(value, list):
        return [_written(item) for item in value]
    return value.to_api() if isinstance(value, m.ApiModel) else value


def test_a_read_only_answer_keeps_unknown_fields_and_values() -> None:
    body = b'{"state": "ARCHIVING", "futureField": {"b": 1, "a": 2.0}, "id": "br-1"}'
    result = decode(endpoints.get_bench_result("br-1"), body)
    assert result.state == "ARCHIVING" and type(result.state) is str
    assert result.is_terminal is False
    assert result.model_extra == {"futureField": {"b": 1, "a": 2.0}}
    # Every field and unknown field is written back; the order is the models' (only read, never sent).
    assert result.to_api() == json.loads(body)
    assert list(result.to_api()) == ["id", "state", "futureField"]


def test_a_read_only_answer_of_the_wrong_type_is_the_package_error() -> None:
    with pytest.raises(LoadTestApiError) as caught:
        decode(endpoints.get_bench_result("br-1"), b'{"id": "br-1", "state": 5}')
    message = str(caught.value)
    assert "expected shape" in message and "state" in message
    with pytest.raises(LoadTestApiError, match="expected shape"):
        decode(endpoints.get_progress("br-1"), b'{"value": true}')
    with pytest.raises(LoadTestApiError, match="expected shape"):
        decode(endpoints.get_threshold_alarms("br-1"), b'{"id": "a1"}')


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>login</html>", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'"just a string"', "expected shape"),
        (b'{"id": "' + SECRET.encode() + b'", "state": 5}', "expected shape"),
    ],
)
def test_errors_are_the_same_through_the_bytes_path(body: bytes, message: str) -> None:
    for request in (endpoints.get_bench_result("br-1"), endpoints.list_templates("ws-1")):
        with pytest.raises(LoadTestApiError, match=message) as caught:
            decode(request, body)
        assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("body", "values"),
    [
        (b"[812.5, 3, null]", [812.5, 3.0, None]),
        (b'[1, true, "2", {"v": 3}, 4.5]', [1.0, None, None, None, 4.5]),
        (b"[]", []),
    ],
)
def test_summary_values_from_bytes(body: bytes, values: list[float | None]) -> None:
    request = endpoints.summary_metric_values("br-1", [{"id": "HITS_TOTAL"}])
    got = decode(request, body)
    assert got == values
    assert [type(v) for v in got] == [type(v) for v in values]


def test_global_metrics_shapes() -> None:
    request = endpoints.get_global_metrics("br-1")
    assert decode(request, b"{}").by_name() == {}
    assert decode(request, b"{}").to_api() == {}
    for body in (b"[]", b"null", b""):  # never "no metrics": the call's error (issue 18)
        with pytest.raises(LoadTestApiError):
            decode(request, body)


@pytest.mark.parametrize(
    ("body", "status", "filename"),
    [
        (b'{"status": "SUCCESS", "filename": "r.pdf"}', m.TaskStatus.SUCCESS, "r.pdf"),
        (b'{"status": "PENDING", "result": null}', m.TaskStatus.PENDING, None),
        (b'{"@type": "PrintReportTaskResult", "filename": "old.pdf"}', m.TaskStatus.SUCCESS, "old.pdf"),
        (b'{"@type": "FailedTaskResult", "message": "boom"}', m.TaskStatus.FAILED, None),
        (b"{}", m.TaskStatus.PENDING, None),
    ],
)
def test_print_task_poll_both_shapes(body: bytes, status: m.TaskStatus, filename: str | None) -> None:
    envelope = decode(endpoints.get_print_task_result("t-1"), body)
    assert envelope.status is status
    assert envelope.resolved_filename == filename


# --- documents written back ---------------------------------------------------------------------------


def test_templates_read_from_bytes_round_trip() -> None:
    doc = full_template()
    reordered = {"name": "second", "id": "t2", "futureField": None, "configs": doc["configs"][:2]}
    body = json.dumps([doc, reordered]).encode()
    templates = decode(endpoints.list_templates("ws-1"), body)
    assert [type(t) for t in templates] == [m.ReportDefinition, m.ReportDefinition]
    assert _canonical([t.to_api() for t in templates]) == _canonical([doc, reordered])
    # A copy, a pickled copy, and a field changed after reading.
    assert _canonical(copy.deepcopy(templates[0]).to_api()) == _canonical(doc)
    assert _canonical(pickle.loads(pickle.dumps(templates[1])).to_api()) == _canonical(reordered)
    templates[1].description = "set later"
    assert templates[1].to_api() == {**reordered, "description": "set later"}


def _canonical(document: Any) -> str:
    """JSON text with its keys sorted: int vs float, nulls and every key show, key order does not."""
    return json.dumps(document, sort_keys=True)


def test_one_bad_template_in_the_bytes_keeps_the_others_exact(caplog: pytest.LogCaptureFixture) -> None:
    doc = full_template()
    bad = {"name": "Odd", "id": "t-bad", "items": [{"@type": "TopReportItem", "size": "ten"}]}
    body = json.dumps([bad, doc]).encode()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        templates = decode(endpoints.list_templates("ws-1"), body)
    assert isinstance(templates[0], m.OpaqueReportTemplate)
    assert _canonical(templates[0].to_api()) == _canonical(bad)  # kept as it came
    assert _canonical(templates[1].to_api()) == _canonical(doc)
    assert "items.0.TopReportItem.size" in caplog.text
    assert "__known__" not in caplog.text and "__unknown__" not in caplog.text
    assert "is a known" not in caplog.text  # the unknown branch's refusal is noise, left out


def test_unknown_types_are_reported_once_when_the_list_is_read_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = {"id": "t-odd", "items": [{"@type": "HeatMapReportItem"}]}
    bad = {"id": "t-bad", "created": "yesterday"}
    for answer, opaque in (([odd], 0), ([odd, bad], 1)):  # read in one pass; read again, one by one
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            templates = decode(endpoints.list_templates("ws-1"), json.dumps(answer).encode())
        assert sum(isinstance(t, m.OpaqueReportTemplate) for t in templates) == opaque
        assert caplog.text.count("HeatMapReportItem") == 1


def test_a_broken_known_item_is_refused_with_a_readable_message() -> None:
    items = [{"@type": "TextReportItem"}, {"@type": "TopReportItem", "size": "x"}]
    body = json.dumps({"id": "r-1", "items": items})
    with pytest.raises(LoadTestApiError) as caught:
        decode(endpoints.get_bench_report("r-1"), body.encode())
    message = str(caught.value)
    assert "items.1.TopReportItem.size" in message
    assert "__known__" not in message and "__unknown__" not in message and "tagged-union" not in message


def test_unknown_type_read_from_bytes_is_kept_opaque(caplog: pytest.LogCaptureFixture) -> None:
    item = {"cells": 3, "@type": "HeatMapReportItem", "id": "b"}
    body = json.dumps({"items": [item], "id": "r-1"}).encode()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        report = decode(endpoints.get_bench_report("r-1"), body)
    assert isinstance((report.items or [])[0], m.UnknownReportItem)
    assert "HeatMapReportItem" in caplog.text
    assert report.to_api() == json.loads(body)


def test_an_unknown_model_refuses_a_known_type() -> None:
    with pytest.raises(ValueError, match="known report item @type"):
        m.UnknownReportItem.from_api({"@type": "TextReportItem"})
    assert m.UnknownReportItem.known_types == {tag for tag in m.UnknownReportItem.known_types if tag}
    assert "TextReportItem" in m.UnknownReportItem.known_types
    assert "ApdexReportConfig" not in m.UnknownReportItem.known_types  # another family's type is unknown here


def test_snake_case_type_key_still_picks_the_variant() -> None:
    parsed = m.ReportItemAdapter.validate_json(b'{"kind": "TextReportItem", "description": "d"}')
    assert isinstance(parsed, m.TextReportItem)
    assert parsed.to_api() == {"@type": "TextReportItem", "description": "d"}


def test_models_read_the_same_document_twice_are_equal() -> None:
    body = json.dumps(full_template()).encode()
    assert m.ReportDefinition.model_validate_json(body) == m.ReportDefinition.model_validate_json(body)
    assert m.ReportDefinition.model_validate_json(body) == m.ReportDefinition.from_api(full_template())


def test_python_built_models_write_their_type() -> None:
    metric = m.Metric(id="HITS_TOTAL", kind="HitMetric")
    built = m.StatisticTableReportItem(size=3, name="n", metrics=[metric])
    assert _canonical(built.to_api()) == _canonical(
        {
            "@type": "StatisticTableReportItem",
            "name": "n",
            "metrics": [{"@type": "HitMetric", "id": "HITS_TOTAL"}],
            "size": 3,
        }
    )


def test_reading_runs_no_python_per_object() -> None:
    """The cost the issue names: no wrap validator or serializer, no private attribute, no post-init."""
    for cls in (m.ApiModel, m.ReportDefinition, m.TopReportItem, m.Metric, m.BenchResult):
        assert not cls.__private_attributes__, cls
        assert cls.__pydantic_post_init__ is None, cls
        decorators = cls.__pydantic_decorators__
        assert not decorators.model_validators and not decorators.model_serializers, cls


# --- the garbage collector ----------------------------------------------------------------------------


@pytest.fixture
def collections() -> Iterator[list[str]]:
    seen: list[str] = []

    def record(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(phase)

    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)


def _large_template_list(count: int = 60) -> bytes:
    body = json.dumps([full_template()] * count).encode()
    assert len(body) >= endpoints.COLLECTOR_PAUSE_MIN_BYTES
    return body


def test_a_large_answer_is_read_with_the_collector_paused(collections: list[str]) -> None:
    body = _large_template_list()
    request = endpoints.list_templates("ws-1")
    seen_during: list[int] = []
    parse_json = request.parse_json
    assert parse_json is not None

    def spy(data: bytes) -> Any:
        before = len(collections)
        result = parse_json(data)
        seen_during.append(len(collections) - before)
        seen_during.append(int(gc.isenabled()))
        return result

    from dataclasses import replace

    gc.collect()
    templates = decode(replace(request, parse_json=spy), body)
    assert len(templates) == 60
    assert seen_during == [0, 0]  # no collection while reading, and the collector was off
    assert gc.isenabled()


def test_the_collector_state_is_always_put_back() -> None:
    body = _large_template_list()
    request = endpoints.list_templates("ws-1")
    assert gc.isenabled()
    with pytest.raises(LoadTestApiError):
        decode(request, body[:-1])  # cut short: not JSON
    assert gc.isenabled()
    gc.disable()
    try:
        decode(request, body)
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()


def test_a_small_answer_leaves_the_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(endpoints.gc, "disable", lambda: calls.append("disable"))
    decode(endpoints.get_bench_result("br-1"), b'{"state": "RUNNING"}')
    assert calls == []


# --- choosing a template: ids and names only ----------------------------------------------------------


BAD_TEMPLATE = {"id": "t-bad", "name": "Odd", "items": [{"@type": "TopReportItem", "size": "ten"}]}
REFS_BODY = json.dumps([full_template(), BAD_TEMPLATE, {"name": "No id"}]).encode()


def test_template_refs_read_only_ids_and_names(no_json_loads: None) -> None:
    refs = decode(endpoints.list_template_refs("ws-1"), REFS_BODY)
    assert [(r.id, r.name) for r in refs] == [("tpl-1", "Full template"), ("t-bad", "Odd"), (None, "No id")]
    assert all(type(r) is m.TemplateRef and not r.model_extra for r in refs)  # nothing else built
    request = endpoints.list_template_refs("ws-1")
    assert (request.method, request.path) == ("GET", endpoints.list_templates("ws-1").path)


def test_a_template_with_an_odd_id_never_stops_the_choice(caplog: pytest.LogCaptureFixture) -> None:
    body = json.dumps([{"id": 7, "name": "Seven"}, {"id": "t-1", "name": ["x"]}, {"id": "t-2", "name": "Ok"}])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        refs = decode(endpoints.list_template_refs("ws-1"), body.encode())
    assert [(r.id, r.name) for r in refs] == [(None, "Seven"), ("t-1", None), ("t-2", "Ok")]
    assert "#0" in caplog.text and "#1" in caplog.text
    from airflow_provider_loadtest.decisions.templates import choose_template

    found = choose_template(refs, workspace_id="ws-1", name="ok")
    assert found is not None and found.id == "t-2"


@pytest.mark.parametrize(
    ("body", "message"), [(b'{"id": "t"}', "expected a list"), (b"[1]", "not an object")]
)
def test_template_refs_need_a_list_of_objects(body: bytes, message: str) -> None:
    with pytest.raises(LoadTestApiError, match=message):
        decode(endpoints.list_template_refs("ws-1"), body)


def test_documents_of_one_kind_in_any_key_order_are_read_alike() -> None:
    first = {"@type": "TimeRangeReportConfig", "from": 1, "to": 2}
    second = {"to": 2, "from": 1, "@type": "TimeRangeReportConfig"}
    third = {"from": 1, "@type": "TimeRangeReportConfig", "x": None, "to": 2}
    document = {"id": "t", "configs": [first, second, third, first]}
    template = m.ReportDefinition.model_validate_json(json.dumps(document).encode())
    assert template.to_api() == document
    assert m.TimeRangeReportConfig(to=2, from_=1).to_api() == first


@pytest.fixture
def full_templates_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if a workspace's templates are read as full models (choosing one needs ids and names)."""

    def refuse(*_args: Any) -> Any:
        raise AssertionError("full templates were read to choose one")

    monkeypatch.setattr(endpoints, "_template_list_json", refuse)
    monkeypatch.setattr(endpoints, "parse_template_list", refuse)


def test_the_sensor_and_the_operator_choose_from_ids_and_names(
    loadtest_conn: str, requests_mock: Any, full_templates_refused: None
) -> None:
    from unittest import mock

    from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
    from airflow_provider_loadtest.sensors.template import TemplateSensor
    from tests.unit.test_hook import BENCH_REPORT, RUN_URL, TEMPLATES, TEMPLATES_URL

    requests_mock.get(TEMPLATES_URL, json=[BAD_TEMPLATE, *TEMPLATES])
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    sensor = TemplateSensor(task_id="s", workspace_id="ws-1", template_name="smoke")
    assert sensor.poke({}).xcom_value == "t-3"  # type: ignore[arg-type]
    operator = RunScenarioOperator(
        task_id="t", scenario_id="sc-1", template_name="Odd", workspace_id="ws-1", wait_for_completion=False
    )
    assert operator.execute({"ti": mock.MagicMock(name="ti")})["template_id"] == "t-bad"  # type: ignore[arg-type]


def test_the_deferred_wait_chooses_from_ids_and_names() -> None:
    from airflow_provider_loadtest.decisions.template_wait import wait_for_template

    wait = wait_for_template("ws-1", name="Odd", interval_s=1.0, deadline=2e9)
    request = next(wait)
    assert request.parse_json is not None
    refs = decode(request, json.dumps([BAD_TEMPLATE]).encode())
    assert all(type(r) is m.TemplateRef for r in refs)
    wait.send(refs)  # answered: it logs what it found
    with pytest.raises(StopIteration) as done:
        next(wait)
    assert done.value.value.id == "t-bad"
