"""The benchmarks still run (tiny sizes), and their figures still reach docs/performance.md: a benchmark
nobody can run is a figure nobody can check.

No figure is asserted here: performance lives in the benchmarks' own ratios, never in timed tests. This
runs without the ``bench`` dependency group (CI installs only the dev group): the peers are reported as
not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = (
    "dag_parse.py",
    "pytest_plugin_cost.py",
    "client_cpu.py",
    "models_parse.py",
    "triggerer_scale.py",
    "plugin_page.py",
    "plugin_overview.py",
    "demo_split.py",
    "gate_quality.py",
    "gate_bound.py",
    "jtl_read.py",
    "gate_memory.py",
)
BUDGET_ROWS = (
    "DAG parse: import of each operator/sensor module",
    "DAG parse: the provider's share of an example DAG file",
    "Triggerer: CPU of 1,000 deferred waits",
    "Triggerer: resident memory per deferred wait",
    "Triggerer: poll lateness",
    "Client CPU per call",
    "Models: parsing full templates",
    'The "Load tests" view: server time',
    'The "Load tests" overview: server time',
    "`make demo` wall time",
    "Gate: false alarms per 100 clean nights",
    "Gate: a 4 sd step failed on its first night",
    "Gate: a 2.5 sd step failed within three nights",
    "Gate: the floor of any one-night rule",
    "Gate family: red clean nights per 100",
    "Gate family: steps caught",
    "JTL reader: peak RSS",
    "JTL reader: CPU time over pandas",
)


def test_every_benchmark_runs_in_its_smoke_size_and_fills_the_performance_doc(tmp_path: Path) -> None:
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    doc = tmp_path / "performance.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--smoke", "--docs", str(doc)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for script in SCRIPTS:
        assert f"## {script}" in done.stdout
    assert "provider's share" in done.stdout  # dag_parse's and demo_split's tables came out
    written = doc.read_text()
    assert "Not measured yet" not in written
    for script in SCRIPTS:
        assert f"python benchmarks/{script}" in written, script
    budgets = written.split("### Budgets", 1)[1].split("###", 1)[0]
    for figure in BUDGET_ROWS:
        assert figure in budgets, figure
    assert "not found in this run's output" not in budgets  # every figure was read back
