"""The "Load tests" view's pieces without a database: reading XCom rows, verdicts, chart geometry, the
rendered page (escaping, CSP-friendly markup), and the plugin's registration and import cost."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from importlib.metadata import entry_points
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate import GateRow, GateSpec, judge_history
from airflow_provider_loadtest.decisions.history import STATUSES, GateHistory
from airflow_provider_loadtest.get_provider_info import get_provider_info
from airflow_provider_loadtest.plugins import charts as ch
from airflow_provider_loadtest.plugins.history import (
    Night,
    SeriesKey,
    Verdict,
    build,
    task_instance_url,
)
from airflow_provider_loadtest.plugins.rows import FIELD_CHECKERS, RunResult, Status, gate_row, gate_rows

P95 = "RESPONSE_TIME_PERCENTILE_95"
ACCEPTED = "change accepted as the new normal: the history restarts from this night"
START = datetime(2026, 2, 28, 2, tzinfo=UTC)  # night 1 is 2026-03-01


def today_row(value: float | None = 468.0, **changes: Any) -> dict[str, Any]:
    """A row as ``GateRow.to_xcom()`` writes it today (baseline="previous")."""
    row = {
        "metric": P95,
        "value": value,
        "passed": True,
        "budget": "<= 1000",
        "baseline": 468.0,
        "change_pct": 0.0,
        "max_regression_pct": 10.0,
        "reason": None,
    }
    return {**row, **changes}


def night(
    day: int,
    rows: list[dict[str, Any]] | None = None,
    *,
    state: str = "success",
    result: bool = True,
    report_url: str = "https://saas.example/report/r",
) -> Night:
    value = {
        "bench_result_id": f"br-{day}",
        "report_url": report_url,
        "state": "FINISHED",
        "gate": [today_row()] if rows is None else rows,
    }
    return Night(
        run_id=f"scheduled__2026-03-{day:02d}T02:00:00+00:00",
        map_index=-1,
        run_after=START + timedelta(days=day, minutes=5),
        logical_date=START + timedelta(days=day),
        ti_state=state,
        result=RunResult.from_xcom(value if result else None, {"bench_result_id": f"br-{day}"}),
    )


# --- reading XCom ---------------------------------------------------------------------------------


def test_todays_rows_get_a_status_from_passed_value_and_reason() -> None:
    """Rows written before the history gate have no status: the gate's own reader derives it."""
    ok = gate_row(today_row())
    regression = gate_row(today_row(780.0, passed=False, reason="more than 10 % worse than the baseline"))
    budget = gate_row(today_row(1200.0, passed=False, reason="budget <= 1000"))
    missing = gate_row(today_row(None, passed=False, reason="no value from the service"))
    assert ok is not None and ok.kind is Status.PASS and ok.passed
    assert regression is not None and regression.kind is Status.REGRESSION
    assert budget is not None and budget.kind is Status.BUDGET
    assert missing is not None and missing.kind is Status.NOT_MEASURED and missing.kind.failed


def test_the_view_reads_rows_as_the_gate_reads_them() -> None:
    """``GateRow.from_xcom`` is the one reader: whatever it makes of a row, the view makes too."""
    old_shapes = [
        today_row(),
        today_row(1200.0, passed=False, reason="budget <= 1000; more than 10 % worse than the baseline"),
        today_row(None, passed=False, reason="no value from the service"),
        {"metric": P95, "value": 500.0},  # the least a row can be
    ]
    for data in old_shapes:
        row = gate_row(data)
        assert row is not None
        assert GateRow(**{f.name: getattr(row, f.name) for f in fields(GateRow)}) == GateRow.from_xcom(data)


def test_every_field_of_the_gates_rows_is_checked_before_it_is_read() -> None:
    """A field the gate adds with a type the view cannot check would be dropped silently: fail here."""
    assert set(FIELD_CHECKERS) == {f.name for f in fields(GateRow)}
    assert [status.value for status in Status] == list(STATUSES)  # the view names every status


def test_history_fields_and_transaction_are_read_when_present() -> None:
    row = gate_row(
        today_row(
            512.0,
            status="suspected",
            centre=470.0,
            noise=12.0,
            band_low=446.0,
            band_high=494.0,
            history_n=14,
            transaction="Checkout",
            note="suspected: 8.9 % worse than the history's centre 470",
        )
    )
    assert row is not None
    assert (row.kind, row.centre, row.band, row.history_n) == (Status.SUSPECTED, 470.0, (446.0, 494.0), 14)
    assert row.transaction == "Checkout" and row.accepted is None
    assert not row.kind.failed
    centre_and_noise = gate_row(today_row(centre=470.0, noise=-12.0))
    assert centre_and_noise is not None and centre_and_noise.band == (458.0, 482.0)


def gate_nights(values: list[float], accept: int | None = None) -> list[dict[str, Any]]:
    """The rows the history gate writes for ``values`` (one per night), as they reach XCom; night
    ``accept`` (0-based) is one whose change a person accepted."""
    spec = GateSpec.parse({P95: "<= 1000"}, {P95: 10}, "history")
    history, written = GateHistory(), []
    for i, value in enumerate(values):
        accepted = [P95] if i == accept else []
        rows, after = judge_history(spec, {P95: value}, None, history=history, accepted=accepted)
        history = after or history
        written.append(json.loads(json.dumps(rows[0].to_xcom())))  # through JSON, as in XCom
    return written


def test_the_history_gates_rows_reach_the_view_whole_with_the_accepted_change_marked() -> None:
    usual = [500.0, 560.0, 470.0, 530.0, 450.0, 545.0, 480.0, 520.0, 465.0, 515.0]  # about 7 % of noise
    written = gate_nights([*usual, 505.0, 630.0, 900.0, 902.0, 905.0], accept=13)
    rows = [gate_row(data) for data in written]
    assert all(row is not None and row.to_xcom() == data for row, data in zip(rows, written, strict=True))
    kinds = [row.kind for row in rows if row is not None]
    assert kinds[10:] == [Status.NOISE, Status.SUSPECTED, Status.REGRESSION, Status.PASS, Status.PASS]
    accepted = [row.accepted for row in rows if row is not None]
    assert [i for i, marker in enumerate(accepted) if marker] == [13]  # the gate's note says so
    assert accepted[13] is not None and accepted[13].startswith("change accepted")
    band, after = rows[10], rows[14]
    assert band is not None and band.band is not None and band.centre is not None
    assert after is not None and after.band is None and after.baseline == 902.0  # the history restarted


def test_malformed_rows_and_values_are_skipped_not_fatal() -> None:
    rows = gate_rows(
        [
            "not a row",
            {"value": 1},
            {"metric": ""},
            today_row(float("nan"), passed=True, baseline=True, status="exploded", history_n=-3),
            {
                **today_row(),
                "value": "fast",
                "passed": "yes",
                "centre": "470",
                "transaction": 7,
                "note": ["x"],
            },
            today_row(),
        ]
    )
    assert len(rows) == 3
    odd, strings = rows[0], rows[1]
    assert odd.value is None and odd.baseline is None and odd.history_n is None
    assert odd.kind is Status.PASS  # an unknown status falls back to what today's keys say
    assert (strings.value, strings.passed, strings.centre, strings.transaction, strings.note) == (
        None,
        False,
        None,
        None,
        None,
    )
    assert gate_rows({"metric": P95}) == []


def test_only_http_links_reach_the_page_and_the_run_record_fills_what_the_result_lacks() -> None:
    evil = RunResult.from_xcom({"report_url": "javascript:alert(1)", "gate": []}, {"scenario_id": "s"})
    assert evil.report_url is None and evil.scenario_id == "s" and evil.has_result
    started = RunResult.from_xcom(None, {"bench_result_id": "br-9", "report_url": "http://h/r/9"})
    assert (started.bench_result_id, started.report_url, started.has_result) == (
        "br-9",
        "http://h/r/9",
        False,
    )
    assert RunResult.from_xcom("s3://bucket/xcom/ref").rows == ()  # a custom backend's reference


# --- verdicts and series ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "state", "result", "verdict"),
    [
        ([today_row()], "success", True, Verdict.PASS),
        ([today_row(status="noise")], "success", True, Verdict.PASS),
        ([today_row(status="suspected")], "success", True, Verdict.SUSPECTED),
        ([today_row(780.0, passed=False, reason="more than 10 %")], "failed", True, Verdict.FAIL),
        ([today_row()], "failed", True, Verdict.RUN_FAILED),
        ([], "success", True, Verdict.NO_GATE),
        (None, "deferred", False, Verdict.RUNNING),
        (None, "failed", False, Verdict.NO_VERDICT),
    ],
)
def test_a_nights_verdict(
    rows: list[dict[str, Any]] | None, state: str, result: bool, verdict: Verdict
) -> None:
    assert night(1, rows, state=state, result=result).verdict is verdict


def test_series_per_metric_and_transaction_oldest_first_and_nights_newest_first() -> None:
    errors = today_row(0.4, metric="ERRORS_PERCENT", budget="< 1", max_regression_pct=None)
    checkout = today_row(300.0, transaction="Checkout")
    nights = [night(2, [today_row(470.0), errors, checkout]), night(1, [today_row(468.0)])]
    history = build("dag", "task", nights, total=30)
    assert [n.day for n in history.nights] == ["2026-03-02", "2026-03-01"]
    assert [s.key for s in history.series] == [
        SeriesKey(P95),
        SeriesKey("ERRORS_PERCENT"),
        SeriesKey(P95, "Checkout"),
    ]
    p95 = history.series[0]
    assert [r.value if r else None for r in p95.rows] == [468.0, 470.0]
    assert [r is None for r in history.series[1].rows] == [True, False]  # gated from night 2 only
    assert history.metrics == [P95, "ERRORS_PERCENT"] and history.transactions == ["Checkout"]
    assert history.total == 30


def test_links_to_task_instances_quote_the_ids() -> None:
    assert (
        task_instance_url("/airflow", "d", "manual__2026-03-01T02:00:00+00:00", "g.t")
        == "/airflow/dags/d/runs/manual__2026-03-01T02%3A00%3A00%2B00%3A00/tasks/g.t"
    )
    assert task_instance_url("", "d", "r", "t", 3) == "/dags/d/runs/r/tasks/t/mapped/3"


# --- chart geometry --------------------------------------------------------------------------------


def test_round_steps_and_domains() -> None:
    assert [ch.nice_step(s, 5) for s in (400, 1, 0.8, 13)] == [100, 0.2, 0.2, 5]
    assert ch.y_domain([700.0, 1100.0]) == (700.0, 1100.0, 100.0)
    assert ch.y_domain([0.2, 1.0])[0] == 0.0  # near zero compared with the spread: from zero
    low, high, _ = ch.y_domain([5.0])
    assert low < 5 < high
    assert ch.y_domain([]) == (0.0, 1.0, 0.25)


def test_paths_break_where_values_are_missing() -> None:
    assert ch.line_path([0, 1, 2, 3], [5, None, 7, 8]) == "M0.0 5.0 M2.0 7.0 L3.0 8.0"
    spans = [(0.0, 5.0), (5.0, 15.0), (15.0, 20.0)]
    assert ch.step_path(spans, [1, 1, 2]) == "M0.0 1.0 H5.0 H15.0 V2.0 H20.0"
    assert ch.step_path(spans, [1, None, 1]) == "M0.0 1.0 H5.0 M15.0 1.0 H20.0"
    band = ch.band_path(spans, [(9, 11), (8, 12), None])
    assert band == "M0.0 11.0 L5.0 11.0 L5.0 12.0 L15.0 12.0 L15.0 8.0 L5.0 8.0 L5.0 9.0 L0.0 9.0 Z"


def test_a_chart_marks_each_night_by_status_with_budget_limit_band_and_accepted_change() -> None:
    nights = [
        night(1, [today_row(468.0, baseline=None, change_pct=None)]),
        night(2, [today_row(470.0)]),
        night(3, [today_row(780.0, passed=False, reason="more than 10 % worse than the baseline")]),
        night(4, [today_row(None, passed=False, reason="no value from the service")]),
        night(5, [today_row(500.0, status="suspected", centre=470.0, band_low=450.0, band_high=490.0)]),
        night(6, [today_row(505.0, status="pass", centre=480.0, noise=20.0, note=ACCEPTED)]),
    ]
    history = build("dag", "run_load_test", nights)
    chart = ch.chart(history.series[0], "", "dag", "run_load_test")
    assert [m.status for m in chart.marks] == [
        "pass",
        "pass",
        "regression",
        "not_measured",
        "suspected",
        "pass",
    ]
    left, _, right, bottom = chart.plot
    assert chart.marks[0].x == left and chart.marks[-1].x == right  # dates span the plot
    assert chart.marks[3].y == bottom  # not measured: on the axis
    assert chart.marks[2].y < chart.marks[1].y  # slower is higher
    assert chart.marks[2].href.endswith(
        "/runs/scheduled__2026-03-03T02%3A00%3A00%2B00%3A00/tasks/run_load_test"
    )
    assert "regression" in chart.marks[2].title and "+0.0 %" in chart.marks[1].title
    assert chart.budget_path.startswith(f"M{left:.1f} ") and chart.budget_path.endswith(f"H{right:.1f}")
    assert chart.budget_path.count("M") == 1 and "V" not in chart.budget_path  # one level: 1000
    assert chart.limit_path  # baseline x 1.10 where the gate compared with a single baseline run
    assert chart.band_path.count("Z") == 1  # nights 5 and 6 judged against a history
    assert [a.x for a in chart.accepted] == [chart.marks[-1].x]
    assert chart.unit == "ms" and chart.direction == "lower is better"
    assert "6 nights, 2 failing" in chart.summary
    labels = [t.label for t in chart.y_ticks]
    assert labels[0] == "0" and float(labels[-1]) >= 1000  # 450 is close to 0 against a 550 spread


def test_units_of_metric_ids() -> None:
    assert [ch.unit_of(m) for m in (P95, "ERRORS_PERCENT", "HITS_RATE", "RESPONSE_TIME_APDEX")] == [
        "ms",
        "%",
        "/s",
        "",
    ]
    assert [ch.number(v) for v in (468.0, 0.4, 12345.678, None)] == ["468", "0.4", "1.235e+04", "-"]


# --- the page --------------------------------------------------------------------------------------


def render(nights: list[Night], dag_id: str = "loadtest_release_gate", task_id: str = "run_load_test") -> str:
    from airflow_provider_loadtest.plugins.app import render_html
    from airflow_provider_loadtest.plugins.page import task_view

    view = task_view(build(dag_id, task_id, nights), "/airflow")
    return render_html("/airflow/loadtest/static", 200, title="t", subject=dag_id, single=False, tasks=[view])


def test_the_page_shows_a_chart_per_metric_and_a_row_per_night_with_links() -> None:
    errors = today_row(0.4, metric="ERRORS_PERCENT", budget="< 1", max_regression_pct=None)
    failing = today_row(780.0, passed=False, reason="more than 10 % worse than the baseline")
    html = render([night(1, [today_row(), errors]), night(2, [failing, errors], state="failed")])
    assert re.findall(r'data-metric="([A-Z_0-9]+)"', html) == [P95, "ERRORS_PERCENT"]
    assert re.findall(r'data-verdict="([a-z ]+)"', html) == ["fail", "pass"]
    assert "RESPONSE_TIME_PERCENTILE_95: more than 10 % worse than the baseline" in html
    assert (
        'href="/airflow/dags/loadtest_release_gate/runs/scheduled__2026-03-02T02%3A00%3A00%2B00%3A00' in html
    )
    assert 'href="https://saas.example/report/r" target="_blank" rel="noopener noreferrer">br-2<' in html
    assert 'href="/airflow/loadtest/static/view.css?v=' in html and "+66.7 %" not in html


def test_the_table_marks_the_night_whose_change_was_accepted() -> None:
    accepted = today_row(803.0, status="pass", baseline=None, change_pct=None, history_n=22, note=ACCEPTED)
    html = render([night(1, [today_row(status="noise")]), night(2, [accepted]), night(3, [today_row()])])
    rows = re.findall(r"<tr data-run-id=.*?</tr>", html, re.S)
    marked = ["change accepted</span>" in row for row in rows]
    assert marked == [False, True, False]  # newest first
    assert f'title="{P95}: {ACCEPTED}"' in rows[1]


def test_per_transaction_rows_get_a_chart_per_transaction_and_metric_folded_under_the_transaction() -> None:
    """Rows with a ``transaction`` (per-transaction gates): a chart per (transaction, metric) under the
    transaction's name, the run's own charts and table columns unchanged, a failing transaction named."""
    avg = "RESPONSE_TIME_AVG"
    checkout_fails = today_row(
        1400.0, transaction="Checkout", passed=False, reason="budget <= 1000", status="budget"
    )
    html = render(
        [
            night(1, [today_row(), today_row(300.0, transaction="Checkout")]),
            night(
                2,
                [
                    today_row(),
                    checkout_fails,
                    today_row(210.0, metric=avg, transaction="Checkout", budget=None),
                    today_row(90.0, transaction="Home page"),
                ],
                state="failed",
            ),
        ]
    )
    figures = re.findall(
        r'<figure class="chart" data-metric="([A-Z_0-9]+)"(?: data-transaction="([^"]+)")?', html
    )
    assert figures == [(P95, ""), (P95, "Checkout"), (avg, "Checkout"), (P95, "Home page")]
    folded = re.findall(r'<details class="transaction" data-transaction="([^"]+)">', html)
    assert folded == ["Home page"]  # Checkout fails tonight: its charts are open (issue 35)
    assert re.findall(r'<details class="transaction" data-transaction="([^"]+)" open>', html) == ["Checkout"]
    checkout = html.split('data-transaction="Checkout">', 1)[1].split("</details>", 1)[0]
    assert checkout.count('class="mark ') == 3  # p95 on two nights, the average on one
    assert 'class="mark budget"' in checkout
    assert re.findall(r'<th scope="col" class="num" title="([A-Z_0-9]+)"', html) == [P95]
    assert re.findall(r'data-verdict="([a-z ]+)"', html) == ["fail", "pass"]
    assert "RESPONSE_TIME_PERCENTILE_95 (Checkout): budget &lt;= 1000" in html


def test_the_page_escapes_what_tasks_wrote_and_needs_no_inline_script_or_style() -> None:
    evil = '<script>alert("x")</script>'
    row = today_row(780.0, passed=False, reason=evil, transaction=evil, note=evil)
    html = render([night(1, [row], report_url="javascript:alert(1)")])
    assert evil not in html and "&lt;script&gt;" in html
    assert "javascript:" not in html
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", html, re.S)
    assert scripts == [""]  # one script, by src (the CSP allows 'self' only)
    assert not re.search(r"\sstyle=", html) and "<style" not in html


def test_an_empty_dag_says_so() -> None:
    from airflow_provider_loadtest.plugins.app import render_html

    html = render_html("/s", 200, title="t", subject="d", single=False, tasks=[])
    assert "No load test in this DAG yet" in html


# --- the plugin ------------------------------------------------------------------------------------


def test_the_plugin_is_registered_by_entry_point_and_in_provider_info() -> None:
    (found,) = [ep for ep in entry_points(group="airflow.plugins") if ep.value.startswith("airflow_provider")]
    assert found.value == "airflow_provider_loadtest.plugins:ENTRY_POINT_PLUGIN"
    (declared,) = get_provider_info()["plugins"]
    assert declared == {
        "name": "loadtest",
        "plugin-class": "airflow_provider_loadtest.plugins.LoadTestViewPlugin",
    }
    from airflow_provider_loadtest.plugins import LoadTestViewPlugin

    assert LoadTestViewPlugin.name == declared["name"]


def test_the_entry_point_steps_aside_when_airflow_reads_provider_info_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow import settings

    from airflow_provider_loadtest import plugins

    monkeypatch.setattr(settings, "LAZY_LOAD_PROVIDERS", True, raising=False)
    assert plugins.ENTRY_POINT_PLUGIN is plugins.LoadTestViewPlugin
    monkeypatch.setattr(settings, "LAZY_LOAD_PROVIDERS", False)
    assert plugins.ENTRY_POINT_PLUGIN is None
    with pytest.raises(AttributeError):
        _ = plugins.NOT_THERE


def test_tabs_carry_airflows_base_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_loadtest.plugins import _external_views

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example/team-a/")
    dag_tab, task_tab, _overview = _external_views()
    assert dag_tab["href"] == "/team-a/loadtest/dags/{DAG_ID}" and dag_tab["destination"] == "dag"
    assert task_tab["href"] == "/team-a/loadtest/dags/{DAG_ID}/tasks/{TASK_ID}"
    assert task_tab["destination"] == "task" and dag_tab["url_route"] != task_tab["url_route"]
    assert dag_tab["icon"] == "/team-a/loadtest/static/icon.svg"


def test_loading_the_plugin_on_a_worker_builds_nothing_and_imports_nothing_heavy() -> None:
    """Workers load plugins too (macros, listeners): the plugin module itself must stay cheap; its app
    is built only when the API server reads ``fastapi_apps``."""
    code = (
        "import sys\n"
        "import airflow.sdk\n"
        "before = set(sys.modules)\n"
        "from airflow_provider_loadtest.plugins import ENTRY_POINT_PLUGIN, LoadTestViewPlugin\n"
        "plugin = LoadTestViewPlugin()\n"
        "_ = plugin.name, plugin.macros, plugin.listeners\n"
        "print('MODULES:' + ','.join(sorted(set(sys.modules) - before)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("MODULES:")]
    added = set(line.removeprefix("MODULES:").split(","))
    assert added <= {
        "airflow_provider_loadtest",
        "airflow_provider_loadtest.plugins",
        "airflow.plugins_manager",
        "airflow._shared.plugins_manager",
        "airflow._shared.plugins_manager.plugins_manager",
    }, added


@pytest.mark.parametrize("lazy", ["True", "False"])
def test_airflow_registers_the_plugin_once_whatever_lazy_discover_providers_says(lazy: str) -> None:
    code = (
        "import json\n"
        "from airflow import plugins_manager as pm\n"
        "from airflow.plugins_manager import get_plugin_info\n"
        "info = [p for p in get_plugin_info() if p['name'] == 'loadtest']\n"
        "errors = pm.get_import_errors() if hasattr(pm, 'get_import_errors') else pm.import_errors\n"
        "print('RESULT:' + json.dumps({'errors': errors, 'info': info}, default=str))\n"
    )
    import os

    env = {**os.environ, "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": lazy}
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    (line,) = [x for x in run.stdout.splitlines() if x.startswith("RESULT:")]
    result = json.loads(line.removeprefix("RESULT:"))
    assert result["errors"] == {}
    (info,) = result["info"]
    assert [app["url_prefix"] for app in info["fastapi_apps"]] == ["/loadtest"]
    assert [view["destination"] for view in info["external_views"]] == ["dag", "task", "nav"]
