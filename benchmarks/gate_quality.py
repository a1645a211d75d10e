"""How well ``baseline="history"`` tells a regression from noise, beside today's ``"previous"`` rule and
Apache Otava's change-point detection, on the same simulated seasons of nightly values.

A season is one metric (p95 response time, 500 ms, higher is worse) night after night, with run-to-run
noise of a shape and a size (coefficient of variation, CV):

* ``gaussian``: normal noise;
* ``lognormal``: multiplicative, right-skewed noise (response times are);
* ``heavy``: Student's t with 3 degrees of freedom (rare big nights), scaled to the same standard deviation;
* ``outliers``: normal noise, and one night in a hundred 4 to 8 noise standard deviations worse (an
  infrastructure hiccup); those nights are counted apart (a gate with one night to decide cannot tell
  the first night of a step from an outlier: the question is whether the nights after it are judged
  right, i.e. whether the outlier moved the history);
* ``wander``: normal noise plus a slow drift up and down (period 60 nights) carrying a third of the variance.

Clean seasons have no change; step seasons jump by k noise standard deviations at night ``STEP_AT``
(history full by then) and stay there. Each season is replayed through ``decisions.gate.replay_history``
(the operator's code), through the ``"previous"`` rule (``decisions.gate.judge_metric`` against the last
passing night), and, when ``.venv-otava`` exists (``make otava-venv``), through Otava run every night on
the season so far (``benchmarks/otava_peer.py``: a night fails when a change point lies in its last three
nights and is a rise of more than the bound). Every rule uses the same bound, ``--max-regression-pct``.

Reported per shape and noise level: false alarms per 100 clean nights (nights from ``STEP_AT`` on, after
the warm-up), and the share of steps caught on their first night and within three nights, by step size.

    .venv/bin/python benchmarks/gate_quality.py [--seasons 100] [--smoke] [--no-otava] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_provider_loadtest.decisions.gate import (  # noqa: E402
    DEFAULT_HISTORY,
    judge_metric,
    replay_history,
)
from airflow_provider_loadtest.decisions.history import SUSPECTED  # noqa: E402
from benchmarks.common import table  # noqa: E402

METRIC = "RESPONSE_TIME_PERCENTILE_95"
BASE = 500.0
#: The first night of a step, and of the clean nights counted: the history is full by then.
STEP_AT = DEFAULT_HISTORY.window + DEFAULT_HISTORY.persist_nights + 3
CLEAN_NIGHTS = 100  # counted per clean season, from STEP_AT on
SHAPES = ("gaussian", "lognormal", "heavy", "outliers", "wander")
CVS = (0.02, 0.05, 0.10, 0.20)
STEPS = (1.5, 2.5, 4.0, 6.0)
OUTLIER_RATE = 0.01
OTAVA_PYTHON = ROOT / ".venv-otava" / "bin" / "python"
TARGET_FA, TARGET_FIRST, TARGET_WITHIN3 = 1.0, 90.0, 90.0


def noise(shape: str, cv: float, rng: random.Random, length: int) -> tuple[list[float], set[int]]:
    """Unit-variance noise of ``shape`` for ``length`` nights (relative to the base: times ``cv``), and
    the nights that are outliers."""
    outliers: set[int] = set()
    phase = rng.uniform(0, 2 * math.pi)
    out = []
    for night in range(length):
        if shape == "lognormal":
            sigma = math.sqrt(math.log(1 + cv * cv))
            e = (math.exp(sigma * rng.gauss(0, 1) - sigma * sigma / 2) - 1) / cv
        elif shape == "heavy":
            chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(3))
            e = rng.gauss(0, 1) / math.sqrt(chi2 / 3) / math.sqrt(3)
        elif shape == "wander":
            e = math.sqrt(2 / 3) * rng.gauss(0, 1) + math.sqrt(2 / 3) * math.sin(
                phase + night * 2 * math.pi / 60
            )
        else:
            e = rng.gauss(0, 1)
            if shape == "outliers" and night > 0 and rng.random() < OUTLIER_RATE:
                e += rng.uniform(4, 8)
                outliers.add(night)
        out.append(e)
    return out, outliers


def season(
    shape: str, cv: float, step: float, length: int, rng: random.Random
) -> tuple[list[float], set[int]]:
    """Nightly values: the base, a step of ``step`` noise standard deviations from ``STEP_AT`` on, noise."""
    draws, outliers = noise(shape, cv, rng, length)
    values = []
    for night, e in enumerate(draws):
        level = 1 + (step * cv if night >= STEP_AT else 0.0)
        values.append(round(BASE * max(0.05, level + cv * e), 3))
    return values, outliers


# --- the rules -------------------------------------------------------------------------------------


def ours(values: Sequence[float], bound: float, settings: dict[str, Any]) -> tuple[list[bool], list[bool]]:
    """Failed and suspected, night by night, through the operator's code."""
    rows = replay_history(METRIC, values, max_regression_pct=bound, **settings)
    return [not r.passed for r in rows], [r.status == SUSPECTED for r in rows]


def previous(values: Sequence[float], bound: float) -> list[bool]:
    """Today's rule: against the last passing night (the first night has no baseline: budgets only)."""
    failed, last = [], None
    for value in values:
        row, _ = judge_metric(METRIC, value, bound=bound, baseline=last)
        failed.append(not row.passed)
        if row.passed:
            last = value
    return failed


def otava(seasons: list[list[float]], bound: float) -> list[list[bool]] | None:
    """Otava's verdicts from night ``STEP_AT`` on, or None when its venv is not there."""
    if not OTAVA_PYTHON.exists() or not seasons:
        return None
    job = {
        "seasons": seasons,
        "first": STEP_AT,
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
        timeout=3600,
    )
    flags = json.loads(done.stdout)["failed"]
    return [[False] * STEP_AT + [bool(f) for f in season_flags] for season_flags in flags]


# --- one cell: a shape at a noise level -------------------------------------------------------------


@dataclass
class Cell:
    shape: str
    cv: float
    fa: dict[str, float]  # rule -> false alarms per 100 clean nights
    suspected: float  # ours: suspected per 100 clean nights
    outliers_failed: float | None  # ours: share of outlier nights failed (the outliers shape)
    after_outlier_fa: float | None  # ours: false alarms per 100 of the 3 nights after an outlier
    first: dict[str, dict[float, float]]  # rule -> step -> % caught on the first night
    within3: dict[str, dict[float, float]]  # rule -> step -> % caught within three nights


def pct(hits: int, total: int) -> float:
    return 100.0 * hits / total if total else math.nan


def measure_cell(
    shape: str,
    cv: float,
    *,
    seasons: int,
    step_seasons: int,
    bound: float,
    settings: dict[str, Any],
    use_otava: bool,
) -> Cell:
    rng = random.Random(f"{shape}-{cv}")  # noqa: S311 - simulated noise, seeded to repeat
    clean = [season(shape, cv, 0.0, STEP_AT + CLEAN_NIGHTS, rng) for _ in range(seasons)]
    rules: dict[str, list[list[bool]]] = {"history": [], "previous": []}
    suspected_count = 0
    for values, _ in clean:
        failed, suspected = ours(values, bound, settings)
        rules["history"].append(failed)
        suspected_count += sum(suspected[STEP_AT:])
        rules["previous"].append(previous(values, bound))
    found = otava([v for v, _ in clean], bound) if use_otava else None
    if found is not None:
        rules["otava"] = found
    fa: dict[str, float] = {}
    counted = 0
    for rule, per_season in rules.items():
        hits = counted = 0
        for (_, outliers), flags in zip(clean, per_season, strict=True):
            for night in range(STEP_AT, len(flags)):
                if night in outliers:
                    continue
                counted += 1
                hits += flags[night]
        fa[rule] = pct(hits, counted)
    outliers_failed = after_outlier = None
    if shape == "outliers":
        marked = [(flags, outliers) for (_, outliers), flags in zip(clean, rules["history"], strict=True)]
        nights = [(f, n) for f, o in marked for n in o if n >= STEP_AT]
        outliers_failed = pct(sum(f[n] for f, n in nights), len(nights))
        after = [
            (f, m)
            for f, o in marked
            for n in o
            for m in range(n + 1, n + 4)
            if STEP_AT <= m < len(f) and m not in o
        ]
        after_outlier = pct(sum(f[m] for f, m in after), len(after))

    first: dict[str, dict[float, float]] = {}
    within3: dict[str, dict[float, float]] = {}
    for step in STEPS:
        stepped = [season(shape, cv, step, STEP_AT + 3, rng)[0] for _ in range(step_seasons)]
        verdicts = {
            "history": [ours(values, bound, settings)[0] for values in stepped],
            "previous": [previous(values, bound) for values in stepped],
        }
        otava_verdicts = otava(stepped, bound) if use_otava else None
        if otava_verdicts is not None:
            verdicts["otava"] = otava_verdicts
        for rule, per_season in verdicts.items():
            first.setdefault(rule, {})[step] = pct(sum(f[STEP_AT] for f in per_season), len(per_season))
            within3.setdefault(rule, {})[step] = pct(
                sum(any(f[STEP_AT : STEP_AT + 3]) for f in per_season), len(per_season)
            )
    return Cell(
        shape,
        cv,
        fa,
        pct(suspected_count, seasons * CLEAN_NIGHTS),
        outliers_failed,
        after_outlier,
        first,
        within3,
    )


# --- the tables ------------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def above_bound(step: float, cv: float, bound: float) -> bool:
    return step * cv * 100 > bound


def tables(cells: list[Cell], bound: float, rules: list[str]) -> str:
    fa_rows = [
        [
            c.shape,
            f"{c.cv * 100:.0f} %",
            *(_f(c.fa.get(rule), 2) for rule in rules),
            _f(c.suspected, 1),
            _f(c.outliers_failed, 0) + (" %" if c.outliers_failed is not None else ""),
            _f(c.after_outlier_fa, 2),
        ]
        for c in cells
    ]
    parts = [
        f"False alarms per 100 clean nights (bound {bound:g} %; nights from {STEP_AT} on):",
        "",
        table(
            fa_rows,
            [
                "noise",
                "CV",
                *(f"{rule}" for rule in rules),
                "history: suspected /100",
                "outlier nights failed",
                "FA /100 in 3 nights after an outlier",
            ],
        ),
        "",
        "Steps caught by `history`, % on the first night / % within three nights, by step size in noise "
        f"standard deviations (in brackets: a step not above the {bound:g} % bound, "
        "which no rule should fail):",
        "",
    ]
    step_rows = []
    for c in cells:
        cells_text = []
        for step in STEPS:
            text = f"{_f(c.first['history'][step], 0)} / {_f(c.within3['history'][step], 0)}"
            cells_text.append(text if above_bound(step, c.cv, bound) else f"({text})")
        step_rows.append([c.shape, f"{c.cv * 100:.0f} %", *cells_text])
    parts.append(table(step_rows, ["noise", "CV", *(f"{s:g} sd" for s in STEPS)]))
    parts += [
        "",
        "The targets, rule beside rule: false alarms per 100 clean nights; a 4 sd step caught on its first "
        "night; a 2.5 sd step caught within three nights:",
        "",
    ]
    compare_rows = []
    for c in cells:
        row = [c.shape, f"{c.cv * 100:.0f} %"]
        for rule in rules:
            first4 = c.first.get(rule, {}).get(4.0)
            within25 = c.within3.get(rule, {}).get(2.5)
            counts = above_bound(2.5, c.cv, bound)
            row.append(
                f"{_f(c.fa.get(rule), 2)} / {_f(first4, 0)} % / "
                + (f"{_f(within25, 0)} %" if counts else f"({_f(within25, 0)} %)")
            )
        compare_rows.append(row)
    parts.append(table(compare_rows, ["noise", "CV", *rules]))
    return "\n".join(parts)


def targets(cells: list[Cell], bound: float) -> dict[str, Any]:
    """The worst cell for each target (ours), and whether it is met."""
    fa = max(cells, key=lambda c: c.fa["history"])
    first = [c for c in cells if above_bound(4.0, c.cv, bound)]
    within = [c for c in cells if above_bound(2.5, c.cv, bound)]
    worst_first = min(first, key=lambda c: c.first["history"][4.0])
    worst_within = min(within, key=lambda c: c.within3["history"][2.5])

    def peer(rule: str, fn: Callable[[Cell], float | None], worst: Callable[..., Cell]) -> Any:
        have = [c for c in cells if rule in c.fa]
        if not have:
            return None
        pick = worst(have, key=fn)
        return {"value": fn(pick), "shape": pick.shape, "cv": pick.cv}

    return {
        "false_alarms": {
            "value": fa.fa["history"],
            "shape": fa.shape,
            "cv": fa.cv,
            "met": fa.fa["history"] <= TARGET_FA,
        },
        "first_night_4sd": {
            "value": worst_first.first["history"][4.0],
            "shape": worst_first.shape,
            "cv": worst_first.cv,
            "met": worst_first.first["history"][4.0] >= TARGET_FIRST,
        },
        "within3_2_5sd": {
            "value": worst_within.within3["history"][2.5],
            "shape": worst_within.shape,
            "cv": worst_within.cv,
            "met": worst_within.within3["history"][2.5] >= TARGET_WITHIN3,
        },
        "peers": {
            rule: {
                "false_alarms": peer(rule, lambda c, r=rule: c.fa.get(r), max),
                "first_night_4sd": peer(rule, lambda c, r=rule: c.first.get(r, {}).get(4.0), min),
                "within3_2_5sd": peer(rule, lambda c, r=rule: c.within3.get(r, {}).get(2.5), min),
            }
            for rule in ("previous", "otava")
        },
    }


BEGIN, END = "<!-- begin: gate_quality -->", "<!-- end: gate_quality -->"


def write_docs(path: Path, command: str, report: list[str]) -> None:
    """Replace what lies between the markers of ``path`` with this run's tables and its command."""
    doc = path.read_text()
    start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
    body = "\n".join([f"Measured with {command}:", "", *report])
    path.write_text(doc[:start] + "\n" + body + "\n" + doc[end:])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seasons", type=int, default=100, help="clean seasons per shape and noise level")
    parser.add_argument(
        "--step-seasons", type=int, default=200, help="seasons per step size, shape and level"
    )
    parser.add_argument("--max-regression-pct", type=float, default=3.0)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--cvs", nargs="+", type=float, default=list(CVS))
    parser.add_argument("--settings", type=json.loads, default={}, help="HistorySettings fields, as JSON")
    parser.add_argument("--no-otava", action="store_true", help="leave Otava out even if its venv exists")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny: checks the benchmark still runs (no Otava)"
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--docs", type=Path, help="write the tables into this page (docs/gate_quality.md)")
    args = parser.parse_args()
    if args.smoke:
        args.seasons, args.step_seasons, args.no_otava = 3, 5, True
        args.shapes, args.cvs = ["gaussian", "outliers"], [0.05]
    use_otava = not args.no_otava and OTAVA_PYTHON.exists()
    rules = ["history", "previous", *(["otava"] if use_otava else [])]
    started = time.perf_counter()
    cells = [
        measure_cell(
            shape,
            cv,
            seasons=args.seasons,
            step_seasons=args.step_seasons,
            bound=args.max_regression_pct,
            settings=args.settings,
            use_otava=use_otava,
        )
        for shape in args.shapes
        for cv in args.cvs
    ]
    settings = {**DEFAULT_HISTORY.__dict__, **args.settings}
    report = [
        f"{args.seasons} clean seasons of {CLEAN_NIGHTS} counted nights and {args.step_seasons} step seasons "
        f"per step size, per shape and noise level; history settings {json.dumps(settings)}; "
        + (
            "Otava 0.8 (window_len 30, max_pvalue 0.001, the last 60 nights)"
            if use_otava
            else "Otava not run" + ("" if args.no_otava else f" ({OTAVA_PYTHON} missing: make otava-venv)")
        )
        + f"; {time.perf_counter() - started:.0f} s.",
        "",
        tables(cells, args.max_regression_pct, rules),
        "",
    ]
    goals = targets(cells, args.max_regression_pct)
    report.append(
        "Targets (history, worst cell): "
        f"false alarms {goals['false_alarms']['value']:.2f} per 100 clean nights (<= {TARGET_FA:g}: "
        f"{'met' if goals['false_alarms']['met'] else 'NOT met'}); "
        f"4 sd on the first night {goals['first_night_4sd']['value']:.0f} % (>= {TARGET_FIRST:g} %: "
        f"{'met' if goals['first_night_4sd']['met'] else 'NOT met'}); "
        f"2.5 sd within three nights {goals['within3_2_5sd']['value']:.0f} % (>= {TARGET_WITHIN3:g} %: "
        f"{'met' if goals['within3_2_5sd']['met'] else 'NOT met'})."
    )
    print("\n".join(report))
    if args.docs:
        write_docs(args.docs, f"`{' '.join(['python benchmarks/gate_quality.py', *sys.argv[1:]])}`", report)
        print(f"\nwrote the tables into {args.docs}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "targets": goals,
                    "settings": settings,
                    "bound": args.max_regression_pct,
                    "otava": use_otava,
                    "cells": [c.__dict__ for c in cells],
                },
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
