"""The gate's memory on the production rig (issue 33): PostgreSQL, Celery with two workers, two triggerers.

``check_gate_memory`` runs on the rig of the CI slice (``test_production_slice.py``) after its attacks, and
in ``make test-prod``.

Every DAG run here is triggered through the REST API with ``logical_date: null``, as ``airflow dags
trigger``, ``TriggerDagRunOperator`` and asset-scheduled runs make them. On PostgreSQL (NULLS FIRST in a
descending sort) the chain of histories this replaces froze on such a run: every later night read the
accepted run's history, ``history_n`` stayed 1 and the gate never left its warm-up. Here:

1. two nights one after another, then two at once (``max_active_runs=8``): every night is recorded once;
2. a person accepts a change (``{"loadtest_accept_change": true}``): the two nights after it judge
   against a history that restarts from it and grows (``history_n`` 1, then 2);
3. a mapped gate whose scenario list changes order judges each scenario against its own night.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DAG_ID, MAPPED = "rig_gate_memory", "rig_gate_memory_mapped"  # not prod_*: the rig waits for its own two
P95 = "RESPONSE_TIME_PERCENTILE_95"
ENDED = ("success", "failed")


def _wait(what: str, done: Callable[[], bool], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(2)
    raise AssertionError(f"timed out waiting for {what}")


def _nights(cluster: Any, dag_id: str, *runs: tuple[str, dict[str, Any]]) -> None:
    """Trigger ``runs`` at once and wait until every one has ended."""
    for run_id, conf in runs:
        cluster.trigger(dag_id, run_id, conf)
    for run_id, _conf in runs:
        _wait(f"{dag_id} {run_id}", lambda r=run_id: cluster.dag_run_state(dag_id, r) in ENDED)


def _xcoms(cluster: Any, dag_id: str, key: str) -> dict[tuple[str, int], Any]:
    rows = cluster.query(
        "select run_id, map_index, value from xcom where dag_id = %s and task_id = 'load_test' and key = %s",
        dag_id,
        key,
    )
    return {(run_id, index): value for run_id, index, value in rows}


def _p95(cluster: Any, dag_id: str, run_id: str, map_index: int = -1) -> dict[str, Any]:
    verdict = _xcoms(cluster, dag_id, "return_value")[(run_id, map_index)]
    return next(row for row in verdict["gate"] if row["metric"] == P95)


def check_gate_memory(cluster: Any) -> list[str]:
    """The gate's memory on a booted rig (nine DAG runs, about three minutes): what broke, if anything."""
    broken: list[str] = []
    demo = {"scenario": "demo-scenario"}
    _nights(cluster, DAG_ID, ("gm-1", demo))
    _nights(cluster, DAG_ID, ("gm-2", demo))
    _nights(cluster, DAG_ID, ("gm-3", demo), ("gm-4", demo))  # two at once
    _nights(cluster, DAG_ID, ("gm-accept", {**demo, "loadtest_accept_change": True}))
    if "accepted" not in (_p95(cluster, DAG_ID, "gm-accept")["note"] or ""):
        broken.append(f"the acceptance was not taken: {_p95(cluster, DAG_ID, 'gm-accept')}")
    _nights(cluster, DAG_ID, ("gm-6", demo))
    _nights(cluster, DAG_ID, ("gm-7", demo))
    grown = [_p95(cluster, DAG_ID, run)["history_n"] for run in ("gm-6", "gm-7")]
    if grown != [1, 2]:  # the chain of histories froze here: 1, 1
        broken.append(f"after the acceptance the history held {grown} nights, not [1, 2]")
    records = _xcoms(cluster, DAG_ID, "loadtest_gate_night")
    benches = [record["bench_result_id"] for record in records.values()]
    if not len(benches) == len(set(benches)) == 7:
        broken.append(f"7 nights ran, {len(benches)} records of {len(set(benches))} bench results")
    if any(record["logical_date"] is not None for record in records.values()):
        broken.append("a night recorded a logical date: the rig triggers without one")
    # A mapped gate whose list changes order: each scenario against its own night (the scenarios differ
    # by more than the bound: judged against the other's, one of them fails).
    pair = ["demo-scenario", "warning-scenario"]
    _nights(cluster, MAPPED, ("gm-mapped-1", {"scenarios": pair}))
    _nights(cluster, MAPPED, ("gm-mapped-2", {"scenarios": pair[::-1]}))
    for index in (0, 1):
        row = _p95(cluster, MAPPED, "gm-mapped-2", index)
        if not (row["passed"] and row["history_n"] == 1):
            broken.append(f"mapped gate reordered, map index {index}: {row}")
    return broken
