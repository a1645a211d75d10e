"""The JTL reader beside pandas: per-label percentiles of a large JTL, in memory bounded by labels.

A JTL of ``--samples`` samples over 50 labels (JMeter's default 17 columns, some responseMessages
quoted with embedded commas and line breaks) is written to a temporary file, once per size, then read
by each variant in a fresh interpreter of its own, so that each one's peak resident memory
(``ru_maxrss``, the interpreter and its imports included) is its own:

- ``ours (gate)``: ``JtlReader`` with the metrics a gate on response times and errors needs (per label:
  hits, errors, p50/p80/p90/p95/p99, avg, min, max, std), the file fed in 1 MiB chunks;
- ``ours (every figure)``: every metric of ``SAMPLE_METRICS`` (latency, connect, bytes, rates too);
- ``pandas (gate)``: ``pandas.read_csv(path)`` + ``groupby`` quantiles and aggregates, the same figures;
- ``pandas usecols (gate)``: the same, reading only the three columns needed (``usecols``): pandas'
  C tokenizer then converts nothing else, which the ``csv`` module cannot skip;
- ``pandas (every figure)``: ``read_csv(path)``, then the figures of ``ours (every figure)``;
- ``floor``: reading the file in 1 MiB chunks and nothing else (the interpreter's own memory).

Times are the child's CPU time (user + system: the machine is shared, and wall time depends on what
else runs), medians over ``--rounds`` rounds, variants interleaved. The "agrees" column is the largest
relative difference, over every label and percentile, between ours and the exact nearest-rank ones
(numpy's ``inverted_cdf``, computed untimed in the pandas child): ours are exact or within 0.8 %.

    .venv/bin/python benchmarks/jtl_read.py [--samples 1000000 5000000] [--rounds 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import table

LABELS = 50
PERCENTILES = (50, 80, 90, 95, 99)
GATE_METRICS = [
    "HITS_TOTAL",
    "ERRORS_PERCENT",
    "RESPONSE_TIME_AVG",
    "RESPONSE_TIME_MAX",
    "RESPONSE_TIME_STD",
    *(f"RESPONSE_TIME_PERCENTILE_{p}" for p in PERCENTILES if p != 50),
    "RESPONSE_TIME_MEDIAN",
]
HEADER = (
    "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,"
    "bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n"
)
VARIANTS = (
    "floor",
    "ours (gate)",
    "pandas (gate)",
    "pandas usecols (gate)",
    "ours (every figure)",
    "pandas (every figure)",
)


def write_jtl(path: Path, samples: int, seed: int = 1) -> None:
    """``samples`` rows over ``LABELS`` labels; each label its own log-normal response times."""
    rng = random.Random(seed)  # noqa: S311 - test data
    labels = [f"Step {i:02d} - {'api/items' if i % 3 else 'Checkout, page'}" for i in range(LABELS)]
    quoted = [f'"{label}"' if "," in label else label for label in labels]
    failure = '"Non HTTP response message: Read timed out, after 30,000 ms\nat line 2"'
    start = 1_767_225_600_000
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(HEADER)
        lines = []
        for i in range(samples):
            n = rng.randrange(LABELS)
            elapsed = int(rng.lognormvariate(4.5 + n / 20, 0.6))
            ok = rng.random() > 0.01
            lines.append(
                f"{start + i // 8},{elapsed},{quoted[n]},{200 if ok else 500},"
                f"{'OK' if ok else failure},lg-1 Users 1-{i % 200},text,{'true' if ok else 'false'},,"
                f"{rng.randrange(500, 60_000)},{600 + n},200,200,https://shop.example.test/{n},"
                f"{elapsed * 3 // 4},0,{0 if i % 7 else elapsed // 10}\n"
            )
            if len(lines) == 10_000:
                out.write("".join(lines))
                lines.clear()
        out.write("".join(lines))


# --- the variants, each in a child interpreter ---------------------------------------------------------


def _chunks(path: str) -> Any:
    with open(path, "rb") as source:
        while chunk := source.read(2**20):
            yield chunk


def _ours(path: str, every: bool) -> dict[str, dict[str, float | None]]:
    from airflow_provider_loadtest.decisions.jtl import JtlReader
    from airflow_provider_loadtest.decisions.jtl_figures import SAMPLE_METRICS

    metrics = list(SAMPLE_METRICS) if every else GATE_METRICS
    reader = JtlReader(metrics)
    part = reader.file(os.path.basename(path))
    for chunk in _chunks(path):
        part.feed(chunk)
    part.close()
    summary = reader.summary()
    return {label: {m: stats.metric(m) for m in metrics} for label, stats in summary.transactions.items()}


def _pandas(path: str, every: bool, usecols: bool) -> dict[str, dict[str, float | None]]:
    import pandas as pd

    frame = pd.read_csv(path, usecols=["label", "elapsed", "success"] if usecols else None)
    groups = frame.groupby("label")
    quantiles = groups["elapsed"].quantile([p / 100 for p in PERCENTILES], interpolation="higher").unstack()
    errors = (~frame["success"]).groupby(frame["label"]).sum()
    stats = groups["elapsed"].agg(["count", "mean", "max", "std"])
    found: dict[str, dict[str, float | None]] = {}
    for label in stats.index:
        row = {
            "HITS_TOTAL": float(stats.at[label, "count"]),
            "ERRORS_PERCENT": 100 * float(errors[label]) / float(stats.at[label, "count"]),
            "RESPONSE_TIME_AVG": float(stats.at[label, "mean"]),
            "RESPONSE_TIME_MAX": float(stats.at[label, "max"]),
            "RESPONSE_TIME_STD": float(stats.at[label, "std"]),
            "RESPONSE_TIME_MEDIAN": float(quantiles.at[label, 0.5]),
        }
        for p in PERCENTILES[1:]:
            row[f"RESPONSE_TIME_PERCENTILE_{p}"] = float(quantiles.at[label, p / 100])
        found[label] = row
    if every:
        span = (frame["timeStamp"] + frame["elapsed"]).max() - frame["timeStamp"].min()
        more = groups.agg(
            latency_mean=("Latency", "mean"),
            latency_std=("Latency", "std"),
            latency_min=("Latency", "min"),
            latency_max=("Latency", "max"),
            connect_mean=("Connect", "mean"),
            connect_std=("Connect", "std"),
            connect_min=("Connect", "min"),
            connect_max=("Connect", "max"),
            bytes_sum=("bytes", "sum"),
            sent_sum=("sentBytes", "sum"),
            sent_std=("sentBytes", "std"),
            sent_min=("sentBytes", "min"),
            sent_max=("sentBytes", "max"),
            elapsed_min=("elapsed", "min"),
        )
        for label in more.index:
            found[label]["HITS_RATE"] = found[label]["HITS_TOTAL"] / (span / 1000)  # type: ignore[operator]
            found[label]["LATENCY_AVG"] = float(more.at[label, "latency_mean"])
            found[label]["THROUGHPUT_TOTAL"] = float(more.at[label, "bytes_sum"])
    return found


def _exact(path: str) -> dict[str, dict[str, float]]:
    """Nearest-rank percentiles of each label (numpy's ``inverted_cdf``): the reference, untimed."""
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(path, usecols=["label", "elapsed"])
    return {
        str(label): {
            "RESPONSE_TIME_MEDIAN" if p == 50 else f"RESPONSE_TIME_PERCENTILE_{p}": float(
                np.percentile(group.to_numpy(), p, method="inverted_cdf")
            )
            for p in PERCENTILES
        }
        for label, group in frame.groupby("label")["elapsed"]
    }


def child(variant: str, path: str, out: str) -> None:
    """Run one variant and write its figures, CPU time and peak memory to ``out`` (imports first,
    untimed: pandas takes a few tenths of a second to import, the reader a few milliseconds)."""
    if variant.startswith("ours"):
        import airflow_provider_loadtest.decisions.jtl  # noqa: F401
    elif variant.startswith("pandas"):
        import pandas  # noqa: F401
    started = time.process_time()
    wall = time.perf_counter()
    figures: dict[str, Any] = {}
    if variant == "floor":
        for _chunk in _chunks(path):
            pass
    elif variant.startswith("ours"):
        figures = _ours(path, every="every" in variant)
    else:
        figures = _pandas(path, every="every" in variant, usecols="usecols" in variant)
    result = {
        "cpu_s": time.process_time() - started,
        "wall_s": time.perf_counter() - wall,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "figures": figures,
    }
    if variant == "pandas (gate)":
        result["exact"] = _exact(path)
    Path(out).write_text(json.dumps(result))


def run_child(variant: str, path: Path, scratch: Path) -> dict[str, Any]:
    out = scratch / "child.json"
    subprocess.run(
        [sys.executable, __file__, "--child", variant, str(path), str(out)],
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def agreement(ours: dict[str, Any], theirs: dict[str, Any]) -> float:
    """The largest relative difference between our percentiles and the exact nearest-rank ones."""
    worst = 0.0
    for label, figures in theirs.items():
        for p in PERCENTILES:
            metric = "RESPONSE_TIME_MEDIAN" if p == 50 else f"RESPONSE_TIME_PERCENTILE_{p}"
            mine, other = ours[label][metric], figures[metric]
            worst = max(worst, abs(mine - other) / other)
    return worst


def pandas_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("pandas") is not None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "JTL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    variants = [v for v in VARIANTS if pandas_installed() or not v.startswith("pandas")]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="loadtest-jtl-") as scratch_dir:
        scratch = Path(scratch_dir)
        for samples in args.samples:
            path = scratch / f"results-{samples}.jtl"
            began = time.perf_counter()
            write_jtl(path, samples)
            size_mib = path.stat().st_size / 2**20
            print(
                f"# {samples:,} samples, {size_mib:,.0f} MiB, written in {time.perf_counter() - began:.0f} s"
            )
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
            for _round in range(args.rounds):
                for variant in variants:
                    runs[variant].append(run_child(variant, path, scratch))
            path.unlink()
            for variant in variants:
                last = runs[variant][-1]
                peer = variant.replace("ours", "pandas")
                row = {
                    "samples": samples,
                    "file_mib": round(size_mib, 1),
                    "variant": variant,
                    "cpu_s": statistics.median(r["cpu_s"] for r in runs[variant]),
                    "wall_s": statistics.median(r["wall_s"] for r in runs[variant]),
                    "rss_mib": max(r["rss_mib"] for r in runs[variant]),
                    "agrees": agreement(last["figures"], runs["pandas (gate)"][-1]["exact"])
                    if variant.startswith("ours") and "pandas (gate)" in runs
                    else None,
                }
                results.append(row)
    by = {(r["samples"], r["variant"]): r for r in results}
    rows = []
    for r in results:
        variant = str(r["variant"])
        ratios = []
        for peer_name in (variant.replace("ours", "pandas"), variant.replace("ours", "pandas usecols")):
            peer = by.get((r["samples"], peer_name))
            if peer and variant.startswith("ours"):
                ratio = r["cpu_s"] / peer["cpu_s"]
                r["vs_" + peer_name.split(" (")[0].replace(" ", "_")] = ratio
                ratios.append(f"{ratio:.2f}x {peer_name.split(' (')[0]}")
        rows.append(
            [
                f"{r['samples']:,}",
                f"{r['file_mib']:,.0f}",
                variant,
                f"{r['cpu_s']:.2f}",
                f"{r['wall_s']:.2f}",
                ", ".join(ratios),
                f"{r['rss_mib']:.0f}",
                f"{100 * r['agrees']:.2f} %" if r["agrees"] is not None else "",
            ]
        )
    print(
        f"\nMedians of {args.rounds} round(s), variants interleaved, each in its own interpreter"
        + ("" if pandas_installed() else " (pandas not installed: `make bench` installs it)")
        + ":\n"
    )
    header = ["samples", "file MiB", "variant", "CPU s", "wall s", "CPU vs pandas", "peak RSS MiB", "agrees"]
    print(table(rows, header))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
