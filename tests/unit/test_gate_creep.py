"""Issue 33: a creep never becomes the new normal. A series that slows a little every night is judged
against its reference level (its first nights since the last accepted change), a regression never joins
the history without a person (warm-up and the nights after an acceptance included), and a night that
failed as a whole (a glitch of the environment) leaves every series' history as it was."""

from __future__ import annotations

import math
import random

from airflow_provider_loadtest.decisions.gate import family
from airflow_provider_loadtest.decisions.gate.family import Budget
from airflow_provider_loadtest.decisions.gate.history import (
    REFERENCE_NIGHTS,
    GateHistory,
    HistorySettings,
    SeriesHistory,
    judge_night,
    with_reference,
)
from airflow_provider_loadtest.decisions.gate.judging import replay_gate, replay_gate_night
from tests.unit.test_gate_family import AVG, P95, Key, _keys


def _gate(seed: int, keys: list[Key]) -> tuple[random.Random, dict[Key, float], dict[Key, float]]:
    rng = random.Random(seed)
    return rng, {k: rng.uniform(50, 2000) for k in keys}, {k: rng.uniform(0.05, 0.15) for k in keys}


def _night(
    rng: random.Random, base: dict[Key, float], cv: dict[Key, float], moved: dict[Key, float] | None = None
) -> dict[Key, float]:
    """One clean night (sd of each series: CV x base), ``moved`` adding sd of a series' noise."""
    return {k: base[k] * (1 + cv[k] * (rng.gauss(0, 1) + (moved or {}).get(k, 0.0))) for k in base}


def _dates(count: int) -> list[str]:
    return [f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(count)]


def test_a_creep_of_one_series_among_41_is_caught_and_says_it_crept() -> None:
    """Today: the series drags the window's centre with it and passes every night. Now: its last
    nights against its reference level (its first nights) fail it, saying how much, over how many
    nights, since when."""
    keys = _keys(20)
    rng, base, cv = _gate(33, keys)
    creeping = ("t07", AVG)
    warm, creep = 70, 60
    nights = [_night(rng, base, cv) for _ in range(warm)]
    nights += [_night(rng, base, cv, {creeping: 0.05 * (n + 1)}) for n in range(creep)]
    verdicts = replay_gate(nights, max_regression_pct=2, whens=_dates(len(nights)))
    assert all(v.passed for v in verdicts[66:warm])
    failed = [
        (i, row)
        for i, v in enumerate(verdicts)
        for row in v.rows
        if i >= warm and not row.passed and (row.transaction, row.metric) == creeping
    ]
    assert failed, "the creep was never caught"
    first, row = failed[0]
    assert warm + 20 <= first < warm + creep, first  # 0.05 sd a night: 2 sd after 40 nights
    assert row.status == "regression"
    assert row.reason is not None and row.reason.startswith("crept +"), row.reason
    assert " sd) over " in row.reason and "since 2026-01-01" in row.reason
    assert "reference level" in row.reason
    # no other series fails on its behalf
    others = [r for i, r in failed if i == first and (r.transaction, r.metric) != creeping]
    assert not others
    # the creeping nights never join the history, but count among the last nights measured
    after = verdicts[first].history.series[creeping]
    assert max(after.values) < base[creeping] * (1 + cv[creeping] * 5)
    assert after.last[-1] == nights[first][creeping]


def test_without_a_date_the_creep_counts_the_nights() -> None:
    keys = _keys(20)
    rng, base, cv = _gate(34, keys)
    creeping = ("t03", P95)
    nights = [_night(rng, base, cv) for _ in range(70)]
    nights += [_night(rng, base, cv, {creeping: 0.15 * (n + 1)}) for n in range(40)]
    verdicts = replay_gate(nights, max_regression_pct=2)
    reasons = [
        r.reason or ""
        for v in verdicts
        for r in v.rows
        if (r.transaction, r.metric) == creeping and not r.passed
    ]
    assert any(r.startswith("crept +") and " nights: the mean of its last " in r for r in reasons), reasons
    assert not any("since 20" in r for r in reasons)


def test_a_creep_of_every_series_together_is_caught_as_a_regression_of_the_whole_run() -> None:
    """0.03 sd a night in every series: the night effect (every series' shared movement) fails."""
    keys = _keys(20)
    rng, base, cv = _gate(35, keys)
    nights = [_night(rng, base, cv) for _ in range(70)]
    nights += [_night(rng, base, cv, dict.fromkeys(keys, 0.03 * (n + 1))) for n in range(60)]
    verdicts = replay_gate(nights, max_regression_pct=2, whens=_dates(len(nights)))
    failed = [i for i, v in enumerate(verdicts) if i >= 66 and v.night is not None and not v.night.passed]
    assert failed and failed[0] >= 70, failed


def test_the_budget_text_gives_the_creep_test_its_share() -> None:
    settings = HistorySettings()
    text = Budget.split(settings, 41, with_night=True).text(settings, 60)
    assert f"({100 * family.CREEP_SHARE:g} % of it for the creep tests against the reference levels)" in text
    assert "or creep" in text and f"against its first {REFERENCE_NIGHTS}" in text


# --- what joins the history -------------------------------------------------------------------------


def _judge(value: float, history: SeriesHistory, **kwargs: object):  # type: ignore[no-untyped-def]
    return judge_night(
        value, history, worse_higher=True, max_regression_pct=2.0, settings=HistorySettings(), **kwargs
    )


def test_after_an_acceptance_a_change_that_goes_on_getting_worse_never_joins() -> None:
    """+15 % a night from the night after an acceptance: today the second night's history is the
    first red night's, and the fifth night passes. Now each is judged against the accepted night."""
    old = SeriesHistory(tuple(500.0 + (i % 5) for i in range(30)))
    accepted, history = _judge(600.0, old, accepted=True, when="2026-03-05")
    assert accepted.status == "pass"
    assert history.values == (600.0,) and history.since == "2026-03-05" and history.accepted
    for night in range(1, 9):
        judged, history = _judge(600.0 * (1 + 0.15 * night), history)
        assert judged.status == "regression", (night, judged)
        assert history.values == (600.0,), night


def test_after_an_acceptance_ordinary_nights_join_and_the_reference_forms() -> None:
    _, history = _judge(600.0, SeriesHistory(), accepted=True)
    for night in range(REFERENCE_NIGHTS + 10):
        _, history = _judge(600.0 + 3 * math.sin(night), history)
    assert len(history.values) >= REFERENCE_NIGHTS
    assert len(history.reference) == REFERENCE_NIGHTS and history.reference[0] == 600.0


def test_a_regression_in_warm_up_does_not_join() -> None:
    """Three nights of history: a night far beyond them fails by the bound, and no longer joins."""
    history = SeriesHistory((500.0, 505.0, 495.0))
    judged, after = _judge(900.0, history)
    assert judged.status == "regression"
    assert after.values == history.values
    # an ordinary night still joins, and one that fails by the bound but within the noise too
    _, after = _judge(502.0, history)
    assert after.values == (500.0, 505.0, 495.0, 502.0)
    _, after = _judge(515.0, history)
    assert after.values[-1] == 515.0


def test_a_regression_in_the_familys_warm_up_does_not_join() -> None:
    keys = _keys(20)
    rng, base, cv = _gate(36, keys)
    history = GateHistory()
    for _ in range(3):
        history = replay_gate_night(
            _night(rng, base, cv), history, bounds=2.0, settings=HistorySettings()
        ).history
    night = _night(rng, base, cv)
    night[("t05", P95)] *= 3
    verdict = replay_gate_night(night, history, bounds=2.0, settings=HistorySettings())
    row = next(r for r in verdict.rows if (r.transaction, r.metric) == ("t05", P95))
    assert row.status == "regression"
    assert verdict.history.series[("t05", P95)].values == history.series[("t05", P95)].values


def test_an_acceptance_through_the_gate_starts_the_reference_with_its_date() -> None:
    keys = _keys(20)
    rng, base, cv = _gate(37, keys)
    history = GateHistory()
    settings = HistorySettings()
    for _ in range(70):
        history = replay_gate_night(_night(rng, base, cv), history, bounds=2.0, settings=settings).history
    step = {k: v * (1.5 if k[1] == P95 else 1.0) for k, v in _night(rng, base, cv).items()}
    verdict = replay_gate_night(
        step, history, bounds=2.0, settings=settings, accepted=[P95], when="2026-06-01"
    )
    assert verdict.passed
    after = verdict.history.series[("t01", P95)]
    assert after.values == (step[("t01", P95)],) and after.since == "2026-06-01" and after.accepted
    assert after.shifts and after.shifts[0] is not None  # its night effect, measured on the others
    # the next night, 15 % worse again, fails against the accepted night and does not join
    worse = {k: v * (1.15 if k[1] == P95 else 1.0) for k, v in step.items()}
    verdict = replay_gate_night(worse, verdict.history, bounds=2.0, settings=settings)
    assert not verdict.passed
    assert verdict.history.series[("t01", P95)].values == after.values


# --- a night that failed as a whole -------------------------------------------------------------------


def test_a_glitch_night_leaves_every_series_history_as_it_was_and_the_next_night_passes() -> None:
    keys = _keys(20)
    rng, base, cv = _gate(38, keys)
    settings = HistorySettings()
    history = GateHistory()
    for _ in range(80):
        history = replay_gate_night(_night(rng, base, cv), history, bounds=2.0, settings=settings).history
    glitch = {k: 3 * v for k, v in _night(rng, base, cv).items()}
    verdict = replay_gate_night(glitch, history, bounds=2.0, settings=settings)
    assert verdict.night is not None and not verdict.night.passed
    for key in keys:
        assert verdict.history.series[key] == history.series[key], key
    history = verdict.history
    for _ in range(10):
        verdict = replay_gate_night(_night(rng, base, cv), history, bounds=2.0, settings=settings)
        assert verdict.passed, [r.reason for r in verdict.rows if not r.passed]
        history = verdict.history


# --- the form kept in XCom ----------------------------------------------------------------------------


def test_the_reference_round_trips_through_xcom() -> None:
    series = SeriesHistory(
        (1.0, 2.0, 3.0),
        ((4.0, "noise"),),
        (0.1, None, 0.3),
        (0.4,),
        reference=(1.0, 2.0),
        reference_shifts=(0.1, None),
        since="2026-03-05T02:00:00+00:00",
        age=7,
        joined=3,
        accepted=True,
        last=(2.0, 3.0, 4.0, 9.0),
        after=2,
    )
    gate = GateHistory({("t1", P95): series, (None, AVG): SeriesHistory((5.0,))}, night=SeriesHistory((0.2,)))
    back = GateHistory.from_xcom(gate.to_xcom())
    assert back == gate
    assert back.series[("t1", P95)].since == "2026-03-05T02:00:00+00:00"


def test_a_history_the_current_release_wrote_still_reads_and_its_oldest_nights_are_the_reference() -> None:
    written = {
        "format": 1,
        "series": [
            {"metric": P95, "transaction": "t1", "values": [float(500 + i) for i in range(40)], "recent": []},
        ],
    }
    read = GateHistory.from_xcom(written)
    assert read.error is None
    series = read.series[("t1", P95)]
    assert series.reference == () and series.since is None
    seeded = with_reference(series)
    assert seeded.reference == tuple(float(500 + i) for i in range(REFERENCE_NIGHTS))
    # and what it writes back the older reader reads: the keys it knew are unchanged
    again = GateHistory(read.series).to_xcom()
    assert again["series"][0]["values"] == written["series"][0]["values"]  # type: ignore[index]


def test_a_gate_of_a_few_series_judges_each_ones_creep_alone() -> None:
    """Three series (too few for a night effect): the creeping one still fails as a creep."""
    keys = _keys(1)
    rng, base, cv = _gate(39, keys)
    creeping = ("t00", AVG)
    nights = [_night(rng, base, cv) for _ in range(70)]
    nights += [_night(rng, base, cv, {creeping: 0.04 * (n + 1)}) for n in range(80)]
    verdicts = replay_gate(nights, max_regression_pct=2)
    reasons = [
        r.reason or ""
        for v in verdicts[70:]
        for r in v.rows
        if (r.transaction, r.metric) == creeping and not r.passed
    ]
    assert any(r.startswith("crept +") for r in reasons), reasons
    assert not any("every series moved together" in r for r in reasons)
