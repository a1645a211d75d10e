"""The mutation score of ``make mutation``, per module, from mutmut's results in ``mutants/``.

Run in the directory mutmut ran in (``make mutation`` does): ``python -m tests.mutation_score``.
A mutant is *killed* when a test failed on it. One whose tests outlasted mutmut's bound
(``timeout_multiplier`` times their time in the clean run) is counted apart: it may loop (caught), or
only be slow on a busy machine; re-run those with a larger multiplier before counting them. Mutants
listed in ``tests/mutation_equivalent.txt`` (name, then why, one a line) are equivalent: no test can
tell them from the code, and they leave the score's denominator. ``--functions PATTERN`` scores only
the mutants of matching functions (a glob on mutmut's name, e.g. ``'*RunScenarioOperator*_start*'``)
as well; ``--survivors`` lists those left.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from collections import Counter
from pathlib import Path

KILLED = {1, 3}  # a test failed
TIMED_OUT = {36, -24, 24, 152, 255}
SURVIVED = {0}
EQUIVALENT_FILE = Path(__file__).with_name("mutation_equivalent.txt")


def equivalent_mutants(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """``{mutant name: why it is equivalent}`` from the triage file."""
    found: dict[str, str] = {}
    if not path.exists():
        return found
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            found[name] = why.strip()
    return found


def results(root: Path = Path("mutants")) -> dict[str, dict[str, int | None]]:
    """``{module path: {mutant name: exit code}}`` from mutmut's ``.meta`` files."""
    found: dict[str, dict[str, int | None]] = {}
    for meta in sorted(root.rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8")).get("exit_code_by_key", {})
        if codes:
            found[str(meta.relative_to(root))[: -len(".meta")]] = codes
    return found


def score_line(label: str, codes: dict[str, int | None], equivalent: dict[str, str]) -> tuple[str, list[str]]:
    """One table row and the names of the survivors not known to be equivalent."""
    tally: Counter[str] = Counter()
    survivors: list[str] = []
    for name, code in codes.items():
        if name in equivalent:
            tally["equivalent"] += 1
        elif code in KILLED:
            tally["killed"] += 1
        elif code in TIMED_OUT:
            tally["timeout"] += 1
        elif code is None:
            tally["unchecked"] += 1  # the run has not reached it (stopped, or a narrowed run)
        elif code in SURVIVED:
            tally["survived"] += 1
            survivors.append(name)
        else:
            tally["other"] += 1  # no test reaches it, or suspicious: a survivor too
            survivors.append(name)
    judged = tally["killed"] + tally["survived"] + tally["other"]
    pct = f"{100.0 * tally['killed'] / judged:6.1f} %" if judged else "     - "
    row = (
        f"{label:<58} {len(codes):>5} {tally['unchecked']:>9} {tally['timeout']:>7} {tally['killed']:>6} "
        f"{tally['survived']:>8} {tally['other']:>5} {tally['equivalent']:>5} {pct}"
    )
    return row, survivors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--functions", action="append", default=[], help="glob on mutant names")
    parser.add_argument("--survivors", action="store_true", help="list the survivors")
    args = parser.parse_args(argv)
    equivalent = equivalent_mutants()
    by_module = results()
    print(
        f"{'module':<58} {'all':>5} {'unchecked':>9} {'timeout':>7} {'killed':>6} {'survived':>8} "
        f"{'other':>5} {'equiv':>5}  score (killed / decided, equivalent left out)"
    )
    left: list[str] = []
    for module, codes in by_module.items():
        row, survivors = score_line(module, codes, equivalent)
        print(row)
        left += survivors
    every = {name: code for codes in by_module.values() for name, code in codes.items()}
    for pattern in args.functions:
        chosen = {name: code for name, code in every.items() if fnmatch.fnmatch(name, pattern)}
        row, _ = score_line(pattern, chosen, equivalent)
        print(row)
    if args.survivors:
        for name in left:
            print(f"survived: {name} (exit code {every[name]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
