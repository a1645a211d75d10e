"""``make bench``: every benchmark, one after the other, full size (or ``--smoke``: tiny, for CI).

A full run writes its tables into ``docs/performance.md`` (between the ``make bench`` markers: the
budget table, how cost grows with the number of waits, and every benchmark's own tables), so the
document always holds one run's figures; ``--docs PATH`` writes another copy of that file instead
(a smoke run writes nothing unless given ``--docs``). Exits 1 when a benchmark crashed.

    .venv/bin/python benchmarks/run_all.py [--smoke] [--only dag_parse.py ...] [--docs PATH]
        [--before /tmp/before]  (a worktree of an earlier commit: the triggerer before and after)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "performance.md"
BEGIN, END = "<!-- begin: make bench -->", "<!-- end: make bench -->"


@dataclass(frozen=True)
class Benchmark:
    script: str
    full: list[str]
    smoke: list[str]
    json: bool = False  # takes --json PATH
    figures: list[str] = field(default_factory=list)  # what it measures, for the budget table


WAITS = ["100", "1000", "2000"]
INTERVAL = "10"
BENCHMARKS = [
    Benchmark("dag_parse.py", [], ["--runs", "1"], json=True),
    Benchmark("pytest_plugin_cost.py", [], ["--runs", "1"]),
    Benchmark("client_cpu.py", [], ["--rounds", "2", "--calls", "5"]),
    Benchmark("models_parse.py", [], ["--rounds", "1", "--templates", "20"]),
    Benchmark(
        "triggerer_scale.py",
        ["--waits", *WAITS, "--interval", INTERVAL],
        ["--waits", "10", "--interval", "0.5", "--simulators", "1"],
        json=True,
    ),
    # Two JTL sizes (1 and 5 million samples, ~3 min in all); --smoke: two tiny ones, one round.
    Benchmark("jtl_read.py", [], ["--samples", "20000", "50000", "--rounds", "1"], json=True),
    # A year of nightly history in the "Load tests" view, seeded into a throwaway home (~20 s small).
    Benchmark("plugin_page.py", [], ["--smoke"], json=True),
    # Every gate at a glance (/loadtest/): 500 gated tasks over a year (~3 min to seed); --smoke: 8 tasks.
    Benchmark("plugin_overview.py", [], ["--smoke"], json=True),
    # The demo's full run is 3 x (ours ~2 min + control ~1 min); --smoke: one control DAG run (~20 s).
    Benchmark("demo_split.py", ["--repetitions", "3"], ["--smoke"], json=True),
    # The gate's judgement on simulated seasons (docs/gate_quality.md); Otava beside it when
    # .venv-otava exists (make otava-venv, which make bench runs), and its family section (gate_family.py:
    # 41 and 201 series a night, ~10 min). --smoke: two small cells, no Otava, a tiny family.
    Benchmark("gate_quality.py", ["--docs", "docs/gate_quality.md"], ["--smoke"], json=True),
    # The floor of any one-night rule on each noise shape, beside the gate's figures (docs/gate_quality.md;
    # ~20 min full: the most powerful invariant tests by Monte Carlo, 20,000 draws of each hypothesis for
    # intervals of about +-0.1 at 1 %); --smoke: a few hundred draws.
    Benchmark(
        "gate_bound.py", ["--samples", "20000", "--docs", "docs/gate_quality.md"], ["--smoke"], json=True
    ),
    # What the gate's memory costs a night: a year of records read, tonight's history derived (~1 min).
    Benchmark("gate_memory.py", [], ["--smoke"]),
]


@dataclass
class Outcome:
    """What one benchmark printed (and wrote with --json), and the command that reproduces it."""

    command: str
    stdout: str = ""
    figures: Any = None
    ok: bool = True


def run(bench: Benchmark, args: list[str], scratch: Path) -> Outcome:
    """Run one benchmark, its output shown as it comes and kept."""
    json_path = scratch / (bench.script + ".json")
    argv = [
        sys.executable,
        str(HERE / bench.script),
        *args,
        *(["--json", str(json_path)] if bench.json else []),
    ]
    outcome = Outcome(command=f"python benchmarks/{bench.script} {' '.join(args)}".strip())
    print(f"\n## {bench.script} {' '.join(args)}", flush=True)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    outcome.stdout, outcome.ok = "".join(lines), process.returncode == 0
    if outcome.ok and bench.json and json_path.exists():
        outcome.figures = json.loads(json_path.read_text())
    return outcome


# --- reading the figures back ------------------------------------------------------------------------


def markdown_tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table in ``text``, as rows keyed by the header's cells."""
    found: list[list[dict[str, str]]] = []
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if len(block) > 2:
            header = block[0]
            found.append([dict(zip(header, row, strict=False)) for row in block[2:]])
        block = []
    return found


def ratio(cell: str) -> float:
    """``"1.20x"`` -> 1.2 (ValueError when the cell is no ratio)."""
    return float(cell.strip().rstrip("x"))


def _or_missing(fn: Callable[[], list[str]]) -> list[str]:
    """A budget row's cells, or a row saying the figure could not be read (a benchmark changed its
    output, or did not run): the run's tables below still hold it."""
    try:
        return fn()
    except (AttributeError, KeyError, IndexError, StopIteration, TypeError, ValueError):
        return ["not found in this run's output (see its tables below)", "", ""]


def row(figure: str, budget: str, cells: Callable[[], list[str]]) -> list[str]:
    """One budget row: figure, ours, baseline / peers, budget, met."""
    ours, peers, met = _or_missing(cells)
    return [figure, ours, peers, budget, met]


def _verdict(met: bool) -> str:
    return "yes" if met else "**no**"


def dag_parse_rows(result: Any) -> list[list[str]]:
    def modules() -> list[str]:
        ours = [m for m in result["modules"] if m["ours"]]
        peers = [m for m in result["modules"] if m["label"].startswith("peer")]
        worst = max(m["median"] for m in ours)
        return [
            ", ".join(f"{m['label'].split(': ')[-1]} {m['median']:+.1f} ms" for m in ours),
            ", ".join(f"{m['label'].split(': ')[-1]} {m['median']:+.1f} ms" for m in peers)
            or "peers not installed: " + ", ".join(result["not_installed"]),
            _verdict(worst < 15.0),
        ]

    def dags() -> list[str]:
        shares = [
            (d["file"], d["parse"]["share"]["median"], d["parse"]["control"]["median"])
            for d in result["dags"]
        ]
        return [
            ", ".join(f"{name} {share:+.1f} ms" for name, share, _ in shares),
            "the same files with EmptyOperators: "
            + ", ".join(f"{control:.1f} ms" for _, _, control in shares),
            _verdict(max(share for _, share, _ in shares) < 15.0),
        ]

    return [
        row(
            "DAG parse: import of each operator/sensor module over `import airflow.sdk`",
            "< +15 ms each",
            modules,
        ),
        row("DAG parse: the provider's share of an example DAG file (DagBag)", "< +15 ms", dags),
    ]


def triggerer_rows(results: Any) -> list[list[str]]:
    """The triggerer's budgets as a deployment feels them: CPU in percent of one core and memory per
    wait at 1,000 waits polling every 10 s (Airflow's default triggerer capacity), lateness at 2,000.
    Beside ours: the same trigger before a change (``--before``) and a new client per poll."""
    rows_of = results or []
    ours: list[dict[str, Any]] = [r for r in rows_of if str(r["variant"]).startswith("ours")]
    others: list[dict[str, Any]] = [r for r in rows_of if not str(r["variant"]).startswith("ours")]

    def at(waits: int) -> dict[str, Any]:
        """Our row at ``waits`` (the budget's size), else at the largest size this run measured."""
        return next((r for r in ours if r["waits"] == waits), None) or max(
            ours, key=lambda r: int(r["waits"])
        )

    def beside(key: str, fmt: str, waits: int) -> str:
        """Each other variant's figure at the largest size up to ``waits`` (``fmt`` holds the unit)."""
        cells = []
        for variant in dict.fromkeys(str(r["variant"]) for r in others):
            rows = [r for r in others if r["variant"] == variant and r["waits"] <= waits]
            if rows:
                row = max(rows, key=lambda r: int(r["waits"]))
                cells.append(f"{variant}: {fmt.format(row[key])} at {row['waits']} waits")
        return "; ".join(cells) or "not measured"

    def cpu() -> list[str]:
        row = at(1000)
        return [
            f"{row['cpu_core_pct']:.1f} % ({row['cpu_per_poll_ms']:.3f} ms a poll) at {row['waits']} waits",
            beside("cpu_core_pct", "{:.1f} %", 1000),
            _verdict(row["cpu_core_pct"] <= 5.0),
        ]

    def memory() -> list[str]:
        row = at(1000)
        return [
            f"{row['rss_per_wait_kib']:.1f} KiB at {row['waits']} waits",
            beside("rss_per_wait_kib", "{:.1f} KiB", 1000),
            _verdict(row["rss_per_wait_kib"] <= 50),
        ]

    def lateness() -> list[str]:
        row = at(2000)
        return [
            f"p99 {row['late_p99_s']:.2f} s, p50 {row['late_p50_s']:.3f} s at {row['waits']} waits "
            f"({row['polls_made_pct']:.0f} % of the polls due were made)",
            beside("late_p99_s", "p99 {:.2f} s", 2000),
            # A loop that fell behind makes fewer polls, each late by less than the ones it skipped.
            _verdict(row["late_p99_s"] < 1.0 and row["polls_made_pct"] >= 95),
        ]

    return [
        row(
            f"Triggerer: CPU of 1,000 deferred waits polling every {INTERVAL} s, in % of one core",
            "<= 5 %",
            cpu,
        ),
        row("Triggerer: resident memory per deferred wait, 1,000 waits", "<= 50 KiB", memory),
        row(
            f"Triggerer: poll lateness, 2,000 waits, {INTERVAL} s interval",
            "p99 < 1 s, >= 95 % of polls made",
            lateness,
        ),
    ]


def client_cpu_rows(stdout: str) -> list[list[str]]:
    def calls() -> list[str]:
        rows = next(t for t in markdown_tables(stdout) if t and "vs bare session" in t[0])
        per_variant: dict[str, list[str]] = {}
        for r in rows:
            if ratio(r["vs bare session"]) != 1.0 or r["variant"].startswith("ours"):
                per_variant.setdefault(r["variant"], []).append(f"{r['call']} {r['vs bare session']}")
        ours = [ratio(r["vs bare session"]) for r in rows if r["variant"].startswith("ours")]
        others = [
            f"{variant}: {', '.join(cells)}"
            for variant, cells in per_variant.items()
            if not variant.startswith("ours")
        ]
        return [
            "; ".join(
                ", ".join(cells) for variant, cells in per_variant.items() if variant.startswith("ours")
            ),
            "; ".join(others + ([] if any("HttpHook" in o for o in others) else ["HttpHook not installed"])),
            _verdict(max(ours) <= 1.1),
        ]

    return [row("Client CPU per call, over a bare `requests.Session` + `json.loads`", "<= 1.1x", calls)]


def models_rows(stdout: str) -> list[list[str]]:
    def templates() -> list[str]:
        rows = next(t for t in markdown_tables(stdout) if t and "ours / json" in t[0])
        row = next(r for r in rows if r["answer"].startswith("list_templates"))
        value = ratio(row["ours / json"])
        return [f"{value:.2f}x", f"`json.loads`: {row['json us']} us", _verdict(value <= 4.0)]

    return [row("Models: parsing full templates from bytes, over `json.loads`", "<= 4x", templates)]


def jtl_rows(results: Any) -> list[list[str]]:
    def of(variant: str) -> list[dict[str, Any]]:
        return sorted((r for r in results if r["variant"] == variant), key=lambda r: int(r["samples"]))

    def memory() -> list[str]:
        ours = of("ours (gate)") + of("ours (every figure)")
        peers = of("pandas (gate)")
        return [
            ", ".join(f"{r['rss_mib']:.0f} MiB ({r['variant'][6:-1]}, {r['samples']:,})" for r in ours),
            ", ".join(f"{r['rss_mib']:.0f} MiB at {r['samples']:,}" for r in peers) or "pandas not installed",
            _verdict(max(r["rss_mib"] for r in ours) <= 100),
        ]

    def speed() -> list[str]:
        ours = of("ours (gate)")
        largest = ours[-1]
        if "vs_pandas" not in largest:
            return [f"{largest['cpu_s']:.1f} s at {largest['samples']:,}", "pandas not installed", ""]
        return [
            f"{largest['vs_pandas']:.2f}x `read_csv(path)` ({largest['cpu_s']:.1f} s CPU at "
            f"{largest['samples']:,}); every figure {of('ours (every figure)')[-1]['vs_pandas']:.2f}x",
            f"`usecols`: ours {largest['vs_pandas_usecols']:.2f}x",
            _verdict(largest["vs_pandas"] <= 2.0),
        ]

    return [
        row("JTL reader: peak RSS, two sizes (interpreter included)", "<= 100 MiB", memory),
        row("JTL reader: CPU time over pandas `read_csv` + `groupby` quantiles", "<= 2x", speed),
    ]


def plugin_page_rows(result: Any) -> list[list[str]]:
    def page() -> list[str]:
        return [
            f"{result['task_ms']:.0f} ms of CPU ({result['task_wall_ms']:.0f} ms wall at load "
            f"{result['load_average']:.1f}) with {result['nights']} nights; the DAG's tab "
            f"{result['dag_tab_ms']:.0f} ms, JSON {result['json_ms']:.0f} ms",
            f"Airflow's `GET /api/v2/dags/~/dagRuns?limit=100`: {result['baseline_ms']:.0f} ms of CPU",
            _verdict(result["task_ms"] < result["budget_ms"]),
        ]

    return [row('The "Load tests" view: server time of a task\'s tab, 365 nights', "< 200 ms", page)]


def plugin_overview_rows(result: Any) -> list[list[str]]:
    def overview() -> list[str]:
        return [
            f"{result['cold_ms']:.0f} ms of CPU cold ({result['cold_wall_ms']:.0f} ms wall at load "
            f"{result['load_average']:.1f}), {result['warm_ms']:.0f} ms warm, the first view after a start "
            f"{result['first_ms']:.0f} ms; {result['gated']:,} gated tasks, {result['nights']} nights",
            f"Airflow's `GET /api/v2/dags?limit=100`: {result['baseline_ms']:.0f} ms of CPU",
            _verdict(result["cold_ms"] < result["budget_ms"]),
        ]

    return [
        row('The "Load tests" overview: server time, 500 gated tasks over a year, cold', "< 300 ms", overview)
    ]


def demo_rows(result: Any) -> list[list[str]]:
    def split() -> list[str]:
        total = result["steps"][-1]
        control = f"control (EmptyOperators): {total['control']['median']:.1f} s"
        if total["ours"] is None:
            return ["not measured (the smoke runs only the control)", control, ""]
        floor = (result["explained"] or {}).get("floor_s")
        return [
            f"{total['ours']['median']:.1f} s, of which the provider's share "
            f"{total['share']['median']:+.1f} s (floor: the simulated runs, {floor:.0f} s)",
            control,
            "",
        ]

    return [row("`make demo` wall time", "none: explained", split)]


def growth(results: Any) -> str:
    """How the triggerer's costs grow with the number of waits (our rows), with a linear fit of memory."""
    ours = sorted(
        (r for r in results or [] if str(r["variant"]).startswith("ours")), key=lambda r: r["waits"]
    )
    if not ours:
        return "Not measured in this run."
    rows = [
        [
            str(r["waits"]),
            f"{r['cpu_core_pct']:.1f} %",
            f"{r['rss_per_wait_kib']:.1f}",
            f"{r['rss_per_wait_kib'] * r['waits'] / 1024:.1f}",
            f"{r['sockets_per_wait']:.2f}",
            f"{r['cpu_per_poll_ms']:.3f}",
            f"{r['polls_made_pct']:.0f} %",
            f"{r['late_p50_s']:.3f}",
            f"{r['late_p99_s']:.3f}",
        ]
        for r in ours
    ]
    from benchmarks.common import table

    text = table(
        rows,
        [
            "waits",
            "CPU % of one core",
            "RSS KiB/wait",
            "RSS MiB in all",
            "sockets/wait",
            "CPU ms/poll",
            "polls made (of due)",
            "late p50 s",
            "late p99 s",
        ],
    )
    if len(ours) >= 2:
        xs = [float(r["waits"]) for r in ours]
        ys = [r["rss_per_wait_kib"] * r["waits"] for r in ours]
        mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mean_x) ** 2 for x in xs
        )
        text += (
            f"\n\nA least-squares line through the memory totals: {slope:.1f} KiB for each further wait, "
            f"{mean_y - slope * mean_x:+.0f} KiB fixed."
        )
    return text


def gate_quality_rows(result: Any) -> list[list[str]]:
    """The three targets of issue 18: the worst noise level (with its 95 % interval) and every noise
    level where the target is not met, beside the peers' worst."""
    goals = result["targets"]

    def where(figure: dict[str, Any]) -> str:
        return f"{figure['shape']} noise, CV {figure['cv'] * 100:.0f} %"

    def figure_text(figure: dict[str, Any], unit: str) -> str:
        digits = 2 if unit == "" else 1
        interval = f" ± {figure['ci95']:.{digits}f}" if figure.get("ci95") is not None else ""
        return f"{figure['value']:.{digits}f}{unit}{interval}"

    def peers(key: str, unit: str) -> str:
        found = []
        for rule, figures in goals["peers"].items():
            figure = figures.get(key) if figures else None
            if figure is not None and figure["value"] is not None:
                found.append(f"{rule}: {figure_text(figure, unit)} ({where(figure)})")
            elif rule == "otava":
                found.append("otava: not run (make otava-venv)")
        return "; ".join(found)

    def cells(key: str, unit: str) -> Callable[[], list[str]]:
        def read() -> list[str]:
            figure = goals[key]
            ours = f"{figure_text(figure, unit)} (worst: {where(figure)})"
            if figure.get("not_met_in"):
                ours += f"; not met in {', '.join(figure['not_met_in'])}"
            return [ours, peers(key, unit), _verdict(figure["met"])]

        return read

    return [
        row(
            "Gate: false alarms per 100 clean nights, every noise level",
            "<= 1",
            cells("false_alarms", ""),
        ),
        row(
            "Gate: a 4 sd step failed on its first night, every noise level",
            ">= 90 %",
            cells("first_night_4sd", " %"),
        ),
        row(
            "Gate: a 2.5 sd step failed within three nights, every noise level",
            ">= 90 %",
            cells("within3_2_5sd", " %"),
        ),
    ]


def gate_bound_rows(result: Any) -> list[list[str]]:
    """The floor of any one-night rule (benchmarks/gate_bound.py): where it stands above the first target
    of issue 18 (beyond its Monte Carlo interval), no rule meets the first two targets there."""

    def floors() -> list[str]:
        found = []
        for entry in result:
            for kind, what in (("shape_known", "shape known"), ("unknown", "shape not known")):
                point = entry.get(kind)
                if point is not None and point["lower"] - point["lower_ci"] > 1.0:
                    found.append(f"{entry['noise']} ({what}): {point['lower']:.2f} ± {point['lower_ci']:.2f}")
        gaussian = next(e for e in result if e["noise"] == "gaussian")["shape_known"]
        out_of_reach = "; ".join(found) or "none above 1"
        return [
            f"out of reach for any rule: {out_of_reach}",
            f"Gaussian noise: {gaussian['lower']:.2f} ± {gaussian['lower_ci']:.2f}",
            "above 1: out of reach" if found else "every floor <= 1",
        ]

    return [
        row(
            "Gate: the floor of any one-night rule (false alarms per 100 clean nights at 90 % of 4 sd "
            "steps caught)",
            "<= 1 (the first target)",
            floors,
        )
    ]


def gate_family_rows(result: Any) -> list[list[str]]:
    """Issue 27's targets for the gate as a whole (gate_quality.py's family section, from
    benchmarks/gate_family.py): the family gate's worst cell of each, beside today's per-series rule's."""
    goals = result["family"]["targets"] if result and result.get("family") else None

    def text(figure: dict[str, Any] | None) -> str:
        if figure is None:
            return "not measured"
        return f"{figure['value']:.1f} ± {figure['ci95']:.1f} (worst: {figure['where']})"

    def cells(labels: list[str]) -> Callable[[], list[str]]:
        def read() -> list[str]:
            if goals is None:
                raise KeyError("family")  # no family section in this run: the row says so
            family, per_series = goals.get("family"), goals["per-series"]
            ours = "; ".join(f"{label}: {text(family.get(label) if family else None)}" for label in labels)
            if family is None:
                ours = "the family gate is not there yet"
            peers = "per-series: " + "; ".join(f"{label}: {text(per_series.get(label))}" for label in labels)
            met = family is not None and all(family[label]["met"] for label in labels if label in family)
            return [ours, peers, _verdict(met)]

        return read

    return [
        row(
            "Gate family: red clean nights per 100, 41 and 201 series",
            "<= 1",
            cells(["red clean nights /100 (<= 1)"]),
        ),
        row(
            "Gate family: steps caught (one series +4 sd within 2 nights, +6 sd on the first; every series "
            "+2.5 sd)",
            ">= 90 %",
            cells(
                [
                    "one +4 sd: within 2 %",
                    "one +4 sd: 1st night %",
                    "one +6 sd: 1st night %",
                    "all +2.5 sd: 1st night %",
                    "all +2.5 sd: within 3 %",
                ]
            ),
        ),
    ]


#: Each benchmark's budget rows, read from its --json figures or else from its printed tables.
BUDGET_ROWS: list[tuple[str, Callable[[Any], list[list[str]]]]] = [
    ("dag_parse.py", dag_parse_rows),
    ("triggerer_scale.py", triggerer_rows),
    ("client_cpu.py", client_cpu_rows),
    ("models_parse.py", models_rows),
    ("jtl_read.py", jtl_rows),
    ("plugin_page.py", plugin_page_rows),
    ("plugin_overview.py", plugin_overview_rows),
    ("demo_split.py", demo_rows),
    ("gate_quality.py", gate_quality_rows),
    ("gate_quality.py", gate_family_rows),
    ("gate_bound.py", gate_bound_rows),
]


def budget_table(outcomes: dict[str, Outcome]) -> str:
    from benchmarks.common import table

    rows = []
    for script, rows_of in BUDGET_ROWS:
        outcome = outcomes.get(script)
        for cells in rows_of(None if outcome is None else outcome.figures or outcome.stdout):
            if outcome is None:
                cells[1:3], cells[4] = ["not run", ""], ""
            elif not outcome.ok:
                cells[1:3], cells[4] = ["**crashed**", ""], ""
            rows.append([*cells, f"`{outcome.command}`" if outcome else ""])
    return table(rows, ["figure", "ours", "baseline / peers", "budget", "met", "command"])


def generated(outcomes: dict[str, Outcome], smoke: bool) -> str:
    airflow = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; print(m.version('apache-airflow'))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        f"One `make bench` run{' (SMOKE sizes: the figures mean nothing)' if smoke else ''}, {when}: "
        f"{os.cpu_count()} CPU(s), Python {platform.python_version()}, Airflow {airflow}.",
        "",
        "### Budgets",
        "",
        budget_table(outcomes),
        "",
        "### How the triggerer's cost grows with the number of waits",
        "",
        growth(outcomes["triggerer_scale.py"].figures if "triggerer_scale.py" in outcomes else None),
    ]
    for outcome in outcomes.values():
        parts += ["", f"### `{outcome.command}`", ""]
        parts.append(outcome.stdout.strip() if outcome.ok else "**crashed** (see the run's output)")
    return "\n".join(parts)


def write_docs(path: Path, text: str) -> None:
    """Replace what lies between the markers of ``path`` (docs/performance.md) with ``text``."""
    doc = DOCS.read_text() if not path.exists() else path.read_text()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(doc):
        raise SystemExit(f"{path} has no {BEGIN} ... {END} markers")
    path.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", doc))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="each benchmark tiny: checks they still run")
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these benchmarks")
    parser.add_argument(
        "--before",
        type=Path,
        help="a checkout of an earlier commit: the triggerer's figures before and after, in one run",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        help="write the tables here (default: docs/performance.md "
        "after a full run of every benchmark; nowhere after a smoke or partial run)",
    )
    args = parser.parse_args()
    chosen = [b for b in BENCHMARKS if not args.only or b.script in args.only]
    outcomes: dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="loadtest-bench-") as scratch:
        for bench in chosen:
            bench_args = bench.smoke if args.smoke else bench.full
            if args.before and bench.script == "triggerer_scale.py":
                bench_args = [*bench_args, "--before", str(args.before)]
            outcomes[bench.script] = run(bench, bench_args, Path(scratch))
    failed = [script for script, outcome in outcomes.items() if not outcome.ok]
    docs = args.docs or (DOCS if not args.smoke and not args.only else None)
    if docs is not None:
        write_docs(docs, generated(outcomes, args.smoke))
        print(f"\nwrote the tables into {docs}")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    sys.exit(main())
