"""``baseline="history"``: the noise estimate, the one-night and persistence tests, what joins the history,
accepting a change, the XCom forms, and a gate that fails closed on whatever it cannot read."""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import replace
from typing import Any

import pytest

from airflow_provider_loadtest.api.endpoints import ApiRequest
from airflow_provider_loadtest.decisions.gate import (
    Baseline,
    GateRow,
    GateSpec,
    Verdict,
    evaluate,
    judge,
    judge_history,
    replay_history,
)
from airflow_provider_loadtest.decisions.history import (
    ACCEPT_CHANGE,
    HISTORY_XCOM_KEY,
    GateHistory,
    HistorySettings,
    SeriesHistory,
    accepted_metrics,
    estimate,
    nominal_false_alarm_rate,
    t_quantile,
    threshold_factor,
)
from airflow_provider_loadtest.decisions.watch import Log

P95 = "RESPONSE_TIME_PERCENTILE_95"
THROUGHPUT = "THROUGHPUT_RATE"


def _kept(history: SeriesHistory | None) -> object:
    """The nights a history keeps (its reference level's bookkeeping, issue 33, aside)."""
    assert history is not None
    return (history.values, history.recent, history.shifts, history.recent_shifts)


def nights(count: int, *, cv: float = 0.05, base: float = 500.0, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [round(base * (1 + cv * rng.gauss(0, 1)), 2) for _ in range(count)]


def settled(history_nights: int = 40, **kwargs: Any) -> list[float]:
    """A season long enough for a full history (window 30, plus the nights waiting to join)."""
    return nights(history_nights, **kwargs)


# --- the noise estimate ---------------------------------------------------------------------------


def test_the_noise_is_the_sd_within_the_fence_and_one_outlier_night_does_not_move_it() -> None:
    values = nights(30, cv=0.1, base=1.0, seed=3)
    fit = estimate(values)
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    assert fit.n == 30 and fit.centre == pytest.approx(mean) and fit.sd == pytest.approx(sd)
    for outlier in (50.0, -50.0):  # a hiccup, or a lucky night
        spiked = estimate([*values[:-1], outlier])
        assert spiked.n == 29
        assert spiked.sd == pytest.approx(sd, rel=0.15) and spiked.centre == pytest.approx(mean, rel=0.02)
    assert estimate([2.0, 2.0, 2.0]).sd == 0.0 and estimate([1.0]).sd == 0.0


def test_a_short_history_keeps_every_night() -> None:
    """The MAD of a few nights is too unsteady to fence with: it set ordinary nights aside."""
    few = [500.0, 501.0, 499.0, 500.5, 530.0]  # 530 is 20 MADs out, but 5 nights say little
    assert estimate(few).n == 5
    assert (
        estimate([*few, *nights(5, cv=0.002, seed=8)]).n == 9
    )  # FENCE_FROM = 10: fenced from the tenth night


def test_the_tails_of_the_noise_count_in_its_sd() -> None:
    """The first version's robust spread (Qn) saw the core of heavy-tailed noise only and cried wolf:
    a night 3 sd out, once in 30, is part of the noise and widens it."""
    values = nights(30, cv=0.05, base=100.0, seed=4)
    core = estimate(values).sd
    assert estimate([*values[:-1], 100.0 + 3 * 5.0]).sd > 1.1 * core


@pytest.mark.parametrize(
    ("z", "dof", "exact"),  # scipy.stats.t.ppf(norm.cdf(z), dof), computed once
    [
        (2.5, 59, 2.5791),
        (2.5, 29, 2.6659),
        (2.5, 7, 3.3400),
        (2.8, 59, 2.9086),
        (1.6449, 3, 2.3535),
        (2.5, 3, 5.405),
        (2.5, 2, 8.889),
        (2.5, 1, 51.254),
    ],
)
def test_t_quantile_is_within_a_hair_of_the_exact_one(z: float, dof: int, exact: float) -> None:
    assert t_quantile(z, dof) == pytest.approx(exact, rel=0.01 if dof < 7 else 0.001)


def test_the_threshold_is_the_prediction_interval_of_the_next_nights() -> None:
    # sqrt(1 + 1/n) for one night, sqrt(1/m + 1/n) for the mean of m; t widens a short history
    assert threshold_factor(2.5, 60) == pytest.approx(t_quantile(2.5, 59) * (1 + 1 / 60) ** 0.5)
    assert threshold_factor(2.8, 60, 3) == pytest.approx(t_quantile(2.8, 59) * (1 / 3 + 1 / 60) ** 0.5)
    assert threshold_factor(2.5, 8) > threshold_factor(2.5, 30) > threshold_factor(2.5, 60) > 2.5
    assert nominal_false_alarm_rate(2.5) == pytest.approx(0.00621, rel=0.01)


def test_one_outlier_night_in_the_history_does_not_widen_the_band() -> None:
    season = settled()
    clean = replay_history(P95, season, max_regression_pct=5)[-1]
    spiked = replay_history(P95, [*season[:20], 5000.0, *season[21:]], max_regression_pct=5)
    assert spiked[20].status == "regression"  # the outlier night itself fails, and never joins
    assert spiked[-1].noise == pytest.approx(clean.noise, rel=0.1)
    assert spiked[-1].centre == pytest.approx(clean.centre, rel=0.01)


# --- the verdicts ---------------------------------------------------------------------------------


def test_a_clean_season_is_noise_once_the_history_is_long_enough() -> None:
    failed = 0
    for seed in range(11, 21):  # under one false alarm per 100 nights: the benchmark measures it
        rows = replay_history(P95, nights(120, seed=seed), max_regression_pct=5)
        failed += sum(not r.passed for r in rows[8:])
    assert failed <= 12  # 1120 nights (7 failed when written)
    rows = replay_history(P95, nights(120, seed=17), max_regression_pct=5)
    judged = rows[8:]
    assert {r.status for r in judged} == {"noise", "suspected"}
    last = rows[-1]
    assert last.history_n == 60 and last.centre is not None and last.noise is not None
    assert last.band_low is not None and last.band_high is not None
    assert last.band_low < last.centre < last.band_high
    assert last.baseline == last.centre


def test_a_big_step_fails_on_its_first_night_and_keeps_failing_until_accepted() -> None:
    season = [*settled(), *[round(v * 1.4, 2) for v in nights(5, seed=9)]]  # +40 %: 8 noise sd
    rows = replay_history(P95, season, max_regression_pct=10)
    assert all(r.passed for r in rows[:40])
    for row in rows[40:]:
        assert not row.passed and row.status == "regression"
        assert "worse than the history's centre" in (row.reason or "")
        assert row.change_pct is not None and row.change_pct > 10
    # failing nights never joined: the centre is where it was
    assert rows[-1].centre == pytest.approx(rows[42].centre)  # 38 and 39 joined on nights 40 and 41


def test_a_change_smaller_than_the_bound_is_noise_however_clear() -> None:
    season = [*nights(40, cv=0.005), *[v * 1.04 for v in nights(5, cv=0.005, seed=5)]]  # 8 sd, 4 %
    rows = replay_history(P95, season, max_regression_pct=5)
    assert all(r.passed for r in rows)
    assert rows[-1].status == "noise"


def test_a_small_persistent_step_is_suspected_then_caught_when_it_persists() -> None:
    history = [500.0 + d for d in (-20, 20, -10, 10, 0, -25, 25, -5, 5, -15, 15) * 3]
    step = [535.0, 537.0, 536.0]  # about 2.2 noise sd, each night alone below the one-night band
    rows = replay_history(P95, [*history, *step], max_regression_pct=5)
    first, second, third = rows[-3:]
    assert first.passed and first.status == "suspected"
    assert "suspected" in (first.note or "") and "next nights" in (first.note or "")
    assert not third.passed and third.status == "regression"
    assert "nights together" in (third.reason or "")
    # the persistence test already fails the second: its 3 nights are the last of the history (+15,
    # not yet admitted) and the two step nights, together beyond persist_z
    assert not second.passed and second.status == "regression"
    assert "nights together" in (second.reason or "")
    # a confirmed regression keeps failing while it lasts, and none of its nights joins the history
    later = replay_history(P95, [*history, *step, 547.0, 551.0], max_regression_pct=5)
    assert [r.status for r in later[-2:]] == ["regression", "regression"]
    assert later[-1].centre == pytest.approx(rows[-1].centre)


def test_suspected_nights_join_only_once_the_next_nights_cleared_them() -> None:
    history = [500.0 + d for d in (-20, 20, -10, 10, 0, -25, 25, -5, 5, -15, 15) * 3]
    spec = GateSpec.parse(None, {P95: 5}, "history")
    state = GateHistory()
    for value in history:
        _, state = judge_history(spec, {P95: value}, None, history=state)  # type: ignore[assignment]
    before = state.series[(None, P95)].values
    rows, state = judge_history(spec, {P95: 535.0}, None, history=state)  # type: ignore[assignment]
    assert rows[0].status == "suspected"
    series = state.series[(None, P95)]
    assert 535.0 not in series.values and (535.0, "suspected") in series.recent
    for value in (500.0, 505.0):  # the next nights are ordinary: it was noise after all
        _, state = judge_history(spec, {P95: value}, None, history=state)  # type: ignore[assignment]
    assert state.series[(None, P95)].values[-1] == 535.0
    assert len(before) == len(history) - 2  # the last two are still recent


def test_lower_is_worse_metrics_fail_when_they_drop() -> None:
    season = [*nights(40, base=200.0), 120.0]
    rows = replay_history(THROUGHPUT, season, max_regression_pct=10)
    assert rows[-1].status == "regression" and rows[-1].change_pct is not None and rows[-1].change_pct < -10
    better = replay_history(THROUGHPUT, [*nights(40, base=200.0), 300.0], max_regression_pct=10)
    assert better[-1].passed and better[-1].status == "noise"


def test_too_little_history_says_so_and_judges_by_the_bound_against_the_median() -> None:
    rows = replay_history(P95, [500.0, 510.0, 490.0, 600.0, 505.0], max_regression_pct=10)
    assert rows[0].passed and rows[0].status == "pass" and "budgets only" in (rows[0].note or "")
    assert "3 nights of history, 4 needed" in (rows[3].note or "")
    assert not rows[3].passed and rows[3].status == "regression" and rows[3].baseline == 500.0
    assert "median of the 3 nights" in (rows[3].reason or "")
    # a warm-up night joins whatever its verdict: one lucky night cannot lock the gate
    assert rows[4].history_n == 4 and rows[4].passed and rows[4].status == "noise"


def test_a_lucky_first_night_does_not_lock_the_gate_as_previous_does() -> None:
    season = [400.0, *nights(40, cv=0.03)]
    rows = replay_history(P95, season, max_regression_pct=5)
    assert sum(not r.passed for r in rows[10:]) == 0


def test_zero_values_are_judged_like_any_other() -> None:
    rows = replay_history("ERRORS_PERCENT", [0.0] * 12 + [0.5], max_regression_pct=10)
    assert all(r.passed for r in rows[:-1])
    assert not rows[-1].passed and rows[-1].status == "regression" and rows[-1].centre == 0.0


def test_settings_are_checked() -> None:
    assert HistorySettings.parse().window == 60
    cases: list[tuple[dict[str, Any], str]] = [
        ({"window": 3}, r"window \(3\)"),
        ({"window": "20"}, "whole number"),
        ({"min_history": 2}, r"min_history \(2\)"),
        ({"fail_z": -1}, "fail_z"),
        ({"suspect_z": 3.0, "fail_z": 2.0}, "suspect_z"),
        ({"colour": 1}, "unknown history setting"),
    ]
    for bad, match in cases:
        with pytest.raises(ValueError, match=match):
            HistorySettings.parse(**bad)
    # The settings given are the ones applied: each changes a verdict the defaults give.
    five = [100.0, 104.0, 97.0, 102.0, 99.0]
    judged = replay_history(P95, five, max_regression_pct=5)[-1]  # 4 nights: enough by default
    warming = replay_history(P95, five, max_regression_pct=5, min_history=5)[-1]
    assert judged.noise is not None and "needed" not in (judged.note or "")
    assert warming.noise is None and "4 nights of history, 5 needed" in (warming.note or "")
    season = [100.0 + (-3, 2, 0, 4, -1, 1)[i % 6] for i in range(20)]
    assert replay_history(P95, season, max_regression_pct=5)[-1].history_n > 5
    assert replay_history(P95, season, max_regression_pct=5, window=5)[-1].history_n == 5


# --- accepting a change -----------------------------------------------------------------------------


def test_accepted_metrics_reads_the_dag_run_conf() -> None:
    gated = [P95, THROUGHPUT]
    assert accepted_metrics(None, "run", gated) == frozenset()
    assert accepted_metrics({}, "run", gated) == frozenset()
    assert accepted_metrics({ACCEPT_CHANGE: False}, "run", gated) == frozenset()
    assert accepted_metrics({ACCEPT_CHANGE: True}, "run", gated) == {P95, THROUGHPUT}
    assert accepted_metrics({ACCEPT_CHANGE: [P95]}, "run", gated) == {P95}
    assert accepted_metrics({ACCEPT_CHANGE: P95}, "run", gated) == {P95}
    assert accepted_metrics({ACCEPT_CHANGE: {"run": True, "other": [P95]}}, "run", gated) == set(gated)
    assert accepted_metrics({ACCEPT_CHANGE: {"other": True}}, "run", gated) == frozenset()
    with pytest.raises(ValueError, match="not gated by task 'run'"):
        accepted_metrics({ACCEPT_CHANGE: ["RESPONSE_TIME_PERCENTILE_99"]}, "run", gated)
    with pytest.raises(ValueError, match="must be true, a list of metric ids"):
        accepted_metrics({ACCEPT_CHANGE: 1}, "run", gated)
    with pytest.raises(ValueError, match="not gated by task 'run'"):  # a string is one metric id
        accepted_metrics({ACCEPT_CHANGE: "yes please"}, "run", [P95])


def test_an_accepted_change_passes_and_the_history_restarts_from_it() -> None:
    spec = GateSpec.parse({P95: "<= 1000"}, {P95: 10}, "history")
    state = GateHistory()
    for value in settled():
        _, state = judge_history(spec, {P95: value}, None, history=state)  # type: ignore[assignment]
    rows, _ = judge_history(spec, {P95: 800.0}, None, history=state)
    assert rows[0].status == "regression"
    rows, state = judge_history(spec, {P95: 800.0}, None, history=state, accepted={P95})  # type: ignore[assignment]
    assert rows[0].passed and rows[0].status == "pass" and "accepted" in (rows[0].note or "")
    assert _kept(state.series[(None, P95)]) == _kept(SeriesHistory((800.0,)))
    rows, _ = judge_history(spec, {P95: 810.0}, None, history=state)
    assert rows[0].passed and rows[0].baseline == 800.0
    # a budget still applies to an accepted night
    rows, _ = judge_history(spec, {P95: 1200.0}, None, history=state, accepted={P95})
    assert not rows[0].passed and rows[0].status == "budget"


# --- the XCom forms ---------------------------------------------------------------------------------


def test_history_round_trips_through_xcom_per_transaction_and_metric() -> None:
    history = GateHistory(
        {
            (None, P95): SeriesHistory((1.0, 2.0), ((3.0, "suspected"),)),
            ("login", P95): SeriesHistory((4.0,)),
        }
    )
    data = history.to_xcom()
    assert data["format"] == 1
    assert GateHistory.from_xcom(data) == history
    assert GateHistory.from_xcom(None) == GateHistory()
    assert HISTORY_XCOM_KEY == "loadtest_gate_history"


def test_the_same_metric_is_judged_per_transaction_from_its_own_history() -> None:
    spec = GateSpec.parse(None, {P95: 10}, "history")
    state = GateHistory()
    for value in settled():
        for label, scale in (("login", 1.0), ("search", 2.0)):
            _, state = judge_history(  # type: ignore[assignment]
                spec, {P95: value * scale}, None, history=state, transaction=label
            )
    login = judge_history(spec, {P95: 1000.0}, None, history=state, transaction="login")[0][0]
    search = judge_history(spec, {P95: 1000.0}, None, history=state, transaction="search")[0][0]
    assert login.status == "regression" and search.passed


def test_gate_row_reads_older_and_newer_xcom_rows() -> None:
    row = GateRow(P95, 700.0, False, status="regression", centre=600.0, noise=20.0, history_n=30)
    assert GateRow.from_xcom(row.to_xcom()) == row
    old = {"metric": P95, "value": 900.0, "passed": False, "budget": "<= 800", "baseline": None,
           "change_pct": None, "max_regression_pct": None, "reason": "budget <= 800"}  # fmt: skip
    assert GateRow.from_xcom(old).status == "budget"
    assert GateRow.from_xcom({**old, "reason": "no value from the service"}).status == "not_measured"
    assert GateRow.from_xcom({**old, "reason": "more than 10 % worse"}).status == "regression"
    assert GateRow.from_xcom({**old, "passed": True, "reason": None}).status == "pass"
    newer = {**row.to_xcom(), "transaction": "login", "something_later": 1}
    assert GateRow.from_xcom(newer) == replace(row, transaction="login")


# --- fail closed ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stored",
    [
        "not a history",
        {"format": 99, "series": []},
        {"format": 1, "series": "x"},
        {"format": 1, "series": [{"values": [1.0]}]},
        [1, 2, 3],
    ],
)
def test_a_history_that_does_not_parse_fails_every_bounded_metric_as_not_measured(stored: object) -> None:
    spec = GateSpec.parse({"ERRORS_PERCENT": "< 1"}, {P95: 10}, "history")
    rows, next_history = judge_history(
        spec, {P95: 500.0, "ERRORS_PERCENT": 0.1}, None, history=GateHistory.from_xcom(stored)
    )
    by_metric = {r.metric: r for r in rows}
    assert not by_metric[P95].passed and by_metric[P95].status == "not_measured"
    assert "XCom" in (by_metric[P95].reason or "")
    assert by_metric["ERRORS_PERCENT"].passed  # a budget needs no history
    assert next_history == GateHistory()  # restarts from the next night


def test_one_broken_series_fails_that_metric_only() -> None:
    stored = {
        "format": 1,
        "series": [
            {"metric": P95, "transaction": None, "values": [1.0, "x"], "recent": []},
            {"metric": THROUGHPUT, "transaction": None, "values": [100.0] * 10, "recent": []},
        ],
    }
    spec = GateSpec.parse(None, {P95: 10, THROUGHPUT: 10}, "history")
    rows = judge(spec, {P95: 500.0, THROUGHPUT: 100.0}, None, history=GateHistory.from_xcom(stored))
    assert [(r.metric, r.status) for r in rows] == [(P95, "not_measured"), (THROUGHPUT, "noise")]
    assert "does not parse" in (rows[0].reason or "")


def test_history_baseline_without_a_history_read_never_passes_a_bound() -> None:
    spec = GateSpec.parse(None, {P95: 10}, "history")
    row = judge(spec, {P95: 500.0}, None)[0]
    assert (
        not row.passed and row.status == "not_measured" and "no gate history was read" in (row.reason or "")
    )


def _drive(steps: Generator[Any, Any, Verdict], answers: list[object]) -> tuple[Verdict, list[str]]:
    logs: list[str] = []
    sent: object = None
    try:
        while True:
            action = steps.send(sent)
            if isinstance(action, ApiRequest):
                sent = answers.pop(0)
            else:
                assert isinstance(action, Log)
                logs.append(action.message)
                sent = None
    except StopIteration as done:
        return done.value, logs


def test_a_summary_answer_of_the_wrong_length_is_not_measured() -> None:
    """Failed on the old code: values were taken by position, so an answer with more values than
    metrics passed the first ones as if they were aligned."""
    spec = GateSpec.parse({P95: "<= 800", "ERRORS_PERCENT": "< 1"}, None, None)
    verdict, logs = _drive(evaluate(spec, "br-1", known_metrics={}, baseline=None), [[700.0, 0.1, 3.0]])
    assert not verdict.passed
    assert {r.status for r in verdict.rows} == {"not_measured"}
    assert "answered 3 values for 2 metrics" in (verdict.rows[0].reason or "")
    assert "FAIL: not measured" in logs[0]


def test_a_baseline_in_xcom_that_does_not_parse_is_not_taken_for_no_baseline() -> None:
    """Failed on the old code: an unreadable baseline in XCom read as "no baseline yet", so the gate
    checked budgets only and passed a regression bound it never judged."""
    spec = GateSpec.parse(None, {P95: 10}, "previous")
    found = Baseline.from_xcom({"metrics": {P95: 100.0}})  # no bench_result_id
    assert found is not None and found.unreadable
    verdict, logs = _drive(evaluate(spec, "br-1", known_metrics={}, baseline=found), [[900.0]])
    assert not verdict.passed and verdict.rows[0].status == "not_measured"
    assert "does not parse" in logs[0]
    assert Baseline.from_xcom(None) is None


def test_the_log_shows_centre_band_change_and_the_suspicion() -> None:
    history = [500.0 + d for d in (-20, 20, -10, 10, 0, -25, 25, -5, 5, -15, 15) * 3]
    spec = GateSpec.parse(None, {P95: 5}, "history")
    state = GateHistory()
    for value in history:
        _, state = judge_history(spec, {P95: value}, None, history=state)  # type: ignore[assignment]
    answers: list[object] = [[535.0], [50, 120.0]]  # the gate's metrics, then the applied load
    verdict, logs = _drive(evaluate(spec, "br-9", known_metrics={}, baseline=None, history=state), answers)
    assert verdict.passed and verdict.history is not None
    table = logs[0]
    assert "against the history of the last passing runs" in table
    assert "noise band" in table and "(mean of 31)" in table and "suspected" in table
    assert f"{P95}: suspected:" in table
    assert verdict.history.series[(None, P95)].recent[-1] == (535.0, "suspected")


# --- what joins the history, the tests' shape ------------------------------------------------------


def test_a_one_night_failure_that_the_next_nights_clear_joins_the_history() -> None:
    """A night beyond the band followed by ordinary nights was the noise's own tail (or a hiccup):
    keeping every such night out cut the history's upper tail and biased its noise low."""
    history = [500.0 + d for d in (-20, 20, -10, 10, 0, -25, 25, -5, 5, -15, 15) * 3]
    rows = replay_history(P95, [*history, 560.0, 500.0, 505.0, 495.0], max_regression_pct=5)
    assert rows[len(history)].status == "regression"
    assert rows[-1].history_n == len(history) + 1  # the history, and 560 (500 and 505 still recent)
    kept_out = replay_history(P95, [*history, 560.0, 535.0, 505.0, 495.0], max_regression_pct=5)
    assert kept_out[len(history) + 1].status == "suspected"  # not cleared: stays out
    assert kept_out[-1].history_n == len(history)


def test_one_persistence_test_over_persist_nights_and_none_with_one() -> None:
    history = [500.0 + d for d in (-20, 20, -10, 10, 0, -25, 25, -5, 5, -15, 15) * 3] + [490.0]
    step = [535.0, 537.0, 536.0]  # each night alone suspected, together a regression
    rows = replay_history(P95, [*history, *step], max_regression_pct=5)
    assert [r.status for r in rows[-3:]] == ["suspected", "suspected", "regression"]
    assert "the last 3 nights together" in (rows[-1].reason or "")
    alone = replay_history(P95, [*history, *step], max_regression_pct=5, persist_nights=1)
    assert [r.status for r in alone[-3:]] == ["suspected"] * 3


def test_a_short_history_widens_the_band_rather_than_crying_wolf() -> None:
    season = nights(40, seed=2)
    rows = replay_history(P95, season, max_regression_pct=1)
    early, late = next(r for r in rows if r.history_n == 8), rows[-1]
    assert late.history_n == 37
    assert early.noise is not None and late.noise is not None
    assert early.band_high is not None and early.centre is not None
    assert late.band_high is not None and late.centre is not None
    early_width = (early.band_high - early.centre) / early.noise
    late_width = (late.band_high - late.centre) / late.noise
    assert early_width == pytest.approx(threshold_factor(2.5, 8))  # t with 7 degrees of freedom
    assert early_width > 1.25 * late_width
