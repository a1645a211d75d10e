"""The gate's memory on the production rig (issue 33): PostgreSQL, Celery with two workers, two triggerers.

Every DAG run here is triggered through the REST API with ``logical_date: null``, as ``airflow dags
trigger``, ``TriggerDagRunOperator`` and asset-scheduled runs make them. On PostgreSQL (NULLS FIRST in a
descending sort) the chain of histories this replaces froze on such a run: every later night read the
accepted run's history, ``history_n`` stayed 1 and the gate never left its warm-up. Here:

1. four nights one after another, then two at once (``max_active_runs=8``): every night is recorded
   once, and the night after them judges against all six;
2. a person accepts a change (``{"loadtest_accept_change": true}``): the two nights after it judge
   against a history that restarts from it and grows (``history_n`` 1, then 2);
3. a mapped gate whose scenario list changes order judges each scenario against its own nights.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.production.rig import missing_prerequisites, production_rig
from tests.system_installs import skip_or_fail

pytestmark = [pytest.mark.integration, pytest.mark.production]

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


def test_every_night_counts_once_in_order_and_an_acceptance_holds_on_postgresql() -> None:
    why = missing_prerequisites()
    if why:
        skip_or_fail(why)
    lines: list[str] = []
    with production_rig([], 1, lines.append) as cluster:
        demo = {"scenario": "demo-scenario"}
        for night in range(1, 5):
            _nights(cluster, DAG_ID, (f"gm-{night}", demo))
        _nights(cluster, DAG_ID, ("gm-5", demo), ("gm-6", demo))  # two at once
        _nights(cluster, DAG_ID, ("gm-7", demo))
        records = _xcoms(cluster, DAG_ID, "loadtest_gate_night")
        benches = [record["bench_result_id"] for record in records.values()]
        assert len(benches) == len(set(benches)) == 7, records
        assert all(record["logical_date"] is None for record in records.values())
        seventh = _p95(cluster, DAG_ID, "gm-7")
        assert seventh["passed"], seventh
        # Six nights before it: the warm-up's four, then the nights wait for the ones after them.
        assert seventh["history_n"] >= 4, seventh

        _nights(cluster, DAG_ID, ("gm-accept", {**demo, "loadtest_accept_change": True}))
        assert "accepted" in (_p95(cluster, DAG_ID, "gm-accept")["note"] or "")
        _nights(cluster, DAG_ID, ("gm-9", demo))
        _nights(cluster, DAG_ID, ("gm-10", demo))
        grown = [_p95(cluster, DAG_ID, run)["history_n"] for run in ("gm-9", "gm-10")]
        assert grown == [1, 2], grown  # the chain froze here: 1, 1

        both = ["demo-scenario", "warning-scenario"]  # steady figures (light-scenario changes its load)
        for night, order in enumerate([both, both, both, both, both[::-1]], start=1):
            _nights(cluster, MAPPED, (f"gm-mapped-{night}", {"scenarios": order}))
        for index in (0, 1):
            row = _p95(cluster, MAPPED, "gm-mapped-5", index)
            assert row["passed"] and row["history_n"] == 4, row
    print("\n".join(lines))
