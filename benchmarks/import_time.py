"""What a DAG parse pays for this provider: import time of our modules over Airflow's own.

Each measurement is a fresh interpreter that first imports the baseline (``import airflow.sdk``, timed
on its own) and then times the one import statement of its kind (interpreter start-up excluded), the
kinds interleaved so drift hits all of them alike. The overhead is timed inside the same interpreter,
after the baseline: subtracting medians of separate ~1 s interpreters would drown a few milliseconds in
noise. Bytecode is cached first (this machine sets PYTHONDONTWRITEBYTECODE, and the package is
installed editable), so nothing is compiled from source while timed, as in a deployment.

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
    "airflow.sdk base classes (any operator pays these)": (
        "from airflow.sdk import BaseOperator, BaseSensorOperator, BaseOperatorLink"
    ),
    "operators.run_scenario": "import airflow_provider_loadtest.operators.run_scenario",
    "sensors.template": "import airflow_provider_loadtest.sensors.template",
    "operators.report": "import airflow_provider_loadtest.operators.report",
    "example DAG's imports (operator + sensor)": (
        "import airflow_provider_loadtest.operators.run_scenario, airflow_provider_loadtest.sensors.template"
    ),
    "for scale: base classes + requests": (
        "from airflow.sdk import BaseOperator, BaseSensorOperator; import requests"
    ),
}
PROBE = (
    "import time\nt = time.perf_counter()\n{baseline}\nu = time.perf_counter()\n{stmt}\n"
    "print(u - t, time.perf_counter() - u)\n"
)


def measure(statement: str, env: dict[str, str]) -> tuple[float, float]:
    """Milliseconds for the baseline, then for ``statement`` on top of it, in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(baseline=BASELINE, stmt=statement)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    base, extra = out.strip().splitlines()[-1].split()
    return float(base) * 1000.0, float(extra) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loadtest-bench-") as home:
        env = dict(os.environ, AIRFLOW_HOME=home)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
        for statement in KINDS.values():  # writes airflow.cfg and the .pyc files: not timed
            measure(statement, env)
        baseline: list[float] = []
        samples: dict[str, list[float]] = {name: [] for name in KINDS}
        for _ in range(args.runs):
            for name, statement in KINDS.items():
                base, extra = measure(statement, env)
                baseline.append(base)
                samples[name].append(extra)
    base_median = statistics.median(baseline)
    print(f"{args.runs} fresh interpreters per kind; each times `{BASELINE}`, then the kind's import on top")
    print(f"  {'baseline: ' + BASELINE:55s} {base_median:8.1f} ms  (median of {len(baseline)})")
    print(f"  {'overhead over the baseline, median [min-max]':55s}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(
            f"  {name:55s} {median:+8.1f} ms  [{min(values):.1f}-{max(values):.1f}]"
            f"  ({median / base_median:6.1%} of baseline)"
        )


if __name__ == "__main__":
    main()
