"""``make bench``: every benchmark, one after the other, full size (or ``--smoke``: tiny, for CI).

.venv/bin/python benchmarks/run_all.py [--smoke]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (script, full-size arguments, smoke arguments)
BENCHMARKS: list[tuple[str, list[str], list[str]]] = [
    ("import_time.py", [], ["--runs", "1"]),
    ("pytest_plugin_cost.py", [], ["--runs", "1"]),
    ("client_cpu.py", [], ["--rounds", "2", "--calls", "5"]),
    ("models_parse.py", [], ["--rounds", "1", "--templates", "20"]),
    (
        "triggerer_scale.py",
        ["--waits", "100", "1000", "2000", "--interval", "10"],
        ["--waits", "10", "--interval", "0.5", "--simulators", "1"],
    ),
]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="each benchmark tiny: checks they still run")
    args = parser.parse_args()
    failed = []
    for script, full, smoke in BENCHMARKS:
        command = [sys.executable, str(HERE / script), *(smoke if args.smoke else full)]
        print(f"\n## {script} {' '.join(command[2:])}", flush=True)
        if subprocess.run(command, check=False).returncode != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
