"""How well ``baseline="history"`` tells a regression from noise, beside today's ``"previous"`` rule and
Apache Otava's change-point detection, on the same simulated seasons of nightly values.

A season is one metric (p95 response time, 500 ms, higher is worse) night after night, with run-to-run
noise of a shape and a size (coefficient of variation, CV; the noise's standard deviation, "sd", is
``CV x 500 ms`` in every shape, and steps are measured in it):

* ``gaussian``: normal noise;
* ``lognormal``: multiplicative, right-skewed noise (response times are);
* ``heavy``: Student's t with 3 degrees of freedom (rare big nights), scaled to the same sd;
* ``outliers``: normal noise, and one night in a hundred 4 to 8 sd worse (an infrastructure hiccup):
  those nights are counted apart (a gate with one night to decide cannot tell the first night of a
  step from an outlier: the question is whether the nights after it are judged right);
* ``wander``: normal noise plus a level that wanders (AR(1), correlation 0.95 from one night to the
  next) carrying a third of the variance. **Counted as noise**: the level strays about 0.6 sd from its
  long-run mean and comes back by itself, less than the smallest change the targets ask the gate to
  catch (2.5 sd); a gate that fails it cries wolf. (Not a sine of period 60 nights, as at first: a
  window of 60 nights averages that one away exactly and would flatter the default window.)
* a **drift** (``--drift-seasons``, Gaussian noise): the level creeps up by a fixed share of the sd
  every night and never comes back: **a regression**, the one the issue calls "a slow drift of a few
  percent a night" that a one-night baseline is blind to. Reported apart: the night the gate first
  fails it, and how far the level had drifted by then.

How the seasons are replayed. Every season starts empty and warms up for ``window + persist_nights + 3``
nights (the history fills, and the nights waiting to join it), then runs ``--nights`` counted nights
without any change: those are the **clean nights** of the false-alarm rate (warm-up nights are counted
apart, in two columns). Steps are injected from that same season: every ``--branch-every`` counted
nights, the season's state (its ``GateHistory``) is copied and the next three nights are replayed with
the step added (k sd from that night on), once per step size, while the clean season goes on. So each
step meets a history that has been judged exactly as a real one (what joined it, what was suspected),
at many points of each season, and the warm-up is paid once per season rather than once per step.
The replay is ``decisions.gate.judge_history``, night after night, from the state the previous night
left: exactly what ``replay_history`` does (checked on the first season of every cell), which the
operator runs too.

The same seasons go through the ``"previous"`` rule (``judge_metric`` against the last passing night)
and, when ``.venv-otava`` exists (``make otava-venv``), through Otava, run every night on the season so
far (``benchmarks/otava_peer.py``: a night fails when a change point lies in its last three nights and
is a rise of more than the bound) on a subset of the seasons (Otava costs ~2 ms a night). Every rule
uses the same bound, ``--max-regression-pct``.

Each figure comes with its 95 % interval (+-1.96 standard errors, from the spread between seasons: the
nights of one season share a history, so they are not independent draws), so a reader can tell 0.9
from 1.1 false alarms per 100 nights, and 88 % from 92 %.

The gate as a whole (many series a night, issue 27) comes after, as the family section:
``benchmarks/gate_family.py`` with ``--family-args`` (``--no-family``: left out).

    .venv/bin/python benchmarks/gate_quality.py [--seasons 200] [--nights 300] [--smoke] [--no-otava]
        [--settings JSON] [--compact] [--json PATH] [--docs docs/gate_quality.md [--section NAME]]
        [--no-family] [--family-args "--seasons 5 3 ..."]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_provider_loadtest.decisions.gate import (  # noqa: E402
    DEFAULT_HISTORY,
    GateHistory,
    GateRow,
    GateSpec,
    judge_history,
    judge_metric,
    replay_history,
)
from airflow_provider_loadtest.decisions.history import HISTORY, SUSPECTED  # noqa: E402
from benchmarks.common import table  # noqa: E402
from benchmarks.gate_ceiling import ceiling_table, ceilings  # noqa: E402

METRIC = "RESPONSE_TIME_PERCENTILE_95"
BASE = 500.0
SHAPES = ("gaussian", "lognormal", "heavy", "outliers", "wander")
CVS = (0.02, 0.05, 0.10, 0.20)
STEPS = (1.5, 2.5, 4.0, 6.0)
DRIFTS = (0.1, 0.25, 0.5)  # sd a night
DRIFT_HORIZON = 40
OUTLIER_RATE = 0.01
WANDER_PHI = 0.95  # the wandering level's night-to-night correlation: it forgets in ~20 nights
OTAVA_PYTHON = ROOT / ".venv-otava" / "bin" / "python"
TARGET_FA, TARGET_FIRST, TARGET_WITHIN3 = 1.0, 90.0, 90.0
Z95 = 1.96


def warmup(settings: dict[str, Any]) -> int:
    """Nights before the counted ones: the history is full by then."""
    merged = {**DEFAULT_HISTORY.__dict__, **settings}
    return int(merged["window"]) + int(merged["persist_nights"]) + 3


# --- the seasons -----------------------------------------------------------------------------------


def noise(shape: str, cv: float, rng: random.Random, length: int) -> tuple[list[float], set[int]]:
    """Unit-sd noise of ``shape`` for ``length`` nights (the value is ``BASE x (level + cv x noise)``),
    and the nights that are outliers."""
    outliers: set[int] = set()
    level = 0.0
    out = []
    sigma = math.sqrt(math.log(1 + cv * cv))
    for night in range(length):
        if shape == "lognormal":
            e = (math.exp(sigma * rng.gauss(0, 1) - sigma * sigma / 2) - 1) / cv
        elif shape == "heavy":
            chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(3))
            e = rng.gauss(0, 1) / math.sqrt(chi2 / 3) / math.sqrt(3)
        elif shape == "wander":
            # the level: AR(1), stationary from the first night, a third of the variance
            level = (
                level * WANDER_PHI + math.sqrt(1 - WANDER_PHI**2) * rng.gauss(0, 1)
                if night
                else rng.gauss(0, 1)
            )
            e = math.sqrt(2 / 3) * rng.gauss(0, 1) + math.sqrt(1 / 3) * level
        else:
            e = rng.gauss(0, 1)
            if shape == "outliers" and night > 0 and rng.random() < OUTLIER_RATE:
                e += rng.uniform(4, 8)
                outliers.add(night)
        out.append(e)
    return out, outliers


def value(cv: float, e: float, shift_sd: float = 0.0) -> float:
    """One night's value: the base moved by ``shift_sd`` noise sd, plus the noise."""
    return round(BASE * max(0.05, 1 + cv * (shift_sd + e)), 3)


# --- the rules, night by night from an explicit state -----------------------------------------------


class Ours:
    """``baseline="history"`` night by night through ``judge_history`` (what ``replay_history`` loops)."""

    def __init__(self, bound: float, settings: dict[str, Any]) -> None:
        self.spec = GateSpec.parse(None, {METRIC: bound}, HISTORY, settings)

    def night(self, state: GateHistory, tonight: float) -> tuple[GateRow, GateHistory]:
        rows, after = judge_history(self.spec, {METRIC: tonight}, None, history=state)
        assert after is not None
        return rows[0], after


def previous_night(bound: float, last: float | None, tonight: float) -> tuple[bool, float | None]:
    """Today's rule: against the last passing night (the first night has no baseline: budgets only).
    Returns (failed, the next night's baseline)."""
    row, _ = judge_metric(METRIC, tonight, bound=bound, baseline=last)
    return (not row.passed), (tonight if row.passed else last)


def otava(jobs: list[tuple[list[float], list[int]]], bound: float) -> list[list[bool]] | None:
    """Otava's verdict on the given nights of each series, or None when its venv is not there."""
    if not OTAVA_PYTHON.exists() or not jobs:
        return None
    job = {
        "jobs": [{"series": series, "nights": nights} for series, nights in jobs],
        "max_regression_pct": bound,
        "window_len": 30,
        "max_pvalue": 0.001,
        "tail": 60,
    }
    done = subprocess.run(
        [str(OTAVA_PYTHON), str(ROOT / "benchmarks" / "otava_peer.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=True,
        timeout=7200,
    )
    return [[bool(f) for f in flags] for flags in json.loads(done.stdout)["failed"]]


# --- a figure with its interval ----------------------------------------------------------------------


@dataclass
class Rate:
    """Hits over trials, kept per season so the interval reflects the seasons' spread."""

    per_season: list[tuple[int, int]] = field(default_factory=list)

    def add(self, hits: int, trials: int) -> None:
        if trials:
            self.per_season.append((hits, trials))

    @property
    def value(self) -> float:
        trials = sum(t for _, t in self.per_season)
        return 100.0 * sum(h for h, _ in self.per_season) / trials if trials else math.nan

    @property
    def half_width(self) -> float:
        """1.96 standard errors of the ratio estimate over seasons (a cluster sample)."""
        k = len(self.per_season)
        trials = sum(t for _, t in self.per_season)
        if k < 2 or not trials:
            return math.nan
        ratio = sum(h for h, _ in self.per_season) / trials
        mean_trials = trials / k
        residuals = [(h - ratio * t) / mean_trials for h, t in self.per_season]
        return 100.0 * Z95 * statistics.stdev(residuals) / math.sqrt(k)

    def to_json(self) -> dict[str, float]:
        return {"value": self.value, "ci95": self.half_width, "trials": sum(t for _, t in self.per_season)}


# --- one cell: a shape at a noise level -------------------------------------------------------------

Key = tuple[Any, ...]  # ("fa", rule), ("first", rule, step), ("within3", rule, step), ("warmup",), ...


@dataclass
class Cell:
    """One shape at one noise level: every figure, as a rate with its per-season counts."""

    shape: str
    cv: float
    rates: dict[Key, Rate] = field(default_factory=dict)

    def add(self, counts: dict[Key, list[int]]) -> None:
        """One season's [hits, trials] per figure."""
        for key, (hits, trials) in counts.items():
            self.rates.setdefault(key, Rate()).add(hits, trials)

    def get(self, *key: Any) -> Rate | None:
        return self.rates.get(key)

    def rules(self) -> list[str]:
        return [key[1] for key in self.rates if key[0] == "fa"]


def _count(counts: dict[Key, list[int]], key: Key, hits: int, trials: int = 1) -> None:
    got = counts.setdefault(key, [0, 0])
    got[0] += hits
    got[1] += trials


@dataclass
class Setup:
    """What every season of a run shares."""

    bound: float
    settings: dict[str, Any]
    nights: int
    branch_every: int
    otava_nights: int

    def __post_init__(self) -> None:
        self.ours = Ours(self.bound, self.settings)
        self.start = warmup(self.settings)
        self.min_history = int({**DEFAULT_HISTORY.__dict__, **self.settings}["min_history"])


def _steps(
    setup: Setup, state: GateHistory, last: float | None, draws: list[float], night: int, cv: float
) -> dict[Key, list[int]]:
    """Every step size injected tonight, from the season's state, for three nights, by both rules."""
    counts: dict[Key, list[int]] = {}
    for step in STEPS:
        stepped = [value(cv, e, step) for e in draws[night : night + 3]]
        flags: dict[str, list[bool]] = {"history": [], "previous": []}
        branch, base = state, last
        for tonight in stepped:
            row, branch = setup.ours.night(branch, tonight)
            flags["history"].append(not row.passed)
            hit, base = previous_night(setup.bound, base, tonight)
            flags["previous"].append(hit)
        for rule, got in flags.items():
            _count(counts, ("first", rule, step), got[0])
            _count(counts, ("within3", rule, step), any(got))
    return counts


def _season(
    setup: Setup, shape: str, cv: float, rng: random.Random, otava_jobs: list[Any] | None, check: bool
) -> dict[Key, list[int]]:
    """One season, clean, with steps branched off it; Otava's nights are queued in ``otava_jobs``."""
    start, nights = setup.start, setup.nights
    draws, outliers = noise(shape, cv, rng, start + nights + 3)
    values = [value(cv, e) for e in draws]
    state, last = GateHistory(), None
    failed: dict[str, list[bool]] = {"history": [], "previous": []}
    counts: dict[Key, list[int]] = {}
    for night in range(start + nights):
        if night >= start and (night - start) % setup.branch_every == 0:
            for key, (hits, trials) in _steps(setup, state, last, draws, night, cv).items():
                _count(counts, key, hits, trials)
            if otava_jobs is not None and night - start < setup.otava_nights:
                for step in STEPS:
                    stepped = [value(cv, e, step) for e in draws[night : night + 3]]
                    otava_jobs.append(
                        (("step", step), [*values[:night], *stepped], [night, night + 1, night + 2])
                    )
        row, state = setup.ours.night(state, values[night])
        failed["history"].append(not row.passed)
        if night >= start:
            _count(counts, ("suspected",), row.status == SUSPECTED)
        hit, last = previous_night(setup.bound, last, values[night])
        failed["previous"].append(hit)
    clean = [n for n in range(start, start + nights) if n not in outliers]
    for rule, flags in failed.items():
        _count(counts, ("fa", rule), sum(flags[n] for n in clean), len(clean))
    ours = failed["history"]
    filling = [n for n in range(setup.min_history, start) if n not in outliers]
    first = [n for n in range(1, setup.min_history) if n not in outliers]
    _count(counts, ("warmup",), sum(ours[n] for n in filling), len(filling))
    _count(counts, ("fallback",), sum(ours[n] for n in first), len(first))
    if shape == "outliers":
        mine = [n for n in outliers if start <= n < start + nights]
        after = {m for n in mine for m in range(n + 1, n + 4) if m < start + nights and m not in outliers}
        _count(counts, ("outliers_failed",), sum(ours[n] for n in mine), len(mine))
        _count(counts, ("after_outlier",), sum(ours[m] for m in after), len(after))
    if otava_jobs is not None:
        judged = [n for n in clean if n < start + setup.otava_nights]
        otava_jobs.append((("fa",), values[: start + setup.otava_nights], judged))
    if check:  # the stepping is replay_history's own loop
        replayed = replay_history(
            METRIC, values[: len(ours)], max_regression_pct=setup.bound, **setup.settings
        )
        assert [not r.passed for r in replayed] == ours, "judge_history night by night is not replay_history"
    return counts


def measure_cell(setup: Setup, shape: str, cv: float, *, seasons: int, otava_seasons: int) -> Cell:
    rng = random.Random(f"{shape}-{cv}")  # noqa: S311 - simulated noise, seeded to repeat
    cell = Cell(shape, cv)
    queued: list[list[Any]] = []
    for season_no in range(seasons):
        jobs: list[Any] | None = [] if season_no < otava_seasons else None
        cell.add(_season(setup, shape, cv, rng, jobs, check=season_no == 0))
        if jobs:
            queued.append(jobs)
    found = otava([(series, nights) for jobs in queued for _, series, nights in jobs], setup.bound)
    if found is not None:
        verdicts = iter(found)
        for jobs in queued:
            counts: dict[Key, list[int]] = {}
            for (kind, *step), _, _ in jobs:
                flags = next(verdicts)
                if kind == "fa":
                    _count(counts, ("fa", "otava"), sum(flags), len(flags))
                else:
                    _count(counts, ("first", "otava", step[0]), flags[0])
                    _count(counts, ("within3", "otava", step[0]), any(flags))
            cell.add(counts)
    return cell


# --- the drift: a regression that creeps ------------------------------------------------------------


@dataclass
class DriftCell:
    cv: float
    per_night_sd: float
    caught: list[int | None]  # per season: the drift's night of the first failure (None: not in the horizon)
    horizon: int


def measure_drift(setup: Setup, cv: float, per_night_sd: float, *, seasons: int, horizon: int) -> DriftCell:
    """Gaussian seasons whose level starts creeping up once the history is full, by ``per_night_sd``
    a night: on which night of the drift does ``history`` first fail? (``"previous"`` is left out: it
    fails most clean nights already, so its first failure says nothing of the drift.)"""
    rng = random.Random(f"drift-{cv}-{per_night_sd}")  # noqa: S311 - simulated noise, seeded to repeat
    caught: list[int | None] = []
    onset = setup.start
    for _ in range(seasons):
        draws, _ = noise("gaussian", cv, rng, onset + horizon)
        state, first = GateHistory(), None
        for night, e in enumerate(draws):
            row, state = setup.ours.night(state, value(cv, e, per_night_sd * max(0, night - onset + 1)))
            if night >= onset and not row.passed:
                first = night - onset + 1
                break
        caught.append(first)
    return DriftCell(cv, per_night_sd, caught, horizon)


# --- the tables ------------------------------------------------------------------------------------


def _f(figure: float | None, digits: int = 1) -> str:
    return "-" if figure is None or math.isnan(figure) else f"{figure:.{digits}f}"


def _ci(rate: Rate | None, digits: int = 1, unit: str = "") -> str:
    if rate is None or math.isnan(rate.value):
        return "-"
    return f"{rate.value:.{digits}f}{unit} ± {_f(rate.half_width, digits)}"


def above_bound(step: float, cv: float, bound: float) -> bool:
    return step * cv * 100 > bound


def _mark(text: str, bad: bool) -> str:
    return f"**{text}**" if bad and text != "-" else text


def targets_table(cells: list[Cell], bound: float, rules: list[str]) -> str:
    """Per cell and rule: false alarms / 4 sd on the first night / 2.5 sd within three nights."""
    rows = []
    for c in cells:
        row = [c.shape, f"{c.cv * 100:.0f} %"]
        for rule in rules:
            fa, first4, within25 = c.get("fa", rule), c.get("first", rule, 4.0), c.get("within3", rule, 2.5)
            counts = above_bound(2.5, c.cv, bound)
            texts = [
                _mark(_ci(fa, 2), fa is not None and fa.value > TARGET_FA),
                _mark(_ci(first4, 1, " %"), first4 is not None and first4.value < TARGET_FIRST),
                _mark(_ci(within25, 1, " %"), within25 is not None and within25.value < TARGET_WITHIN3)
                if counts
                else f"({_ci(within25, 1, ' %')})",
            ]
            row.append(" / ".join(texts))
        rows.append(row)
    return table(rows, ["noise", "CV", *rules])


def tables(cells: list[Cell], bound: float, rules: list[str], start: int, min_history: int) -> str:
    parts = [
        "The targets, rule beside rule, each with its 95 % interval: false alarms per 100 clean nights "
        "(<= 1); a 4 sd step caught on its first night (>= 90 %); a 2.5 sd step caught within three nights "
        f"(>= 90 %; in brackets where 2.5 sd is not above the {bound:g} % bound, which no rule should fail). "
        "**Bold**: not met.",
        "",
        targets_table(cells, bound, rules),
        "",
        f"`history` in detail: false alarms per 100 nights while the history fills (nights {min_history + 1} "
        f"to {start}: judged against the noise of a shorter history) and the share of the first "
        f"{min_history} nights failed (too little history: the bound alone against the median of the nights "
        "so far, today's rule); suspicions per 100 clean nights; on the `outliers` noise, the outlier "
        "nights failed and the false alarms in the three nights after one:",
        "",
    ]
    detail_rows = []
    for c in cells:
        outliers, after = c.get("outliers_failed"), c.get("after_outlier")
        fallback, suspected = c.get("fallback"), c.get("suspected")
        detail_rows.append(
            [
                c.shape,
                f"{c.cv * 100:.0f} %",
                _ci(c.get("warmup"), 2),
                _f(fallback.value if fallback else None, 0) + " %",
                _f(suspected.value if suspected else None, 1),
                _f(outliers.value, 0) + " %" if outliers else "-",
                _ci(after, 2) if after else "-",
            ]
        )
    parts.append(
        table(
            detail_rows,
            [
                "noise",
                "CV",
                "FA /100 while it fills",
                f"first {min_history} nights failed",
                "suspected /100",
                "outlier nights failed",
                "FA /100 after an outlier",
            ],
        )
    )
    parts += [
        "",
        "Steps caught by `history`, % on the first night / % within three nights, by step size in noise "
        f"standard deviations (in brackets: a step not above the {bound:g} % bound, which no rule should "
        "fail):",
        "",
    ]
    step_rows = []
    for c in cells:
        texts = []
        for step in STEPS:
            first, within = c.get("first", "history", step), c.get("within3", "history", step)
            text = f"{_f(first.value if first else None, 0)} / {_f(within.value if within else None, 0)}"
            texts.append(text if above_bound(step, c.cv, bound) else f"({text})")
        step_rows.append([c.shape, f"{c.cv * 100:.0f} %", *texts])
    parts.append(table(step_rows, ["noise", "CV", *(f"{s:g} sd" for s in STEPS)]))
    return "\n".join(parts)


def drift_table(cells: list[DriftCell], bound: float) -> str:
    rows = []
    for c in cells:
        got = sorted(n for n in c.caught if n is not None)
        row = [f"{c.cv * 100:.0f} %", f"{c.per_night_sd:g} sd ({c.per_night_sd * c.cv * 100:.2g} %)"]
        row.append(f"{100.0 * len(got) / len(c.caught):.0f} %")
        if got:
            median, p90 = statistics.median(got), got[min(len(got) - 1, int(0.9 * len(got)))]
            row += [
                f"{median:g} (90 %: {p90})",
                f"{median * c.per_night_sd:.1f} sd, {median * c.per_night_sd * c.cv * 100:.0f} %",
            ]
        else:
            row += ["-", "-"]
        rows.append(row)
    return (
        "A drift, a regression that creeps: from a full history on, the level rises by a fixed share of "
        f"the noise sd every night and never comes back (Gaussian noise, bound {bound:g} %). The share of "
        f"seasons `history` failed within {cells[0].horizon} nights, the drift's night of the first failure "
        "(median, and 90th percentile), and how far the level had drifted by the median night:\n\n"
        + table(rows, ["CV", "drift a night", "caught", "night caught", "drifted by then"])
    )


def targets(cells: list[Cell], bound: float) -> dict[str, Any]:
    """The worst cell for each target (ours, and the peers), whether it is met, and where it is not."""

    def summary(figures: list[tuple[Cell, Rate | None]], worst: Any, ok: Callable[[float], bool]) -> Any:
        have = [(c, r) for c, r in figures if r is not None and not math.isnan(r.value)]
        if not have:
            return None
        cell, rate = worst(have, key=lambda pair: pair[1].value)
        return {
            "value": rate.value,
            "ci95": rate.half_width,
            "shape": cell.shape,
            "cv": cell.cv,
            "met": ok(rate.value),
            "not_met_in": [f"{c.shape} {c.cv * 100:.0f} %" for c, r in have if not ok(r.value)],
        }

    def figures(rule: str) -> dict[str, Any]:
        return {
            "false_alarms": summary([(c, c.get("fa", rule)) for c in cells], max, lambda v: v <= TARGET_FA),
            "first_night_4sd": summary(
                [(c, c.get("first", rule, 4.0)) for c in cells], min, lambda v: v >= TARGET_FIRST
            ),
            "within3_2_5sd": summary(
                [(c, c.get("within3", rule, 2.5)) for c in cells if above_bound(2.5, c.cv, bound)],
                min,
                lambda v: v >= TARGET_WITHIN3,
            ),
        }

    return {**figures("history"), "peers": {rule: figures(rule) for rule in ("previous", "otava")}}


def said(goals: dict[str, Any]) -> str:
    """The targets in one sentence: the worst cell of each, and the cells where it is not met."""

    def one(key: str, unit: str, target: str) -> str:
        got = goals[key]
        digits = 1 if unit else 2
        missed = f"; not met in {', '.join(got['not_met_in'])}" if got["not_met_in"] else ""
        return (
            f"{got['value']:.{digits}f}{unit} ± {got['ci95']:.{digits}f} (worst: {got['shape']} "
            f"{got['cv'] * 100:.0f} %; {target}: {'met' if got['met'] else 'NOT met'}{missed})"
        )

    return (
        "Targets (`history`): false alarms per 100 clean nights "
        + one("false_alarms", "", f"<= {TARGET_FA:g}")
        + "; a 4 sd step on its first night "
        + one("first_night_4sd", " %", f">= {TARGET_FIRST:g} %")
        + "; a 2.5 sd step within three nights "
        + one("within3_2_5sd", " %", f">= {TARGET_WITHIN3:g} %")
        + "."
    )


def appendices(args: argparse.Namespace, drifts: list[DriftCell], window: int) -> list[str]:
    """The report's tables after the targets: the drift, and the one-night ceiling of every shape."""
    parts = []
    if drifts:
        parts += [drift_table(drifts, args.max_regression_pct), ""]
    if args.ceiling_samples and not args.compact:
        rows = ceilings(noise, args.shapes, args.cvs, nights=window, samples=args.ceiling_samples)
        parts += [ceiling_table(rows, window, table), ""]
    return parts


def smoke_sizes(args: argparse.Namespace) -> None:
    """--smoke: tiny sizes, enough to check that every table still comes out."""
    if not args.smoke:
        return
    args.seasons, args.nights, args.no_otava, args.drift_seasons = 2, 20, True, 2
    args.ceiling_samples = 200
    args.shapes, args.cvs = ["gaussian", "outliers"], [0.05]
    args.family_args = ["--smoke", *args.family_args]


def add_family_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-family", action="store_true", help="leave out the family section (many series)")
    parser.add_argument(
        "--family-args",
        type=shlex.split,
        default=[],
        help="options of the family section (benchmarks/gate_family.py), as one string",
    )


def family_section(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    """The gate as a whole, judging many series a night (issue 27): ``benchmarks/gate_family.py``'s
    report, run with ``--family-args`` and this run's bound and settings."""
    from benchmarks import gate_family

    family_args = gate_family.parse_args(
        [
            "--max-regression-pct",
            str(args.max_regression_pct),
            "--settings",
            json.dumps(args.settings),
            *args.family_args,
        ]
    )
    lines, figures = gate_family.run(family_args)
    command = shlex.join(["python", "benchmarks/gate_family.py", *args.family_args])
    heading = f"The gate as a whole: many series a night (`{command}`, the same bound and settings):"
    return [heading, "", *lines], figures


def write_docs(path: Path, section: str, command: str, report: list[str]) -> None:
    """Replace what lies between the section's markers in ``path`` with this run's tables and command."""
    begin, end = f"<!-- begin: {section} -->", f"<!-- end: {section} -->"
    doc = path.read_text()
    start, stop = doc.index(begin) + len(begin), doc.index(end)
    body = "\n".join([f"Measured with {command}:", "", *report])
    path.write_text(doc[:start] + "\n" + body + "\n" + doc[stop:])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seasons", type=int, default=200, help="seasons per shape and noise level")
    parser.add_argument("--nights", type=int, default=300, help="counted (clean) nights per season")
    parser.add_argument(
        "--branch-every", type=int, default=5, help="a step of every size is injected every N counted nights"
    )
    parser.add_argument("--otava-seasons", type=int, default=20, help="of those, the seasons Otava judges")
    parser.add_argument("--otava-nights", type=int, default=100, help="the counted nights Otava judges")
    parser.add_argument("--drift-seasons", type=int, default=200, help="seasons per drift cell (0: none)")
    parser.add_argument(
        "--ceiling-samples",
        type=int,
        default=100_000,
        help="draws a row of the one-night ceiling table (gate_ceiling.py; 0: none)",
    )
    parser.add_argument("--max-regression-pct", type=float, default=3.0)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--cvs", nargs="+", type=float, default=list(CVS))
    parser.add_argument("--settings", type=json.loads, default={}, help="HistorySettings fields, as JSON")
    parser.add_argument("--no-otava", action="store_true", help="leave Otava out even if its venv exists")
    parser.add_argument("--compact", action="store_true", help="the targets table only")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny: checks the benchmark still runs (no Otava)"
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--docs", type=Path, help="write the tables into this page (docs/gate_quality.md)")
    parser.add_argument("--section", default="gate_quality", help="the page's markers to write between")
    add_family_options(parser)
    args = parser.parse_args()
    smoke_sizes(args)
    use_otava = not args.no_otava and OTAVA_PYTHON.exists()
    rules = ["history", "previous", *(["otava"] if use_otava else [])]
    settings = {**DEFAULT_HISTORY.__dict__, **args.settings}
    otava_nights = min(args.otava_nights, args.nights)
    setup = Setup(args.max_regression_pct, args.settings, args.nights, args.branch_every, otava_nights)
    started = time.perf_counter()
    cells = [
        measure_cell(
            setup, shape, cv, seasons=args.seasons, otava_seasons=args.otava_seasons if use_otava else 0
        )
        for shape in args.shapes
        for cv in args.cvs
    ]
    drifts = [
        measure_drift(setup, cv, d, seasons=args.drift_seasons, horizon=DRIFT_HORIZON)
        for cv in args.cvs
        for d in DRIFTS
        if args.drift_seasons and not args.compact
    ]
    branches = len(range(0, args.nights, args.branch_every))
    otava_text = (
        f"Otava 0.8 (window_len 30, max_pvalue 0.001, the last 60 nights) on the first {args.otava_seasons} "
        f"seasons' first {otava_nights} counted nights and their steps"
        if use_otava
        else "Otava not run" + ("" if args.no_otava else f" ({OTAVA_PYTHON} missing: make otava-venv)")
    )
    goals = targets(cells, args.max_regression_pct)
    report = [
        f"Per shape and noise level: {args.seasons} seasons of {setup.start} warm-up and {args.nights} "
        f"counted nights, a step of each size injected every {args.branch_every} counted nights "
        f"({args.seasons * branches} steps per size); history settings {json.dumps(settings)}; "
        f"bound {args.max_regression_pct:g} %; {otava_text}; {time.perf_counter() - started:.0f} s.",
        "",
    ]
    if args.compact:
        report += [targets_table(cells, args.max_regression_pct, rules), ""]
    else:
        report += [tables(cells, args.max_regression_pct, rules, setup.start, setup.min_history), ""]
    report += appendices(args, drifts, int(settings["window"]))
    report.append(said(goals))
    family = None if args.no_family else family_section(args)
    report += ["", *family[0]] if family is not None else []
    print("\n".join(report))
    if args.docs:
        shown = [a for i, a in enumerate(sys.argv[1:]) if a != "--json" and sys.argv[i] != "--json"]
        command = f"`{shlex.join(['python', 'benchmarks/gate_quality.py', *shown])}`"
        write_docs(args.docs, args.section, command, report)
        print(f"\nwrote the tables into {args.docs}")
    if args.json:
        figures = {
            "targets": goals,
            "settings": settings,
            "bound": args.max_regression_pct,
            "otava": use_otava,
            "cells": [
                {
                    "shape": c.shape,
                    "cv": c.cv,
                    "rates": {"/".join(map(str, k)): r.to_json() for k, r in c.rates.items()},
                }
                for c in cells
            ],
            "drift": [d.__dict__ for d in drifts],
            "family": None if family is None else family[1],
        }
        args.json.write_text(json.dumps(figures, default=str))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
