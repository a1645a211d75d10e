"""What the ``pytest11`` plugin costs a user's ``pytest --co`` in a project that never uses its fixtures.

Each sample is a fresh ``python -m pytest --co -q -p no:cacheprovider`` in an empty folder, once as installed
and once with the plugin disabled (``-p no:loadtest_simulator``), interleaved so drift hits both alike; the
cost is the difference of the medians. Also prints the plugin module's own import time on top of pytest.

    .venv/bin/python benchmarks/pytest_plugin_cost.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

PYTEST = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
WITHOUT = ["-p", "no:loadtest_simulator"]


def wall_ms(args: list[str], cwd: str, env: dict[str, str]) -> float:
    """Milliseconds for one fresh pytest process (exit code 5, "no tests collected", is expected)."""
    start = time.perf_counter()
    subprocess.run(args, cwd=cwd, env=env, capture_output=True, check=False)
    return (time.perf_counter() - start) * 1000.0


def plugin_import_ms(cwd: str, env: dict[str, str]) -> float:
    """Milliseconds to import the plugin module in a fresh interpreter that already imported pytest."""
    code = (
        "import time, pytest\nt = time.perf_counter()\n"
        "import airflow_provider_loadtest.simulator.pytest_plugin\nprint(time.perf_counter() - t)"
    )
    args = [sys.executable, "-c", code]
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1]) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="loadtest-plugin-bench-") as empty:
        wall_ms(PYTEST, empty, env)  # .pyc files written, not timed
        with_plugin: list[float] = []
        without: list[float] = []
        for _ in range(args.runs):
            with_plugin.append(wall_ms(PYTEST, empty, env))
            without.append(wall_ms(PYTEST + WITHOUT, empty, env))
        imports = statistics.median(plugin_import_ms(empty, env) for _ in range(5))
    a, b = statistics.median(with_plugin), statistics.median(without)
    print(f"pytest --co in an empty folder, {args.runs} runs each, interleaved (median)")
    print(f"  with the plugin     {a:7.1f} ms")
    print(f"  plugin disabled     {b:7.1f} ms")
    print(f"  difference          {a - b:+7.1f} ms")
    print(f"  plugin module import after pytest (median of 5): {imports:.1f} ms")


if __name__ == "__main__":
    main()
