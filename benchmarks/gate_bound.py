"""What any rule could do: the most powerful test of tonight against the last nights, per noise shape.

Issue 18 asks one rule for three things on every noise shape of ``gate_quality.py``: at most 1 false
alarm per 100 clean nights, a 4 sd step caught on its first night 90 % of the time, a 2.5 sd step
within three nights 90 % of the time. Where the measured rule misses, is a better rule possible, or
is the target out of reach? This module answers with floors: false-alarm rates that no rule of a
stated kind can go below while it catches 90 % of the steps, whatever it computes.

The kind of rule, and so the reach of every "no rule can" below: it judges tonight from the last
``--nights`` nights (60, the gate's window; the floors fall as the history grows, and rise fast below
it: on Gaussian noise 2.0 at 10 nights, 0.98 at 20, 0.70 at 30, 0.52 at 60, 0.43 at 100), and it gives
the same verdict when every value is shifted or scaled alike (a faster or slower service, milliseconds
or seconds). A rule that also used the metric's zero (response times cannot go below it) is outside
that kind; on lognormal noise, whose spread grows with the level, it could do a little better.

* **known**: the noise's distribution known exactly, no history needed (``gate_ceiling.known_ceiling``).
* **shape known**: the rule knows the shape but not the noise's level and size. Among rules of the kind
  above, the most powerful test of "tonight is a 4 sd step" against "tonight is clean" is known in
  closed form (Lehmann & Romano, *Testing Statistical Hypotheses*, 3rd ed., section 6.3): the ratio of
  ``int_0^inf int v^(N-2) f(v x_1 - u, ..., v x_N - u) du dv`` under the two hypotheses. It is told the
  shape and the step's exact size, which a gate never is.
* **shape not known**: the same for a rule that must hold on several shapes at once, not knowing which
  it faces (Gaussian noise and this shape; and the issue's own shapes together: Gaussian noise, the odd
  outlier night, heavy tails). The bound is the Lagrangian dual of "the smallest worst false-alarm rate
  when 90 % of every shape's steps are caught" (the generalised Neyman-Pearson lemma): for any
  multipliers it is a lower bound, and it is concave in them. The multipliers are searched on half of
  the draws and the bound is measured on the other half, so the search cannot flatter it; beside it, the
  test those multipliers define, measured on the same fresh draws (what the best test found achieves).

These are one-night floors: the three-night target needs a further test, which only adds false alarms
(``gate_quality``'s persistence test adds about 0.2 per 100 nights on Gaussian noise). Each floor is
given with its 95 % Monte Carlo interval; a floor counts as out of reach only when its interval clears 1.

Monte Carlo over ``--samples`` draws of each hypothesis. The integral over the unknown level and size is
a sum over a grid around each standardised sample (the Gaussian one in closed form over the level);
``tests/unit/test_gate_bound.py`` checks it against the closed form, a wider and finer grid, and the
identity a true density ratio must satisfy. numpy comes with the ``dev`` group (pandas brings it to
``bench`` too).

    .venv/bin/python benchmarks/gate_bound.py [--samples 8000] [--nights 60] [--cvs ...] [--smoke]
        [--json PATH] [--docs docs/gate_quality.md [--section gate_bound]]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import table  # noqa: E402
from benchmarks.gate_ceiling import CATCH, STEP_SD, known_ceiling  # noqa: E402

Array = NDArray[np.float64]
LogDensity = Callable[[Array], Array]

#: The shapes of ``gate_quality.noise`` whose nights are independent draws (``wander``'s are not, so no
#: floor of this kind holds for it).
SHAPES = ("gaussian", "lognormal", "heavy", "outliers")
#: ``gate_quality``'s outlier nights: one in a hundred, 4 to 8 sd worse.
OUTLIER_RATE, OUTLIER_LOW, OUTLIER_HIGH = 0.01, 4.0, 8.0
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_T3_SCALE = math.sqrt(3.0)  # a Student t(3) night has variance 3: unit-sd noise is t / sqrt(3)
_T3_CONST = math.lgamma(2.0) - math.lgamma(1.5) - 0.5 * math.log(3 * math.pi) + math.log(_T3_SCALE)


def _log_gaussian(x: Array) -> Array:
    return -0.5 * x * x - _HALF_LOG_2PI


# A&S 26.2.17: Q(z) = phi(z) (b1 t + ... + b5 t^5), t = 1 / (1 + p z), for 0 <= z < 5.5 (absolute error
# under 7.5e-8); beyond, the asymptotic series phi(z) / z (1 - 1/z^2 + 3/z^4 - 15/z^6) (relative error
# under 2e-4). numpy has no erfc, and scipy is not in the dev group.
_P = 0.2316419
_B = (0.319381530, -0.356563782, 1.781477937, -1.821255978, 1.330274429)


def _log_upper_tail(z: Array) -> Array:
    """log(1 - Phi(z)) for every z: the upper tail where it is small, 1 minus it below 0."""
    a = np.abs(z)
    t = 1.0 / (1.0 + _P * a)
    poly = t * (_B[0] + t * (_B[1] + t * (_B[2] + t * (_B[3] + t * _B[4]))))
    r = 1.0 / np.maximum(a, 5.5) ** 2
    series = (1.0 - r * (1.0 - r * (3.0 - 15.0 * r))) / np.maximum(a, 5.5)
    log_q = _log_gaussian(a) + np.log(np.where(a < 5.5, poly, series))  # log Q(|z|)
    return np.where(z >= 0, log_q, np.log1p(-np.exp(log_q)))


def _log_normal_cdf_difference(a: Array, b: Array) -> Array:
    """log(Phi(a) - Phi(b)) for a > b, from the tail on the side where both are small (no cancellation):
    Q(b) - Q(a) when b >= 0, Q(-a) - Q(-b) when a <= 0, 1 - Q(a) - Q(-b) between (each branch is
    computed everywhere, so the ones not taken may divide by zero: ignored)."""
    with np.errstate(divide="ignore"):
        return _log_cdf_difference(a, b)


def _log_cdf_difference(a: Array, b: Array) -> Array:
    qa, qb, q_minus_a, q_minus_b = (_log_upper_tail(z) for z in (a, b, -a, -b))
    upper = qb + np.log1p(-np.exp(np.minimum(qa - qb, 0.0)))
    lower = q_minus_a + np.log1p(-np.exp(np.minimum(q_minus_b - q_minus_a, 0.0)))
    middle = np.log(np.maximum(1.0 - np.exp(qa) - np.exp(q_minus_b), 1e-300))
    return np.where(b >= 0, upper, np.where(a <= 0, lower, middle))


def _log_outliers_exact(x: Array) -> Array:
    """A night plus U(4, 8) with probability 1 %: (Phi(x - 4) - Phi(x - 8)) / 4 beside phi(x)."""
    width = OUTLIER_HIGH - OUTLIER_LOW
    shifted = _log_normal_cdf_difference(x - OUTLIER_LOW, x - OUTLIER_HIGH) - math.log(width)
    return np.logaddexp(math.log(1 - OUTLIER_RATE) + _log_gaussian(x), math.log(OUTLIER_RATE) + shifted)


#: The outlier nights' log density tabulated every 0.001 sd (it is smooth: linear interpolation is
#: within 1e-6 of it) and read by interpolation, 30 times faster than computing it.
_OUTLIERS_X = np.linspace(-60.0, 80.0, 140_001)
_OUTLIERS_LOG_F = _log_outliers_exact(_OUTLIERS_X)


def _log_outliers(x: Array) -> Array:
    out = np.interp(x, _OUTLIERS_X, _OUTLIERS_LOG_F)
    outside = (x < _OUTLIERS_X[0]) | (x > _OUTLIERS_X[-1])
    if outside.any():
        out[outside] = _log_outliers_exact(x[outside])
    return out


def log_density(shape: str, cv: float) -> LogDensity:
    """The log density of one night's noise of ``shape`` (unit sd; for ``outliers``, Gaussian unit-sd
    noise with the odd outlier night), exactly as ``gate_quality.noise`` draws it."""
    if shape == "gaussian":
        return _log_gaussian
    if shape == "heavy":

        def t3(x: Array) -> Array:
            t = x * _T3_SCALE
            return _T3_CONST - 2.0 * np.log1p(t * t / 3.0)

        return t3
    if shape == "lognormal":
        sigma = math.sqrt(math.log(1 + cv * cv))

        def lognormal(x: Array) -> Array:
            # 1 + cv x = exp(sigma z - sigma^2 / 2); nothing below -1 / cv
            inside = 1.0 + cv * x
            safe = np.where(inside > 0, inside, 1.0)
            z = (np.log(safe) + sigma * sigma / 2) / sigma
            out = -0.5 * z * z - _HALF_LOG_2PI + math.log(cv / sigma) - np.log(safe)
            return np.where(inside > 0, out, -np.inf)

        return lognormal
    if shape == "outliers":
        return _log_outliers
    raise ValueError(f"no density for {shape!r}")


def draw(shape: str, cv: float, rng: np.random.Generator, size: tuple[int, int]) -> Array:
    """Nights of noise of ``shape`` (the same distributions as ``gate_quality.noise``, drawn by numpy)."""
    if shape == "gaussian":
        return rng.standard_normal(size)
    if shape == "heavy":
        return rng.standard_t(3, size) / _T3_SCALE
    if shape == "lognormal":
        sigma = math.sqrt(math.log(1 + cv * cv))
        return (np.exp(sigma * rng.standard_normal(size) - sigma * sigma / 2) - 1) / cv
    if shape == "outliers":
        nights = rng.standard_normal(size)
        hit = rng.random(size) < OUTLIER_RATE
        return nights + np.where(hit, rng.uniform(OUTLIER_LOW, OUTLIER_HIGH, size), 0.0)
    raise ValueError(f"no draws for {shape!r}")


@dataclass(frozen=True)
class Noise:
    """One hypothesis about the nights: the history's shape, and tonight's (an ``outliers`` season's
    false alarms are counted on its clean nights, which are Gaussian)."""

    shape: str
    cv: float

    @property
    def tonight(self) -> str:
        return "gaussian" if self.shape == "outliers" else self.shape

    @property
    def label(self) -> str:
        return f"{self.shape} {self.cv * 100:.0f} %" if self.shape == "lognormal" else self.shape

    def rows(self, rng: np.random.Generator, samples: int, nights: int, step: float) -> Array:
        """``samples`` rows of ``nights`` history nights and tonight (last), tonight moved by ``step``."""
        history = draw(self.shape, self.cv, rng, (samples, nights))
        tonight = draw(self.tonight, self.cv, rng, (samples, 1)) + step
        return np.concatenate([history, tonight], axis=1)

    def known(self) -> float:
        """False alarms per 100 clean nights of the best threshold when everything is known."""
        return known_ceiling(self.tonight, self.cv)[1]


def standardise(samples: Array) -> Array:
    """Each row centred on its history's median and scaled by its robust sd (1.4826 MAD): the tests are
    invariant, so this changes no figure; it only puts the integrals' mass near the grid's centre."""
    history = samples[:, :-1]
    median = np.median(history, axis=1, keepdims=True)
    spread = 1.4826 * np.median(np.abs(history - median), axis=1, keepdims=True)
    return (samples - median) / spread


@dataclass(frozen=True)
class Grid:
    """Where the integral over the unknown level ``u`` and size ``v`` is summed, for one shape."""

    u: Array
    log_v: Array

    @classmethod
    def for_shape(cls, shape: str, cv: float, nights: int, *, points: int = 51) -> Grid:
        """Centred where a standardised sample puts the mass (``u`` near minus the noise's median, ``v``
        near its robust sd: a Gaussian's is 1, a unit-sd t(3)'s 0.655), and wide enough for the
        hypothesis of a step too. On a skewed noise that hypothesis pushes the mass of a low night
        towards small ``v`` (tonight less 4 sd must stay above the support's edge, -1 / cv): the grid
        reaches down to the ``v`` that puts a night 8 robust sd below the median there. Measured
        against a grid three times as wide in the unit tests. The spacing (``points`` across the
        centred part) stays under half the mass's own width, where a sum of a smooth peak is exact to
        many digits."""
        probe = draw(shape, cv, np.random.default_rng(0), (1, 400_000))[0]
        median = float(np.median(probe))
        robust = 1.4826 * float(np.median(np.abs(probe - median)))
        scale = math.sqrt(61 / (nights + 1))
        half_u, half_log_v = 2.5 * scale, 1.6 * scale
        u = np.linspace(-median - half_u, -median + half_u, points)
        low, high = math.log(robust) - half_log_v, math.log(robust) + half_log_v
        if shape == "lognormal":
            low = min(low, math.log(max(1 / cv - STEP_SD, 0.05) / 16))
        spacing = 2 * half_log_v / (points - 1)
        log_v = np.linspace(low, high, round((high - low) / spacing) + 1)
        return cls(u, log_v)


def log_integral_gaussian(w: Array, delta: float) -> Array:
    """log of ``int_0^inf int v^(N-2) prod_j phi(v w_j - u - delta e_j) du dv`` (``e``: tonight, the last
    column): the level in closed form, the size summed on a fine grid of log v."""
    n_all = w.shape[1]
    log_v = np.linspace(-5.0, 3.0, 4001)
    v = np.exp(log_v)[None, :]
    centred = w - w.mean(axis=1, keepdims=True)
    a = (centred * centred).sum(axis=1)[:, None]
    b = centred[:, -1][:, None]
    c = 1.0 - 1.0 / n_all
    terms = (n_all - 1) * log_v[None, :] - 0.5 * (v * v * a - 2 * v * delta * b + delta * delta * c)
    top = terms.max(axis=1)
    step = log_v[1] - log_v[0]
    summed = np.log(np.exp(terms - top[:, None]).sum(axis=1) * step)
    return np.asarray(top + summed - n_all * _HALF_LOG_2PI + 0.5 * math.log(2 * math.pi / n_all))


def log_integrals_on_grid(
    w: Array, history: LogDensity, tonight: LogDensity, grid: Grid, deltas: Sequence[float]
) -> tuple[list[Array], Array]:
    """The same integral for any shape (the history's nights of density ``history``, tonight's of
    ``tonight`` moved by each of ``deltas``), summed over ``grid``; and per row how close the grid's
    edge came to the peak (log ratio: below -10 the edge holds nothing)."""
    rows, n_all = w.shape
    du = float(grid.u[1] - grid.u[0])
    dlv = float(grid.log_v[1] - grid.log_v[0])
    terms = np.empty((len(deltas), rows, grid.u.size, grid.log_v.size))
    for j, log_v in enumerate(grid.log_v):
        shifted = math.exp(log_v) * w[:, :, None] - grid.u[None, None, :]
        past = history(shifted[:, :-1]).sum(axis=1) + (n_all - 1) * log_v
        for k, delta in enumerate(deltas):
            terms[k, :, :, j] = past + tonight(shifted[:, -1] - delta)
    out, edge = [], np.full(rows, -np.inf)
    for k in range(len(deltas)):
        t = terms[k]
        top = t.max(axis=(1, 2))
        border = np.maximum(t[:, [0, -1], :].max(axis=(1, 2)), t[:, :, [0, -1]].max(axis=(1, 2)))
        edge = np.maximum(edge, border - top)
        out.append(top + np.log(np.exp(t - top[:, None, None]).sum(axis=(1, 2)) * du * dlv))
    return out, edge


#: A hypothesis: (the noise, tonight's step in noise sd).
Hypothesis = tuple[Noise, float]


@dataclass
class Draws:
    """Draws of every hypothesis of a family, each with its log integral under every hypothesis; and
    how many of the integrals that matter (within e^-15 of the largest of their draw's: a hypothesis
    that cannot explain a draw at all takes no part in any test's verdict on it) had more than e^-10 of
    their peak at the grid's edge, out of how many."""

    logs: dict[Hypothesis, dict[Hypothesis, Array]] = field(default_factory=dict)
    near_edge: int = 0
    mattering: int = 0

    def split(self, share: float) -> tuple[Draws, Draws]:
        """The first ``share`` of every hypothesis' draws, and the rest: weights are searched on the
        first part and every figure is measured on the rest, so no figure is flattered by the search."""

        def part(piece: Callable[[Array], Array]) -> Draws:
            logs = {h: {g: piece(a) for g, a in by.items()} for h, by in self.logs.items()}
            return Draws(logs, self.near_edge, self.mattering)

        def cut(a: Array) -> int:
            return round(len(a) * share)

        return part(lambda a: a[: cut(a)]), part(lambda a: a[cut(a) :])


def measure(family: Sequence[Noise], *, nights: int, samples: int, seed: int = 18, chunk: int = 250) -> Draws:
    """Draw ``samples`` rows of each hypothesis of ``family`` (each noise, clean and with a 4 sd step)
    and compute every hypothesis' integral for each row (seeded: a run repeats its figures)."""
    out = Draws()
    grids = {n: Grid.for_shape(n.shape, n.cv, nights) for n in family if n.shape != "gaussian"}
    for drawn in family:
        for step in (0.0, STEP_SD):
            rng = np.random.default_rng([seed, SHAPES.index(drawn.shape), round(drawn.cv * 1000), int(step)])
            w = standardise(drawn.rows(rng, samples, nights, step))
            logs: dict[Hypothesis, Array] = {}
            edges: dict[Noise, Array] = {}
            for noise in family:
                if noise.shape == "gaussian":
                    for delta in (0.0, STEP_SD):
                        logs[(noise, delta)] = log_integral_gaussian(w, delta)
                    continue
                parts: list[list[Array]] = [[], [], []]
                for start in range(0, len(w), chunk):
                    got, edge = log_integrals_on_grid(
                        w[start : start + chunk],
                        log_density(noise.shape, noise.cv),
                        log_density(noise.tonight, noise.cv),
                        grids[noise],
                        (0.0, STEP_SD),
                    )
                    for part, array in zip(parts, [*got, edge], strict=True):
                        part.append(array)
                logs[(noise, 0.0)], logs[(noise, STEP_SD)], edges[noise] = map(np.concatenate, parts)
            top = np.max(list(logs.values()), axis=0)
            for noise, edge in edges.items():
                matters = np.maximum(logs[(noise, 0.0)], logs[(noise, STEP_SD)]) > top - 15
                out.mattering += int(matters.sum())
                out.near_edge += int((matters & (edge > -10)).sum())
            out.logs[(drawn, step)] = logs
    return out


@dataclass(frozen=True)
class Point:
    """What the best test found does on fresh draws: false alarms per 100 clean nights and detection
    (% of 4 sd steps) per noise, each with its 95 % half-width; and the lower bound (per 100 nights,
    with its 95 % half-width) that no test catching 90 % of the steps of every noise of the family
    can beat on the worst of them."""

    false_alarms: dict[str, float]
    detection: dict[str, float]
    false_alarms_ci: dict[str, float]
    lower: float
    lower_ci: float

    @property
    def worst(self) -> float:
        return max(self.false_alarms.values())


def _hypotheses(family: Sequence[Noise]) -> list[Hypothesis]:
    return [(n, step) for n in family for step in (0.0, STEP_SD)]


def _ratios(draws: Draws, family: Sequence[Noise]) -> dict[Hypothesis, Array]:
    """Every hypothesis' density over the pooled draws' density, at each pooled draw (the integrals'
    common factor cancels): a mean of ``phi x ratio`` over the pooled draws is the chance of ``phi``
    under that hypothesis, so every draw informs every hypothesis. Each ratio is at most the number of
    hypotheses (each one's own draws are a share of the pool)."""
    hypotheses = _hypotheses(family)
    logs = {h: np.concatenate([draws.logs[g][h] for g in hypotheses]) for h in hypotheses}
    counts = {g: len(draws.logs[g][hypotheses[0]]) for g in hypotheses}
    total = sum(counts.values())
    log_pool = np.logaddexp.reduce([math.log(counts[g] / total) + logs[g] for g in hypotheses])
    return {h: np.exp(logs[h] - log_pool) for h in hypotheses}


def _dual_terms(
    ratios: dict[Hypothesis, Array], family: Sequence[Noise], weights: Array
) -> tuple[float, Array]:
    """The Lagrangian dual of "the smallest worst false-alarm rate when 90 % of every noise's steps are
    caught", at multipliers ``mu = softmax(weights[:k])`` (on the clean nights) and ``nu =
    exp(weights[k:])`` (on the steps): ``0.9 sum(nu) + E[min(0, sum mu_i r_i,clean - sum nu_j r_j,step)]``.
    For any multipliers it is a lower bound on every test's worst rate (weak duality; the minimising
    test is ``sum nu_j I_j,step > sum mu_i I_i,clean``, the generalised Neyman-Pearson lemma), and it is
    concave in them. Returns the constant and the per-draw terms whose mean is added."""
    k = len(family)
    mu = np.exp(weights[:k] - np.max(weights[:k]))
    mu /= mu.sum()
    nu = np.exp(weights[k:])
    clean = sum(mu[i] * ratios[(n, 0.0)] for i, n in enumerate(family))
    step = sum(nu[i] * ratios[(n, STEP_SD)] for i, n in enumerate(family))
    return CATCH * float(nu.sum()), np.minimum(0.0, np.asarray(clean - step))


def _dual(ratios: dict[Hypothesis, Array], family: Sequence[Noise], weights: Array) -> float:
    constant, terms = _dual_terms(ratios, family, weights)
    return constant + float(terms.mean())


def _maximise(value: Callable[[Array], float], start: Array, free: Sequence[int]) -> Array:
    """A pattern search (each free coordinate up and down, the step halved when nothing improves). The
    dual is concave in the multipliers (not quite in their logarithms, searched here), and any
    multipliers give a valid bound: a search that stops short of the maximum only loosens it."""
    best, score = start.copy(), value(start)
    step = 2.0
    while step > 0.01:
        improved = False
        for i in free:
            for sign in (1.0, -1.0):
                trial = best.copy()
                trial[i] += sign * step
                got = value(trial)
                if got > score:
                    best, score, improved = trial, got, True
        if not improved:
            step /= 2
    return best


def _statistic(logs: dict[Hypothesis, Array], family: Sequence[Noise], weights: Array) -> Array:
    """log(sum_j nu_j I_j,step) - log(sum_i mu_i I_i,clean): the test the multipliers define."""
    k = len(family)
    step = np.logaddexp.reduce([weights[k + i] + logs[(n, STEP_SD)] for i, n in enumerate(family)])
    clean = np.logaddexp.reduce([weights[i] + logs[(n, 0.0)] for i, n in enumerate(family)])
    return np.asarray(step - clean)


def _rate(hits: NDArray[np.bool_]) -> tuple[float, float]:
    share = float(np.mean(hits))
    return 100 * share, 100 * 1.96 * math.sqrt(share * (1 - share) / len(hits))


#: The share of the draws the multipliers are searched on (the rest measure every figure).
SEARCH_SHARE = 0.5


def best_test(draws: Draws, family: Sequence[Noise]) -> Point:
    """The most powerful test for the family, and the bound it proves.

    The multipliers that maximise the dual are searched on the first ``SEARCH_SHARE`` of the draws
    (each draw informing every hypothesis through its density ratios), then measured on the others:
    the dual there is an unbiased estimate of a lower bound that holds for every test; the test they
    define, its threshold set where it catches 90 % of the fresh steps of every noise, is what the best
    test achieves. When the two meet, that is the floor. One noise: the likelihood ratio itself."""
    k = len(family)
    search, held_out = draws.split(SEARCH_SHARE)
    ratios = _ratios(search, family)
    free = [i for i in range(2 * k) if i != 0]
    weights = _maximise(lambda w: _dual(ratios, family, w), np.zeros(2 * k), free)
    constant, terms = _dual_terms(_ratios(held_out, family), family, weights)
    lower = 100 * (constant + float(terms.mean()))
    lower_ci = 100 * 1.96 * float(terms.std(ddof=1)) / math.sqrt(len(terms))
    steps = {n: _statistic(held_out.logs[(n, STEP_SD)], family, weights) for n in family}
    cleans = {n: _statistic(held_out.logs[(n, 0.0)], family, weights) for n in family}
    threshold = min(float(np.quantile(s, 1 - CATCH)) for s in steps.values())
    false_alarms = {n.label: _rate(cleans[n] > threshold) for n in family}
    return Point(
        {label: fa for label, (fa, _) in false_alarms.items()},
        {n.label: _rate(steps[n] > threshold)[0] for n in family},
        {label: ci for label, (_, ci) in false_alarms.items()},
        lower,
        lower_ci,
    )


@dataclass(frozen=True)
class BoundRow:
    """One row of the report: a noise (or a family of them) and its floors."""

    label: str
    known: float | None
    shape_known: Point | None
    unknown: Point | None


def _at_least(family: Point, members: Iterable[Point]) -> Point:
    """A rule for several shapes must meet the targets on each: its floor is at least each member's own
    (a tighter bound than the family's dual can be, when one shape dominates)."""
    best = max([family, *members], key=lambda p: p.lower)
    return dataclasses.replace(family, lower=best.lower, lower_ci=best.lower_ci)


def rows(
    *, nights: int, samples: int, cvs: Iterable[float], shapes: Sequence[str]
) -> tuple[list[BoundRow], tuple[int, int]]:
    """Every row: per noise, its floors alone and beside Gaussian noise; then the issue's own shapes
    together (Gaussian, outliers, heavy). Returns the rows and (integrals near the grid's edge, of all
    that matter)."""
    gaussian = Noise("gaussian", 0.0)
    noises = [Noise(shape, cv) for shape in shapes for cv in (cvs if shape == "lognormal" else [0.0])]
    out: list[BoundRow] = []
    edges = [0, 0]
    issue_family = [gaussian, Noise("outliers", 0.0), Noise("heavy", 0.0)]
    together = [n for n in issue_family if n.shape in shapes]
    shared = measure(together, nights=nights, samples=samples) if len(together) > 1 else None
    alone: dict[Noise, Point] = {}
    for noise in noises:
        family = [gaussian] if noise == gaussian else [gaussian, noise]
        draws = shared if shared is not None and all(n in together for n in family) else None
        if draws is None:
            draws = measure(family, nights=nights, samples=samples)
        if draws is not shared:
            edges = [edges[0] + draws.near_edge, edges[1] + draws.mattering]
        alone[noise] = best_test(draws, [noise])
        beside = None
        if noise != gaussian:
            beside = _at_least(best_test(draws, family), [alone[n] for n in family if n in alone])
        out.append(BoundRow(noise.label, noise.known(), alone[noise], beside))
    if shared is not None and len(together) == 3:
        all_three = _at_least(best_test(shared, together), [alone[n] for n in together if n in alone])
        out.append(BoundRow(" + ".join(n.label for n in together), None, None, all_three))
    if shared is not None:
        edges = [edges[0] + shared.near_edge, edges[1] + shared.mattering]
    return out, (edges[0], edges[1])


def bound_table(found: list[BoundRow]) -> str:
    """The report: per noise, the floors in false alarms per 100 clean nights (target: at most 1), each
    with its 95 % interval (Monte Carlo)."""

    def alone(point: Point | None) -> str:
        return "-" if point is None else f"{point.lower:.2f} ± {point.lower_ci:.2f}"

    def unknown(point: Point | None) -> str:
        if point is None:
            return "-"
        rates = ", ".join(f"{label} {fa:.2f}" for label, fa in point.false_alarms.items())
        return f"{point.lower:.2f} ± {point.lower_ci:.2f} (the best test found: {rates})"

    body = [
        [r.label, "-" if r.known is None else f"{r.known:.2f}", alone(r.shape_known), unknown(r.unknown)]
        for r in found
    ]
    header = [
        "noise",
        "known",
        "shape known, level and size from the nights",
        "shape not known: Gaussian or this one (the last row: any of the three)",
    ]
    return table(body, header)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=8000, help="draws of each hypothesis")
    parser.add_argument("--nights", type=int, default=60, help="nights of history (the default window)")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--cvs", nargs="+", type=float, default=[0.05, 0.1, 0.2], help="the lognormal's")
    parser.add_argument("--smoke", action="store_true", help="tiny: checks the module still runs")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--docs", type=Path, help="write the table into this page")
    parser.add_argument("--section", default="gate_bound", help="the page's markers to write between")
    args = parser.parse_args()
    if args.smoke:
        args.samples, args.nights, args.shapes = 150, 30, ["gaussian", "heavy"]
    started = time.perf_counter()
    found, (near_edge, mattering) = rows(
        nights=args.nights, samples=args.samples, cvs=args.cvs, shapes=args.shapes
    )
    report = [
        f"The floors of a one-night test, in false alarms per 100 clean nights, when 90 % of 4 sd steps are "
        f"caught on their first night (target: at most 1): {args.samples} draws of each hypothesis, "
        f"{args.nights} nights of history; {near_edge} of the {mattering} integrals that matter had more "
        f"than e^-10 of their peak at the grid's edge; {time.perf_counter() - started:.0f} s.",
        "",
        bound_table(found),
    ]
    print("\n".join(report))
    if args.docs:
        from benchmarks.gate_quality import write_docs

        shown = [a for i, a in enumerate(sys.argv[1:]) if a != "--json" and sys.argv[i] != "--json"]
        command = f"`{shlex.join(['python', 'benchmarks/gate_bound.py', *shown])}`"
        write_docs(args.docs, args.section, command, report)
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "noise": r.label,
                        "known": r.known,
                        "shape_known": None if r.shape_known is None else r.shape_known.__dict__,
                        "unknown": None if r.unknown is None else r.unknown.__dict__,
                    }
                    for r in found
                ]
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
