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
from dataclasses import dataclass, replace
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
    #: Ended DAG runs found to hold no record: saved with tonight's history, not read again.
    without_record: tuple[str, ...] = ()


def _as_list(value: object) -> list[object]:
    """``xcom_pull`` without a map index answers a single value when only one matched."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    return [value]


@dataclass(frozen=True)
class Stored:
    """What reading the records found: the records, the DAG runs still in flight with no record yet,
    the ended DAG runs found to hold none (not read again: kept with tonight's saved history), and
    what the log should say about the reading."""

    records: list[object]
    in_flight: list[str]
    without_record: list[str]
    notes: list[str]


#: Key, in a saved history, of the ended DAG runs found to hold no record (read once, not every night).
WITHOUT_RECORD = "runs_without_record"


def _known_without_record(ti: Any, task_id: str, found: list[object]) -> set[str]:
    """The DAG runs the newest recorded night found to hold no record (from its saved history)."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY

    def when(record: Mapping[str, Any]) -> float:
        ran_at = record.get("ran_at")
        return float(ran_at) if isinstance(ran_at, int | float) and not isinstance(ran_at, bool) else 0.0

    recorded = [r for r in found if isinstance(r, Mapping) and isinstance(r.get("dag_run_id"), str)]
    if not recorded:
        return set()
    newest = max(recorded, key=when)
    index = newest.get("map_index", -1)
    data = ti.xcom_pull(
        task_ids=task_id,
        key=HISTORY_XCOM_KEY,
        run_id=newest["dag_run_id"],
        map_indexes=index if isinstance(index, int) else -1,
    )
    listed = data.get(WITHOUT_RECORD) if isinstance(data, Mapping) else None
    return {run for run in listed if isinstance(run, str)} if isinstance(listed, list) else set()


def stored_records(ti: Any, task_id: str) -> Stored:
    """Every record of ``task_id`` this task instance can read (see the module's docstring)."""
    from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY

    found = _as_list(ti.xcom_pull(task_ids=task_id, key=NIGHT_XCOM_KEY, include_prior_dates=True))
    covered = {
        r["dag_run_id"] for r in found if isinstance(r, Mapping) and isinstance(r.get("dag_run_id"), str)
    }
    covered.add(getattr(ti, "run_id", None))
    try:
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[task_id])
    except Exception as exc:  # the API server did not answer: nights dated after tonight's are unseen
        why = f"The task states could not be read ({exc!r}): nights of DAG runs dated after this one are "
        return Stored(found, [], [], [why + "not in tonight's history"])
    if not isinstance(states, Mapping):
        return Stored(found, [], [], [])
    ended, in_flight = [], []
    for run_id, tasks in states.items():
        if not isinstance(run_id, str) or run_id in covered or not isinstance(tasks, Mapping):
            continue
        seen = {str(state) for state in tasks.values()}
        if seen & ENDED:
            ended.append(run_id)
        elif seen & IN_FLIGHT:
            in_flight.append(run_id)
    known_empty = _known_without_record(ti, task_id, found) if ended else set()
    # Newest first, as far as a run id tells (Airflow's own ids end with when the run was due).
    to_read = sorted(
        (r for r in ended if r not in known_empty), key=lambda r: r.rsplit("__", 1)[-1], reverse=True
    )
    without = sorted(known_empty.intersection(ended))
    for run_id in to_read[:MAX_SINGLE_READS]:
        more = _as_list(ti.xcom_pull(task_ids=task_id, key=NIGHT_XCOM_KEY, run_id=run_id))
        found.extend(more)
        if not more:
            without.append(run_id)
    notes = []
    if len(to_read) > MAX_SINGLE_READS:
        notes.append(
            f"{len(to_read)} ended DAG runs of this task were not read with this night's records: the "
            f"{MAX_SINGLE_READS} newest were read, the next nights read the others"
        )
    return Stored(found, sorted(in_flight), sorted(without), notes)


#: Marks a history saved by this release beside a night's record: never taken for an earlier release's.
SAVED_BY_RECORDS = "night_of"


def _checkpoint(ti: Any, task_id: str, night: NightRecord) -> GateHistory | None:
    """The history ``night`` ended with, as its task instance saved it (None: not readable)."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY, GateHistory

    if night.dag_run_id is None:
        return None
    data = ti.xcom_pull(
        task_ids=task_id, key=HISTORY_XCOM_KEY, run_id=night.dag_run_id, map_indexes=night.map_index
    )
    if not isinstance(data, Mapping) or data.get(SAVED_BY_RECORDS) != night.bench_result_id:
        return None
    saved = GateHistory.from_xcom(data)
    return None if saved.error is not None else saved


def _legacy(ti: Any, task_id: str) -> GateHistory | None:
    """The history an earlier release left (a chain of whole histories, read by logical date): the
    nights go on from it rather than start again. A history this release saved is never taken for one."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY, GateHistory

    data = ti.xcom_pull(
        task_ids=task_id,
        key=HISTORY_XCOM_KEY,
        include_prior_dates=True,
        map_indexes=getattr(ti, "map_index", -1),
    )
    if data is None or (isinstance(data, Mapping) and SAVED_BY_RECORDS in data):
        return None
    saved = GateHistory.from_xcom(data)  # one that does not read fails tonight closed, then restarts
    return saved if saved.series or saved.error is not None else None


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

    stored = stored_records(ti, task_id)
    in_flight, notes = stored.in_flight, stored.notes
    memory = recall(stored.records, scenario_id=scenario_id, bench_result_id=bench_result_id, ran_at=ran_at)
    notes += memory.notes
    if in_flight:
        notes.append(
            f"Tonight's history lacks the night(s) of DAG run(s) {', '.join(in_flight[:5])}"
            f"{' and more' if len(in_flight) > 5 else ''}, still running: the nights after them take them in"
        )
    start: GateHistory | None = None
    if memory.checkpoint is not None:
        start = _checkpoint(ti, task_id, memory.checkpoint)
        if start is None:
            notes.append(
                f"The history saved by run {memory.checkpoint.bench_result_id}'s night does not read: the "
                "nights are judged again from their records"
            )
            memory = replace(memory, checkpoint=None, replay=memory.before[-MAX_REPLAY:])
        elif memory.replay and memory.checkpoint is not None:
            notes.append(
                f"{len(memory.replay)} night(s) recorded out of the order they ran in (or at once, or "
                f"cleared) are judged again onto the history of run {memory.checkpoint.bench_result_id}"
            )
    if start is None and len(memory.replay) == len(memory.before):
        # From the first recorded night: on from the history an earlier release left, if any.
        start = _legacy(ti, task_id)
        if start is not None and not memory.before:
            notes.append(
                "No night of this scenario was recorded yet: going on from the history an earlier "
                "release left"
            )
    history = fold(start or GateHistory(), memory, settings)
    return Recalled(history, memory, tuple(notes), tuple(stored.without_record))


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
    from airflow_provider_loadtest.decisions.gate.nights import NightRecord, RecordedSeries, chain_of

    run_id, map_index, logical = context_ids
    series = tuple(
        RecordedSeries(one.key[0], one.key[1], _usable(one.value), one.bound, one.samples)
        for one in verdict.judged
    )
    loads = tuple((one.metric, _usable(one.value), one.minimum) for one in verdict.judged_loads)
    gated = {s.metric for s in series} | {metric for metric, _v, _m in loads}
    record = NightRecord(
        bench_result_id=run.bench_result_id,
        scenario_id=run.scenario_id,
        ran_at=ran_at_of(run),
        series=series,
        loads=loads,
        accepted=frozenset(accepted) & gated,
        passed=verdict.passed,
        dag_run_id=run_id,
        map_index=map_index,
        logical_date=logical,
        recorded_at=time.time(),
    )
    before = memory.before if memory is not None else ()
    return replace(record, chain=chain_of([*before, record]))


#: The service's time of a run is taken when within this many seconds of ours (a day): a clock or a
#: unit that far off (seconds for milliseconds) would sort every night before or after all others.
TRUSTED_CLOCK_S = 86_400.0


def ran_at_of(run: StartedRun) -> float:
    """When the run happened: the service's own time where its answer gave one close to ours."""
    created = getattr(run, "created_at", None)
    ours = float(run.started_at)
    if isinstance(created, int | float) and abs(created - ours) <= TRUSTED_CLOCK_S:
        return float(created)
    return ours


def night_date(run: StartedRun) -> str:
    """The night's date (ISO) as the gate says it ("crept ... since 2026-03-05")."""
    from airflow_provider_loadtest.decisions.gate.nights import date_of

    return date_of(ran_at_of(run))


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


def push_night(ti: Any, record: NightRecord, verdict: Verdict, without_record: Iterable[str] = ()) -> None:
    """Leave tonight's record and the history it ended with (its checkpoint) in XCom, with the ended
    DAG runs found to hold no record."""
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY
    from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY

    if verdict.history is not None:
        saved = {
            **verdict.history.to_xcom(),
            SAVED_BY_RECORDS: record.bench_result_id,
            WITHOUT_RECORD: sorted(without_record),
        }
        ti.xcom_push(key=HISTORY_XCOM_KEY, value=saved)
    ti.xcom_push(key=NIGHT_XCOM_KEY, value=record.to_xcom())
