"""The benchmarks still run (tiny sizes): a benchmark nobody can run is a figure nobody can check.

No figure is asserted here: performance lives in the benchmarks' own ratios, never in timed tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_every_benchmark_runs_in_its_smoke_size(tmp_path: Path) -> None:
    env = dict(os.environ, AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for heading in ("import_time.py", "client_cpu.py", "models_parse.py", "triggerer_scale.py"):
        assert f"## {heading}" in done.stdout
    assert done.stdout.count("| ours") >= 2  # the tables came out
