"""What a DAG parse pays for this provider: import time of our modules over Airflow's own.

Each measurement is a fresh interpreter timing one import statement (interpreter start-up excluded),
the kinds interleaved so drift hits all of them alike. Reported: median per kind, and each kind's
overhead over the baseline measured in the same run.

    .venv/bin/python benchmarks/import_time.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

BASELINE = "import airflow.sdk"
KINDS = {
    "baseline: import airflow.sdk": BASELINE,
    "airflow.sdk base classes (any operator pays these)": (
        "import airflow.sdk; from airflow.sdk import BaseOperator, BaseSensorOperator, BaseOperatorLink"
    ),
    "operators.run_scenario": "import airflow.sdk; import airflow_provider_loadtest.operators.run_scenario",
    "sensors.template": "import airflow.sdk; import airflow_provider_loadtest.sensors.template",
    "operators.report": "import airflow.sdk; import airflow_provider_loadtest.operators.report",
    "example DAG's imports (operator + sensor)": (
        "import airflow.sdk; import airflow_provider_loadtest.operators.run_scenario, "
        "airflow_provider_loadtest.sensors.template"
    ),
    "for scale: base classes + requests": (
        "import airflow.sdk; from airflow.sdk import BaseOperator, BaseSensorOperator; import requests"
    ),
}
PROBE = "import time\nt = time.perf_counter()\n{stmt}\nprint(time.perf_counter() - t)\n"


def measure(statement: str, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(stmt=statement)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out.strip().splitlines()[-1]) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = dict(os.environ, AIRFLOW_HOME=tempfile.mkdtemp(prefix="loadtest-bench-"))
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    measure(BASELINE, env)  # first run writes airflow.cfg: not timed
    samples: dict[str, list[float]] = {name: [] for name in KINDS}
    for _ in range(args.runs):
        for name, statement in KINDS.items():
            samples[name].append(measure(statement, env))
    base = statistics.median(samples["baseline: import airflow.sdk"])
    print(f"{args.runs} fresh interpreters per kind, median ms (ratio to baseline, overhead over baseline)")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"  {name:55s} {median:8.1f} ms  x{median / base:5.3f}  {median - base:+7.1f} ms")


if __name__ == "__main__":
    main()
