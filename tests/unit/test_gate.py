"""The quality gate: budgets, directions, the comparison, the verdict rows, and the operator's use of them."""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm
from airflow.sdk import Asset

from airflow_provider_loadtest.compat import AirflowException, AirflowFailException, TaskDeferred
from airflow_provider_loadtest.decisions.gate import (
    BASELINE_XCOM_KEY,
    METRIC_DIRECTIONS,
    Budget,
    Direction,
    GateRow,
    GateSpec,
    judge,
    parse_budgets,
)
from airflow_provider_loadtest.models.enums import MetricId
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from tests.conftest import BASE_URL
from tests.unit.test_hook import BENCH_REPORT
from tests.unit.test_run_lifecycle import FakeStateStore, _context, _op, _service

SUMMARY_URL = f"{BASE_URL}/analysis/metrics/summary"
P95 = "RESPONSE_TIME_PERCENTILE_95"

# --- parsing budgets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "op", "bound", "ok", "not_ok"),
    [
        ("<= 800", "<=", 800.0, 800.0, 800.5),
        ("<1", "<", 1.0, 0.99, 1.0),
        (">= 50", ">=", 50.0, 50.0, 49.9),
        ("> 0.5", ">", 0.5, 0.51, 0.5),
        (" <= 1e3 ", "<=", 1000.0, 1000.0, 1001.0),
        ("< -2", "<", -2.0, -3.0, -2.0),
    ],
)
def test_every_operator_parses_and_judges(
    condition: str, op: str, bound: float, ok: float, not_ok: float
) -> None:
    budget = Budget.parse(P95, condition)
    assert (budget.op, budget.bound) == (op, bound)
    assert budget.allows(ok)
    assert not budget.allows(not_ok)


@pytest.mark.parametrize(
    "condition", ["800", "== 800", "<= ", "<= 8OO", "=< 800", "<= nan", "<= inf", 800, None]
)
def test_bad_condition_is_refused_naming_it(condition: object) -> None:
    with pytest.raises(ValueError, match=rf"metric_budgets\['{P95}'\]: condition .* does not parse"):
        parse_budgets({P95: condition})


def test_a_bad_condition_names_the_setting_it_came_from() -> None:
    with pytest.raises(ValueError, match=rf"^transaction_budgets\['Checkout'\]\['{P95}'\]: condition 'x'"):
        Budget.parse(P95, "x", "transaction_budgets['Checkout']")


def test_unknown_metric_id_names_the_closest_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown metric id 'RESPONSE_TIME_PERCENTILE_96'") as caught:
        parse_budgets({"RESPONSE_TIME_PERCENTILE_96": "<= 800"})
    assert "RESPONSE_TIME_PERCENTILE_95" in str(caught.value)
    with pytest.raises(ValueError, match="did you mean ERRORS_PERCENT"):
        parse_budgets({"errors_percent": "< 1"})


def test_breakdowns_and_neutral_metrics_are_refused_where_they_make_no_sense() -> None:
    with pytest.raises(ValueError, match="HTTP_RESPONSE_CODES is a breakdown"):
        parse_budgets({"HTTP_RESPONSE_CODES": "< 1"})
    with pytest.raises(ValueError, match="USERLOAD is neither better nor worse"):
        GateSpec.parse(None, {"USERLOAD": 10}, "previous")
    assert GateSpec.parse({"USERLOAD": ">= 50"}, None, None).budgets["USERLOAD"].bound == 50


@pytest.mark.parametrize("pct", [-1, "ten", True, float("nan")])
def test_bad_regression_bound_is_refused(pct: object) -> None:
    with pytest.raises(ValueError, match=r"max_regression_pct\['RESPONSE_TIME_AVG'\]"):
        GateSpec.parse(None, {"RESPONSE_TIME_AVG": pct}, "previous")


def test_baseline_is_none_previous_or_a_checked_id() -> None:
    assert GateSpec.parse(None, None, None).baseline is None
    assert GateSpec.parse(None, None, "previous").baseline == "previous"
    assert GateSpec.parse(None, None, "br-0").baseline == "br-0"
    with pytest.raises(ValueError, match=r"baseline='\.\./x' is not a valid id"):
        GateSpec.parse(None, None, "../x")
    with pytest.raises(ValueError, match="max_regression_pct needs a baseline"):
        GateSpec.parse(None, {P95: 10}, None)


def test_plain_values_fail_at_dag_parse_time() -> None:
    with pytest.raises(
        ValueError, match="did you mean RESPONSE_TIME_PERCENTILE_99 or RESPONSE_TIME_PERCENTILE_95"
    ):
        _op(metric_budgets={"RESPONSE_TIME_PERCENTILE_59": "<= 800"})
    with pytest.raises(ValueError, match="does not parse"):
        _op(metric_budgets={P95: "under 800"})
    with pytest.raises(ValueError, match="needs a baseline"):
        _op(max_regression_pct={P95: 10})
    with pytest.raises(ValueError, match="need wait_for_completion"):
        _op(metric_budgets={P95: "<= 800"}, wait_for_completion=False)


def test_templated_values_are_checked_at_run_time_before_the_run_starts(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    op = _op(
        metric_budgets={P95: "{{ var.value.p95 }}", "ERRORS_PERCENT": "< 1"},
        baseline="{{ var.value.baseline }}",
    )  # passes parse time: the templated parts are not checked yet
    op.metric_budgets = {P95: "below 800", "ERRORS_PERCENT": "< 1"}  # as rendered
    op.baseline = "br-0"
    with pytest.raises(AirflowFailException, match=r"condition 'below 800' does not parse"):
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert requests_mock.call_count == 0
    op.metric_budgets, op.baseline = {P95: "<= 800"}, "br/0"
    with pytest.raises(AirflowFailException, match="baseline='br/0' is not a valid id"):
        op.execute(_context(FakeStateStore()))  # type: ignore[arg-type]
    assert requests_mock.call_count == 0


def test_gate_fields_are_templated() -> None:
    assert {"metric_budgets", "baseline", "max_regression_pct"} <= set(RunScenarioOperator.template_fields)


def test_summary_call_reads_numbers_aligned_and_missing_as_none() -> None:
    from airflow_provider_loadtest.api.endpoints import decode_answer, summary_metric_values

    request = summary_metric_values("br-1", [{"id": P95, "benchResultId": "br-1"}])
    assert (request.method, request.path) == ("POST", "/analysis/metrics/summary")
    assert request.json_body["@type"] == "SummaryReportItem"
    assert request.may_resend(never_opened=False)  # a read despite the verb
    assert decode_answer(request, 200, "application/json", b'[1, 2.5, null, "x", true]', None) == [
        1.0,
        2.5,
        None,
        None,
        None,
    ]
    with pytest.raises(Exception, match="empty body"):  # never "no values": a gate would pass unread
        decode_answer(request, 200, "application/json", b"", None)
    with pytest.raises(Exception, match="expected a list of numbers"):
        decode_answer(request, 200, "application/json", b'{"values": []}', None)
    with pytest.raises(ValueError, match="bench_result_id"):
        summary_metric_values("../x", [])


# --- the direction table --------------------------------------------------------------------------


def test_the_table_covers_every_metric_id_of_the_spec() -> None:
    assert set(METRIC_DIRECTIONS) == {m.value for m in MetricId}


@pytest.mark.parametrize(
    "family",
    ["RESPONSE_TIME_", "CONNECT_TIME_", "LATENCY_", "NETWORK_TIME_", "ERRORS_"],
)
def test_times_errors_and_their_rates_are_worse_higher(family: str) -> None:
    members = [m for m in METRIC_DIRECTIONS if m.startswith(family) and not m.endswith("_APDEX")]
    assert members
    assert {METRIC_DIRECTIONS[m] for m in members} == {Direction.HIGHER_IS_WORSE}


def test_assertion_failures_are_worse_higher_and_successes_lower() -> None:
    assert METRIC_DIRECTIONS["ASSERTIONS_ERROR_TOTAL"] is Direction.HIGHER_IS_WORSE
    assert METRIC_DIRECTIONS["ASSERTIONS_FAILURE_TOTAL"] is Direction.HIGHER_IS_WORSE
    assert METRIC_DIRECTIONS["ASSERTIONS_SUCCESS_TOTAL"] is Direction.LOWER_IS_WORSE


@pytest.mark.parametrize("family", ["HITS_", "THROUGHPUT_"])
def test_throughput_hits_and_successful_percentages_are_worse_lower(family: str) -> None:
    members = [m for m in METRIC_DIRECTIONS if m.startswith(family)]
    assert "HITS_SUCCESSFUL_PERCENT" in METRIC_DIRECTIONS
    assert {METRIC_DIRECTIONS[m] for m in members} == {Direction.LOWER_IS_WORSE}


def test_apdex_scores_are_worse_lower() -> None:
    apdex = [m for m in METRIC_DIRECTIONS if m.endswith("_APDEX")]
    assert len(apdex) == 3
    assert {METRIC_DIRECTIONS[m] for m in apdex} == {Direction.LOWER_IS_WORSE}


def test_sizes_and_load_are_neutral_and_breakdowns_are_not_numbers() -> None:
    assert METRIC_DIRECTIONS["SENT_BYTES_TOTAL"] is Direction.NEUTRAL
    assert METRIC_DIRECTIONS["USERLOAD"] is Direction.NEUTRAL
    assert METRIC_DIRECTIONS["HTTP_METHODS"] is Direction.BREAKDOWN


# --- the comparison -------------------------------------------------------------------------------

SPEC = GateSpec.parse({P95: "<= 800"}, {P95: 10, "THROUGHPUT_RATE": 5, "ERRORS_TOTAL": 0}, "previous")


def _row(values: dict[str, Any], baseline: dict[str, Any] | None, metric: str = P95) -> dict[str, Any]:
    return next(r.to_xcom() for r in judge(SPEC, values, baseline) if r.metric == metric)


def test_equal_to_the_baseline_passes() -> None:
    row = _row({P95: 700}, {P95: 700})
    assert row["passed"] and row["change_pct"] == 0.0


def test_better_passes_in_both_directions() -> None:
    assert _row({P95: 500}, {P95: 700})["passed"]
    assert _row({P95: 500}, {P95: 700})["change_pct"] == pytest.approx(-28.57)
    row = _row({"THROUGHPUT_RATE": 120}, {"THROUGHPUT_RATE": 100}, "THROUGHPUT_RATE")
    assert row["passed"] and row["change_pct"] == 20.0


def test_worse_beyond_the_bound_fails_in_both_directions() -> None:
    assert _row({P95: 770}, {P95: 700})["passed"]  # +10 % exactly is allowed
    row = _row({P95: 771}, {P95: 700})
    assert not row["passed"] and "more than 10 % worse" in row["reason"]
    row = _row({"THROUGHPUT_RATE": 90}, {"THROUGHPUT_RATE": 100}, "THROUGHPUT_RATE")
    assert not row["passed"] and row["change_pct"] == -10.0


def test_budget_fails_even_without_regression() -> None:
    row = _row({P95: 900}, {P95: 900})
    assert not row["passed"] and row["reason"] == "budget <= 800"


def test_baseline_zero() -> None:
    assert _row({"ERRORS_TOTAL": 0}, {"ERRORS_TOTAL": 0}, "ERRORS_TOTAL")["passed"]
    row = _row({"ERRORS_TOTAL": 3}, {"ERRORS_TOTAL": 0}, "ERRORS_TOTAL")
    assert not row["passed"] and row["change_pct"] is None  # any worsening of 0 is infinitely worse
    assert _row({"THROUGHPUT_RATE": 3}, {"THROUGHPUT_RATE": 0}, "THROUGHPUT_RATE")["passed"]


def test_missing_value_from_the_service_fails_as_not_measured() -> None:
    row = _row({P95: None}, {P95: 700})
    assert not row["passed"] and row["reason"] == "not measured: no value from the service"
    assert row["status"] == "not_measured"
    assert not _row({}, None)["passed"]


@pytest.mark.parametrize("unread", [None, "700", float("nan"), True, "missing"])
def test_a_baseline_value_that_cannot_be_read_fails_its_bound_never_passes(unread: object) -> None:
    """Failed on the old code: a bounded metric whose baseline value was unreadable passed on its
    budget alone, so a regression against a baseline nobody read went through."""
    baseline = {} if unread == "missing" else {P95: unread}
    row = _row({P95: 799}, baseline)
    assert not row["passed"] and row["status"] == "not_measured"
    assert row["reason"].startswith("not measured:") and row["baseline"] is None
    # a metric with a budget only does not need the baseline's value
    budget_only = GateSpec.parse({P95: "<= 800"}, None, "previous")
    assert judge(budget_only, {P95: 799}, baseline)[0].passed


def test_no_baseline_checks_budgets_only() -> None:
    rows = judge(SPEC, {P95: 5000, "THROUGHPUT_RATE": 1, "ERRORS_TOTAL": 99}, None)
    assert [r.passed for r in rows] == [False, True, True]


# --- the operator: rows in XCom, message, baseline from XCom, asset events ------------------------


def _ti(previous: Any = None) -> mock.MagicMock:
    ti = mock.MagicMock(name="ti", start_date=None, map_index=-1)
    ti.xcom_pull.return_value = previous
    return ti


def _gate_context(previous: Any = None, outlets: bool = False) -> dict[str, Any]:
    context = _context(FakeStateStore())
    context["ti"] = _ti(previous)
    if outlets:

        class Events:  # keyed by URI, as Airflow's accessors are (3.1's Asset is not hashable)
            def __init__(self) -> None:
                self.by_uri: dict[str, Any] = {}

            def __getitem__(self, asset: Any) -> Any:
                return self.by_uri.setdefault(asset.uri, mock.MagicMock(extra={}))

        context["outlet_events"] = Events()
    return context


def _pushed(context: dict[str, Any]) -> dict[str, Any]:
    return {c.kwargs["key"]: c.kwargs["value"] for c in context["ti"].xcom_push.call_args_list}


NO_HISTORY = {"centre": None, "noise": None, "band_low": None, "band_high": None, "history_n": None,
              "note": None, "own_sd": None, "night_sd": None}  # fmt: skip
GATED = {
    "metric_budgets": {P95: "<= 800", "ERRORS_PERCENT": "< 1"},
    "baseline": "previous",
    "max_regression_pct": {P95: 10},
}


def test_failing_regression_pushes_rows_and_names_every_failing_metric(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[780.0, 2.5])
    context = _gate_context(
        previous={"bench_result_id": "br-0", "metrics": {P95: 600.0, "ERRORS_PERCENT": 0.1}}
    )
    op = _op(**GATED)
    with pytest.raises(AirflowFailException) as caught:
        op.execute(context)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "baseline run br-0" in message
    assert f"{P95} 780 vs baseline 600 (+30.0 %): more than 10 % worse" in message
    assert "ERRORS_PERCENT 2.5 vs baseline 0.1 (+2400.0 %): budget < 1" in message
    pushed = _pushed(context)
    assert pushed["return_value"]["gate"] == [
        {"metric": P95, "value": 780.0, "passed": False, "budget": "<= 800", "baseline": 600.0,
         "change_pct": 30.0, "max_regression_pct": 10.0, "reason": "more than 10 % worse than the baseline",
         "status": "regression", **NO_HISTORY, "transaction": None},
        {"metric": "ERRORS_PERCENT", "value": 2.5, "passed": False, "budget": "< 1", "baseline": 0.1,
         "change_pct": 2400.0, "max_regression_pct": None, "reason": "budget < 1", "status": "budget",
         **NO_HISTORY, "transaction": None},
    ]  # fmt: skip
    assert BASELINE_XCOM_KEY not in pushed  # a failing run is never a baseline
    context["ti"].xcom_pull.assert_called_once_with(
        task_ids="run", key=BASELINE_XCOM_KEY, include_prior_dates=True, map_indexes=-1
    )
    body = requests_mock.request_history[-1].json()
    assert body["@type"] == "SummaryReportItem"
    assert [(m["id"], m["benchResultId"]) for m in body["metrics"]] == [
        (P95, "br-1"),
        ("ERRORS_PERCENT", "br-1"),
    ]


def test_passing_run_leaves_its_values_as_the_next_baseline(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[610.0, 0.2])
    context = _gate_context(previous={"bench_result_id": "br-0", "metrics": {P95: 600.0}})
    result = _op(**GATED).execute(context)  # type: ignore[arg-type]
    assert [r["passed"] for r in result["gate"]] == [True, True]
    # the baseline's ERRORS_PERCENT was not known: fetched for br-0, not for the run
    last = requests_mock.request_history[-1].json()["metrics"]
    assert [(m["id"], m["benchResultId"]) for m in last] == [("ERRORS_PERCENT", "br-0")]
    assert _pushed(context)[BASELINE_XCOM_KEY] == {
        "bench_result_id": "br-1",
        "metrics": {P95: 610.0, "ERRORS_PERCENT": 0.2},
        "transactions": {},
    }
    assert "against baseline run br-0" in capsys.readouterr().out
    assert "summary_metrics" not in result


def test_no_baseline_yet_is_not_a_failure_and_says_budgets_only(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[0.2, 5000.0])
    op = _op(**{**GATED, "metric_budgets": {"ERRORS_PERCENT": "< 1"}})
    result = op.execute(_gate_context())  # type: ignore[arg-type]
    assert result["gate"][1]["baseline"] is None and result["gate"][1]["passed"]
    assert (
        "no baseline yet (no earlier run of this task passed), so budgets only were checked"
        in capsys.readouterr().out
    )


def test_report_summary_metrics_are_reused_and_pinned_baseline_is_fetched(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    own = {
        "@type": "HitMetric",
        "id": P95,
        "type": "HIT",
        "filters": [],
        "benchResultId": "br-1",
        "configs": [],
    }
    report = {**BENCH_REPORT, "items": [{"@type": "SummaryReportItem", "id": "s", "metrics": [own]}]}
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(f"{BASE_URL}/runtime/scenarios/run/sc-1", json=report)
    requests_mock.post(SUMMARY_URL, [{"json": [700.0]}, {"json": [690.0]}])
    result = _op(metric_budgets={P95: "<= 800"}, baseline="br-0", max_regression_pct={P95: 5}).execute(
        _gate_context()  # type: ignore[arg-type]
    )
    run_body, base_body = (r.json() for r in requests_mock.request_history if r.url == SUMMARY_URL)
    assert run_body["metrics"] == [own]
    assert base_body["metrics"] == [{**own, "benchResultId": "br-0"}]
    assert result["gate"][0]["change_pct"] == 1.45


def test_failed_run_is_judged_best_effort_and_fails_for_its_own_reason(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["ERROR"])
    requests_mock.post(SUMMARY_URL, status_code=500)
    with pytest.raises(AirflowException, match="ERROR"):
        _op(**GATED).execute(_gate_context())  # type: ignore[arg-type]


def test_asset_event_carries_the_run_and_the_verdict(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[610.0, 0.2])
    asset = Asset("loadtest://nightly")
    context = _gate_context(outlets=True)
    result = _op(**GATED, outlets=[asset]).execute(context)  # type: ignore[arg-type]
    assert context["outlet_events"][asset].extra == {
        "scenario_id": "sc-1",
        "bench_result_id": "br-1",
        "report_url": result["report_url"],
        "state": "FINISHED",
        "passed": True,
        "metrics": {P95: 610.0, "ERRORS_PERCENT": 0.2},
        "transactions": {},
        "gate": result["gate"],
        "night_effect": None,  # a gate of two series has none
    }
    assert [GateRow.from_xcom(row).status for row in result["gate"]] == ["pass", "pass"]


def test_deferrable_mode_reaches_the_same_verdict(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    own = {"id": P95, "type": "HIT", "filters": [{"@type": "SingleTermFilter", "field": "f", "term": "t"}],
           "benchResultId": "br-1", "configs": []}  # fmt: skip
    report = {**BENCH_REPORT, "items": [{"@type": "SummaryReportItem", "id": "s", "metrics": [own]}]}
    _service(requests_mock, ["RUNNING"])
    requests_mock.post(f"{BASE_URL}/runtime/scenarios/run/sc-1", json=report)
    requests_mock.post(SUMMARY_URL, json=[900.0, 0.2])
    context = _gate_context()
    op = _op(**GATED, deferrable=True)
    with pytest.raises(TaskDeferred) as caught:
        op.execute(context)  # type: ignore[arg-type]
    run_record = caught.value.trigger.serialize()[1]["run_record"]
    assert run_record["summary_metrics"] == {P95: own}  # the report's metric travels with the run
    outcome = {"bench_result_id": "br-1", "state": "FINISHED", "reason": "finished", "succeeded": True,
               "message": "Run br-1 FINISHED", "duration_s": 1.0}  # fmt: skip
    resumed = _op(**GATED, deferrable=True)  # a new instance, as after a deferral
    with pytest.raises(AirflowFailException, match=f"{P95} 900: budget <= 800"):
        resumed.execute_complete(context, {"status": "done", "run": run_record, "outcome": outcome})  # type: ignore[arg-type]
    assert _pushed(context)["return_value"]["gate"][0]["value"] == 900.0
    assert requests_mock.request_history[-1].json()["metrics"][0] == own


def test_judge_names_the_transaction_its_rows_are_about() -> None:
    spec = GateSpec.parse({P95: "<= 800"}, None, None)
    (row,) = judge(spec, {P95: 900.0}, None, transaction="Checkout")
    assert (row.transaction, row.passed) == ("Checkout", False)
    (run_row,) = judge(spec, {P95: 900.0}, None)
    assert run_row.transaction is None


def test_the_table_and_the_message_name_the_transaction_of_a_row() -> None:
    from airflow_provider_loadtest.decisions.gate import Verdict

    spec = GateSpec.parse({P95: "<= 800"}, None, None)
    rows = [*judge(spec, {P95: 700.0}, None), *judge(spec, {P95: 2345.0}, None, transaction="Check\nout")]
    verdict = Verdict(tuple(rows), None)
    header, run_line, checkout_line = verdict.table().splitlines()
    assert header.split()[:3] == ["transaction", "metric", "value"]
    assert run_line.split()[:3] == ["(run)", P95, "700"]
    assert checkout_line.split()[:4] == ["Check", "out", P95, "2345"]  # one line, whatever the label
    assert verdict.message() == f"Quality gate failed: {P95} of 'Check\\nout' 2345: budget <= 800"
    only_run = Verdict(tuple(rows[:1]), None)
    assert only_run.table().splitlines()[0].split()[0] == "metric"  # no transaction: no column


def test_transaction_rows_are_kept_apart_from_the_run_s_values() -> None:
    """A transaction's P95 must not overwrite the run's in the asset event and the next baseline."""
    from airflow_provider_loadtest.decisions.gate import Baseline, Verdict, asset_extra

    spec = GateSpec.parse({P95: "<= 800"}, None, None)
    rows = [*judge(spec, {P95: 700.0}, None), *judge(spec, {P95: 2345.0}, None, transaction="Checkout")]
    verdict = Verdict(tuple(rows), None)
    assert verdict.metrics == {P95: 700.0}
    assert verdict.transactions == {"Checkout": {P95: 2345.0}}
    extra = asset_extra({}, passed=False, verdict=verdict)
    assert (extra["metrics"], extra["transactions"]) == ({P95: 700.0}, {"Checkout": {P95: 2345.0}})
    saved = Baseline("br-1", verdict.metrics, transactions=verdict.transactions).to_xcom()
    again = Baseline.from_xcom(saved)
    assert again is not None and again.metrics == {P95: 700.0}
    assert again.transactions == {"Checkout": {P95: 2345.0}}
    older = Baseline.from_xcom({"bench_result_id": "br-0", "metrics": {P95: 1.0}})  # written before
    assert older is not None and older.transactions == {}


def test_a_bad_regression_bound_names_the_setting_it_came_from() -> None:
    from airflow_provider_loadtest.decisions.gate import parse_regression

    where = "transaction_max_regression_pct['Checkout']"
    with pytest.raises(ValueError, match=rf"^{re.escape(where)}\['{P95}'\]: 'ten' is not a percentage"):
        parse_regression({P95: "ten"}, where)
    with pytest.raises(ValueError, match=rf"^{re.escape(where)}: USERLOAD is neither better nor worse"):
        parse_regression({"USERLOAD": 10}, where)


def test_evaluate_joins_the_transaction_rows_history_and_log_to_the_run_s() -> None:
    from airflow_provider_loadtest.decisions.gate import evaluate
    from airflow_provider_loadtest.decisions.history import GateHistory, SeriesHistory
    from airflow_provider_loadtest.decisions.watch import Log

    spec = GateSpec.parse(None, {P95: 10}, "history")
    checkout = judge(GateSpec.parse({P95: "<= 800"}, None, None), {P95: 2345.0}, None, transaction="Checkout")
    steps = evaluate(
        spec,
        "br-1",
        known_metrics={},
        baseline=None,
        history=GateHistory(),
        transaction_rows=checkout,
        transaction_history={("Checkout", P95): SeriesHistory((2345.0,))},
        transactions_log="Slowest transactions ...",
    )
    request = next(steps)
    assert request.path == "/analysis/metrics/summary"
    load = steps.send([600.0])  # the applied load, asked apart (decisions.gate.load)
    assert [m["id"] for m in load.json_body["metrics"]] == ["USERLOAD", "HITS_RATE"]
    log = steps.send([50, 120.0])
    assert isinstance(log, Log) and log.message.endswith("\nSlowest transactions ...")
    assert "Checkout" in log.message.splitlines()[5]
    with pytest.raises(StopIteration) as done:
        next(steps)
    verdict = done.value.value
    assert [(r.transaction, r.metric, r.passed) for r in verdict.rows] == [
        (None, P95, True),
        (None, "USERLOAD", True),
        (None, "HITS_RATE", True),
        ("Checkout", P95, False),
    ]
    assert verdict.history is not None
    assert set(verdict.history.series) == {
        (None, P95),
        ("Checkout", P95),
        (None, "USERLOAD"),
        (None, "HITS_RATE"),
    }
