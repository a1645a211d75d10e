"""The "Load tests" view shows the night effect (issue 27): every series' shared movement per night, its
usual band, the nights whose night effect failed (a regression of the whole run), and a line per night;
nothing of it when no night has one; and whatever a task left in ``night_effect``, never a broken page."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate.family import NightEffect
from airflow_provider_loadtest.plugins.app import history_json, render_html
from airflow_provider_loadtest.plugins.history import Night, Verdict, build
from airflow_provider_loadtest.plugins.night_effect import TITLE
from airflow_provider_loadtest.plugins.page import task_view
from airflow_provider_loadtest.plugins.rows import RunResult, night_effect

START = datetime(2026, 2, 28, 2, tzinfo=UTC)
P95 = "RESPONSE_TIME_PERCENTILE_95"


def effect(shift: float, status: str = "noise", **changes: Any) -> dict[str, Any]:
    """A night effect as the gate writes it (``NightEffect.to_xcom()``)."""
    made = NightEffect(shift, 40, status, centre=0.1, noise=0.5, history_n=20, change_pct=shift * 2.0)
    return {**made.to_xcom(), **changes}


def night(day: int, effect_value: object = None, *, with_effect: bool = True, as_json: bool = False) -> Night:
    value: dict[str, Any] = {
        "bench_result_id": f"br-{day}",
        "state": "FINISHED",
        "gate": [{"metric": P95, "value": 468.0, "passed": True, "status": "noise"}],
    }
    if with_effect:
        value["night_effect"] = effect_value
    # as_json: as the API server reads it, the XCom column's JSON text
    result = RunResult.from_json(json.dumps(value, allow_nan=True)) if as_json else RunResult.from_xcom(value)
    return Night(
        run_id=f"scheduled__2026-03-{day:02d}T02:00:00+00:00",
        map_index=-1,
        run_after=START + timedelta(days=day, minutes=5),
        logical_date=START + timedelta(days=day),
        ti_state="success",
        result=result,
    )


def page(nights: list[Night]) -> str:
    view = task_view(build("dag", "run_load_test", nights), "/airflow")
    return render_html("/airflow/loadtest/static", 200, title="t", subject="dag", single=True, tasks=[view])


def night_effect_figure(html: str) -> str:
    found = re.search(r'<div class="charts" data-kind="night-effect">(.*?)</div>', html, re.S)
    assert found is not None, "no night effect chart"
    return found.group(1)


def test_a_page_with_night_effects_charts_them_and_marks_the_failing_night() -> None:
    nights = [
        night(1, effect(0.2)),
        night(2, effect(-0.3, "pass")),
        night(3, effect(3.4, "regression", reason="every series moved together")),
        night(4, None),  # a night of fewer than 8 series: none
    ]
    html = page(nights)
    figure = night_effect_figure(html)
    assert f'data-metric="{TITLE}"' in figure and "(sd)" in figure and "lower is better" in figure
    assert '<path class="band"' in figure  # the usual band: centre +- noise
    marks = re.findall(r'<a class="mark (\w+)" href="([^"]+)"', figure)
    assert [status for status, _ in marks] == ["noise", "pass", "regression"]  # night 4 has no mark
    assert marks[2][1].endswith("/runs/scheduled__2026-03-03T02%3A00%3A00%2B00%3A00/tasks/run_load_test")
    assert "3 nights, 1 failing, latest 3.4 sd (regression)" in figure
    # The failed night's verdict is a failure (its gate rows all passed) and its table row says why.
    assert re.findall(r'data-verdict="([a-z ]+)"', html) == ["pass", "fail", "pass", "pass"]
    assert (
        '<div class="night-effect regression">Night effect: the 40 series moved +3.4 sd of their noise '
        "together (usually +0.1 sd, noise 0.5 sd over 20 nights), +6.8 % for the median series: "
        "FAIL: regression of the whole run; every series moved together</div>"
    ) in html
    assert html.count('class="night-effect ') == 3


def test_a_suspected_night_effect_makes_the_night_suspected() -> None:
    (only,) = build("dag", "t", [night(1, effect(2.5, "suspected"))]).nights
    assert only.verdict is Verdict.SUSPECTED


def test_a_page_without_night_effects_shows_none() -> None:
    html = page([night(1, with_effect=False), night(2, None)])
    assert 'data-kind="night-effect"' not in html and "night-effect" not in html
    assert "Night effect" not in html and "The night effect:" not in html
    assert re.findall(r'data-verdict="([a-z ]+)"', html) == ["pass", "pass"]


def test_a_transactions_page_leaves_the_night_effect_to_the_tasks_page() -> None:
    history = build("dag", "t", [night(1, effect(0.2))], transaction="Checkout")
    assert task_view(history, "/airflow").night_effect is None


def test_the_json_answer_carries_the_night_effect_as_read() -> None:
    nights = history_json(build("dag", "t", [night(1, effect(3.4, "regression")), night(2, None)]))["nights"]
    assert nights[0]["night_effect"] is None
    assert nights[1]["night_effect"]["passed"] is False and nights[1]["night_effect"]["shift_sd"] == 3.4


EVIL = '<script>alert("x")</script>'
HOSTILE = [
    "regression",
    ["shift_sd", 3.0],
    {"shift_sd": "3.0", "status": "regression"},
    {"shift_sd": float("nan"), "status": "regression"},
    {"shift_sd": float("inf")},
    {"shift_sd": 10**400},
    {"shift_sd": True},
    {"shift_sd": 1.7e308, "centre": -1.7e308, "noise": 1.7e308, "change_pct": 1e300, "series": 10**30},
    {"shift_sd": -5e-324, "centre": 5e-324, "noise": 0.0, "history_n": -3},
    {"shift_sd": 2.0, "status": EVIL, "passed": False, "reason": EVIL, "note": EVIL * 1000},
    {"shift_sd": 2.0, "status": ["regression"], "series": "forty", "history_n": 1.5, "centre": "0"},
    {"shift_sd": 1e16, "centre": float("nan"), "noise": float("-inf"), "change_pct": 10**400},
    effect(3.0, "budget"),
]


@pytest.mark.parametrize("as_json", [False, True], ids=["xcom", "json"])
@pytest.mark.parametrize("hostile", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_night_effect_never_fails_the_page(hostile: object, as_json: bool) -> None:
    html = page([night(1, effect(0.2), as_json=as_json), night(2, hostile, as_json=as_json)])
    assert EVIL not in html and "nan" not in html.lower().replace("nanoseconds", "")
    assert "inf " not in html and 'd=""' not in html
    assert len(html) < 200_000  # every text clipped
    figure = night_effect_figure(html)
    assert figure.count('<a class="mark ') in (1, 2)  # night 1's always; night 2's when it has a number
    json.dumps(history_json(build("dag", "t", [night(2, hostile, as_json=as_json)])), allow_nan=False)


def test_what_the_reader_keeps_of_a_hostile_night_effect() -> None:
    assert night_effect({"shift_sd": "3.0"}) is None and night_effect({"shift_sd": float("nan")}) is None
    assert night_effect({"shift_sd": 10**400}) is None
    forged = night_effect({"shift_sd": 2.0, "status": EVIL, "passed": False, "series": "forty"})
    assert forged is not None and forged.status == "regression" and not forged.passed and forged.series == 0
    assert night_effect({"shift_sd": 2.0, "status": "budget"}) == NightEffect(2.0, 0)  # never over budget
    huge = night_effect({"shift_sd": 1.7e308, "series": 10**30, "history_n": -1, "centre": float("inf")})
    assert huge == NightEffect(1.7e308, 0)
    # What the gate writes is read whole: the view's reader and the gate's agree.
    written = effect(3.4, "regression", reason="r", note="n")
    assert night_effect(written) == NightEffect.from_xcom(written)


def test_the_docs_name_the_chart_and_when_it_shows() -> None:
    from pathlib import Path

    from airflow_provider_loadtest.decisions.gate.family import FAMILY_FROM

    text = " ".join((Path(__file__).parents[2] / "docs" / "load_tests_view.md").read_text().split())
    assert f'"{TITLE}"' in text and f"A gate of {FAMILY_FROM} series or more" in text
