"""Adversarial review of the models read straight from bytes (issue 13): each test failed before its fix."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from airflow_provider_loadtest import models as m
from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError

FIXTURES = Path(__file__).parent / "fixtures"
KEY = "k3y-0123456789abcdef0123456789abcdef"


def _template() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / "report_template_full.json").read_text())
    return document


@pytest.mark.parametrize("value", ["true", "yes", 1, 0])
def test_a_boolean_field_never_rewrites_a_non_boolean(value: object) -> None:
    # A lax ``bool`` read "yes" or 1 as True and wrote back ``true``: not the document that came.
    config = {"@type": "GraphReportConfig", "displayColorDots": value, "maxLines": 3}
    for read in (
        lambda: m.BenchReportConfigAdapter.validate_python(config),
        lambda: m.BenchReportConfigAdapter.validate_json(json.dumps(config)),
    ):
        with pytest.raises(ValidationError):
            read()


def test_a_template_with_a_non_boolean_flag_is_kept_verbatim() -> None:
    template = {
        "id": "t1",
        "name": "n",
        "configs": [{"@type": "GraphReportConfig", "displayColorDots": "true"}],
    }
    body = json.dumps([template]).encode()
    (read,) = endpoints.decode_answer(endpoints.list_templates("ws"), 200, "application/json", body, KEY)
    assert json.dumps(read.to_api(), sort_keys=True) == json.dumps(template, sort_keys=True)


def test_an_opaque_template_keeps_underscore_fields() -> None:
    # Spring HATEOAS writes ``_links``; setattr put it beside the model, out of the write-back.
    template = {"id": "t1", "_links": {"self": {"href": "x"}}, "created": "yesterday", "name": "n"}
    (read,) = m.parse_template_list([template])
    assert isinstance(read, m.OpaqueReportTemplate)
    assert json.dumps(read.to_api(), sort_keys=True) == json.dumps(template, sort_keys=True)


@pytest.mark.parametrize(
    "request_",
    [endpoints.list_templates("ws"), endpoints.list_template_refs("ws"), endpoints.list_run_files("r")],
    ids=["templates", "template-refs", "run-files"],
)
def test_no_part_of_the_key_in_an_error_about_a_list_entry(request_: endpoints.ApiRequest[Any]) -> None:
    # The entry was cut at 80 characters before the key was blanked out: the key's start was shown.
    body = json.dumps([{"note": "x" * 50 + KEY}] if "files" in request_.operation else ["x" * 60 + KEY])
    with pytest.raises(LoadTestApiError) as caught:
        endpoints.decode_answer(request_, 200, "application/json", body.encode(), KEY)
    assert KEY[:8] not in str(caught.value)


def test_one_template_kept_does_not_keep_the_whole_answer_once_written_back() -> None:
    # Writing one template back parsed the whole list answer and kept it, for as long as that one lived.
    template = _template()
    body = json.dumps([{**template, "id": f"t{index}"} for index in range(100)]).encode()
    templates = endpoints.decode_answer(endpoints.list_templates("ws"), 200, "application/json", body, KEY)
    size = len(body)
    del body
    kept = templates[0]
    del templates
    gc.collect()
    tracemalloc.start()
    try:
        assert kept.to_api()["id"] == "t0"
        gc.collect()
        retained, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert retained < size / 4  # one template's worth, not the 100 of the answer parsed


def test_a_pickled_or_deep_copied_template_carries_only_itself() -> None:
    # Each template remembered the whole list answer's bytes: pickling one pickled them all.
    template = _template()
    body = json.dumps([{**template, "id": f"t{index}"} for index in range(100)]).encode()
    first = endpoints.decode_answer(endpoints.list_templates("ws"), 200, "application/json", body, KEY)[0]
    alone = len(pickle.dumps(m.ReportDefinition.model_validate_json(json.dumps({**template, "id": "t0"}))))
    assert len(pickle.dumps(first)) < 2 * alone
    for copied in (pickle.loads(pickle.dumps(first)), copy.deepcopy(first), first.model_copy(deep=True)):
        assert copied.to_api() == {**template, "id": "t0"}


@pytest.mark.parametrize("with_a_bad_template", [False, True], ids=["one-pass", "template-by-template"])
def test_a_new_item_type_in_every_template_is_said_once(
    with_a_bad_template: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Each of 50 templates holding the same new item type logged the same line: 50 per read.
    answer: list[dict[str, Any]] = [
        {"id": f"t{index}", "items": [{"@type": "HeatMapReportItem"}]} for index in range(50)
    ]
    if with_a_bad_template:
        answer.append({"id": "t-bad", "created": "yesterday"})
    with caplog.at_level("WARNING", logger="airflow_provider_loadtest.models"):
        endpoints.decode_answer(
            endpoints.list_templates("ws"), 200, "application/json", json.dumps(answer).encode(), KEY
        )
    assert caplog.text.count("HeatMapReportItem") == 1
