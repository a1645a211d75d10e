"""What a DAG parse pays for this provider: our modules and example DAG files, beside peers and a control.

Two figures, each against a baseline measured in the same fresh interpreter, kinds interleaved round by
round so drift (other processes, CPU frequency) hits all of them alike:

1. Import time of each of our operator/sensor modules over ``import airflow.sdk`` (timed first, in the
   same interpreter), beside Airflow's dbt Cloud and HTTP operator modules when their providers are
   installed (``make bench`` installs them: the ``bench`` dependency group; the package does not
   depend on them).
2. An example DAG file loaded as the DAG processor does: ``DagBag(dag_folder=file)`` (execute the file,
   validate and bag its DAGs), then ``DagSerialization.to_dict`` of each DAG (what the processor sends
   to the database), beside a control: the same file with an ``EmptyOperator`` for each of our tasks
   (same task ids, BaseOperator arguments and edges; checked). The difference is the provider's share;
   the control is what Airflow itself costs for that DAG (DAG object, cron timetable, validation).
   DagBag's own first-use cost is paid before the clock starts, on an empty file.

Bytecode is cached first (this machine sets PYTHONDONTWRITEBYTECODE, and the package is installed
editable), so nothing is compiled from source while timed, as in a deployment.

    .venv/bin/python benchmarks/dag_parse.py [--runs 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import airflow_env, check_same_shape, table, write_control_dags

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "import airflow.sdk"
#: The budget of the issue: each module, and the provider's share of an example DAG, under this.
BUDGET_MS = 15.0


@dataclass(frozen=True)
class Module:
    label: str
    statement: str
    ours: bool
    distribution: str | None = None  # the peer's PyPI distribution (None: always installed)


MODULES = [
    Module("ours: operators.run_scenario", "import airflow_provider_loadtest.operators.run_scenario", True),
    Module("ours: sensors.template", "import airflow_provider_loadtest.sensors.template", True),
    Module("ours: sensors.run", "import airflow_provider_loadtest.sensors.run", True),
    Module("ours: operators.report", "import airflow_provider_loadtest.operators.report", True),
    Module(
        "Airflow's base classes (any operator pays these)",
        "from airflow.sdk import BaseOperator, BaseSensorOperator, BaseOperatorLink",
        False,
    ),
    Module(
        "peer: dbt Cloud operators",
        "import airflow.providers.dbt.cloud.operators.dbt",
        False,
        "apache-airflow-providers-dbt-cloud",
    ),
    Module(
        "peer: HTTP operators",
        "import airflow.providers.http.operators.http",
        False,
        "apache-airflow-providers-http",
    ),
]
DAG_FILES = ["loadtest_nightly.py", "loadtest_release_gate.py"]

# One sample: the baseline, then (module kinds) one import, or (DAG kinds) DagBag's warm-up on an empty
# file, untimed, then the DAG file's parse and its serialization. Prints the milliseconds as JSON.
MODULE_PROBE = """
import json, time
t = time.perf_counter()
import airflow.sdk
u = time.perf_counter()
{statement}
v = time.perf_counter()
print(json.dumps([1000 * (u - t), 1000 * (v - u)]))
"""
DAG_PROBE = """
import json, time
t = time.perf_counter()
import airflow.sdk
u = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization
DagBag(dag_folder={empty!r})
v = time.perf_counter()
bag = DagBag(dag_folder={path!r})
w = time.perf_counter()
for dag in bag.dags.values():
    DagSerialization.to_dict(dag)
x = time.perf_counter()
assert bag.dags and not bag.import_errors, bag.import_errors
print(json.dumps([1000 * (u - t), 1000 * (w - v), 1000 * (x - w)]))
"""
EMPTY_DAG_FILE = "# An airflow DAG file without any DAG: warms DagBag up before the clock starts.\n"


def sample(code: str, env: dict[str, str]) -> list[float]:
    """Run one probe in a fresh interpreter; its figures (milliseconds)."""
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    ).stdout
    figures: list[float] = json.loads(out.strip().splitlines()[-1])
    return figures


def installed(module: Module) -> bool:
    if module.distribution is None:
        return True
    try:
        importlib.metadata.distribution(module.distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def paired(ours: list[float], control: list[float]) -> list[float]:
    """Round-by-round differences (the two were measured next to each other)."""
    return [a - b for a, b in zip(ours, control, strict=True)]


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(runs: int, folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """Every kind ``runs`` times, interleaved round by round; medians and spreads per kind."""
    modules = [m for m in MODULES if installed(m)]
    missing = [m for m in MODULES if not installed(m)]
    (folder / "ours").mkdir()
    ours = []
    for name in DAG_FILES:  # each file as a user copies it into their DAGs folder
        target = folder / "ours" / name
        target.write_text((ROOT / "example_dags" / name).read_text())
        ours.append(target)
    controls = write_control_dags(ours, folder / "control")
    empty = folder / "empty_dag_file.py"
    empty.write_text(EMPTY_DAG_FILE)
    # Untimed: checks the controls, writes airflow.cfg and every .pyc (our DAG files import our modules).
    check_same_shape(ours, controls, env)
    sample(MODULE_PROBE.format(statement="; ".join(m.statement for m in modules)), env)
    probes: dict[str, str] = {m.label: MODULE_PROBE.format(statement=m.statement) for m in modules}
    for name, mine, control in zip(DAG_FILES, ours, controls, strict=True):
        probes[f"{name}: ours"] = DAG_PROBE.format(empty=str(empty), path=str(mine))
        probes[f"{name}: control"] = DAG_PROBE.format(empty=str(empty), path=str(control))
    samples: dict[str, list[list[float]]] = {label: [] for label in probes}
    for _ in range(runs):
        for label, code in probes.items():
            samples[label].append(sample(code, env))
    baseline = [s[0] for values in samples.values() for s in values]
    result: dict[str, Any] = {
        "runs": runs,
        "baseline_ms": summary(baseline),
        "not_installed": [str(m.distribution) for m in missing],
        "modules": [
            {
                "label": m.label,
                "statement": m.statement,
                "ours": m.ours,
                **summary([s[1] for s in samples[m.label]]),
            }
            for m in modules
        ],
        "dags": [],
    }
    for name in DAG_FILES:
        with_ours, with_empty = samples[f"{name}: ours"], samples[f"{name}: control"]
        figures: dict[str, Any] = {"file": name}
        for index, part in ((1, "parse"), (2, "serialize")):
            ours_ms, control_ms = [s[index] for s in with_ours], [s[index] for s in with_empty]
            figures[part] = {
                "ours": summary(ours_ms),
                "control": summary(control_ms),
                "share": summary(paired(ours_ms, control_ms)),
            }
        result["dags"].append(figures)
    return result


def _fmt(figure: dict[str, float], sign: str = "") -> str:
    return f"{figure['median']:{sign}.1f} [{figure['min']:.1f} to {figure['max']:.1f}]"


def report(result: dict[str, Any]) -> str:
    """The two Markdown tables (and what was not measured)."""
    base = result["baseline_ms"]
    lines = [
        f"Import time over `{BASELINE}` ({_fmt(base)} ms in the same interpreters), ms, "
        f"median [min to max] of {result['runs']} fresh interpreters per kind, interleaved; "
        f"budget for ours: +{BUDGET_MS:g} ms:",
        table(
            [
                [
                    m["label"],
                    f"`{m['statement']}`",
                    _fmt(m, "+"),
                    ("yes" if m["median"] < BUDGET_MS else "NO") if m["ours"] else "",
                ]
                for m in result["modules"]
            ],
            ["module", "statement", "ms over airflow.sdk", "within budget"],
        ),
    ]
    if result["not_installed"]:
        lines.append(
            "not installed, so not measured (`make bench` installs them): "
            + ", ".join(result["not_installed"])
        )
    rows = []
    for dag in result["dags"]:
        for part, what in (
            ("parse", "DagBag (execute, validate)"),
            ("serialize", "DagSerialization.to_dict"),
        ):
            fig = dag[part]
            rows.append(
                [
                    dag["file"],
                    what,
                    _fmt(fig["ours"]),
                    _fmt(fig["control"]),
                    _fmt(fig["share"], "+"),
                    ("yes" if fig["share"]["median"] < BUDGET_MS else "NO") if part == "parse" else "",
                ]
            )
    lines += [
        "",
        "An example DAG file as the DAG processor loads it, ms, median [min to max]; control: the same "
        "file with EmptyOperators (Airflow's own cost); share: ours minus control, round by round:",
        table(rows, ["DAG file", "step", "ours", "control", "provider's share", "within budget"]),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters per kind")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loadtest-bench-") as home:
        result = measure(args.runs, Path(home), airflow_env(Path(home)))
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
