"""benchmarks/gate_family.py proves issue 27's targets only if its pieces are right: the noise has the
sd and the shared share it claims, a night's values are ``gate_quality.value``'s, the harness counts what
a rule does (a rule that fails everything is red every night and catches every step), the shortcuts
change no figure, and the floors are the most powerful tests (closed forms where there are some)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import pytest

np = pytest.importorskip("numpy")

from benchmarks import gate_family as fam  # noqa: E402
from benchmarks.gate_quality import value  # noqa: E402

Z99 = NormalDist().inv_cdf(0.99)


def test_a_gate_is_every_transactions_p95_and_average_and_the_runs_p95() -> None:
    keys = fam.gate_keys(41)
    assert len(keys) == len(set(keys)) == 41
    assert keys[-1] == (None, fam.P95)
    assert {m for _, m in keys} == {fam.P95, fam.AVG}
    assert len({t for t, _ in keys if t is not None}) == 20
    with pytest.raises(ValueError, match="odd"):
        fam.gate_keys(40)


@pytest.mark.parametrize("kind", fam.NOISES, ids=lambda k: k.label)
def test_each_noise_has_unit_sd_in_every_series_and_shares_what_it_says(kind: fam.NoiseKind) -> None:
    cvs = np.array([0.05, 0.10, 0.15, 0.15, 0.08])
    if kind.cv is not None:
        cvs = np.full(5, kind.cv)
    noise = fam.draw_noise(kind, cvs, np.random.default_rng(3), 200_000)
    assert noise.shape == (200_000, 5)
    if kind.shape == "heavy":  # t3's sample sd converges slowly: its quantiles, t3's over sqrt(3)
        quartile, tail = np.quantile(noise, [0.75, 0.975], axis=0)
        assert np.abs(quartile - 0.7649 / math.sqrt(3)).max() < 0.01
        assert np.abs(tail - 3.1824 / math.sqrt(3)).max() < 0.04
    else:
        assert np.abs(noise.std(axis=0) - 1).max() < 0.01
    assert np.abs(noise.mean(axis=0)).max() < 0.02
    corr = np.corrcoef(noise, rowvar=False)[np.triu_indices(5, 1)]
    assert np.abs(corr - kind.shared).max() < 0.02
    if kind.shape == "lognormal":  # multiplicative: skewed to the right like response times
        assert float(np.mean(noise**3)) > 0.3


def test_a_nights_values_are_the_quality_benchmarks() -> None:
    series = fam.Series(np.full(4, 500.0), np.array([0.02, 0.05, 0.1, 0.2]))
    noise = np.array([[0.3, -1.2, 2.5, -6.0]])
    got = series.values(noise, np.array([0.0, 4.0, 0.0, 2.5]))[0]
    assert list(got) == [value(0.02, 0.3), value(0.05, -1.2, 4.0), value(0.1, 2.5), value(0.2, -6.0, 2.5)]


def test_each_series_has_its_own_base_and_cv_in_the_stated_ranges() -> None:
    series = fam.Series.draw(fam.NOISES[0], 201, np.random.default_rng(1))
    assert 50 <= series.bases.min() < 100 and 1000 < series.bases.max() <= 2000
    assert 0.05 <= series.cvs.min() < 0.06 and 0.14 < series.cvs.max() <= 0.15
    lognormal = fam.Series.draw(fam.NOISE_BY_LABEL["lognormal 15 %"], 41, np.random.default_rng(1))
    assert set(lognormal.cvs) == {0.15}


class Always(fam.NightByNight):
    """A rule that fails every row of every night (or none)."""

    def __init__(self, keys: list[fam.Key], fail: bool) -> None:
        self.keys, self.fail = keys, fail
        self.name = "always" if fail else "never"

    def start(self) -> int:
        return 0

    def night(self, state: int, values: Mapping[fam.Key, float]) -> tuple[fam.Night, int]:
        failed = frozenset(self.keys) if self.fail else frozenset()
        return fam.Night(not self.fail, failed), state + 1

    def check(self, nights: Any, judged: Any) -> None:
        assert len(judged) == len(nights)


PLAN = fam.Plan(41, 2, 20, 4, 3.0, {}, 2)


def test_a_rule_failing_every_row_is_red_every_clean_night_and_catches_every_step() -> None:
    keys = fam.gate_keys(41)
    counts, _ = fam.season(PLAN, fam.NOISES[0], [Always(keys, True), Always(keys, False)], (1,), check=True)
    assert counts[("red", "always")] == [20, 20]
    assert counts[("red", "never")] == [0, 20]
    assert counts[("rows_per_red", "always")] == [20 * 41, 20]
    for step in fam.STEPS:
        assert counts[("first", "always", step)] == [5, 5]
        assert counts[("within", "always", step)] == [5, 5]
        assert counts[("first", "never", step)] == [0, 5]


class Generic(fam.NightByNight):
    """The per-series rule without its shortcuts: every step judged whole, every night of it."""

    name = "per-series"

    def __init__(self, rule: fam.PerSeries) -> None:
        self.rule = rule

    def start(self) -> Any:
        return self.rule.start()

    def night(self, state: Any, values: Mapping[fam.Key, float]) -> tuple[fam.Night, Any]:
        return self.rule.night(state, values)

    def run(self, state: Any, nights: Any, *, until: Any = None) -> tuple[list[fam.Night], Any]:
        return super().run(state, nights)  # never stops early

    def check(self, nights: Any, judged: Any) -> None:
        self.rule.check(nights, judged)


@pytest.mark.parametrize("label", ["independent", "shared 80 %"])
def test_the_per_series_rule_is_replay_history_and_its_shortcuts_change_no_figure(label: str) -> None:
    """One season, checked against ``replay_history`` series by series (``check=True``), with the step
    shortcuts (only the stepped series judged, a step judged until caught) and without."""
    kind = fam.NOISE_BY_LABEL[label]
    plan = fam.Plan(21, 1, 30, 3, 3.0, {}, 1)
    rule = fam.PerSeries(fam.gate_keys(21), 3.0, {})
    fast, _ = fam.season(plan, kind, [rule], (5,), check=True)
    slow, _ = fam.season(plan, kind, [Generic(rule)], (5,), check=False)
    assert fast == slow
    assert fast[("first", "per-series", fam.ONE_4)][1] == 10


def test_the_per_series_rule_ignores_the_family_gates_own_settings() -> None:
    rule = fam.PerSeries(fam.gate_keys(3), 3.0, {"false_alarm_budget": 0.01, "window": 30})
    assert rule.settings == {"window": 30}


def test_a_cell_counts_every_season_and_the_comparison_judges_only_its_share() -> None:
    plan = fam.Plan(3, 3, 10, 5, 3.0, {}, 1)
    cell = fam.measure_cell(plan, fam.NOISES[0], ["per-series"])
    assert len(cell.rates[("red", "per-series")].per_season) == 1
    assert cell.rates[("red", "per-series")].per_season[0][1] == 10


def test_the_targets_are_the_issues() -> None:
    independent, shared = fam.NOISE_BY_LABEL["independent"], fam.NOISE_BY_LABEL["shared 50 %"]
    heavy = fam.NOISE_BY_LABEL["heavy (t3)"]
    assert fam.target(independent, "red") and fam.target(shared, "red") and not fam.target(heavy, "red")
    assert not fam.target(independent, "first", fam.ONE_4) and fam.target(shared, "first", fam.ONE_4)
    assert fam.target(independent, "first", fam.ALL_25) and not fam.target(shared, "first", fam.ALL_25)
    assert fam.target(shared, "within", fam.ALL_25) and not fam.target(independent, "within", fam.ALL_25)


# --- the floors ------------------------------------------------------------------------------------


def test_the_floor_of_one_gaussian_series_is_the_one_sided_z_test() -> None:
    """K = 1: the most powerful test of a 4 sd step is x > z_0.99, caught Phi(4 - z_0.99) = 95.3 %."""
    got = fam.floor(fam.FloorNoise(fam.NOISES[0], 1), fam.ONE_4, 1, samples=60_000)
    assert got.power == pytest.approx(100 * NormalDist().cdf(4 - Z99), abs=max(got.ci95, 0.3))
    assert got.ci95 < 1.0


@pytest.mark.parametrize("label", ["independent", "shared 50 %", "shared 80 %"])
def test_the_floor_of_a_step_in_every_gaussian_series_is_the_test_of_their_mean(label: str) -> None:
    """Every series +2.5 sd: the statistic is the nights' mean, sd sqrt((1 - rho) / K + rho)."""
    kind = fam.NOISE_BY_LABEL[label]
    k = 41
    got = fam.floor(fam.FloorNoise(kind, k), fam.ALL_25, 1, samples=40_000)
    sd = math.sqrt((1 - kind.shared) / k + kind.shared)
    exact = 100 * NormalDist().cdf(2.5 / sd - Z99)
    assert got.power == pytest.approx(exact, abs=max(got.ci95, 0.5))


def test_the_floor_within_two_nights_is_the_test_of_both_at_twice_the_budget() -> None:
    """K = 1, two nights: x1 + x2 > sqrt(2) z_0.98, caught Phi(delta sqrt(2) - z_0.98), with a 1.5 sd
    step (``STEPS`` patched) so that the figure is not 100 %."""
    original = fam.STEPS[fam.ONE_4]
    fam.STEPS[fam.ONE_4] = (1.5, 2)
    try:
        got = fam.floor(fam.FloorNoise(fam.NOISES[0], 1), fam.ONE_4, 2, samples=200_000)
    finally:
        fam.STEPS[fam.ONE_4] = original
    exact = 100 * NormalDist().cdf(1.5 * math.sqrt(2) - NormalDist().inv_cdf(0.98))
    assert got.power == pytest.approx(exact, abs=max(got.ci95, 0.5))


@pytest.mark.parametrize("label", [n.label for n in fam.NOISES])
def test_every_floor_ratio_is_a_true_density_ratio(label: str) -> None:
    """``E_clean[f(x - delta e_i) / f(x)] = 1`` for every series ``i`` (and for the step in all): a wrong
    Jacobian, precision or sign breaks it. delta small, so that the mean converges."""
    kind = fam.NOISE_BY_LABEL[label]
    noise = fam.FloorNoise(kind, 5)
    x = noise.draw(np.random.default_rng(8), 400_000)
    one = np.exp(noise.log_ratio_one(x, 0.4)).mean(axis=0)
    assert np.abs(one - 1).max() < 0.02
    if kind.shape != "heavy":
        assert float(np.exp(noise.log_ratio_all(x, 0.2)).mean()) == pytest.approx(1, abs=0.03)


def test_the_floor_of_one_series_among_many_falls_below_one_alone() -> None:
    """One series of 41 is harder to find than one alone (and a Bonferroni test, 1 % / 41, is no better
    than the mixture's Neyman-Pearson test)."""
    alone = fam.floor(fam.FloorNoise(fam.NOISES[0], 1), fam.ONE_4, 1, samples=40_000)
    many = fam.floor(fam.FloorNoise(fam.NOISES[0], 41), fam.ONE_4, 1, samples=40_000)
    bonferroni = 100 * NormalDist().cdf(4 - NormalDist().inv_cdf(1 - 0.01 / 41))
    assert many.power < alone.power - 10
    assert many.power > bonferroni - many.ci95


needs_family = pytest.mark.skipif(
    fam._gate("replay_gate_night") is None, reason="the family gate (replay_gate_night) is not there yet"
)


@needs_family
def test_the_family_gate_night_by_night_is_replay_gate_and_so_is_its_replayed_form() -> None:
    """Stepped night by night from ``Verdict.history`` it gives ``replay_gate``'s verdicts (``check``),
    and the form that replays whole seasons for every branch counts the same."""
    plan = fam.Plan(11, 1, 10, 5, 3.0, {}, 0)
    keys = fam.gate_keys(11)
    kind = fam.NOISE_BY_LABEL["shared 50 %"]
    stepped, _ = fam.season(plan, kind, [fam.Family(keys, 3.0, {})], (2,), check=True)
    replayed, _ = fam.season(plan, kind, [fam.FamilyReplayed(keys, 3.0, {})], (2,), check=True)
    assert stepped == replayed
    assert stepped[("red", "family")][1] == 10


def test_the_creep_floor_is_the_matched_filters_for_a_ramp_of_known_start() -> None:
    """The performance note: a ramp of r sd a night is seen after n nights as r x sqrt(n(n+1)(2n+1)/6) sd;
    caught in 90 % of seasons at one series' share of the budget (1 % / 41 here)."""
    z = NormalDist().inv_cdf(1 - 0.01 / 41) + NormalDist().inv_cdf(0.9)
    for rate in (0.02, 0.05, 0.1):
        n = fam.creep_floor(rate, 41)
        assert rate * math.sqrt(n * (n + 1) * (2 * n + 1) / 6) >= z
        assert rate * math.sqrt((n - 1) * n * (2 * n - 1) / 6) < z
    assert fam.creep_floor(0.05, 41) == 30 and fam.creep_floor(0.02, 41) == 55
    # every series together: their signals add, less so when they share their noise
    assert fam.creep_floor(0.03, 41, every=True) < fam.creep_floor(0.03, 41, every=True, shared=0.5)


def test_the_creep_smoke_runs_and_counts_what_the_gate_catches() -> None:
    args = fam.parse_args(["--smoke", "--creeps", "2"])
    lines, figures = fam.run_creeps(args)
    assert any(line.startswith("Creeps:") for line in lines)
    assert [c["case"]["which"] for c in figures["creeps"]] == ["one", "all"]
    assert all(len(c["caught"]) == 2 for c in figures["creeps"])
    assert list(figures["glitches"]) == ["11 series, independent"]
