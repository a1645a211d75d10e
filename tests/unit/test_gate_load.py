"""The applied load (``decisions.gate.load``): a run that applied markedly fewer users (or far fewer hits)
than usual fails as not measured, a few percent either way passes, a deliberate change is accepted, the
light night leaves every history as it was, and the load never enters the family's budget or night
effect. The same rule through ``evaluate`` (the operator's path), ``replay_gate`` and ``min_userload``."""

from __future__ import annotations

from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.decisions.gate import GateSpec, evaluate, replay_gate
from airflow_provider_loadtest.decisions.gate.history import (
    GateHistory,
    HistorySettings,
    SeriesHistory,
    SeriesKey,
)
from airflow_provider_loadtest.decisions.gate.load import LoadSeries, judge_load, judge_loads
from tests.unit.test_gate import SUMMARY_URL, _gate_context, _pushed
from tests.unit.test_gate_history import _drive
from tests.unit.test_run_lifecycle import _op, _service

P95 = "RESPONSE_TIME_PERCENTILE_95"
SETTINGS = HistorySettings()
USUAL = SeriesHistory((500.0,) * 10)


def _users(value: float, history: Any = USUAL, **kw: Any) -> Any:
    return judge_load(LoadSeries("USERLOAD", value, **kw), history, SETTINGS)


def test_a_run_that_applied_a_fifth_of_its_users_fails_as_not_measured_saying_so() -> None:
    row, after = _users(100.0)
    assert not row.passed and row.status == "not_measured"
    assert row.reason == (
        "the run applied 100 of its usual 500 users: its response times do not describe the usual load"
    )
    assert row.baseline == 500.0 and row.change_pct == -80.0
    assert after is None  # a light night never joins: a broken generator never becomes the usual


@pytest.mark.parametrize("value", [480.0, 450.0, 401.0, 520.0, 600.0])
def test_a_few_percent_more_or_fewer_users_passes_and_joins_the_history(value: float) -> None:
    row, after = _users(value)
    assert row.passed and row.status == "pass"
    assert after is not None and after.values[-1] == value


def test_the_edge_is_twenty_percent_fewer_users() -> None:
    assert _users(400.0)[0].passed  # exactly 20 % fewer: not beyond
    assert not _users(399.0)[0].passed


def test_markedly_more_users_passes_with_a_note() -> None:
    row, _ = _users(1000.0)
    assert row.passed and "more load than its history" in (row.note or "")


def test_a_load_that_varies_is_judged_beyond_its_noise() -> None:
    noisy = SeriesHistory(tuple(500.0 + d for d in (-90, 90, -60, 60, 0, -120, 120, -30, 30, 0)))
    assert _users(390.0, noisy)[0].passed  # 22 % fewer, but within 3 of its noise sd (about 71)
    assert not _users(250.0, noisy)[0].passed


def test_a_deliberate_change_of_load_is_accepted_and_restarts_the_history() -> None:
    row, after = judge_load(LoadSeries("USERLOAD", 100.0), USUAL, SETTINGS, accepted=True)
    assert row.passed and "accepted" in (row.note or "")
    assert after == SeriesHistory((100.0,))


def test_hits_rate_is_a_trust_check_at_half_its_usual() -> None:
    usual = SeriesHistory((120.0,) * 10)
    light, _ = judge_load(LoadSeries("HITS_RATE", 55.0), usual, SETTINGS)
    assert light.status == "not_measured"
    assert "the run sent 55 of its usual 120 hits/s" in (light.reason or "")
    assert judge_load(LoadSeries("HITS_RATE", 80.0), usual, SETTINGS)[0].passed  # a slower night


def test_without_a_history_min_userload_states_the_load_to_reach() -> None:
    row, _ = judge_load(LoadSeries("USERLOAD", 100.0, minimum=500), None, SETTINGS)
    assert row.status == "not_measured" and "fewer than the 500 it must reach (min_userload)" in (
        row.reason or ""
    )
    assert judge_load(LoadSeries("USERLOAD", 500.0, minimum=500), None, SETTINGS)[0].passed
    # a load the service does not give: a note, unless a minimum was asked for
    unread, _ = judge_load(LoadSeries("USERLOAD", None), USUAL, SETTINGS)
    assert unread.passed and "not checked" in (unread.note or "")
    asked, _ = judge_load(LoadSeries("USERLOAD", None, minimum=10), None, SETTINGS)
    assert asked.status == "not_measured"


def test_the_first_night_passes_and_starts_the_history() -> None:
    rows, kept = judge_loads([LoadSeries("USERLOAD", 500.0)], GateHistory(), SETTINGS)
    assert rows[0].passed and "from the next night on" in (rows[0].note or "")
    assert kept == {(None, "USERLOAD"): SeriesHistory((500.0,))}


# --- replay_gate: the same rule, outside the family ------------------------------------------------


def _nights(users: list[float], *, series: int = 10) -> list[dict[Any, object]]:
    """Clean nights of ``series`` transactions' p95 (about 500 ms) and the run's user load."""
    import random

    rng = random.Random(3)
    return [
        {
            (None, "USERLOAD"): load,
            **{(f"t{i}", P95): 500.0 * (1 + 0.05 * rng.gauss(0, 1)) for i in range(series)},
        }
        for load in users
    ]


def test_replay_gate_judges_userload_by_the_load_rule_and_keeps_the_light_night_out() -> None:
    verdicts = replay_gate(_nights([500.0] * 12 + [100.0, 500.0]), max_regression_pct=10)
    light = verdicts[12]
    assert not light.passed
    (row,) = [r for r in light.rows if r.metric == "USERLOAD"]
    assert row.status == "not_measured" and "applied 100 of its usual 500 users" in (row.reason or "")
    assert light.history == verdicts[11].history  # no series learned from the light night
    assert verdicts[13].passed
    # the load is no series of the family: its budget counts the 10 transactions alone
    assert "10 series" in (verdicts[11].budget_text or "")
    assert row.own_sd is None and row.night_sd is None


def test_replay_gate_with_the_load_named_in_the_bounds_judges_hits_rate_as_a_regression() -> None:
    nights: list[dict[SeriesKey, object]] = [
        {(None, "HITS_RATE"): 120.0, (None, P95): 500.0 + i % 3} for i in range(8)
    ]
    nights.append({(None, "HITS_RATE"): 50.0, (None, P95): 501.0})
    trust = replay_gate(nights, max_regression_pct=10)[-1]
    assert [r.status for r in trust.rows if r.metric == "HITS_RATE"] == ["not_measured"]
    bounded = replay_gate(nights, max_regression_pct={"HITS_RATE": 10, P95: 10})[-1]
    assert [r.status for r in bounded.rows if r.metric == "HITS_RATE"] == ["regression"]


# --- evaluate (the operator's and the sensor's path) ----------------------------------------------


def _season() -> GateHistory:
    spec = GateSpec.parse(None, {P95: 10}, "history")
    history = GateHistory()
    for night in range(10):
        verdict, _ = _drive(
            evaluate(spec, f"br-{night}", known_metrics={}, baseline=None, history=history),
            [[600.0 + (night % 3) * 5], [500, 120.0]],
        )
        assert verdict.passed and verdict.history is not None
        history = verdict.history
    return history


def test_every_history_gate_reads_the_load_apart_and_a_light_run_fails_leaving_the_history() -> None:
    spec = GateSpec.parse(None, {P95: 10}, "history")
    season = _season()
    assert season.series[(None, "USERLOAD")].values == (500.0,) * 10
    steps = evaluate(spec, "br-light", known_metrics={}, baseline=None, history=season)
    first = next(steps)
    assert [m["id"] for m in first.json_body["metrics"]] == [P95]
    second = steps.send([480.0])  # a lightly loaded system answers faster
    assert [m["id"] for m in second.json_body["metrics"]] == ["USERLOAD", "HITS_RATE"]
    log = steps.send([100, 24.0])
    with pytest.raises(StopIteration) as done:
        next(steps)
    verdict = done.value.value
    assert not verdict.passed
    assert [(r.metric, r.status) for r in verdict.rows] == [
        (P95, "noise"),
        ("USERLOAD", "not_measured"),
        ("HITS_RATE", "not_measured"),
    ]
    assert verdict.history == season
    assert "kept out of every series' history" in log.message
    assert "USERLOAD 100 vs history centre 500 (-80.0 %): the run applied 100 of its usual 500 users" in (
        verdict.message()
    )


def test_a_load_the_service_refuses_leaves_the_gate_its_own_metrics() -> None:
    from airflow_provider_loadtest.api.errors import LoadTestApiError

    spec = GateSpec.parse(None, {P95: 10}, "history")
    steps = evaluate(spec, "br-1", known_metrics={}, baseline=None, history=_season())
    next(steps)
    steps.send([600.0])
    refused = LoadTestApiError(
        operation="Read the summary metric values",
        method="POST",
        path="/analysis/metrics/summary",
        status=400,
        detail="unknown metric USERLOAD",
    )
    log = steps.throw(refused)
    assert "the applied load is not checked" in log.message
    with pytest.raises(StopIteration) as done:
        next(steps)
    assert done.value.value.passed


def test_min_userload_checks_the_load_of_a_run_without_any_other_gate(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[100])
    context = _gate_context()
    with pytest.raises(AirflowFailException, match="fewer than the 500 it must reach"):
        _op(min_userload=500).execute(context)  # type: ignore[arg-type]
    (row,) = _pushed(context)["return_value"]["gate"]
    assert row["metric"] == "USERLOAD" and row["status"] == "not_measured"
    with pytest.raises(ValueError, match="min_userload"):
        _op(min_userload=0)


def _stored() -> dict[str, Any]:
    """What ten ordinary nights of a history gate left in XCom, the load's series with them."""
    series: dict[SeriesKey, SeriesHistory] = {
        (None, P95): SeriesHistory(tuple(600.0 + i % 3 for i in range(10))),
        (None, "USERLOAD"): SeriesHistory((500.0,) * 10),
        (None, "HITS_RATE"): SeriesHistory((150.0,) * 10),
    }
    return GateHistory(series).to_xcom()


@pytest.mark.parametrize("accept", [False, True])
def test_the_operator_fails_a_light_run_unless_the_dag_run_accepts_the_change(
    loadtest_conn: str, requests_mock: rm.Mocker, accept: bool
) -> None:
    from tests.unit.test_gate_wiring import _context_with

    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, [{"json": [560.0]}, {"json": [100, 30.0]}])
    context = _context_with(_stored(), conf={"loadtest_accept_change": True} if accept else None)
    op = _op(baseline="history", max_regression_pct={P95: 10})
    if accept:
        result = op.execute(context)  # type: ignore[arg-type]
        assert [r["status"] for r in result["gate"]] == ["pass", "pass", "pass"]
        pushed = GateHistory.from_xcom(_pushed(context)["loadtest_gate_history"])
        assert pushed.series[(None, "USERLOAD")] == SeriesHistory((100.0,))  # the new normal
        return
    with pytest.raises(AirflowFailException, match="the run applied 100 of its usual 500 users"):
        op.execute(context)  # type: ignore[arg-type]
    pushed = GateHistory.from_xcom(_pushed(context)["loadtest_gate_history"])
    assert pushed.to_xcom() == _stored()  # the light night joined nothing
