"""What the gate's memory costs a night (issue 33): reading the records of a year of nights, deriving
tonight's history from them, against the cost of the bytes themselves.

A gate of K series (41 or 201, as ``gate_family.py``'s) has run N nights (365). Per night:

* ``json``: ``json.loads`` of the records as the Task SDK hands them over (the floor: the bytes must be
  decoded whatever we do with them);
* ``recall``: our parse and ordering of the records (``nights.recall``): which nights, in which order,
  which checkpoint;
* ``checkpoint``: the usual night: the newest record's saved history parsed (``GateHistory.from_xcom``),
  nothing replayed;
* ``replay k``: k nights recorded out of order, judged again from their records (``nights.fold``);
* ``from scratch``: no checkpoint readable: the last ``window`` + 10 nights judged again.

Figures are CPU milliseconds (process time, medians of interleaved repeats) and the ratio to ``json``.

    .venv/bin/python benchmarks/gate_memory.py [--series 41 201] [--nights 365] [--repeats 5] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from airflow_provider_loadtest.decisions.gate.history import GateHistory, HistorySettings  # noqa: E402
from airflow_provider_loadtest.decisions.gate.nights import (  # noqa: E402
    Memory,
    NightRecord,
    RecordedSeries,
    chain_of,
    fold,
    recall,
)
from benchmarks.common import table  # noqa: E402

P95, AVG = "RESPONSE_TIME_PERCENTILE_95", "RESPONSE_TIME_AVG"


def season(series: int, nights: int, seed: int = 1) -> list[NightRecord]:
    """``nights`` records of a gate of ``series`` series, chained as a scheduled DAG judges them."""
    rng = random.Random(seed)  # noqa: S311 - simulated values, seeded to repeat
    keys = [(f"tx{t:03d}", m) for t in range((series - 1) // 2) for m in (P95, AVG)] + [(None, P95)]
    base = {key: rng.uniform(50, 2000) for key in keys}
    records: list[NightRecord] = []
    for night in range(nights):
        bench = f"br-{night + 1}"
        records.append(
            NightRecord(
                bench_result_id=bench,
                scenario_id="sc-1",
                ran_at=1_700_000_000 + night * 86_400,
                series=tuple(
                    RecordedSeries(label, metric, base[(label, metric)] * (1 + rng.gauss(0, 0.08)), 2.0, 900)
                    for label, metric in keys
                ),
                loads=(("USERLOAD", 50.0, None), ("HITS_RATE", 100.0, None)),
                dag_run_id=f"scheduled__{night}",
                recorded_at=float(night),
            )
        )
        records[-1] = replace(records[-1], chain=chain_of(records))  # as each night records it
    return records


def cpu_ms(work: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        work()
        times.append((time.process_time() - start) * 1000)
    return times


def measure(series: int, nights: int, repeats: int) -> list[list[str]]:
    settings = HistorySettings()
    records = season(series, nights)
    stored = json.dumps([r.to_xcom() for r in records])
    checkpoint = json.dumps(
        fold(
            GateHistory(), Memory(before=tuple(records[-70:]), replay=tuple(records[-70:])), settings
        ).to_xcom()
    )
    swapped = [*records[:-2], records[-1], records[-2]]  # the last two judged at once, the later first
    scratch = records[-(settings.window + 10) :]
    cases: dict[str, Callable[[], object]] = {
        "json": lambda: json.loads(stored),
        "recall": lambda: recall(json.loads(stored), scenario_id="sc-1"),
        "checkpoint": lambda: (
            recall(json.loads(stored), scenario_id="sc-1"),
            GateHistory.from_xcom(json.loads(checkpoint)),
        ),
        "replay 2": lambda: fold(
            GateHistory.from_xcom(json.loads(checkpoint)),
            Memory(before=tuple(swapped), replay=tuple(swapped[-2:])),
            settings,
        ),
        "from scratch": lambda: fold(
            GateHistory(), Memory(before=tuple(scratch), replay=tuple(scratch)), settings
        ),
    }
    found: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):  # interleaved: drift hits every case alike
        for name, work in cases.items():
            found[name] += cpu_ms(work, 1)
    floor = statistics.median(found["json"])
    return [
        [
            str(series),
            name,
            f"{statistics.median(times):.1f}",
            f"{statistics.median(times) / floor:.1f}x",
        ]
        for name, times in found.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, nargs="+", default=[41, 201])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args(argv)
    if args.smoke:
        args.series, args.nights, args.repeats = [11], 80, 1
    rows = [row for k in args.series for row in measure(k, args.nights, args.repeats)]
    print(f"The gate's memory: {args.nights} nights recorded, CPU ms a night (median of {args.repeats})")
    print(table(rows, ["series", "step", "CPU ms", "vs json.loads"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
