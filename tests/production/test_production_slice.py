"""CI's slice of the production-like rig (issue 17): a worker restart, a triggerer failover, a mark-failed,
then the gate's memory (issue 33, ``gate_memory.py``).

The two attacks every deployment meets (a ``systemctl restart`` of the workers at each deploy, a
triggerer lost) and the stop a person asks for (mark failed, sync and deferred), once each, on the
whole rig: PostgreSQL, Redis, Celery with two workers, two triggerers. Every attack, repeated:
``make test-prod``. The slice needs the rig's prerequisites, the
``prod`` dependency group and the Debian packages ``postgresql`` and ``redis-server``; where one is
missing (``make test`` alone syncs the environment without the group, ``LOADTEST_NO_SYSTEM_INSTALLS=1``
installs no package) it is skipped with the reason, a failure under ``CI=true``
(``tests.system_installs``); it never installs anything system-wide itself.
"""

from __future__ import annotations

import pytest

from tests.production.attacks import ATTACKS, CI_SLICE, format_table, summary_rows
from tests.production.gate_memory import check_gate_memory
from tests.production.rig import missing_prerequisites, production_rig, run_attacks
from tests.system_installs import skip_or_fail

pytestmark = [pytest.mark.integration, pytest.mark.production]


def test_infrastructure_never_stops_a_healthy_load_test_and_a_person_always_can() -> None:
    why = missing_prerequisites()
    if why:
        skip_or_fail(why)
    attacks = [ATTACKS[name] for name in CI_SLICE]
    lines: list[str] = []
    # On a loaded machine (issue 34): the cores busy beside the rig, and the triggerers' task-instance
    # state reads (what a trigger's on_kill asks) answered after 6-20 s, as a busy API server does.
    with production_rig(attacks, 1, lines.append, loaded=True) as cluster:
        results = run_attacks(cluster, attacks, 1, lines.append)
        # The gate's memory on PostgreSQL (issue 33), on the same rig: runs without a logical date.
        memory_broken = check_gate_memory(cluster)
        cluster.keep_home = any(r.broken for r in results) or bool(memory_broken)
    print("\n".join(lines))
    print(format_table(summary_rows(results)))
    for r in results:
        if r.attack == "mark-failed":
            print(f"mark-failed {r.mode}: stopped {r.stopped}, +{r.stopped_s or 0:.1f} s after the mark")
    broken = [
        f"{r.attack} {r.run_id}: {line} ({r.cause}: {r.message[:300]})" for r in results for line in r.broken
    ]
    assert not broken + memory_broken, "\n".join(broken + memory_broken + lines[-10:])
