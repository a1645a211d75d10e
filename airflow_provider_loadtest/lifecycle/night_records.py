"""Reading and writing the gate's night records (``decisions.gate.nights``) through Airflow's XCom.

Where the records live, and why: each judged night's record is an XCom of the task instance that judged
it (``loadtest_gate_night``), beside the history it ended with (``loadtest_gate_history``, its
checkpoint). Nothing to set up (no Variable, asset or table of ours), removed with the DAG run by
``airflow db clean``, written once by the task that judged the night, so two nights in flight never
overwrite one another, and read by the "Load tests" view from the same table.

Reading costs one request in the usual case: every record of the task, all map indexes, of every DAG
run whose date is not after tonight's (``xcom_pull(include_prior_dates=True)`` without a map index:
the Task SDK's sequence slice). DAG runs dated after tonight's (a run without a logical date is dated
by when it was triggered, which can lie after the next scheduled run's logical date) are found through
the task's states and read one request each; a task instance of another DAG run still running is
named in the log: its night is not in tonight's history yet.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.history import GateHistory, HistorySettings
    from airflow_provider_loadtest.decisions.gate.nights import Memory, NightRecord
    from airflow_provider_loadtest.decisions.gate.verdict import Verdict
    from airflow_provider_loadtest.decisions.runs import StartedRun

#: Task instance states whose night may still come: not in tonight's history yet.
IN_FLIGHT = frozenset(
    {"running", "deferred", "queued", "scheduled", "up_for_retry", "up_for_reschedule", "restarting"}
)
#: States of a task instance that may have recorded a night.
ENDED = frozenset({"success", "failed"})
#: DAG runs read one by one at most (those dated after tonight's, with no record found yet).
MAX_SINGLE_READS = 500


@dataclass(frozen=True)
class Recalled:
    """Tonight's history, what it was made of, and what the log says of it."""

    history: GateHistory
    memory: Memory
    notes: tuple[str, ...]


def _as_list(value: object) -> list[object]:
    """``xcom_pull`` without a map index answers a single value when only one matched."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


def stored_records(ti: Any, task_id: str) -> tuple[list[object], list[str]]:
    """Every record of ``task_id`` this task instance can read, and the DAG runs whose task instance
    is still in flight with no record yet."""
    from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY

    found = _as_list(ti.xcom_pull(task_ids=task_id, key=NIGHT_XCOM_KEY, include_prior_dates=True))
    covered = {r.get("dag_run_id") for r in found if isinstance(r, Mapping)}
    covered.add(getattr(ti, "run_id", None))
    in_flight: list[str] = []
    try:
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[task_id])
    except Exception:  # an Airflow without it, or an API server that did not answer: the slice stands
        states = None
    if not isinstance(states, Mapping):
        return found, in_flight
    reads = 0
    for run_id, tasks in sorted(states.items()):
        if run_id in covered or not isinstance(tasks, Mapping):
            continue
        seen = {str(state) for state in tasks.values()}
        if seen & ENDED and reads < MAX_SINGLE_READS:
            reads += 1
            found.extend(_as_list(ti.xcom_pull(task_ids=task_id, key=NIGHT_XCOM_KEY, run_id=run_id)))
        elif seen & IN_FLIGHT:
            in_flight.append(run_id)
    return found, in_flight


def _checkpoint(ti: Any, task_id: str, night: NightRecord) -> GateHistory | None:
    """The history ``night`` ended with, as its task instance saved it (None: not readable)."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY, GateHistory

    if night.dag_run_id is None:
        return None
    saved = GateHistory.from_xcom(
        ti.xcom_pull(
            task_ids=task_id, key=HISTORY_XCOM_KEY, run_id=night.dag_run_id, map_indexes=night.map_index
        )
    )
    if saved.error is not None or not (saved.series or saved.night):
        return None
    return saved


def _legacy(ti: Any, task_id: str) -> GateHistory | None:
    """The history an earlier release left (a chain of whole histories, read by logical date): where no
    night was recorded yet, the gate goes on from it rather than start again."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY, GateHistory

    saved = GateHistory.from_xcom(
        ti.xcom_pull(
            task_ids=task_id,
            key=HISTORY_XCOM_KEY,
            include_prior_dates=True,
            map_indexes=getattr(ti, "map_index", -1),
        )
    )
    return saved if saved.series or saved.error else None


def recall_history(
    ti: Any,
    task_id: str,
    settings: HistorySettings,
    *,
    scenario_id: str | None,
    bench_result_id: str | None,
    ran_at: float | None,
) -> Recalled:
    """Tonight's history, derived from the records (``nights.recall`` then ``nights.fold``)."""
    from airflow_provider_loadtest.decisions.gate.history import GateHistory
    from airflow_provider_loadtest.decisions.gate.nights import MAX_REPLAY, fold, recall

    stored, in_flight = stored_records(ti, task_id)
    memory = recall(stored, scenario_id=scenario_id, bench_result_id=bench_result_id, ran_at=ran_at)
    notes = list(memory.notes)
    if in_flight:
        notes.append(
            f"Tonight's history lacks the night(s) of DAG run(s) {', '.join(in_flight[:5])}"
            f"{' and more' if len(in_flight) > 5 else ''}, still running: the nights after them take them in"
        )
    start: GateHistory | None = None
    replay = memory.replay
    if memory.checkpoint is not None:
        start = _checkpoint(ti, task_id, memory.checkpoint)
        if start is None:
            replay = memory.before[-MAX_REPLAY:]
            notes.append(
                f"The history saved by run {memory.checkpoint.bench_result_id}'s night does not read: "
                f"{len(replay)} night(s) judged again from their records"
            )
    elif not (memory.before or memory.later or memory.again):  # no night of this scenario recorded yet
        start = _legacy(ti, task_id)
        if start is not None:
            notes.append(
                "No night of this scenario was recorded yet: going on from the history an earlier release "
                "left"
            )
    if replay and memory.checkpoint is not None and start is not None:
        notes.append(
            f"{len(replay)} night(s) recorded out of the order they ran in (or judged at once) are judged "
            f"again onto the history of run {memory.checkpoint.bench_result_id}"
        )
    history = fold(start or GateHistory(), replay, settings)
    return Recalled(_forget_gone(history, memory, settings), memory, tuple(notes))


def _forget_gone(history: GateHistory, memory: Memory, settings: HistorySettings) -> GateHistory:
    """A series that none of the last ``window`` nights judged (renamed or removed) leaves the history,
    rather than be kept forever."""
    from dataclasses import replace

    recent = memory.before[-settings.window :]
    if len(recent) < settings.window:
        return history
    keys = {(s.transaction, s.metric) for night in recent for s in night.series}
    keys |= {(None, metric) for night in recent for metric, _v, _m in night.loads}
    kept = {key: value for key, value in history.series.items() if key in keys}
    return history if len(kept) == len(history.series) else replace(history, series=kept)


def night_record(
    run: StartedRun,
    verdict: Verdict,
    *,
    accepted: Iterable[str],
    memory: Memory | None,
    context_ids: tuple[str | None, int, str | None],
) -> NightRecord:
    """Tonight's record, from what ``evaluate`` judged. ``context_ids``: the DAG run id, the map index
    and the logical date (ISO, None for a run without one)."""
    from airflow_provider_loadtest.decisions.gate.judging import _usable
    from airflow_provider_loadtest.decisions.gate.nights import NightRecord, RecordedSeries

    run_id, map_index, logical = context_ids
    series = tuple(
        RecordedSeries(one.key[0], one.key[1], _usable(one.value), one.bound, one.samples)
        for one in verdict.judged
    )
    loads = tuple((one.metric, _usable(one.value), one.minimum) for one in verdict.judged_loads)
    gated = {s.metric for s in series} | {metric for metric, _v, _m in loads}
    return NightRecord(
        bench_result_id=run.bench_result_id,
        scenario_id=run.scenario_id,
        ran_at=ran_at_of(run),
        series=series,
        loads=loads,
        accepted=frozenset(accepted) & gated,
        passed=verdict.passed,
        previous=memory.previous if memory is not None else None,
        dag_run_id=run_id,
        map_index=map_index,
        logical_date=logical,
        recorded_at=time.time(),
    )


def ran_at_of(run: StartedRun) -> float:
    """When the run happened: the service's own time where its answer gave one."""
    created = getattr(run, "created_at", None)
    return float(created) if isinstance(created, int | float) and created > 0 else float(run.started_at)


def context_ids(context: Any, ti: Any) -> tuple[str | None, int, str | None]:
    """The DAG run id, the map index and the logical date (ISO; None for a run without one)."""
    dag_run = context.get("dag_run") if hasattr(context, "get") else None
    run_id = getattr(ti, "run_id", None) or getattr(dag_run, "run_id", None)
    logical = getattr(dag_run, "logical_date", None)
    map_index = getattr(ti, "map_index", -1)
    return (
        run_id if isinstance(run_id, str) else None,
        map_index if isinstance(map_index, int) and not isinstance(map_index, bool) else -1,
        logical.isoformat() if isinstance(logical, datetime) else None,
    )


def push_night(ti: Any, record: NightRecord, verdict: Verdict) -> None:
    """Leave tonight's record and the history it ended with (its checkpoint) in XCom."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY
    from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY

    if verdict.history is not None:
        ti.xcom_push(key=HISTORY_XCOM_KEY, value=verdict.history.to_xcom())
    ti.xcom_push(key=NIGHT_XCOM_KEY, value=record.to_xcom())
