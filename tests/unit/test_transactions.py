"""Gates per transaction: ``transaction_budgets`` checked when the DAG is parsed, and judged per label
(or label pattern) by the run gate's own ``judge``, from the figures of the run's JTL files."""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.decisions.gate import GateRow
from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary
from airflow_provider_loadtest.decisions.transactions import (
    TransactionBudgets,
    judge_transactions,
    slowest_text,
    unsampled_reason,
)
from tests.unit.test_jtl import START_MS, Sample, jtl_text, read


def summary_of(times: dict[str, list[int]], errors: dict[str, int] | None = None) -> JtlSummary:
    rows = []
    for label, values in times.items():
        failing = (errors or {}).get(label, 0)
        rows += [
            Sample(START_MS + 10 * i, value, label, i >= failing, "OK", 1000, 640, value // 2, 0)
            for i, value in enumerate(values)
        ]
    return read({"lg-1.jtl": jtl_text(rows).encode()})


def run(budgets: object, summary: JtlSummary) -> list[GateRow]:
    return judge_transactions(TransactionBudgets.parse(budgets), summary)


SUMMARY_TIMES = {
    "Checkout": list(range(500, 1500, 10)),  # p95 1440
    "api/items": list(range(100, 200)),  # p95 194
    "api/users": list(range(300, 400)),  # p95 394
    "Home": [50] * 100,
}


# --- the setting ---------------------------------------------------------------------------------------


def test_budgets_parse_per_label_and_pattern() -> None:
    budgets = TransactionBudgets.parse(
        {
            "Checkout": {"RESPONSE_TIME_PERCENTILE_95": "<= 800", "ERRORS_PERCENT": "< 1"},
            "api/*": {"HITS_RATE": ">= 2"},
        }
    )
    assert budgets.active
    assert budgets.metric_ids == ("RESPONSE_TIME_PERCENTILE_95", "ERRORS_PERCENT", "HITS_RATE")
    assert str(budgets.budgets["Checkout"]["RESPONSE_TIME_PERCENTILE_95"]) == "<= 800"
    assert not TransactionBudgets.parse(None).active and not TransactionBudgets.parse({}).active


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["Checkout"], r"transaction_budgets must be a mapping of transaction label .* got list"),
        ({"": {"ERRORS_PERCENT": "< 1"}}, r"transaction_budgets: '' is not a transaction label"),
        ({"Checkout": "<= 800"}, r"transaction_budgets\['Checkout'\] must be a non-empty mapping"),
        ({"Checkout": {}}, r"transaction_budgets\['Checkout'\] must be a non-empty mapping"),
        (
            {"Checkout": {"RESPONSE_TIME_PERCENTILE95": "<= 800"}},
            r"transaction_budgets\['Checkout'\]: unknown metric id 'RESPONSE_TIME_PERCENTILE95'; "
            r"did you mean RESPONSE_TIME_PERCENTILE_95",
        ),
        (
            {"Checkout": {"RESPONSE_TIME_APDEX": ">= 0.9"}},
            r"transaction_budgets\['Checkout'\]: RESPONSE_TIME_APDEX cannot be computed from a run's "
            r"samples; a transaction can be gated on HITS_TOTAL, ",
        ),
        (
            {"Checkout": {"ERRORS_PERCENT": "under 1"}},
            r"transaction_budgets\['Checkout'\]\['ERRORS_PERCENT'\]: condition 'under 1' does not parse; "
            r"write an operator",
        ),
    ],
)
def test_a_wrong_setting_is_named(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TransactionBudgets.parse(value)
    with pytest.raises(ValueError, match=message):
        TransactionBudgets.check_literal(value)  # the same error when the DAG is parsed


def test_templates_are_left_for_the_run_and_the_rest_checked_at_parse_time() -> None:
    TransactionBudgets.check_literal("{{ var.json.budgets }}")
    TransactionBudgets.check_literal({"{{ params.label }}": {"ERRORS_PERCENT": "< 1"}})
    TransactionBudgets.check_literal({"Checkout": "{{ var.json.checkout }}"})
    TransactionBudgets.check_literal({"Checkout": {"ERRORS_PERCENT": "< {{ params.max_errors }}"}})
    with pytest.raises(ValueError, match="unknown metric id 'WRONG'"):
        TransactionBudgets.check_literal(
            {"{{ params.label }}": {"ERRORS_PERCENT": "< 1"}, "Home": {"NOPE": "< {{ x }}", "WRONG": "< 1"}}
        )


# --- the verdict ---------------------------------------------------------------------------------------


def test_a_slow_transaction_fails_its_budget_row_by_row() -> None:
    rows = run(
        {"Checkout": {"RESPONSE_TIME_PERCENTILE_95": "<= 800", "ERRORS_PERCENT": "< 1"}},
        summary_of(SUMMARY_TIMES),
    )
    assert rows == [
        GateRow(
            "RESPONSE_TIME_PERCENTILE_95",
            1440.0,
            False,
            "<= 800",
            reason="budget <= 800",
            status="budget",
            transaction="Checkout",
        ),
        GateRow("ERRORS_PERCENT", 0.0, True, "< 1", transaction="Checkout"),
    ]
    assert rows[0].to_xcom()["transaction"] == "Checkout"


def test_a_pattern_applies_to_each_matching_label_and_an_exact_label_wins() -> None:
    rows = run(
        {
            "api/*": {"RESPONSE_TIME_PERCENTILE_95": "<= 300", "ERRORS_TOTAL": "<= 0"},
            "api/u*": {"RESPONSE_TIME_PERCENTILE_95": "<= 1"},  # the first pattern naming a metric wins
            "api/users": {"RESPONSE_TIME_PERCENTILE_95": "<= 400"},  # an exact label wins
        },
        summary_of(SUMMARY_TIMES, errors={"api/items": 2}),
    )
    found = {(row.transaction, row.metric): (row.value, row.budget, row.passed) for row in rows}
    assert found == {
        ("api/items", "RESPONSE_TIME_PERCENTILE_95"): (194.0, "<= 300", True),
        ("api/items", "ERRORS_TOTAL"): (2.0, "<= 0", False),
        ("api/users", "RESPONSE_TIME_PERCENTILE_95"): (394.0, "<= 400", True),
        ("api/users", "ERRORS_TOTAL"): (0.0, "<= 0", True),
    }
    assert len(rows) == 4  # one row per (transaction, metric)


def test_a_transaction_never_sampled_fails_naming_the_labels_seen_closest_first() -> None:
    rows = run({"checkout": {"RESPONSE_TIME_PERCENTILE_95": "<= 800"}}, summary_of(SUMMARY_TIMES))
    assert len(rows) == 1 and not rows[0].passed and rows[0].value is None
    assert rows[0].transaction == "checkout"
    assert rows[0].status == "not_measured"
    assert rows[0].reason == (
        "not measured: the run never sampled 'checkout'; labels sampled (closest first): 'Checkout', "
        "'Home', 'api/items', 'api/users'"
    )


def test_a_pattern_matching_nothing_fails_too() -> None:
    rows = run({"web/*": {"ERRORS_PERCENT": "< 1", "HITS_TOTAL": ">= 1"}}, summary_of(SUMMARY_TIMES))
    assert [(row.metric, row.passed) for row in rows] == [("ERRORS_PERCENT", False), ("HITS_TOTAL", False)]
    assert rows[0].reason is not None and rows[0].reason.startswith(
        "not measured: no sampled label matches 'web/*'"
    )


def test_the_labels_named_are_bounded_and_an_empty_run_says_so() -> None:
    labels = [f"step {i:02d}" for i in range(30)]
    reason = unsampled_reason("step 7", labels)
    assert reason.startswith("the run never sampled 'step 7'; labels sampled (closest first): 'step 07', ")
    assert reason.endswith(" and 20 more")
    assert unsampled_reason("x", []) == "the run never sampled 'x': its JTL files hold no samples"


def test_a_metric_without_its_column_fails_saying_why() -> None:
    text = "label,elapsed,success\r\nHome,5,true\r\n"  # no timeStamp: no rate
    rows = judge_transactions(
        TransactionBudgets.parse({"Home": {"HITS_RATE": ">= 1"}}), read({"lg-1.jtl": text.encode()})
    )
    assert [(row.value, row.passed) for row in rows] == [(None, False)]
    assert rows[0].reason == "not measured: the run's JTL files lack the column it is computed from"
    assert rows[0].status == "not_measured"


# --- the slowest transactions --------------------------------------------------------------------------


def test_the_slowest_five_by_p95_with_hits_and_errors() -> None:
    times = {f"t{i}": [10 * i + k for k in range(100)] for i in range(8)}
    text = slowest_text(summary_of(times, errors={"t7": 3}))
    lines = text.splitlines()
    assert lines[0] == "Slowest transactions by p95 response time (5 of 8, 800 samples in 1 JTL file(s)):"
    assert lines[1].split() == [
        "transaction",
        "hits",
        "errors",
        "p95",
        "ms",
        "p99",
        "ms",
        "avg",
        "ms",
        "max",
        "ms",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["t7", "t6", "t5", "t4", "t3"]
    assert lines[2].split() == ["t7", "100", "3", "(3.00", "%)", "164", "168", "119.5", "169"]


def test_no_transaction_at_all() -> None:
    assert slowest_text(read({"lg-1.jtl": b""})) == "No transaction sampled in 1 JTL file(s)."


def test_the_sample_metrics_are_service_metric_ids_that_can_be_gated() -> None:
    from airflow_provider_loadtest.decisions.gate import METRIC_DIRECTIONS, Direction
    from airflow_provider_loadtest.decisions.jtl_figures import SAMPLE_METRICS

    assert set(SAMPLE_METRICS) <= set(METRIC_DIRECTIONS)
    assert all(METRIC_DIRECTIONS[m] is not Direction.BREAKDOWN for m in SAMPLE_METRICS)


# --- regression bounds per transaction ------------------------------------------------------------


def test_bounds_parse_beside_budgets_and_name_every_metric_once() -> None:
    from airflow_provider_loadtest.decisions.transactions import TransactionGate

    gate = TransactionGate.parse(
        {"Checkout": {"ERRORS_PERCENT": "< 1"}},
        {"Checkout": {"RESPONSE_TIME_PERCENTILE_95": 10}, "api/*": {"ERRORS_PERCENT": 50}},
        "previous",
    )
    assert gate.active and gate.named == ["Checkout", "api/*"]
    assert gate.metric_ids == ("ERRORS_PERCENT", "RESPONSE_TIME_PERCENTILE_95")
    assert gate.bounded_metric_ids == ("RESPONSE_TIME_PERCENTILE_95", "ERRORS_PERCENT")
    assert not TransactionGate.parse(None, None, None).active
    TransactionGate.check_literal(None, {"{{ var.value.label }}": {"X": 1}}, "{{ var.value.b }}")
    TransactionGate.check_literal(None, {"Checkout": {"RESPONSE_TIME_AVG": "{{ var.value.pct }}"}}, None)
    with pytest.raises(ValueError, match="needs a baseline"):
        TransactionGate.check_literal(None, {"Checkout": {"RESPONSE_TIME_AVG": 10}}, None)


def test_a_bounded_label_judged_against_the_baseline_run_an_exact_label_winning_over_a_pattern() -> None:
    from airflow_provider_loadtest.decisions.transactions import TransactionGate, judge_transaction_gate

    gate = TransactionGate.parse(
        None, {"api/*": {"RESPONSE_TIME_AVG": 50}, "api/items": {"RESPONSE_TIME_AVG": 5}}, "br-0"
    )
    summary = summary_of(SUMMARY_TIMES)
    known = {"api/items": {"RESPONSE_TIME_AVG": 140.0}, "api/users": {"RESPONSE_TIME_AVG": 300.0}}
    rows, series = judge_transaction_gate(gate, summary, baseline="br-0", baseline_values=known)
    by_label = {row.transaction: row for row in rows}
    assert series == {}
    assert by_label["api/items"].max_regression_pct == 5 and not by_label["api/items"].passed  # 149.5 vs 140
    assert by_label["api/users"].max_regression_pct == 50 and by_label["api/users"].passed  # 349.5 vs 300


def test_unreadable_figures_fail_every_named_key_once_per_metric() -> None:
    from airflow_provider_loadtest.decisions.gate import Unreadable
    from airflow_provider_loadtest.decisions.transactions import TransactionGate, judge_transaction_gate

    gate = TransactionGate.parse(
        {"Checkout": {"ERRORS_PERCENT": "< 1", "RESPONSE_TIME_AVG": "< 500"}},
        {"Checkout": {"RESPONSE_TIME_AVG": 10}},
        "history",
    )
    rows, series = judge_transaction_gate(gate, Unreadable("no JTL"), baseline="history")
    assert [(r.metric, r.budget, r.max_regression_pct, r.status) for r in rows] == [
        ("ERRORS_PERCENT", "< 1", None, "not_measured"),
        ("RESPONSE_TIME_AVG", "< 500", 10, "not_measured"),
    ]
    assert all(r.reason == "not measured: no JTL" and not r.passed for r in rows) and series == {}
