"""The "Load tests" view at any size and any number (issue 28): a page is linear in its rows and bounded
(rows per night, series drawn, columns, text, bytes) and says what it left out; every finite number
renders or shows as out of range, never failing the tab; a DAG Airflow does not know is 404.

Each test here failed on the view before the bounds: a night of 20,000 distinct rows made a 60 MB page
in 12 s (a scan of the night's rows per series and night), and ``1.7e308``, ``5e-324``, a 401-digit
integer or a budget ``<= 1.7e308`` raised in ``nice_step``, ``y_domain``, ``round`` or ``_number``.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_loadtest.plugins import bounds
from airflow_provider_loadtest.plugins import charts as ch
from airflow_provider_loadtest.plugins import history as view_history
from airflow_provider_loadtest.plugins.app import history_json, render_html
from airflow_provider_loadtest.plugins.history import Night, Verdict, build
from airflow_provider_loadtest.plugins.page import task_view
from airflow_provider_loadtest.plugins.rows import RunResult, gate_rows

P95 = "RESPONSE_TIME_PERCENTILE_95"
START = datetime(2026, 2, 28, 2, tzinfo=UTC)


def row(value: Any = 468.0, **changes: Any) -> dict[str, Any]:
    base = {"metric": P95, "value": value, "passed": True, "budget": "<= 1000", "baseline": 468.0}
    return {**base, "change_pct": 0.0, "max_regression_pct": 10.0, "status": "pass", **changes}


def night(day: int, rows: list[Any], *, state: str = "success") -> Night:
    value = {"bench_result_id": f"br-{day}", "report_url": "https://saas.example/r", "gate": rows}
    at = START + timedelta(days=day)
    return Night(f"scheduled__{day}", -1, at, at, state, RunResult.from_xcom(value))


def page(nights: list[Night], **context: Any) -> str:
    view = task_view(build("dag", "task", nights), "/airflow")
    return render_html("/airflow/loadtest/static", 200, title="t", subject="dag", single=True, tasks=[view])


# --- size: linear, bounded, and saying what it left out ---------------------------------------------


def crowded(count: int, *, failing_every: int = 0) -> list[dict[str, Any]]:
    """``count`` distinct rows in one night, as a DAG's author may write them."""
    return [
        row(100.0 + i, metric=f"METRIC_{i % 97}", transaction=f"label {i}")
        | (
            {"passed": False, "status": "budget", "reason": "budget <= 1000"}
            if failing_every and i % failing_every == 0
            else {}
        )
        for i in range(count)
    ]


@pytest.mark.parametrize("count", [20_000, 40_000])
def test_a_night_of_many_distinct_rows_makes_a_bounded_page_that_says_what_it_left_out(count: int) -> None:
    html = page([night(1, [row(), *crowded(count)])])
    assert len(html.encode()) < bounds.PAGE_BYTES / 4  # before: 60 MB for 20,000 rows
    assert html.count('<figure class="chart"') == bounds.SERIES_DRAWN
    said = re.findall(r'<div class="omitted".*?</div>', html, re.S)[0]
    read = bounds.ROWS_PER_NIGHT  # the series of the rows read
    assert f"{read - bounds.SERIES_DRAWN:,} of {read:,} series are not drawn" in said
    assert "rows past them are not read" in said and f"{count + 1 - bounds.ROWS_PER_NIGHT:,} rows" in said
    links = re.findall(r'<li><a href="([^"]+)">label (\d+)</a></li>', said)
    assert len(links) == bounds.NAMES_LISTED
    assert links[0][0] == "/airflow/loadtest/dags/dag/tasks/task?transaction=label+" + links[0][1]


def test_building_a_page_makes_rows_only_for_what_it_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear, and bounded: the same work for 2,000 as for 40,000 distinct rows in a night (before, a
    scan of the night's rows per series: 20,000 rows made 400 million comparisons)."""
    from airflow_provider_loadtest.plugins import rows as view_rows

    made: list[int] = []
    real = view_rows._row

    def counted(entry: Any) -> Any:
        made.append(1)
        return real(entry)

    monkeypatch.setattr(view_rows, "_row", counted)
    sizes = []
    for count in (2_000, 40_000):
        made.clear()
        page([night(1, [row(), *crowded(count)]), night(2, [row()])])
        sizes.append(len(made))
    assert sizes[0] == sizes[1] <= 2 * bounds.SERIES_DRAWN + bounds.COLUMNS


def test_a_failure_past_the_rows_read_still_fails_the_night() -> None:
    rows = [row(), *crowded(bounds.ROWS_PER_NIGHT), row(2000.0, passed=False, status="budget")]
    late = night(1, rows, state="failed")
    assert late.verdict is Verdict.FAIL
    assert late.result.left_out == 2 and late.result.left_out_failing == 1
    html = page([late])
    assert "and 1 more failing row(s)" in html
    data = history_json(build("dag", "task", [late]))
    assert len(data["nights"][0]["rows"]) == bounds.ROWS_PER_NIGHT and data["nights"][0]["rows_left_out"] == 2


def test_a_night_listing_many_failures_names_a_few_and_counts_the_rest() -> None:
    html = page([night(1, crowded(500, failing_every=2), state="failed")])
    cell = re.findall(r'<td class="failing">(.*?)</td>', html, re.S)[0]
    assert cell.count("<div>") == bounds.FAILING_LISTED + 1
    assert f"and {250 - bounds.FAILING_LISTED} more failing row(s)" in cell


def test_long_text_is_cut_and_many_metrics_are_not_all_columns() -> None:
    huge = "x" * 1_000_000
    rows = [row(metric=huge, transaction=huge, reason=huge, note=huge, status="suspected")]
    rows += [row(1.0, metric=f"METRIC_{i}") for i in range(bounds.COLUMNS + 5)]
    html = page([night(1, rows)])
    assert len(html) < 400_000 and "x" * (bounds.TEXT_CHARS + 1) not in html
    assert len(re.findall(r'<th scope="col" class="num"', html)) == bounds.COLUMNS
    assert f"The table shows {bounds.COLUMNS} of the {bounds.COLUMNS + 5} metrics" in html


def test_the_page_stops_at_its_byte_budget_and_says_so() -> None:
    nights = [night(day, [row(400.0 + day), *crowded(30)]) for day in range(1, 200)]
    view = task_view(build("dag", "task", nights), "")
    budget = bounds.PageBudget(limit=150_000)
    from airflow_provider_loadtest.plugins.app import render_parts

    html = "".join(render_parts("/s", 200, budget, title="t", subject="d", single=True, tasks=[view]))
    assert budget.cut and 150_000 <= len(html) < 150_000 + 120_000
    assert "This page reached its size limit" in html and html.rstrip().endswith("</html>")
    assert html.count("<tr data-run-id") < 199


def test_a_transaction_asked_for_gets_its_own_charts() -> None:
    rows = [row(), *[row(10.0 + i, transaction=f"T{i:02d}") for i in range(30)]]
    nights = [night(1, rows), night(2, rows)]
    view = task_view(build("dag", "task", nights, transaction="T25"), "")
    html = render_html("/s", 200, title="t", subject="d", single=True, tasks=[view])
    assert re.findall(r'data-metric="[A-Z_0-9]+" data-transaction="([^"]+)"', html) == ["T25"]
    assert "transaction <strong>T25</strong>" in html


# --- numbers: every finite one renders ----------------------------------------------------------------

EXTREMES = [1.7e308, -1.7e308, 5e-324, -5e-324, 1e15, 1e16, 0.0, 10**400, -(10**400)]


@pytest.mark.parametrize("extreme", EXTREMES, ids=str)
@pytest.mark.parametrize("field", ["value", "baseline", "centre", "noise", "band_low", "change_pct"])
def test_an_extreme_number_anywhere_in_a_row_renders_the_page(field: str, extreme: float) -> None:
    """Through JSON, as in XCom, beside ordinary nights (before: OverflowError, ZeroDivisionError)."""
    odd = json.loads(json.dumps(row(**{field: extreme, "band_high": 500.0, "centre": 470.0, "noise": 10.0})))
    html = page([night(1, [row()]), night(2, [odd]), night(3, [row(470.0)])])
    assert html.count('<figure class="chart"') == 1 and html.rstrip().endswith("</html>")
    assert "nan" not in re.findall(r'<path class="value" d="([^"]*)"', html)[0]
    for d in re.findall(r' d="([^"]*)"', html):
        assert "inf" not in d and "nan" not in d, d


@pytest.mark.parametrize("budget", ["<= 1.7e308", ">= 5e-324", "<= 1e999", "<= -1.7e308"])
def test_an_extreme_budget_renders_the_page(budget: str) -> None:
    html = page([night(1, [row(budget=budget)]), night(2, [row(500.0, budget=budget)])])
    assert html.count('<figure class="chart"') == 1


def test_a_value_beyond_the_chart_shows_at_its_edge_as_out_of_range() -> None:
    html = page([night(1, [row()]), night(2, [row(1.7e308)])])
    assert "1.700e+308 ms · pass · out of the chart&#39;s range" in html
    assert "1.700e+308" in re.findall(r'<td class="num pass"[^>]*>([^<]*)', html)[0]


def test_an_integer_too_large_for_a_float_is_dropped_not_fatal() -> None:
    (read,) = gate_rows([row(10**400, baseline=-(10**400))])
    assert read.value is None and read.baseline is None and read.metric == P95


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_number_gives_every_finite_float_a_short_text(value: float) -> None:
    text = ch.number(value)
    assert text and len(text) <= 12
    read = float(text)  # 4 significant digits: 1.7975e308 reads back beyond a float
    assert math.isclose(read, value, rel_tol=1e-3) or (math.isinf(read) and abs(value) > 1.79e308)


@settings(max_examples=300)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6))
def test_a_domain_holds_every_drawable_value_in_a_few_round_steps(values: list[float]) -> None:
    low, high, step = ch.y_domain(values)
    assert math.isfinite(low) and math.isfinite(high) and low < high and step > 0
    assert (high - low) / step <= 20
    for v in values:
        if abs(v) <= bounds.PLOT_RANGE:
            assert low <= v <= high


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**400), 10**400)),
        min_size=3,
        max_size=3,
    ),
    st.sampled_from(["<= 1000", "<= 1.7e308", ">= 5e-324", None]),
)
def test_any_finite_numbers_render_a_chart_and_a_table(values: list[float], budget: str | None) -> None:
    keys = ("value", "baseline", "centre")
    odd = json.loads(json.dumps(row(**dict(zip(keys, values, strict=True)), budget=budget, noise=values[2])))
    series = build("dag", "task", [night(1, [odd]), night(2, [row()])]).series
    drawn = ch.chart(series[0], "", "dag", "task")
    for d in (drawn.value_path, drawn.band_path, drawn.centre_path, drawn.budget_path, drawn.limit_path):
        assert "inf" not in d and "nan" not in d
    for tick in drawn.y_ticks:
        assert math.isfinite(tick.at) and len(tick.label) <= 12


# --- reading the stored text as the view reads decoded values ----------------------------------------

GATE_SHAPES = [
    row(),
    row(780.0, passed=False, status=None, reason="more than 10 % worse than the baseline"),
    row(None, passed=False, status="exploded", reason="no value from the service"),
    {"metric": P95, "value": 500},
    {"metric": "", "value": 1.0},
    row(transaction="", note="", history_n=-3, status="noise"),
    row(note="change accepted as the new normal", history_n=12, band_low=1.0, band_high=2.0),
    "not a row",
    {"value": 1},
]


@pytest.mark.parametrize("stored_as_string", [False, True])
def test_the_stored_text_is_read_as_the_decoded_value_is(stored_as_string: bool) -> None:
    """``RunResult.from_json`` (the store's path: msgspec straight from the column's text) and
    ``from_xcom`` (a decoded value: PostgreSQL's JSONB) give the same rows, statuses and fields."""
    value = {"bench_result_id": "br-1", "state": "FINISHED", "gate": GATE_SHAPES}
    text = json.dumps(json.dumps(value) if stored_as_string else value)
    fast, slow = RunResult.from_json(text), RunResult.from_xcom(value)
    assert fast.rows == slow.rows == tuple(gate_rows(GATE_SHAPES))
    assert (fast.bench_result_id, fast.state, fast.has_result) == ("br-1", "FINISHED", True)
    assert fast.statuses == slow.statuses


@pytest.mark.parametrize(
    "text", ['{"gate": [{"metric": "M", "value": NaN}]}', '{"gate": [{"metric": "M", "value": 1e999}]}']
)
def test_text_msgspec_refuses_is_read_by_json(text: str) -> None:
    (read,) = RunResult.from_json(text).rows
    assert read.metric == "M" and read.value is None


def test_text_that_is_no_result_reads_as_none() -> None:
    for text in ('"s3://bucket/xcom/ref"', "not json", "[1, 2]", "null"):
        found = RunResult.from_json(text, {"bench_result_id": "br-9"})
        assert not found.has_result and found.bench_result_id == "br-9" and found.rows == ()


def test_series_keys_and_drawn_series_are_linear_in_nights(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[int] = []
    real = RunResult.row_of

    def counted(self: RunResult, metric: str, transaction: str | None) -> Any:
        looked.append(1)
        return real(self, metric, transaction)

    monkeypatch.setattr(RunResult, "row_of", counted)
    rows = [row(), *[row(10.0, transaction=f"T{i}") for i in range(300)]]
    view_history.build("dag", "task", [night(d, rows) for d in range(1, 31)])
    assert len(looked) == 30 * bounds.SERIES_DRAWN


def test_values_too_close_for_a_float_to_divide_render_flat() -> None:
    """0 and 5e-324 (the smallest float): a step of a fifth of their spread is 0 (before: log10(0))."""
    tiny = {"budget": None, "baseline": None, "change_pct": None}
    html = page([night(1, [row(0.0, **tiny)]), night(2, [row(5e-324, **tiny)])])
    assert html.count('<figure class="chart"') == 1 and "4.941e-324" in html


def test_the_docs_state_the_bounds_the_code_has() -> None:
    from pathlib import Path

    from airflow_provider_loadtest.plugins import slots
    from airflow_provider_loadtest.plugins.decoded import CACHED_BYTES

    text = " ".join((Path(__file__).parents[2] / "docs" / "load_tests_view.md").read_text().split())
    for phrase in (
        f"at most {bounds.SERIES_DRAWN} series drawn",
        f"{bounds.COLUMNS} metric columns",
        f"the first {bounds.ROWS_PER_NIGHT:,} gate rows of a night",
        f"{bounds.FAILING_LISTED} failing rows listed",
        f"{bounds.PAGE_BYTES // 2**20} MiB in all",
        f"beyond 10^{round(math.log10(bounds.PLOT_RANGE))}",
        f"at most {CACHED_BYTES // 2**20} MiB of them",
        f"at most {slots.VIEW_SLOTS} answers are built at once",
        f"within {slots.SLOT_WAIT_S:g} seconds",
        f"cut to {bounds.DECODED_CHARS:,} characters as it is decoded",
        f"Airflow's own {bounds.RUN_ID_CHARS}",
        f"about {bounds.JSON_BYTES // 2**20} MiB per answer",
        f"at most {bounds.JSON_ROWS:,} gate rows",
    ):
        assert phrase in text, phrase


def test_the_json_answer_holds_a_bounded_number_of_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_loadtest.plugins import app as view_app

    monkeypatch.setattr(view_app, "JSON_ROWS", 25)
    nights = [night(day, [row(), *crowded(9)], state="success") for day in range(1, 6)]
    data = history_json(build("dag", "task", nights))
    assert [len(n["rows"]) for n in data["nights"]] == [10, 10, 5, 0, 0]
    assert [n["rows_left_out"] for n in data["nights"]] == [0, 0, 5, 10, 10]
    assert {n["verdict"] for n in data["nights"]} == {"pass"}


def test_both_readers_read_the_same_fields() -> None:
    """A field the gate adds (issue 27's night effect, say) reaches the page on the fast path exactly
    when the checked path reads it: what ``_clean`` has no checker for, the decoder skips too."""
    from airflow_provider_loadtest.plugins.rows import FIELD_CHECKERS, WireRow

    assert set(WireRow.__struct_fields__) == set(FIELD_CHECKERS)


def test_a_series_written_twice_in_a_night_shows_its_first_row_in_the_gates_order() -> None:
    result = night(
        1, [row(1.0, metric="B"), row(2.0), row(3.0, metric="B"), row(4.0, transaction="T")]
    ).result
    assert list(result.by_series) == [("B", None), (P95, None), (P95, "T")]
    found = result.row_of("B", None)
    assert found is not None and found.value == 1.0


def test_a_series_judged_with_many_says_how_far_it_and_the_night_moved() -> None:
    """The gate of many series (issue 27) writes ``own_sd`` and ``night_sd`` on each row: the tooltip
    and the table cell say them, huge ones included."""
    html = page([night(1, [row(own_sd=2.34, night_sd=-1.05)]), night(2, [row(own_sd=1.7e308)])])
    assert "+2.3 sd beyond its noise, the night: -1.1 sd shared by every series" in html
    assert "+1.70e+308 sd beyond its noise" in html
    cell = re.findall(r'<td class="num pass" title="([^"]*)"', html)
    assert any("+2.3 sd beyond its noise" in title for title in cell)
