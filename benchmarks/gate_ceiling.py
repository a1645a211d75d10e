"""The ceiling of a one-night test: what any threshold could do on each noise shape of the benchmark.

Issue 18 asks for two things of the same one-night test: at most 1 false alarm per 100 clean nights, and a
4 sd step caught on its first night at least 90 % of the time. Fix the second (the threshold that catches
the step 90 % of the time) and the first is what is left: the clean nights beyond that threshold. This
module computes it twice per shape, so ``gate_quality.py``'s measured figures can be read against what
is possible at all:

* **known**: the noise's distribution known exactly (no history to estimate it from). Nothing does
  better on one night: where this is above 1 %, no rule meets both targets.
* **the gate's centre and noise of n nights**: the rule's own statistic, tonight's distance from the
  centre of the last ``n`` nights in units of their noise (``decisions.history.estimate``: the mean and
  sd within the robust fence; two nights held out between, as the gate holds its recent nights), with
  a threshold chosen for the shape, as if the rule knew it. Above 1 %, no ``fail_z`` meets both on that
  shape, whatever it is told about the shape; the gap to **known** is what estimating from a history
  costs. The nights come from ``gate_quality.noise``, so the wandering level's memory is in them.

Pure Python (the benchmark runs in the project's venv, which has no numpy): closed forms for the known
ceilings (Gaussian, lognormal, Student's t with 3 degrees of freedom), a seeded Monte Carlo for the rest.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_loadtest.decisions.history import estimate

#: ``gate_quality.noise``: (shape, cv, rng, nights) -> (unit-sd draws, the outlier nights).
Draw = Callable[[str, float, random.Random, int], tuple[list[float], set[int]]]

#: The step the ceiling is for, in noise sd, and how often it must be caught on its first night.
STEP_SD, CATCH = 4.0, 0.90
#: The shapes with a closed form; ``wander``'s nights are Gaussian to a rule that does not know its
#: level, and the clean nights of ``outliers`` are Gaussian (those of the others are their shape's).
KNOWN = ("gaussian", "lognormal", "heavy")
#: Nights between the history's last and tonight: the gate's recent nights, not yet in its history.
HELD_OUT = 2


def survival(shape: str, cv: float) -> Callable[[float], float]:
    """P(noise > x) for unit-sd noise of ``shape`` (as ``gate_quality.noise`` draws it)."""
    if shape == "gaussian":
        return lambda x: 0.5 * math.erfc(x / math.sqrt(2))
    if shape == "lognormal":
        sigma = math.sqrt(math.log(1 + cv * cv))

        def lognormal(x: float) -> float:
            if 1 + cv * x <= 0:
                return 1.0
            z = (math.log(1 + cv * x) + sigma * sigma / 2) / sigma
            return 0.5 * math.erfc(z / math.sqrt(2))

        return lognormal
    if shape == "heavy":

        def t3(x: float) -> float:
            # P(t3 > x sqrt(3)); the t3 CDF in closed form has t / sqrt(3), which is x here
            return 0.5 - (x / (1 + x * x) + math.atan(x)) / math.pi

        return t3
    raise ValueError(f"no closed form for {shape!r}")


def _inverse(tail: Callable[[float], float], p: float) -> float:
    """The x with ``tail(x) = p`` (``tail`` decreasing), by bisection."""
    low, high = -50.0, 50.0
    for _ in range(200):
        mid = (low + high) / 2
        if tail(mid) > p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def known_ceiling(shape: str, cv: float) -> tuple[float, float]:
    """(threshold in sd, false alarms per 100 clean nights) when a 4 sd step is caught 90 % of the time."""
    tail = survival(shape, cv)
    threshold = STEP_SD + _inverse(tail, CATCH)
    return threshold, 100 * tail(threshold)


def estimated_ceiling(
    draw: Draw, shape: str, cv: float, *, nights: int, samples: int, seed: int = 18
) -> tuple[float, float]:
    """(threshold in the history's noise, false alarms per 100 clean nights) for the gate's statistic
    ``(tonight - centre) / noise`` of ``nights`` nights drawn by ``draw`` (the benchmark's own noise),
    with the threshold that catches a 4 sd step 90 % of the time on this shape."""
    rng = random.Random(f"{seed}-{shape}-{cv}")  # noqa: S311 - simulated noise, seeded to repeat
    clean: list[float] = []
    stepped: list[float] = []
    while len(clean) < samples:
        draws, outliers = draw(shape, cv, rng, nights + HELD_OUT + 1)
        if nights + HELD_OUT in outliers:
            continue  # tonight must be a clean night (``outliers``: its history keeps its outlier nights)
        fit = estimate(draws[:nights])
        tonight = draws[-1]
        clean.append((tonight - fit.centre) / fit.sd)
        stepped.append((tonight + STEP_SD - fit.centre) / fit.sd)
    stepped.sort()
    threshold = stepped[int((1 - CATCH) * samples)]
    return threshold, 100 * sum(c > threshold for c in clean) / samples


@dataclass(frozen=True)
class Ceiling:
    shape: str
    cv: float
    known: float  # false alarms per 100 clean nights
    estimated: float
    samples: int


def ceilings(draw: Draw, shapes: list[str], cvs: list[float], *, nights: int, samples: int) -> list[Ceiling]:
    """Both ceilings for every shape and CV (a shape's unit noise does not depend on the CV but for the
    lognormal, so the others are computed once and shown on each row)."""
    rows = []
    memo: dict[tuple[str, float], tuple[float, float]] = {}
    for shape in shapes:
        for cv in cvs:
            key = (shape, cv if shape == "lognormal" else 0.0)
            if key not in memo:
                known = known_ceiling(shape if shape in KNOWN else "gaussian", cv)[1]
                estimated = estimated_ceiling(draw, shape, cv, nights=nights, samples=samples)[1]
                memo[key] = (known, estimated)
            rows.append(Ceiling(shape, cv, *memo[key], samples))
    return rows


def ceiling_table(rows: list[Ceiling], nights: int, table: Callable[..., str]) -> str:
    """The report's section: per shape and CV, both ceilings, in false alarms per 100 clean nights."""
    samples = rows[0].samples if rows else 0
    half = 1.96 * math.sqrt(0.01 * 0.99 / samples) * 100 if samples else math.nan
    body = [
        [
            r.shape,
            f"{r.cv * 100:.0f} %",
            f"{r.known:.2f}",
            f"{r.estimated:.2f}",
        ]
        for r in rows
    ]
    return (
        "The ceiling of a one-night test: the threshold that catches a 4 sd step on its first night 90 % of "
        "the time, and the false alarms per 100 clean nights it costs (target: at most 1). *Known*: the "
        "noise's distribution known exactly, the best any rule could do (`outliers`: a clean night is "
        "Gaussian; `wander`: Gaussian, to a rule that does not know its level). *The gate's statistic*: "
        "tonight's distance from the centre of "
        f"{nights} nights in their noise (both within the robust fence, as the gate estimates them), with a "
        f"threshold set for the shape as if the rule knew it ({samples} draws a row, about +-{half:.2f} at "
        "1): above 1, no `fail_z` meets both targets on that shape (`benchmarks/gate_ceiling.py`).\n\n"
        + table(body, ["noise", "CV", "known", f"the gate's statistic, {nights} nights"])
    )
