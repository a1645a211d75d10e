"""Property-based tests (hypothesis): ids, documents and answers the package may meet, generated.

* any id ``validate_path_id`` accepts yields a URL with exactly the endpoint's path segments;
* any document a model accepts round-trips unchanged (``from_api`` then ``to_api``);
* any answer body gives a model or the package's ``LoadTestApiError``, never another exception.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from airflow_provider_loadtest import models as m
from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.validation import validate_path_id
from tests.unit.test_models import FAMILIES

BASE_URL = "https://api.example.test/base"
SECRET = "k3y-0123456789abcdef0123"
FIXTURE = Path(__file__).parent.parent / "unit" / "fixtures" / "report_template_full.json"

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- ids and URLs -------------------------------------------------------------------------------------

#: Endpoint builders taking one id, and the path they must give, with ``{}`` for the id's one segment.
ONE_ID: list[tuple[Callable[[str], endpoints.ApiRequest[Any]], str]] = [
    (endpoints.run_scenario, "/runtime/scenarios/run/{}"),
    (endpoints.get_bench_result, "/runtime/bench-results/{}"),
    (endpoints.get_progress, "/runtime/bench-results/progress/{}"),
    (endpoints.stop_run, "/runtime/bench-results/stop/{}"),
    (endpoints.list_templates, "/analysis/bench-report-templates/by-workspace/{}"),
    (endpoints.get_global_metrics, "/analysis/metrics/global/{}"),
    (endpoints.get_junit_report, "/analysis/junit-reports/{}"),
    (endpoints.list_run_files, "/analysis/logs/list/{}"),
    (endpoints.get_print_task_result, "/tasks/{}/result"),
]

#: Ids from anywhere in Unicode, with the characters that break URLs made likely.
IDS = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("/\\?#%.;=&+ :@!$'()*,[]~\t\n\r\x00\x7f\x85\u200b\u202e\ufeff")),
        st.characters(),
    ),
    min_size=1,
    max_size=40,
)


def _accepted(value: str) -> bool:
    try:
        validate_path_id("id", value)
    except ValueError:
        return False
    return True


@PROPERTY_SETTINGS
@given(value=IDS)
@example(value="..")
@example(value="a%2F..%2Fadmin")
@example(value="run;x=1")
@example(value="\u202eevil")
def test_an_accepted_id_is_exactly_one_path_segment(value: str) -> None:
    if not _accepted(value):
        return
    for build, template in ONE_ID:
        url = BASE_URL + build(value).path
        parts = urlsplit(url)
        assert parts.query == "" and parts.fragment == "", (template, value, url)
        expected = (urlsplit(BASE_URL).path + template).split("/")
        got = parts.path.split("/")
        assert len(got) == len(expected), (template, value, url)
        for want, seen in zip(expected, got, strict=True):
            if want == "{}":
                assert unquote(seen) == value
                assert seen not in {".", ".."} and "/" not in seen
            else:
                assert seen == want, (template, value, url)


@PROPERTY_SETTINGS
@given(value=IDS)
def test_an_id_is_accepted_only_without_controls_or_format_characters(value: str) -> None:
    """The README says control characters are refused: C0, C1 and Unicode format characters alike."""
    import unicodedata

    if _accepted(value):
        assert not any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} for c in value), repr(value)


# --- documents round-trip -----------------------------------------------------------------------------

SAMPLES: list[tuple[Any, Any]] = [
    (adapter, sample) for adapter, samples, _ in FAMILIES.values() for _, _, sample in samples
]
TOP_LEVEL: list[tuple[Any, Any]] = [
    (m.ReportDefinition, json.loads(FIXTURE.read_text())),
    (m.BenchResult, {"id": "br-1", "state": "RUNNING", "scenarioId": "s", "x-extra": [1, None]}),
    (m.BenchReport, {"id": "r-1", "projectId": "p", "benchResultIds": ["br-1"], "name": "n"}),
    (m.Progress, {"value": 0.42}),
    (m.GlobalMetrics, {"metrics": [{"name": "Hits", "value": 9, "unit": ""}]}),
]

JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Any, Any]:
    """A known-good document with a few random edits: a value replaced, a key added or removed."""
    parse, document = draw(st.sampled_from(SAMPLES + TOP_LEVEL))
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        path = draw(st.sampled_from(_paths(document)))
        if not path:
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "add", "remove"]))
        if action == "replace":
            parent[path[-1]] = draw(JSON_VALUES)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(JSON_VALUES)
        elif action == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
    return parse, document


def _parse(parse: Any, document: Any) -> Any:
    if hasattr(parse, "from_api"):
        return parse.from_api(document)
    return parse.validate_python(document)


@PROPERTY_SETTINGS
@given(case=mutated())
def test_an_accepted_document_round_trips_unchanged(case: tuple[Any, Any]) -> None:
    parse, document = case
    try:
        parsed = _parse(parse, document)
    except ValueError:  # pydantic's ValidationError: the model refused it, which is allowed
        return
    assert json.dumps(parsed.to_api(), sort_keys=True) == json.dumps(document, sort_keys=True)  # order aside
    # Read straight from the bytes (how answers are read), the same document comes back.
    body = json.dumps(document).encode()
    from_bytes = parse.model_validate_json(body) if hasattr(parse, "from_api") else parse.validate_json(body)
    assert json.dumps(from_bytes.to_api(), sort_keys=True) == json.dumps(document, sort_keys=True)


# --- answers ------------------------------------------------------------------------------------------

JSON_REQUESTS: list[endpoints.ApiRequest[Any]] = [
    endpoints.run_scenario("sc-1"),
    endpoints.get_bench_result("br-1"),
    endpoints.get_progress("br-1"),
    endpoints.stop_run("br-1"),
    endpoints.list_templates("ws-1"),
    endpoints.get_global_metrics("br-1"),
    endpoints.get_threshold_alarms("br-1"),
    endpoints.list_run_files("br-1"),
    endpoints.get_print_task_result("t-1"),
    endpoints.start_print_task("rep-1"),
    endpoints.member_workspaces(),
]

BODIES = st.one_of(
    st.binary(max_size=200),
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    st.sampled_from([doc for _, doc in TOP_LEVEL]).map(lambda value: json.dumps(value).encode()),
)


@PROPERTY_SETTINGS
@given(
    request=st.sampled_from(JSON_REQUESTS),
    status=st.sampled_from([200, 201, 204, 400, 404, 500, 503]),
    body=BODIES,
    nesting=st.sampled_from([0, 0, 0, 10, 500, 5_000, 100_000]),
)
@example(request=JSON_REQUESTS[1], status=200, body=b"1", nesting=100_000)
def test_any_answer_gives_a_model_or_the_package_error(
    request: endpoints.ApiRequest[Any], status: int, body: bytes, nesting: int
) -> None:
    """``nesting`` wraps the body in that many arrays (deeply nested JSON from a hostile server)."""
    body = b"[" * nesting + body + b"]" * nesting
    try:
        endpoints.decode_answer(request, status, "application/json", body, SECRET)
    except LoadTestApiError as exc:
        assert SECRET not in str(exc)
    except Exception as exc:
        pytest.fail(f"{request.operation}: {type(exc).__name__} escaped for a {len(body)}-byte body")
