"""Every series of a night judged together: one false-alarm budget for the whole gate, the night
effect taken out of each series, the scale of the noise learned from all of them.

Why: a gate judges many series a night (a transaction gate on 20 transactions, p95 and average each,
plus the run's p95, is 41) and fails when any one fails. Judged each alone at one series' rate, a clean
night fails when any of them strays: 27 red nights in 100 at 41 series, 79 at 201 (measured with
``benchmarks/gate_family.py``). Here:

* **One budget for the gate** (``HistorySettings.false_alarm_budget``, default 1 red clean night in
  100): each of the K series tested tonight gets ``1/K`` of it (Bonferroni: no assumption on how the
  series move together, and close to exact when they move apart, which is what is left once the night
  effect is out). A series' one-night, persistence and suspicion quantiles rise with K; one series
  alone is judged at the settings' own quantiles, exactly as before.
* **The night effect.** The response times of one run move together (a slow environment slows every
  transaction). Each series' movement tonight is measured in its own noise (``z``: how many of its
  noise standard deviations worse than its centre), and the night effect is their trimmed mean: what
  every series shared. It is judged once, against its own history (a change of everything beyond the
  usual shared noise fails as a regression of the whole run), and each series is judged on what it
  moved beyond it (its residual), against the history of its own residuals: a transaction that slows
  alone stands out on a noisy night, and a noisy night does not fail forty rows at once. From
  ``FAMILY_FROM`` series on; with fewer, a series' own movement cannot be told from the night's.
* **The scale, from all series.** Response-time noise is multiplicative and skewed; one series' 60
  nights cannot tell that (the skewness of 60 values has a standard error of 0.32), 41 series' can.
  When the pooled skewness of the series' values is clearly positive (3 standard errors) and their
  logarithms' is closer to 0, the positive series are judged on a log scale.
* **A creep is a regression** (issue 33): each series keeps its reference level (its first nights since
  the last accepted change, ``history.SeriesHistory.reference``), and the mean of its last 10, 20 and 40
  nights is judged against it, which does not move with the creep (``_creeps``): what every series moved
  together over those nights (the common creep) is judged once, as the night effect's creep, and each
  series on what it moved beyond its share of it, in its own noise; ``CREEP_SHARE`` of each share of the
  budget pays for it. A night whose night effect failed leaves every series' history as it was.
* **Too few samples is not a measurement**: a transaction's percentile from fewer than
  ``MIN_TAIL_SAMPLES`` samples beyond it (an average or a median from fewer than that in all) is
  judged against its budget only, says how many samples it would need, and stays out of the history.

Sans-I/O and pure Python (``math`` only), like ``history.py``: the worker and the triggerer judge alike.
``judging.judge_gate`` builds the rows from ``judge_family``'s judgements; ``replay_gate`` replays it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from airflow_provider_loadtest.decisions.gate.history import (
    FENCE,
    FENCE_FROM,
    REFERENCE_NIGHTS,
    Creep,
    Decision,
    GateHistory,
    HistorySettings,
    Levels,
    NightJudgement,
    Quantiles,
    SeriesHistory,
    SeriesKey,
    accept,
    admit,
    creep_levels,
    creep_reason,
    creep_windows,
    decide,
    drift_free_noise,
    estimate,
    nominal_false_alarm_rate,
    regression_reason,
    t_quantile,
    threshold_factor,
    with_reference,
)
from airflow_provider_loadtest.decisions.gate.rows import NOISE, PASS, REGRESSION, STATUSES, SUSPECTED

__all__ = [  # noqa: RUF022 - grouped by meaning, not sorted
    "FAMILY_FROM",
    "NIGHT_SHARE",
    "ONE_NIGHT_SHARE",
    "CREEP_SHARE",
    "FAMILY_SPLIT",
    "TRIM",
    "MIN_TAIL_SAMPLES",
    "LOG",
    "LINEAR",
    "z_of",
    "samples_needed",
    "SeriesNight",
    "NightEffect",
    "Budget",
    "FamilyNight",
    "choose_scales",
    "judge_family",
]

#: Series with a history from which the night effect is measured and taken out: with fewer, one
#: series' own movement weighs too much in the night's (a trimmed mean of 7 is 1/5 each series).
FAMILY_FROM = 8
#: The share of the gate's budget spent on the night effect's own tests (the rest: the series'): a
#: fifth, because the night effect's noise is most of the noise when the environment is shared, so a
#: change of every series is a small step in its units (about 2.8 sd for 2.5 sd of each series).
NIGHT_SHARE = 0.2
#: Of each share (the series' and the night effect's), the part spent on the creep test (issue 33:
#: the mean of the last nights against the reference level, ``history.creep_test``); the rest goes to
#: the tests of tonight against the recent nights, split as below.
CREEP_SHARE = 0.15
#: Of a test's budget, the share of its one-night test (the rest: the persistence test), as the
#: settings' defaults split one series' (fail_z 2.5: 0.62 %, persist_z 2.8: 0.26 %).
ONE_NIGHT_SHARE = 0.7
#: A series among many: its budget for the one-night test, the two-night test and the test of
#: ``persist_nights`` nights. The one-night test of 201 series is so strict (4.5 sd with 60 nights of
#: history) that a 4 sd step is mostly caught on its second night, by the two-night test: it gets as
#: much as the one-night test, and the longer test (smaller steps that last) the rest.
FAMILY_SPLIT = (0.45, 0.4, 0.15)
#: The share of the series trimmed from each end before the night effect is averaged: a few series
#: that regress tonight do not move the night's shared movement, which an ordinary mean would let them.
TRIM = 0.2
#: A percentile needs this many samples beyond it to be a measurement (p95: 400 samples, p99: 2,000);
#: an average or a median this many in all.
MIN_TAIL_SAMPLES = 20
LOG = "log"
LINEAR = "linear"
#: The pooled skewness must exceed this many of its standard errors (``sqrt(6 / values)``) for a log
#: scale: Gaussian noise must not be judged on one by chance.
_SKEW_SE = 3.0
#: A series' values must be at least this many for its skewness to count.
_SKEW_FROM = 8


def z_of(tail: float) -> float:
    """The one-sided Gaussian quantile whose tail is ``tail`` (the inverse of
    ``history.nominal_false_alarm_rate``), by Newton's method on ``erfc``: exact to 1e-12 for tails
    from 1e-15 to 0.5. By hand rather than ``statistics.NormalDist``: that module costs this worker's
    import more than the gate itself."""
    if not 0 < tail < 1:
        raise ValueError(f"a tail probability must be between 0 and 1, got {tail}")
    if tail > 0.5:
        return -z_of(1 - tail)
    z = math.sqrt(-2 * math.log(tail)) if tail < 0.3 else 0.5 - tail  # a start on the right side
    for _ in range(50):
        error = nominal_false_alarm_rate(z) - tail
        density = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        step = error / density
        z += step
        if abs(step) < 1e-13 * max(1.0, abs(z)):
            break
    return z


def samples_needed(metric: str) -> int | None:
    """How many samples a transaction's ``metric`` needs to be a measurement: ``MIN_TAIL_SAMPLES``
    beyond a percentile (p95: 400), that many in all for an average, a median or a rate; None for the
    run's own figures, which the service measures on every sample."""
    prefix = "RESPONSE_TIME_PERCENTILE_"
    if metric.startswith(prefix):
        percent = int(metric[len(prefix) :])
        return math.ceil(MIN_TAIL_SAMPLES * 100 / (100 - percent))
    if metric.endswith("_MEDIAN"):
        return 2 * MIN_TAIL_SAMPLES
    return MIN_TAIL_SAMPLES


@dataclass(frozen=True)
class SeriesNight:
    """One series tonight, as the family judges it: a usable value, its direction, its bound, whether
    a person accepted its change, and (for a transaction) the samples its value comes from."""

    key: SeriesKey
    value: float
    worse_higher: bool
    max_regression_pct: float
    accepted: bool = False
    samples: int | None = None


@dataclass(frozen=True)
class NightEffect:
    """The night's shared movement: every judged series' movement tonight in its own noise standard
    deviations (worse: positive), trimmed-averaged, and its judgement against its own history.

    ``shift_sd`` is tonight's; ``centre`` and ``noise`` the usual night effect and its spread (None
    while its history is short); ``change_pct`` what tonight's shift (beyond the usual) means for the
    median series, in percent; ``series`` the number it is measured on."""

    shift_sd: float
    series: int
    status: str = PASS
    centre: float | None = None
    noise: float | None = None
    history_n: int = 0
    change_pct: float | None = None
    reason: str | None = None
    note: str | None = None

    @property
    def passed(self) -> bool:
        return self.status != REGRESSION

    def to_xcom(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}

    @classmethod
    def from_xcom(cls, data: object) -> NightEffect | None:
        """As ``to_xcom`` wrote it; None for anything else (the view reads what it can)."""
        if not isinstance(data, Mapping):
            return None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if not isinstance(known.get("shift_sd"), int | float) or known.get("status", PASS) not in STATUSES:
            return None
        try:
            return cls(**known)
        except TypeError:
            return None

    def text(self) -> str:
        """The log's line: what every series shared tonight, and what it means."""
        usual = (
            f" (usually {self.centre:+.2f} sd, noise {self.noise:.2f} sd over {self.history_n} nights)"
            if self.centre is not None and self.noise is not None
            else ""
        )
        pct = f", {self.change_pct:+.1f} % for the median series" if self.change_pct is not None else ""
        verdict = "FAIL: regression of the whole run" if not self.passed else self.status
        line = (
            f"Night effect: the {self.series} series moved {self.shift_sd:+.2f} sd of their noise "
            f"together{usual}{pct}: {verdict}"
        )
        if self.reason:
            line += f"; {self.reason}"
        if self.note:
            line += f"; {self.note}"
        return line


@dataclass(frozen=True)
class Budget:
    """What the gate's false-alarm budget gives each test tonight: the series' quantiles (with
    ``tested`` series judged together) and the night effect's (None without one)."""

    tested: int
    series: Quantiles
    night: Quantiles | None

    @classmethod
    def split(cls, settings: HistorySettings, tested: int, with_night: bool) -> Budget:
        """Each of ``tested`` series gets its share of the budget (the night effect's taken first);
        never a lower quantile than the settings' own, so one series is judged exactly as before.
        With more than one series the persistence share is split between a test of two nights (a
        step too small for the one-night test is caught on its second night) and one of
        ``persist_nights`` nights."""
        budget = settings.false_alarm_budget
        whole = budget * (1 - NIGHT_SHARE if with_night else 1) / max(1, tested)
        creep = whole * CREEP_SHARE if tested > 1 else 0.0
        share = whole - creep
        if tested > 1:  # the two-night test gets the most: a 4 sd step is caught within two nights
            single, two, lasting = (share * part for part in FAMILY_SPLIT)
        else:  # one series: exactly the settings' split
            single, two, lasting = share * ONE_NIGHT_SHARE, 0.0, share * (1 - ONE_NIGHT_SHARE)
        series = Quantiles(
            max(settings.fail_z, z_of(single)),
            max(settings.persist_z, z_of(lasting)),
            max(settings.suspect_z, z_of(nominal_false_alarm_rate(settings.suspect_z) / max(1, tested))),
            _windows(settings, two, lasting) if tested > 1 else (),
            creep_windows(creep) if tested > 1 else Quantiles.of(settings).creep,
        )
        night = None
        if with_night:
            night_budget = budget * NIGHT_SHARE * (1 - CREEP_SHARE)
            night_single = night_budget * ONE_NIGHT_SHARE
            night_lasting = night_budget * (1 - ONE_NIGHT_SHARE)
            # The night effect's persistence test is of persist_nights nights only: a shift of every
            # series by 2.5 sd is about 2.8 sd of the night effect's own noise when most of the noise
            # is shared, caught within three nights by a three-night test, not by a two-night one.
            night = Quantiles(
                z_of(night_single),
                z_of(night_lasting),
                settings.suspect_z,
                creep=creep_windows(budget * NIGHT_SHARE * CREEP_SHARE),
            )
        return cls(tested, series, night)

    def text(self, settings: HistorySettings, nights: int) -> str:
        """What the budget buys, for the log: how far a series (and the night) must move to fail."""
        n = max(settings.min_history, nights)
        days = settings.persist_nights

        def moves(q: Quantiles) -> str:
            text = f"{threshold_factor(q.fail_z, n):.1f} sd to fail on one night"
            for m, z in q.persistence(days):
                text += f", {threshold_factor(z, n, m):.1f} sd a night over {m} nights"
            if q.creep:
                m, z = q.creep[-1]
                text += (
                    f", or creep {z * math.sqrt(1 / m + 1 / REFERENCE_NIGHTS):.1f} sd from its reference "
                    f"level (the mean of its last {m} nights against its first {REFERENCE_NIGHTS})"
                )
            return text

        count = 100 * settings.false_alarm_budget
        per = f"{count:g} red clean night{'' if count == 1 else 's'} in 100"
        beyond = " beyond the night's shared movement" if self.night is not None else ""
        creep = (
            f" ({100 * CREEP_SHARE:g} % of it for the creep tests against the reference levels)"
            if self.series.creep and self.tested > 1
            else ""
        )
        line = (
            f"Budget: at most {per} for the whole gate{creep}; with {self.tested} series judged together, "
            f"a single series must move {moves(self.series)}{beyond}"
        )
        if self.night is not None:
            line += f"; every series together (the night effect) {moves(self.night)}"
        return line + f" (noise measured on {n} nights)."


@dataclass(frozen=True)
class FamilyNight:
    """The family's judgement of one night: per series its judgement and next history (None: the
    history stays as it was), how far it moved beyond its own noise (``own_sd``) and the night effect."""

    judgements: Mapping[SeriesKey, tuple[NightJudgement, SeriesHistory | None]]
    own_sd: Mapping[SeriesKey, float] = field(default_factory=dict)
    night: NightEffect | None = None
    night_history: SeriesHistory | None = None
    scales: Mapping[SeriesKey, str] = field(default_factory=dict)
    budget: Budget | None = None
    #: The scale the gate was judged on tonight (``LOG`` when any series was), kept for tomorrow.
    scale: str | None = None
    budget_text: str | None = None


def _windows(settings: HistorySettings, two: float, lasting: float) -> tuple[tuple[int, float], ...]:
    """The persistence tests of a series among many: two nights (budget ``two``) and
    ``persist_nights`` nights (budget ``lasting``); one test with both budgets when those are the same
    number of nights."""
    nights = settings.persist_nights
    if nights <= 1:
        return ()
    if nights == 2:
        return ((2, max(settings.persist_z, z_of(two + lasting))),)
    return ((2, max(settings.persist_z, z_of(two))), (nights, max(settings.persist_z, z_of(lasting))))


# --- the scale ------------------------------------------------------------------------------------


def _skewness(values: Sequence[float]) -> float | None:
    """The sample skewness of the values within the history's robust fence (one outlier night must not
    decide the scale of a whole gate); None when the values do not vary."""
    fit = estimate(values)
    if fit.sd <= 0:
        return None
    kept = [v for v in values if abs(v - fit.centre) <= 6 * fit.sd]
    mean = sum(kept) / len(kept)
    m2 = sum((v - mean) ** 2 for v in kept) / len(kept)
    if m2 <= 0:
        return None
    skew: float = sum((v - mean) ** 3 for v in kept) / len(kept) / m2**1.5
    return skew


def _least_squares(points: Sequence[tuple[float, float]]) -> tuple[float, float, float, float] | None:
    """Least squares of value on night effect over ``(night effect, value)`` points: intercept, slope,
    the mean night effect and the night effects' sum of squared deviations; None when they do not vary."""
    n = len(points)
    mean_f = sum(f for f, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((f - mean_f) ** 2 for f, _ in points)
    if spread <= 0:
        return None
    slope = sum((f - mean_f) * (y - mean_y) for f, y in points) / spread
    return mean_y - slope * mean_f, slope, mean_f, spread


def _own_noise(values: Sequence[float], shifts: Sequence[float | None]) -> list[float]:
    """The values less what their nights' effects explain (least squares on the nights whose effect is
    known): the series' own noise, which the other series do not share. Why: when the series share a
    night effect their skewness is mostly the shared draws' (one number a night for all of them), so
    pooling their values adds no evidence of the shape; pooling what each moved on its own does."""
    points = [(f, v) for v, f in zip(values, shifts, strict=False) if f is not None]
    if len(points) < _SKEW_FROM:
        return list(values)
    line = _least_squares(points)
    if line is None:
        return [v for _, v in points]
    _, slope, mean_f, _ = line
    return [v - slope * (f - mean_f) for f, v in points]


def choose_scales(
    histories: Mapping[SeriesKey, Sequence[float]],
    shifts: Mapping[SeriesKey, Sequence[float | None]] | None = None,
    previous: str | None = None,
) -> dict[SeriesKey, str]:
    """``LOG`` for every series whose values are all positive when the pooled skewness of those series
    says the noise is multiplicative (clearly positive, and their logarithms' closer to 0), else
    ``LINEAR``. Pooled by the number of values, from ``FAMILY_FROM`` such series on: one series' 60
    nights cannot tell the shape (a gate of one series stays on the metric's own scale, where a step
    is measured, exactly as before), 41 series' can. With the night effect of their nights known
    (``shifts``), the skewness is each series' own noise's (``_own_noise``). ``previous``, the scale the
    gate was judged on the night before: a log scale stays while the pooled skewness is still more
    than one standard error above 0 (a scale that flips night to night would judge tonight against a
    history measured on another scale)."""
    positive = {k: v for k, v in histories.items() if len(v) >= _SKEW_FROM and min(v) > 0}
    if len(positive) < FAMILY_FROM:
        return dict.fromkeys(histories, LINEAR)
    weight = linear = logged = 0.0
    for key, values in positive.items():
        known = (shifts or {}).get(key) or ()
        aligned = known if len(known) == len(values) else (None,) * len(values)
        plain = _skewness(_own_noise(values, aligned))
        logs = _skewness(_own_noise([math.log(v) for v in values], aligned))
        if plain is None or logs is None:
            continue
        weight += len(values)
        linear += len(values) * plain
        logged += len(values) * logs
    if weight <= 0:
        return dict.fromkeys(histories, LINEAR)
    standard_error = math.sqrt(6 / weight)
    needed = (1.0 if previous == LOG else _SKEW_SE) * standard_error
    multiplicative = linear / weight > needed and abs(logged) < abs(linear)
    return {k: LOG if multiplicative and k in positive else LINEAR for k in histories}


# --- the night ------------------------------------------------------------------------------------


def _trimmed_mean(values: Sequence[float]) -> float:
    ordered = sorted(values)
    cut = int(TRIM * len(ordered))
    kept = ordered[cut : len(ordered) - cut] or ordered
    return math.fsum(kept) / len(kept)


@dataclass(frozen=True)
class _Member:
    """A series judged against its noise tonight: its fit on its scale and its movement (``z``)."""

    night: SeriesNight
    history: SeriesHistory
    scale: str
    centre: float  # on its scale
    sd: float  # on its scale
    n: int
    z: float  # worse-positive movement tonight, in its noise sd

    def to_scale(self, value: float) -> float:
        return math.log(value) if self.scale == LOG else value

    def from_scale(self, value: float) -> float:
        return math.exp(min(value, 700.0)) if self.scale == LOG else value

    @property
    def sign(self) -> int:
        return 1 if self.night.worse_higher else -1

    def z_of(self, value: float) -> float:
        return self.sign * (self.to_scale(value) - self.centre) / self.sd

    def pct(self, moved: float) -> float:
        """A worsening of ``moved`` (in the units of its scale), in percent of the centre's value."""
        if self.scale == LOG:
            return (math.expm1(min(moved, 700.0)) if self.sign > 0 else -math.expm1(-moved)) * 100
        if self.centre == 0:
            return math.inf if moved > 0 else 0.0
        return moved / abs(self.centre) * 100


def _few_samples(night: SeriesNight) -> str | None:
    needed = samples_needed(night.key[1]) if night.key[0] is not None else None
    if needed is None or night.samples is None or night.samples >= needed:
        return None
    return (
        f"only {night.samples} samples: {night.key[1]} needs at least {needed} to be a measurement "
        f"({MIN_TAIL_SAMPLES} beyond a percentile, or in all): judged against its budget only, and "
        "kept out of the history"
    )


def judge_family(
    series: Sequence[SeriesNight],
    history: GateHistory,
    settings: HistorySettings,
    *,
    fallback: Callable[[SeriesNight, SeriesHistory], tuple[NightJudgement, SeriesHistory]],
    when: str | None = None,
) -> FamilyNight:
    """Judge every series of one night together (see the module's docstring).

    ``history`` must be readable for every series given (the caller fails the others as not
    measured). ``fallback`` judges a series whose history is too short to have a noise (today's
    warm-up rule, ``history.judge_night``). Returns each series' judgement and next history, the
    night effect and the night effect's next history. ``when``: the night's date (ISO), kept with a
    reference level that begins tonight and said in a creep's message.

    A night whose night effect failed (every series moved together beyond the usual: a regression of
    the whole run, or a glitch of the environment) leaves every series' history as it was: its values
    measured something else, and would distort the nights after it."""
    judgements: dict[SeriesKey, tuple[NightJudgement, SeriesHistory | None]] = {}
    histories = {s.key: history.get(s.key) for s in series}
    scales = choose_scales(
        {k: h.values for k, h in histories.items()},
        {k: h.shifts for k, h in histories.items()},
        history.scale,
    )
    members: list[_Member] = []
    flat: list[tuple[SeriesNight, SeriesHistory]] = []  # a history whose values do not vary
    for night in series:
        own = histories[night.key]
        if night.accepted:
            judgements[night.key] = accept(night.value, len(own.values), when=when)
            continue
        few = _few_samples(night)
        if few is not None:
            judgements[night.key] = (NightJudgement(PASS, history_n=len(own.values), note=few), None)
            continue
        scale = scales[night.key]
        if len(own.values) < settings.min_history or (scale == LOG and night.value <= 0):
            judgements[night.key] = fallback(night, own)
            continue
        fit = estimate([math.log(v) for v in own.values] if scale == LOG else own.values)
        if fit.sd <= 0:
            flat.append((night, own))
            continue
        member = _Member(night, own, scale, fit.centre, fit.sd, fit.n, 0.0)
        members.append(replace(member, z=member.z_of(night.value)))

    shift = _trimmed_mean([m.z for m in members]) if len(members) >= FAMILY_FROM else None
    budget = Budget.split(settings, len(members) + len(flat), shift is not None)
    for night, own in flat:  # nothing to standardise by: judged alone, at its share of the budget
        judgements[night.key] = fallback(night, own)
    own_sd: dict[SeriesKey, float] = {}
    for member in members:
        judgement, after, moved = _judge_member(member, shift, budget.series, settings, when)
        judgements[member.night.key] = (judgement, after)
        own_sd[member.night.key] = moved
    effect: NightEffect | None = None
    night_history = history.night
    if shift is not None:
        effect, night_history = _judge_night_effect(
            shift, members, history.night or SeriesHistory(), budget, settings, when
        )
        for key, (judged, kept) in list(judgements.items()):
            if kept is not None and len(kept.values) == 1 and kept.accepted and not kept.shifts:
                # an accepted night: its night effect, measured on the others, goes with it
                judgements[key] = (judged, replace(kept, shifts=(shift,), reference_shifts=(shift,)))
    if members:
        effect, night_history = _creeps(
            members, judgements, budget, settings, shift, effect, history.night, night_history, when
        )
    if effect is not None and effect.status == REGRESSION:
        for member in members:  # the night failed as a whole: no series learns from it
            judgements[member.night.key] = (judgements[member.night.key][0], None)
    budget_text = None
    if budget.tested > 1:
        budget_text = budget.text(settings, max((m.n for m in members), default=0))
    return FamilyNight(
        judgements,
        own_sd,
        effect,
        night_history,
        {m.night.key: m.scale for m in members},
        budget=budget,
        budget_text=budget_text,
        scale=LOG if LOG in scales.values() else LINEAR,
    )


@dataclass(frozen=True)
class _Line:
    """A series' values against the night effect of their nights (least squares, within the robust
    fence): the value the night effect predicts and the noise left around it."""

    intercept: float
    slope: float
    sd: float
    n: int
    mean_shift: float
    spread: float  # sum of squared deviations of the night effects from their mean

    def predict(self, shift: float) -> float:
        return self.intercept + self.slope * shift

    def widening(self, shift: float) -> float:
        """How much wider the prediction interval is at ``shift`` than at the mean night effect (the
        leverage of an unusual night)."""
        return math.sqrt((1 + 1 / self.n + (shift - self.mean_shift) ** 2 / self.spread) / (1 + 1 / self.n))


def _fit_line(points: Sequence[tuple[float, float]]) -> _Line | None:
    """Least squares of value on night effect, refitted without the nights beyond the robust fence of
    its residuals (``history.FENCE``, from ``FENCE_FROM`` nights: an outlier night moves neither the
    line nor its noise); None when the night effects do not vary or too few nights are left."""

    first = _least_squares(points)
    if first is None:
        return None
    kept = list(points)
    if len(points) >= FENCE_FROM:
        residuals = [y - first[0] - first[1] * f for f, y in points]
        centre = sorted(residuals)[len(residuals) // 2]
        mad = sorted(abs(r - centre) for r in residuals)[len(residuals) // 2] * 1.4826
        if mad > 0:
            kept = [p for p, r in zip(points, residuals, strict=True) if abs(r - centre) <= FENCE * mad]
    line = _least_squares(kept) if len(kept) >= 4 else None
    if line is None:
        return None
    intercept, slope, mean_f, spread = line
    left = sum((y - intercept - slope * f) ** 2 for f, y in kept)
    return _Line(intercept, slope, math.sqrt(left / (len(kept) - 2)), len(kept), mean_f, spread)


def _judge_member(
    member: _Member,
    shift: float | None,
    quantiles: Quantiles,
    settings: HistorySettings,
    when: str | None = None,
) -> tuple[NightJudgement, SeriesHistory, float]:
    """One series among the others. With a night effect tonight and enough nights whose night effect
    is known, on what it moved beyond what tonight's night effect predicts for it (its values against
    their nights' effects, least squares: each series moves with the night by its own amount), in the
    noise left around that line (a prediction interval, as for one series); before that, on its own
    movement. Returns its judgement, its next history and how far beyond its noise it moved (sd)."""
    own, sign = member.history, member.sign
    shifts = own.shifts if len(own.shifts) == len(own.values) else (None,) * len(own.values)
    log = member.scale == LOG
    points = [
        (f, math.log(v) if log else v) for v, f in zip(own.values, shifts, strict=True) if f is not None
    ]
    line = _fit_line(points) if shift is not None and len(points) >= settings.min_history + 2 else None
    tonight_y = member.to_scale(member.night.value)
    if shift is not None and line is not None and line.sd > 0:
        expected = line.predict(shift)
        noise, n = line.sd * line.widening(shift), line.n - 1  # Student's t with n - 2 dof
        recent = [
            (None if f is None else sign * (member.to_scale(v) - line.predict(f)), status)
            for (v, status), f in zip(
                own.recent, [own.recent_shift(i) for i in range(len(own.recent))], strict=True
            )
        ]
        beyond_night = True
    else:
        expected, noise, n = member.centre, member.sd, member.n
        recent = [(sign * (member.to_scale(v) - member.centre), status) for v, status in own.recent]
        beyond_night = False
    tonight = sign * (tonight_y - expected)
    decision = decide(
        tonight,
        recent,
        noise=noise,
        n=n,
        quantiles=quantiles,
        persist_nights=settings.persist_nights,
        change_pct=member.pct,
        max_regression_pct=member.night.max_regression_pct,
    )
    band = threshold_factor(quantiles.fail_z, n) * noise
    edges = sorted((member.from_scale(expected - band), member.from_scale(expected + band)))
    centre_value = member.from_scale(member.centre)
    judgement = NightJudgement(
        decision.status,
        centre=centre_value,
        noise=_noise_in_units(member),
        band_low=edges[0],
        band_high=edges[1],
        history_n=len(own.values),
        baseline=centre_value,
        reason=_reason(decision, member, centre_value, beyond_night),
        note=_note(decision, tonight / noise, beyond_night),
    )
    return judgement, admit(own, member.night.value, decision, settings, shift), tonight / noise


@dataclass(frozen=True)
class _Drift:
    """A member's nights for the creep test (``history.creep_levels``, on its scale, worse positive):
    its noise beyond the night effect (night-to-night differences of its values less the line's share
    of their nights' effects) and how much of every series' common movement it shares (``loading``,
    in its own noise sd per sd of the night effect)."""

    member: _Member
    levels: Levels
    own_noise: float
    dof: int
    loading: float
    total: float  # its noise sd, night effect included (night-to-night)


def _drift(member: _Member, settings: HistorySettings) -> _Drift | None:
    own, log = member.history, member.scale == LOG

    def level(value: float, _shift: float | None) -> float | None:
        if log and value <= 0:
            return None
        return member.sign * member.to_scale(value)

    found = creep_levels(member.night.value, own, level)
    if found is None or found.noise <= 0:
        return None
    shifts = own.shifts if len(own.shifts) == len(own.values) else (None,) * len(own.values)
    points = [(f, member.to_scale(v)) for v, f in zip(own.values, shifts, strict=True) if f is not None]
    line = _fit_line(points) if len(points) >= settings.min_history + 2 else None
    if line is None or len(points) < len(own.values) // 2:
        return _Drift(member, found, found.noise, found.dof, 1.0, found.noise)
    own_noise, dof = drift_free_noise([y - line.slope * f for f, y in points])
    if own_noise <= 0:
        return None
    loading = min(3.0, max(0.0, line.slope / found.noise))
    return _Drift(member, found, own_noise, dof, loading, found.noise)


def _creeps(
    members: Sequence[_Member],
    judgements: dict[SeriesKey, tuple[NightJudgement, SeriesHistory | None]],
    budget: Budget,
    settings: HistorySettings,
    shift: float | None,
    effect: NightEffect | None,
    night_before: SeriesHistory | None,
    night_history: SeriesHistory | None,
    when: str | None,
) -> tuple[NightEffect | None, SeriesHistory | None]:
    """The creep tests of a gate of many series (issue 33), every level against its reference level
    (which does not move with a creep), for each window of m nights:

    * every series' movement ``d`` (the mean of its last m nights less its reference's, in its noise
      sd), and their trimmed mean, the **common creep** (what every series moved together: the
      night effect over those nights, measured from the references rather than from the moving
      centres): judged against the night effect's own noise (night-to-night) at the night effect's
      creep quantile; a creep of every series together fails as a regression of the whole run;
    * each series on what it moved beyond its share of the common creep, against its own noise
      beyond the night effect, at its creep quantile.

    Updates ``judgements`` in place (a creeping series fails and its night does not join) and returns
    the night effect and its history (failed when every series crept together)."""
    drifts = [d for m in members if (d := _drift(m, settings)) is not None]
    if not drifts or not budget.series.creep:
        return effect, night_history
    worst: dict[SeriesKey, tuple[float, Creep]] = {}
    common_worst: tuple[float, int, float] | None = None
    night_noise, night_dof = drift_free_noise(night_before.values) if night_before is not None else (0.0, 0)
    night_windows = dict(budget.night.creep) if budget.night is not None else {}
    for m, z in budget.series.creep:
        ready = [d for d in drifts if d.levels.after_reference >= m and len(d.levels.levels) >= m]
        if not ready:
            continue
        moved = {
            id(d): math.fsum(d.levels.levels[-m:]) / m
            - math.fsum(d.levels.reference) / len(d.levels.reference)
            for d in ready
        }
        # With fewer series a series' own creep cannot be told from the common one: each is judged on
        # all it moved, against all its noise (night-to-night), as one series alone is.
        together = len(ready) >= FAMILY_FROM
        common = _trimmed_mean([moved[id(d)] / d.total for d in ready]) if together else 0.0
        reach = math.sqrt(1 / m + 1 / REFERENCE_NIGHTS)
        if together and effect is not None and m in night_windows and night_noise > 0 and night_dof > 0:
            beyond = common / (t_quantile(night_windows[m], night_dof) * reach * night_noise)
            bound = sorted(d.member.night.max_regression_pct for d in ready)[len(ready) // 2]
            pct = sorted(d.member.pct(common * d.total) for d in ready)[len(ready) // 2]
            if beyond > 1 and pct > bound and (common_worst is None or beyond > common_worst[0]):
                common_worst = (beyond, m, common)
        for d in ready:
            reach_d = math.sqrt(1 / m + 1 / len(d.levels.reference))
            own = moved[id(d)] - d.loading * common * d.total
            noise, dof = (d.own_noise, d.dof) if together else (d.total, d.levels.dof)
            if d.member.pct(own) <= d.member.night.max_regression_pct:
                continue
            beyond = own / (t_quantile(z, dof) * reach_d * noise)
            key = d.member.night.key
            if beyond > 1 and (key not in worst or beyond > worst[key][0]):
                worst[key] = (beyond, Creep(m, own, noise))
    for d in drifts:
        key = d.member.night.key
        judged, _ = judgements[key]
        if key not in worst or judged.status == REGRESSION:
            continue
        creep = worst[key][1]
        history = with_reference(d.member.history)
        reason = creep_reason(creep, d.member.pct(creep.moved), history, when)
        if len(drifts) >= FAMILY_FROM:
            reason += ", beyond what every series moved together"
        if d.member.scale == LOG:
            reason += " (judged on a log scale)"
        failed = Decision(REGRESSION, "the last nights", kept_as=REGRESSION, creep=reason)
        judgements[key] = (
            replace(judged, status=REGRESSION, reason=reason, note=None),
            admit(d.member.history, d.member.night.value, failed, settings, shift),
        )
    if common_worst is None or effect is None or shift is None or effect.status == REGRESSION:
        return effect, night_history
    return _common_creep(drifts, common_worst[1], common_worst[2], effect, night_before, settings, shift)


def _common_creep(
    drifts: Sequence[_Drift],
    m: int,
    common: float,
    effect: NightEffect,
    night_before: SeriesHistory | None,
    settings: HistorySettings,
    shift: float,
) -> tuple[NightEffect, SeriesHistory]:
    """Every series crept together: the night effect fails, saying so, and its night does not join."""
    ages = sorted(with_reference(d.member.history).age for d in drifts)
    sinces = sorted(s for d in drifts if (s := d.member.history.since))
    pct = sorted(d.member.pct(common * d.total) for d in drifts)[len(drifts) // 2]
    since = f" since {sinces[len(sinces) // 2]}" if sinces else ""
    reason = (
        f"every series crept together: {pct:+.3g} % for the median series ({common:+.2f} sd) over "
        f"{ages[len(ages) // 2] + 1} nights{since}, the mean of their last {m} nights against their "
        "reference levels, beyond the usual shared noise and max_regression_pct; a creep does not become "
        "the normal without a person (loadtest_accept_change)"
    )
    failed = Decision(REGRESSION, "the last nights", kept_as=REGRESSION, creep=reason)
    before = night_before or SeriesHistory()
    return replace(effect, status=REGRESSION, reason=reason, note=None), admit(
        before, shift, failed, settings
    )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _noise_in_units(member: _Member) -> float:
    """One noise sd in the metric's units (on a log scale: its size at the centre)."""
    if member.scale == LOG:
        return math.exp(member.centre) * math.expm1(member.sd)
    return member.sd


def _reason(decision: Decision, member: _Member, centre: float, beyond_night: bool) -> str | None:
    scale = " (judged on a log scale)" if member.scale == LOG and decision.status == REGRESSION else ""
    if decision.creep:
        beyond = ", beyond the night's shared movement" if beyond_night else ""
        return decision.creep + beyond + scale
    if not beyond_night:
        reason = regression_reason(decision, centre, member.night.max_regression_pct)
        return reason + scale if reason else None
    if decision.status != REGRESSION:
        return None
    return (
        f"{decision.over} worse than its usual {_fmt(centre)} by more than "
        f"{_fmt(member.night.max_regression_pct)} % beyond the night's shared movement, and than its "
        f"own noise explains{scale}"
    )


def _note(decision: Decision, moved_sd: float, beyond_night: bool) -> str | None:
    if decision.status != SUSPECTED:
        return None
    beyond = " beyond the night's shared movement" if beyond_night else ""
    return (
        f"suspected: {moved_sd:+.1f} sd of its noise{beyond} on one night, not enough to fail with the "
        "gate's budget; a regression if the next nights confirm it (kept out of the history meanwhile)"
    )


def _judge_night_effect(
    shift: float,
    members: Sequence[_Member],
    history: SeriesHistory,
    budget: Budget,
    settings: HistorySettings,
    when: str | None = None,
) -> tuple[NightEffect, SeriesHistory]:
    """The night effect against its own history: a regression of the whole run when every series
    moved together beyond the usual shared noise (and, for the median series, beyond its bound), or
    when it crept from its reference level (every series creeping together)."""
    bounds = sorted(m.night.max_regression_pct for m in members)
    bound = bounds[len(bounds) // 2]
    if len(history.values) < settings.min_history or budget.night is None:
        warming = (
            f"{len(history.values)} night(s) of night-effect history, {settings.min_history} needed to "
            "judge it: each series is judged on its own movement meanwhile"
        )
        effect = NightEffect(shift, len(members), PASS, history_n=len(history.values), note=warming)
        if not history.values and not history.recent:
            history = SeriesHistory(since=when)
        return effect, admit(history, shift, Decision(NOISE), settings)
    fit = estimate(history.values)
    noise = fit.sd if fit.sd > 0 else 1e-9

    def change_pct(mean: float) -> float:
        moved = sorted(m.pct(mean * m.sd) for m in members)
        return moved[len(moved) // 2]

    decision = decide(
        shift - fit.centre,
        [(v - fit.centre, s) for v, s in history.recent],
        noise=noise,
        n=fit.n,
        quantiles=budget.night,
        persist_nights=settings.persist_nights,
        change_pct=change_pct,
        max_regression_pct=bound,
    )
    reason: str | None = None
    if decision.status == REGRESSION:
        reason = (
            f"{decision.over} every series worse together by more than the usual shared noise "
            f"explains and, for the median series, by more than {_fmt(bound)} %"
        )
    note: str | None = None
    if decision.status == SUSPECTED:
        note = "suspected: every series moved together beyond the usual; a regression if it persists"
    effect = NightEffect(
        shift,
        len(members),
        decision.status,
        fit.centre,
        fit.sd,
        len(history.values),
        _finite_or_none(change_pct(shift - fit.centre)),
        reason,
        note,
    )
    return effect, admit(history, shift, decision, settings)


def _finite_or_none(value: float) -> float | None:
    """A percentage for XCom: JSON has no infinity (a change from 0 has no percentage)."""
    return round(value, 2) if math.isfinite(value) else None


def _fmt(value: float) -> str:
    return "from 0" if math.isinf(value) else f"{value:.4g}"
