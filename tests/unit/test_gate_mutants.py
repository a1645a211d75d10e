"""What the gate's users read and what its history decides, pinned where ``make mutation`` found them loose.

Mutants of the verdict's text (the task log's table, the failure message) survived because the tests
read a column or two; here the whole table and message are compared, as a person reads them. The
history's statistics and rules are pinned with numbers worked out beside each test (issue 30).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate import GateRow, Verdict
from airflow_provider_loadtest.decisions.gate.family import NightEffect
from airflow_provider_loadtest.decisions.gate.history import (
    NOISE,
    PASS,
    SUSPECTED,
    Decision,
    GateHistory,
    HistorySettings,
    HistoryUnreadable,
    NightJudgement,
    NoiseEstimate,
    Quantiles,
    SeriesHistory,
    accepted_metrics,
    admit,
    decide,
    estimate,
    judge_night,
    t_quantile,
    threshold_factor,
)
from airflow_provider_loadtest.decisions.gate.history import REGRESSION as REG
from airflow_provider_loadtest.decisions.gate.rows import (
    BUDGET,
    NOT_MEASURED,
    REGRESSION,
    change_pct,
    format_number,
)

# --- the verdict: the log's table, its notes and the failure message ------------------------------

AVG = GateRow(
    "RESPONSE_TIME_AVG", 120.5, False, baseline=100.0, change_pct=20.5, reason="the last night worse",
    status="regression", centre=100.0, noise=4.0, band_low=90.12345678, band_high=1234567.0000003,
    history_n=12, transaction="Check  out", own_sd=3.25,
)  # fmt: skip
ERRORS = GateRow("ERRORS_RATE", 5.0, True, baseline=0.0, status="noise", own_sd=0.0)
HITS = GateRow(
    "HITS_RATE", 9.0, True, baseline=10.0, change_pct=-10.0, history_n=3, transaction="",
    note="3 nights of history", own_sd=0.5,
)  # fmt: skip
P95 = GateRow(
    "RESPONSE_TIME_P95", None, False, baseline=0.0, reason="no value: not in the report",
    status="not_measured",
    transaction="Checkout",
)  # fmt: skip
P99 = GateRow(
    "RESPONSE_TIME_P99", 900.0, False, budget="<= 800", baseline=850.0, change_pct=5.88,
    reason="budget <= 800",
    status="budget", own_sd=1.0,
)  # fmt: skip
THROUGHPUT = GateRow(
    "THROUGHPUT", 1e15, True, baseline=2.5, status="suspected", note="suspected: 3 % worse", own_sd=-1.5
)
USERLOAD = GateRow("USERLOAD", 7.0, True, status="pass")
ROWS = (AVG, ERRORS, HITS, P95, P99, THROUGHPUT, USERLOAD)
NIGHT = NightEffect(
    shift_sd=2.75, series=7, status="regression", centre=0.1, noise=0.5, history_n=20, change_pct=12.0,
    reason="worse than usual",
)  # fmt: skip

RANKED_TABLE = """\
transaction  metric             value  budget  baseline          noise band          change   beyond noise  result
Check out    RESPONSE_TIME_AVG  120.5  -       100 (mean of 12)  90.1235 .. 1234567  +20.5 %  +3.2 sd       FAIL: regression
(run)        RESPONSE_TIME_P99  900    <= 800  850               -                   +5.9 %   +1.0 sd       FAIL: budget
''           HITS_RATE          9      -       10 (median of 3)  -                   -10.0 %  +0.5 sd       pass
(run)        ERRORS_RATE        5      -       0                 -                   from 0   +0.0 sd       noise
(run)        THROUGHPUT         1e+15  -       2.5               -                   -        -1.5 sd       suspected
Checkout     RESPONSE_TIME_P95  -      -       0                 -                   -        -             FAIL: not measured
(run)        USERLOAD           7      -       -                 -                   -        -             pass"""  # noqa: E501
HEADER, *RANKED_LINES = RANKED_TABLE.splitlines()
RANKED = (
    "RESPONSE_TIME_AVG",
    "RESPONSE_TIME_P99",
    "HITS_RATE",
    "ERRORS_RATE",
    "THROUGHPUT",
    "RESPONSE_TIME_P95",
    "USERLOAD",
)
LINES = dict(zip(RANKED, RANKED_LINES, strict=True))


def _kept(history: SeriesHistory | None) -> object:
    """The nights a history keeps (its reference level's bookkeeping, issue 33, aside)."""
    assert history is not None
    return (history.values, history.recent, history.shifts, history.recent_shifts)


def test_the_table_ranks_the_rows_beyond_their_noise_first_when_the_night_was_judged() -> None:
    """Failed rows first, furthest beyond their noise first, then the passed ones that moved, then
    the rows with no noise to move beyond, in their order."""
    verdict = Verdict(ROWS, "br-9", night=NIGHT, budget_text="the budget buys this")
    assert verdict.table() == RANKED_TABLE
    assert tuple(row.metric for row in verdict.ranked()) == RANKED


def test_the_table_keeps_the_rows_order_without_a_night_effect() -> None:
    verdict = Verdict(ROWS, None)
    assert verdict.table() == "\n".join([HEADER] + [LINES[row.metric] for row in ROWS])


def test_a_plain_table_has_only_the_columns_its_rows_use() -> None:
    assert Verdict((USERLOAD, replace(P99, own_sd=None)), None).table() == (
        "metric             value  budget  baseline  change  result\n"
        "USERLOAD           7      -       -         -       pass\n"
        "RESPONSE_TIME_P99  900    <= 800  850       +5.9 %  FAIL: budget"
    )


def test_the_notes_say_the_night_effect_and_the_budget_first() -> None:
    verdict = Verdict(ROWS, "br-9", night=NIGHT, budget_text="the budget buys this")
    assert verdict.notes() == [
        "Night effect: the 7 series moved +2.75 sd of their noise together (usually +0.10 sd, noise 0.50 sd "
        "over 20 nights), +12.0 % for the median series: FAIL: regression of the whole run; worse than usual",
        "the budget buys this",
        "HITS_RATE of '': 3 nights of history",
        "THROUGHPUT: suspected: 3 % worse",
    ]
    assert Verdict(ROWS, None).notes() == [
        "HITS_RATE of '': 3 nights of history",
        "THROUGHPUT: suspected: 3 % worse",
    ]


def test_the_failure_message_names_the_night_effect_first_then_every_failing_series() -> None:
    verdict = Verdict(ROWS, "br-9", night=NIGHT)
    assert verdict.message() == (
        "Quality gate failed (baseline run br-9): every series together (the night effect) +2.75 sd: "
        "worse than usual; RESPONSE_TIME_AVG of 'Check  out' 120.5 vs history centre 100 (+20.5 %): "
        "the last night worse; "
        "RESPONSE_TIME_P95 of 'Checkout' - vs baseline 0 (-): no value: not in the report; "
        "RESPONSE_TIME_P99 900 vs baseline 850 (+5.9 %): budget <= 800"
    )
    assert not verdict.passed
    calm = NightEffect(shift_sd=0.5, series=7, status="noise")
    assert Verdict(ROWS, None, night=calm).message() == Verdict(ROWS, None).message()
    assert (
        Verdict(ROWS, None)
        .message()
        .startswith("Quality gate failed: RESPONSE_TIME_AVG of 'Check  out' 120.5")
    )
    assert Verdict((USERLOAD,), None, night=calm).passed
    assert not Verdict((USERLOAD,), None, night=NIGHT).passed


def test_rows_read_back_from_an_older_xcom_get_their_status_from_the_reason() -> None:
    def status(reason: str | None, **more: object) -> str:
        return GateRow.from_xcom(
            {"metric": "M", "value": 1.0, "passed": False, "reason": reason, **more}
        ).status

    assert status("budget <= 800, and 20 % worse than the baseline") == REGRESSION
    assert status("budget <= 800") == BUDGET
    assert status("no value in the report") == NOT_MEASURED
    assert status("20 % worse than the baseline") == REGRESSION
    assert status(None) == REGRESSION
    assert status("budget <= 800", status="not a status") == BUDGET
    assert GateRow.from_xcom({"metric": "M", "passed": True, "reason": "budget"}).status == "pass"
    bare = GateRow.from_xcom({"metric": "M", "unknown": 1})
    assert (bare.value, bare.passed, bare.status) == (None, False, REGRESSION)


def test_numbers_are_written_whole_when_they_are_and_short_otherwise() -> None:
    assert [format_number(v) for v in (None, 7.0, -3.0, 0.5, 1e15, 1e15 - 1, 1e16, 123456789.0)] == [
        "-", "7", "-3", "0.5", "1e+15", "999999999999999", "1e+16", "123456789",
    ]  # fmt: skip
    assert [change_pct(v, b) for v in (0.0, 5.0) for b in (0.0, 4.0, -4.0)] == [
        0.0,
        -100.0,
        100.0,
        None,
        25.0,
        225.0,
    ]


# --- the history: what it keeps in XCom, and what a broken one says ------------------------------


def test_a_series_history_with_night_effects_reads_back_as_written() -> None:
    full = SeriesHistory((1.0, 2.0), ((3.0, NOISE), (4.0, SUSPECTED)), (0.5, -0.25), (1.5, 2.5))
    assert full.to_xcom() == {
        "values": [1.0, 2.0], "recent": [[3.0, NOISE], [4.0, SUSPECTED]], "shifts": [0.5, -0.25],
        "recent_shifts": [1.5, 2.5],
    }  # fmt: skip
    assert SeriesHistory.from_xcom(full.to_xcom()) == full
    partly = SeriesHistory((1.0, 2.0), ((3.0, NOISE),), (None, 0.5), (None,))
    assert partly.to_xcom()["shifts"] == [None, 0.5] and partly.to_xcom()["recent_shifts"] == [None]
    assert SeriesHistory.from_xcom(partly.to_xcom()) == partly
    plain = SeriesHistory((1.0,), (), (None,), ())
    assert plain.to_xcom() == {"values": [1.0], "recent": []}  # no night effect known: the older form
    assert SeriesHistory.from_xcom({"values": [1]}) == SeriesHistory((1.0,))
    assert (full.shift(1), full.recent_shift(0)) == (-0.25, 1.5)
    assert (
        SeriesHistory((1.0,), (), (0.5, 0.5)).shift(0),
        SeriesHistory((), ((1.0, NOISE),)).recent_shift(0),
    ) == (None, None)


LISTS = "'values', 'recent', 'shifts' and 'recent_shifts' must be lists"
GO_WITH = "'shifts' and 'recent_shifts' must go with 'values' and 'recent'"


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"values": 1}, LISTS),
        ({"values": [], "recent": 1}, LISTS),
        ({"values": [], "shifts": 1}, LISTS),
        ({"values": [], "recent_shifts": 1}, LISTS),
        ({"values": [1, "x"]}, "a value 'x' is not a finite number"),
        ({"values": [], "recent": [[1.0, "bogus"]]}, "a recent night [1.0, 'bogus'] is not [value, status]"),
        ({"values": [], "recent": [[1.0]]}, "a recent night [1.0] is not [value, status]"),
        ({"values": [], "recent": [[1.0, NOISE, 2]]}, "a recent night [1.0, 'noise', 2] is not [value, status]"),  # noqa: E501
        ({"values": [], "recent": [[math.inf, NOISE]]}, "a recent value inf is not a finite number"),
        ({"values": [1], "shifts": ["x"], "recent_shifts": []}, "a night effect 'x' is not a finite number"),
        (
            {"values": [], "recent": [[1, NOISE]], "shifts": [], "recent_shifts": [True]},
            "a night effect True is not a finite number",
        ),
        ({"values": [1, 2], "shifts": [0.5]}, GO_WITH),
        ({"values": [1], "recent": [[1, NOISE]], "shifts": [0.5], "recent_shifts": []}, GO_WITH),
    ],
)  # fmt: skip
def test_a_broken_series_history_fails_its_series_with_what_is_wrong(
    entry: dict[str, object], why: str
) -> None:
    history = GateHistory.from_xcom({"format": 1, "series": [{"metric": "M", "transaction": "T", **entry}]})
    assert dict(history.broken) == {("T", "M"): f"its history in XCom does not parse: {why}"}
    with pytest.raises(
        HistoryUnreadable, match=f"^its history in XCom does not parse: {__import__('re').escape(why)}$"
    ):
        history.get(("T", "M"))


def test_the_gate_history_keeps_the_night_effect_and_the_scale() -> None:
    night = SeriesHistory((0.1, 0.2), ((0.3, NOISE),))
    series = SeriesHistory((5.0,))
    history = GateHistory({("T", "M"): series, (None, "N"): series}, night=night, scale="log")
    data = history.to_xcom()
    assert data == {
        "format": 1,
        "series": [
            {"metric": "M", "transaction": "T", "values": [5.0], "recent": []},
            {"metric": "N", "transaction": None, "values": [5.0], "recent": []},
        ],
        "night": {"values": [0.1, 0.2], "recent": [[0.3, NOISE]]},
        "scale": "log",
    }
    assert GateHistory.from_xcom(data) == history
    assert GateHistory().to_xcom() == {"format": 1, "series": []}
    assert GateHistory.from_xcom({**data, "scale": "linear"}).scale == "linear"
    assert GateHistory.from_xcom({**data, "scale": "LOG"}).scale is None
    assert GateHistory.from_xcom(
        {"format": 1, "series": [{"metric": "M", "transaction": 5, "values": []}]}
    ).series == {(None, "M"): SeriesHistory()}
    broken_night = GateHistory.from_xcom({**data, "night": 5})
    assert broken_night.error == (
        "the night effect's history in XCom (loadtest_gate_history) does not parse: "
        "a series is int, not a mapping"
    )


def test_accepting_a_change_names_what_it_cannot_accept() -> None:
    with pytest.raises(ValueError, match=r"^loadtest_accept_change: task ids must be strings, got \[5\]$"):
        accepted_metrics({"loadtest_accept_change": {5: True}}, "gate", ["P95"])
    with pytest.raises(
        ValueError,
        match=r"^loadtest_accept_change: \['P99'\] is not gated by task 'gate' \(it gates \['P95'\]\)$",
    ):
        accepted_metrics({"loadtest_accept_change": ["P99"]}, "gate", ["P95"])
    with pytest.raises(
        ValueError, match=r"^loadtest_accept_change: \['A', 'B'\] are not gated by task 'gate'"
    ):
        accepted_metrics({"loadtest_accept_change": {"gate": ["B", "A", "P95"]}}, "gate", ["P95"])


# --- the history: one night judged -----------------------------------------------------------------

SETTINGS = HistorySettings()
NIGHTS = (98.0, 102.0, 99.0, 101.0)  # mean 100, sd sqrt(10/3): exactly min_history nights
SD = math.sqrt(10 / 3)


def _judge(value: float, history: SeriesHistory, **kw: object) -> tuple[NightJudgement, SeriesHistory]:
    args: dict[str, Any] = {"worse_higher": True, "max_regression_pct": 1.0, "settings": SETTINGS, **kw}
    return judge_night(value, history, **args)


def test_a_night_within_the_noise_of_min_history_nights_is_judged_against_it() -> None:
    band = threshold_factor(2.5, 4) * SD
    judgement, after = _judge(101.0, SeriesHistory(NIGHTS))
    figures = (judgement.noise, judgement.band_low, judgement.band_high)
    assert figures == pytest.approx((SD, 100 - band, 100 + band))
    assert replace(judgement, noise=None, band_low=None, band_high=None) == NightJudgement(
        NOISE, centre=100.0, history_n=4, baseline=100.0
    )
    assert _kept(after) == _kept(SeriesHistory(NIGHTS, ((101.0, NOISE),)))


def test_a_regression_says_over_which_nights_and_against_what() -> None:
    judgement, after = _judge(80.0, SeriesHistory(NIGHTS), worse_higher=False, max_regression_pct=5.0)
    assert (judgement.status, judgement.reason) == (
        "regression",
        "the last night worse than the history's centre 100 by more than 5 % and than its noise explains",
    )
    assert after.recent == ((80.0, "regression_one_night"),)
    better, _ = _judge(80.0, SeriesHistory(NIGHTS), max_regression_pct=5.0)
    assert (better.status, better.reason) == (NOISE, None)


def test_a_suspected_night_says_how_much_worse_it_was() -> None:
    low, high = threshold_factor(1.6, 4) * SD, threshold_factor(2.5, 4) * SD
    value = 100 - (low + high) / 2  # beyond a suspicion, short of a failure; lower is worse
    judgement, after = _judge(value, SeriesHistory(NIGHTS), worse_higher=False)
    pct = (100 - value) / 100 * 100
    assert judgement.status == SUSPECTED
    assert judgement.note == (
        f"suspected: {pct:.4g} % worse than the history's centre 100, beyond the noise on one night but not "
        "enough to fail; a regression if the next nights confirm it (kept out of the history meanwhile)"
    )
    assert after.recent == ((value, SUSPECTED),)


def test_an_accepted_change_restarts_the_history() -> None:
    judgement, after = _judge(500.0, SeriesHistory(NIGHTS), accepted=True)
    assert judgement == NightJudgement(
        PASS, history_n=4, note="change accepted as the new normal: the history restarts from this night"
    )
    assert _kept(after) == _kept(SeriesHistory((500.0,)))


def test_a_short_history_is_judged_against_its_median_and_says_so() -> None:
    first, after = _judge(5.0, SeriesHistory())
    assert first == NightJudgement(
        PASS,
        history_n=0,
        note="0 nights of history, 4 needed to judge against the noise: no earlier night: budgets only",
    )
    assert _kept(after) == _kept(SeriesHistory((5.0,)))
    joins = "judged against their median by max_regression_pct alone; tonight joins the history"
    second, _ = _judge(5.0, SeriesHistory((5.0,)))
    assert second == NightJudgement(
        PASS,
        history_n=1,
        baseline=5.0,
        note=f"1 night of history, 4 needed to judge against the noise: {joins} whatever its verdict (its "
        "first night is nobody's choice)",
    )
    accepted, _ = _judge(5.0, SeriesHistory((5.0,), accepted=True))
    assert accepted.note == f"1 night of history, 4 needed to judge against the noise: {joins} if it passes"
    note = f"2 nights of history, 4 needed to judge against the noise: {joins} unless it fails beyond"
    note += " their noise"
    at_bound, _ = _judge(11.0, SeriesHistory((8.0, 12.0)), max_regression_pct=10.0)  # 10 % worse than 10
    assert at_bound == NightJudgement(PASS, history_n=2, baseline=10.0, note=note)
    beyond, after = _judge(12.0, SeriesHistory((8.0, 12.0)), max_regression_pct=10.0)
    assert beyond == NightJudgement(
        "regression", history_n=2, baseline=10.0,
        reason="more than 10 % worse than the median of the 2 nights of history", note=note,
    )  # fmt: skip
    assert _kept(after) == _kept(SeriesHistory((8.0, 12.0, 12.0)))
    assert _judge(3.0, SeriesHistory((1.0, 5.0, 3.0)))[0].baseline == 3.0


@pytest.mark.parametrize(
    ("value", "status"), [(0.0, PASS), (1.0, "regression"), (5.0, "regression"), (-5.0, PASS)]
)
def test_from_a_zero_median_any_worsening_is_a_regression(value: float, status: str) -> None:
    assert _judge(value, SeriesHistory((0.0, 0.0)), max_regression_pct=0.5)[0].status == status


# --- the history's tests, at their edges (decide, on deviations in noise sd) ------------------------


Q = Quantiles(2.5, 2.8, 1.6)


def _decide(tonight: float, recent: list[tuple[float | None, str]], **kw: object) -> Decision:
    """One series, noise 1, 20 nights of history, change in percent = deviation (bound 0.1 %)."""
    args: dict[str, Any] = {
        "noise": 1.0, "n": 20, "quantiles": Q, "persist_nights": 3, "change_pct": lambda mean: mean,
        "max_regression_pct": 0.1, **kw,
    }  # fmt: skip
    return decide(tonight, recent, **args)


def test_one_night_exactly_on_the_threshold_or_the_bound_passes() -> None:
    on = threshold_factor(2.5, 20)
    assert _decide(on, []).status == SUSPECTED
    assert _decide(on * 1.001, []).status == REG
    assert _decide(5.0, [], max_regression_pct=5.0).status == NOISE  # a change as small as the bound
    assert _decide(5.0, [], max_regression_pct=4.99).status == REG
    low = Quantiles(0.2, 2.8, 0.1)  # a one-night test below the persistence floor: no floor for one night
    assert _decide(0.4, [], quantiles=low).status == REG


def test_every_night_of_a_persisting_change_must_clear_the_floor() -> None:
    tonight = 2.5  # short of one night's threshold, beyond a suspicion
    assert tonight < threshold_factor(2.5, 20) and (0.5 + 3.0 + tonight) / 3 > threshold_factor(2.8, 20, 3)
    assert _decide(tonight, [(0.5, NOISE), (3.0, NOISE)]).status == SUSPECTED  # 0.5 sd: on the floor
    assert _decide(tonight, [(0.51, NOISE), (3.0, NOISE)]).status == REG
    assert _decide(tonight, [(0.3, NOISE), (3.0, NOISE)]).status == SUSPECTED
    two = Quantiles(2.5, 2.8, 1.6, windows=((2, 2.0),))  # two nights: the floor holds there too
    assert _decide(2.8, [(0.45, NOISE)], quantiles=two).status == SUSPECTED  # mean 1.63 > 1.59
    assert _decide(2.6, [(0.6, NOISE)], quantiles=two).status == REG


def test_a_persistence_test_needs_all_its_nights() -> None:
    assert _decide(2.6, [(3.0, NOISE)]).status == SUSPECTED  # one earlier night of the three
    assert _decide(2.6, [(None, NOISE), (3.0, NOISE)]).status == SUSPECTED  # a night with no deviation
    assert _decide(2.6, [(3.0, NOISE), (None, NOISE)]).status == SUSPECTED
    assert _decide(2.6, [(3.0, NOISE)], persist_nights=1).status == SUSPECTED  # no persistence test
    assert _decide(2.6, [(3.0, "regression_one_night"), (3.0, NOISE)]).status == SUSPECTED


def test_each_window_takes_the_nights_that_end_tonight() -> None:
    """Two nights and four (a gate of many series): the two-night test reads the night before."""
    windows = Quantiles(2.5, 2.8, 1.6, windows=((2, 2.0), (4, 50.0)))
    decision = _decide(2.6, [(0.1, NOISE), (0.1, NOISE), (3.0, NOISE)], quantiles=windows)
    assert (decision.status, decision.over, decision.marked) == (
        REG,
        "the last 2 nights together",
        frozenset({2}),
    )
    calm = _decide(2.6, [(3.0, NOISE), (0.1, NOISE), (0.1, NOISE)], quantiles=windows)
    assert calm.status == SUSPECTED


def test_a_night_that_fails_alone_and_with_the_nights_before_it_is_part_of_the_regression() -> None:
    both = _decide(9.0, [(3.0, SUSPECTED), (3.0, SUSPECTED)])
    assert (both.status, both.over, both.kept_as, both.marked) == (REG, "the last night", REG, frozenset())
    alone = _decide(9.0, [(0.0, NOISE)])
    assert (alone.status, alone.kept_as) == (REG, "regression_one_night")
    persisted = _decide(2.6, [(3.0, SUSPECTED), (3.0, SUSPECTED)])
    assert (persisted.over, persisted.kept_as, persisted.marked) == (
        "the last 3 nights together",
        REG,
        frozenset({0, 1}),
    )


def test_a_confirmed_regression_keeps_failing_and_says_so() -> None:
    value = 100 + (threshold_factor(1.6, 4) + threshold_factor(2.5, 4)) / 2 * SD  # a suspicion alone
    history = SeriesHistory(NIGHTS, ((110.0, REG),))
    judgement, after = _judge(value, history)
    assert judgement.reason == (
        "the last night, continuing the regression of the night before, worse than the history's centre 100 "
        "by more than 1 % and than its noise explains"
    )
    assert after.recent == ((110.0, REG), (value, REG))


def test_the_nights_of_a_persisting_change_never_join_the_history() -> None:
    history = SeriesHistory(NIGHTS * 5, ((104.0, SUSPECTED), (104.0, SUSPECTED)))  # sd 1.62: 2.5 sd each
    judgement, after = _judge(104.0, history)
    assert judgement.status == REG and judgement.reason is not None
    assert judgement.reason.startswith("the last 3 nights together worse")
    assert _kept(after) == _kept(SeriesHistory(NIGHTS * 5, ((104.0, REG), (104.0, REG))))
    ordinary = SeriesHistory(NIGHTS * 5, ((100.5, NOISE), (100.5, NOISE)))  # 0.3 sd: below the floor
    assert _judge(104.0, ordinary)[0].status == SUSPECTED


def test_with_one_night_persistence_a_lone_failure_joins_the_history_at_once() -> None:
    one = HistorySettings(persist_nights=1)
    judgement, after = _judge(200.0, SeriesHistory(NIGHTS), settings=one)
    assert judgement.status == REG
    assert _kept(after) == _kept(
        SeriesHistory((*NIGHTS, 200.0))
    )  # an outlier of the noise: no later night to clear it
    two = HistorySettings(persist_nights=2)
    value = 104.2  # 2.6 sd of 20 nights: short of one night's 2.83, beyond two nights' 2.35
    assert _judge(value, SeriesHistory(NIGHTS * 5, ((value, SUSPECTED),)), settings=two)[0].status == REG


def test_the_night_effects_travel_with_their_nights_into_the_history() -> None:
    history = SeriesHistory(
        (1.0, 2.0, 3.0, 4.0, 5.0), ((6.0, NOISE), (7.0, NOISE)), (0.1, 0.2, 0.3, 0.4, 0.5), (0.6, 0.7)
    )
    after = admit(history, 8.0, Decision(NOISE), HistorySettings(window=5), shift=0.8)
    assert _kept(after) == _kept(
        SeriesHistory(
            (2.0, 3.0, 4.0, 5.0, 6.0), ((7.0, NOISE), (8.0, NOISE)), (0.2, 0.3, 0.4, 0.5, 0.6), (0.7, 0.8)
        )
    )
    # the history had no reference level (an older release's): its oldest nights became it, and the
    # night that joined adds to it while it has fewer than REFERENCE_NIGHTS
    assert after.reference == (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    assert after.reference_shifts == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
    quiet = SeriesHistory(
        (1.0, 2.0, 3.0, 4.0, 5.0), ((6.0, NOISE), (7.0, NOISE)), (0.1, 0.2, 0.3, 0.4, 0.5), (None, None)
    )
    after = admit(quiet, 8.0, Decision(NOISE), HistorySettings(window=5))
    assert after.shifts == (0.2, 0.3, 0.4, 0.5, None) and after.recent_shifts == (None, None)
    none = SeriesHistory((1.0,), ((6.0, NOISE), (7.0, NOISE)), (None,), (None, None))
    assert _kept(admit(none, 8.0, Decision(NOISE), HistorySettings())) == _kept(
        SeriesHistory((1.0, 6.0), ((7.0, NOISE), (8.0, NOISE)))
    )


def test_a_two_night_history_is_widened_to_student_t_with_one_degree_of_freedom() -> None:
    tail = 0.5 * math.erfc(2.5 / math.sqrt(2))
    assert threshold_factor(2.5, 2) == pytest.approx(math.tan(math.pi * (0.5 - tail)) * math.sqrt(1.5))
    assert t_quantile(2.5, 1) == pytest.approx(math.tan(math.pi * (0.5 - tail)))


def test_student_t_quantiles_are_as_close_as_the_expansion_gets() -> None:
    """At the 97.5 % point (z = 1.96): exact for 2 degrees of freedom, and the Cornish-Fisher
    expansion's measured error against the exact quantiles (R's ``qt``) from 3 on."""
    z = 1.959963984540054
    assert t_quantile(z, 2) == pytest.approx(4.302652730, rel=1e-8)
    exact = {3: 3.182446305, 5: 2.570581836, 7: 2.364624252, 30: 2.042272456}
    within = {3: 1.5e-3, 5: 1.5e-4, 7: 3e-5, 30: 1e-7}
    for dof, value in exact.items():
        assert t_quantile(z, dof) == pytest.approx(value, rel=within[dof]), dof


def test_the_noise_estimate_at_its_edges() -> None:
    assert estimate((5.0,)) == NoiseEstimate(5.0, 0.0, 1)
    assert estimate((1.0, 3.0)) == NoiseEstimate(2.0, math.sqrt(2), 2)
    flat = estimate((100.0,) * 9 + (200.0,))  # no spread around the median: no fence either
    assert (flat.centre, flat.n) == (110.0, 10) and flat.sd == pytest.approx(math.sqrt(1000.0))
    edge = 4.5 * 1.4826  # a night exactly on the fence stays in
    points = (-1.0, -1.0, -1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, edge)
    assert estimate(points).n == 12
    assert estimate((*points[:-1], edge * 1.001)).n == 11


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"fail_z": 0}, "history setting fail_z=0 must be a positive number"),
        ({"fail_z": 100}, "history setting fail_z=100 must be a positive number"),
        ({"fail_z": True}, "history setting fail_z=True must be a positive number"),
        ({"fail_z": "3"}, "history setting fail_z='3' must be a positive number"),
        ({"false_alarm_budget": 0.5}, "history setting false_alarm_budget (0.5) must be a number from 0.0001 "
         "to 0.2 (the share of clean nights the whole gate may fail: 0.01 is one night in 100)"),
        ({"false_alarm_budget": "x"}, "history setting false_alarm_budget ('x') must be a number from"),
        ({"window": 101}, "history setting window (101) must be 5 to 100 nights"),
        ({"persist_nights": 6}, "history setting persist_nights (6) must be 1 to 5"),
        ({"suspect_z": 2.6}, "history setting suspect_z must not exceed fail_z"),
    ],
)  # fmt: skip
def test_history_settings_beyond_their_range_are_refused_by_name(settings: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(why)):
        HistorySettings.parse(**settings)


def test_history_settings_on_the_edges_of_their_range_are_taken() -> None:
    edges = HistorySettings.parse(
        fail_z=0.5, suspect_z=0.5, persist_z=99.5, false_alarm_budget=0.2, window=100, persist_nights=5
    )
    assert (edges.fail_z, edges.suspect_z, edges.window, edges.persist_nights) == (0.5, 0.5, 100, 5)
    assert HistorySettings.parse(false_alarm_budget=0.0001).false_alarm_budget == 0.0001
    assert HistorySettings.parse(window=5, min_history=5).min_history == 5


def test_a_band_is_written_with_its_figures_as_the_log_shows_them() -> None:
    odd = replace(USERLOAD, band_low=1234567.0000003, band_high=90.12345678)
    half = replace(USERLOAD, metric="HALF", band_high=5.0)
    table = Verdict((odd, half), None).table().splitlines()
    assert table[1] == "USERLOAD  7      -       -         1234567 .. 90.1235  -       pass"
    assert table[2] == "HALF      7      -       -         -                   -       pass"


def test_a_suspicion_from_a_zero_centre_says_from_0() -> None:
    value = (threshold_factor(1.6, 4) + threshold_factor(2.5, 4)) / 2 * SD
    judgement, _ = _judge(value, SeriesHistory((-2.0, 2.0, -1.0, 1.0)))
    assert judgement.note is not None
    assert judgement.note.startswith(
        "suspected: from 0 % worse than the history's centre 0, beyond the noise"
    )
