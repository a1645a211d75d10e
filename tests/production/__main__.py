"""``python -m tests.production`` (``make test-prod``): every attack of issue 17, repeated, then the table.

Exits 1 when a task instance broke a rule (each is listed with its cause and the Airflow home that holds
its logs is kept).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tests.production import services
from tests.production.attacks import ATTACKS, format_table, summary_rows
from tests.production.gate_memory import check_gate_memory
from tests.production.rig import missing_prerequisites, production_rig, run_attacks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="rounds per attack (default 2)")
    parser.add_argument(
        "--attacks", default="all", help=f"comma-separated, of: {', '.join(ATTACKS)} (default all)"
    )
    parser.add_argument("--json", type=Path, help="write every task instance's result here")
    parser.add_argument("--keep", action="store_true", help="keep the Airflow home and its logs")
    parser.add_argument(
        "--loaded",
        action="store_true",
        help="busy cores beside the rig, and the triggerers' state reads held 6-20 s (issue 34)",
    )
    args = parser.parse_args(argv)
    names = list(ATTACKS) if args.attacks == "all" else [n.strip() for n in args.attacks.split(",")]
    unknown = [n for n in names if n not in ATTACKS]
    if unknown:
        parser.error(f"unknown attacks {unknown}; known: {', '.join(ATTACKS)}")
    attacks = [ATTACKS[n] for n in names]

    def log(line: str) -> None:
        print(line, flush=True)

    services.ensure_packages(log)
    why = missing_prerequisites()
    if why:
        log(f"Cannot run the rig: {why}")
        return 2
    began = time.monotonic()
    broken = False
    with production_rig(attacks, args.repeat, log, keep=args.keep, loaded=args.loaded) as cluster:
        results = run_attacks(cluster, attacks, args.repeat, log)
        memory_broken = check_gate_memory(cluster)  # the gate's memory on PostgreSQL (issue 33)
        for line in memory_broken:
            log(f"BROKEN gate memory: {line}")
        broken = any(r.broken for r in results) or bool(memory_broken)
        cluster.keep_home = broken  # the logs that show what broke
    log("")
    log(format_table(summary_rows(results)))
    for r in results:
        if r.broken:
            log(f"BROKEN {r.attack} #{r.round} {r.run_id}: " + "; ".join(r.broken))
            log(f"    cause: {r.cause}: {r.message[:300]}")
            for line in r.stop_lines:
                log(f"    {line}")
            log(f"    logs: {r.logs}")
    log(f"wall time {time.monotonic() - began:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in results], indent=1, default=str))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
