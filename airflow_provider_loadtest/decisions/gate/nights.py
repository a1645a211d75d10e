"""The gate's memory as a record of nights, not a chain: what tonight's history is made of.

Until this module, each judged night left the whole history in one XCom and the next night read "the
latest" of them back by logical date. Airflow's own kinds of DAG run break that chain: a run without a
logical date (a manual trigger, the REST API, an asset-scheduled run: the documented way to accept a
change) sorts first or last depending on the database, nights judged out of order or two at once
lose one another, a sensor judging one bench result on several nights counts it several times, and a
mapped gate whose list changes order reads another scenario's history.

So each judged night is **recorded once, with its identity** (``NightRecord``, XCom
``loadtest_gate_night`` of its own task instance): the bench result, the scenario, when the run happened
(the service's own time where it gave one), what was judged (each series' value, bound and samples, the
applied load), whether a person accepted a change, and the night its history ended with. Tonight's
history is **derived** from those records (``recall``, then ``fold``): one night per bench result,
ordered by when the runs happened, per scenario (not per map index), whatever order or kind of DAG run
Airflow made. A backfilled night is judged against the nights before its own time.

The history each night ended with is still saved beside its record (``loadtest_gate_history``): it is a
**checkpoint**, used as it is when the nights before it are exactly the nights its record says it was
judged after (the usual case: nothing is replayed), else the nights after the last good checkpoint are
replayed through the same judging code (``fold``). Replaying is cheap next to a load test: about 12 ms a
night for a gate of 41 series, 70 ms for 201 (benchmarks/gate_family.py's gates).

No I/O here: ``lifecycle/night_records.py`` reads and writes the records through Airflow.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.history import GateHistory, HistorySettings
    from airflow_provider_loadtest.decisions.gate.judging import SeriesSpec
    from airflow_provider_loadtest.decisions.gate.load import LoadSeries

__all__ = [  # noqa: RUF022 - grouped by meaning
    "NIGHT_XCOM_KEY",
    "RECORD_FORMAT",
    "MAX_REPLAY",
    "RecordUnreadable",
    "RecordedSeries",
    "NightRecord",
    "CHAIN_NIGHTS",
    "chain_of",
    "Memory",
    "recall",
    "forget_gone",
    "fold",
    "night_after",
]

#: XCom key of a judged night's record, on the task instance that judged it.
NIGHT_XCOM_KEY = "loadtest_gate_night"
#: Version of the record's form: a form this code does not know is left out, said in the log.
RECORD_FORMAT = 1
#: With no usable checkpoint, at most this many nights are replayed (the newest): the history keeps
#: at most ``HistorySettings.window`` (100 at most) passing nights, so older ones change nothing but
#: where a creep's reference starts.
MAX_REPLAY = 400


class RecordUnreadable(ValueError):
    """A stored record that is not of the form ``NightRecord.to_xcom`` writes."""


@dataclass(frozen=True)
class RecordedSeries:
    """One series as a night judged it: its key, its value (None: not measured that night), its
    regression bound (None: a budget only) and the samples behind a transaction's value."""

    transaction: str | None
    metric: str
    value: float | None
    bound: float | None = None
    samples: int | None = None

    def to_xcom(self) -> list[Any]:
        return [self.transaction, self.metric, self.value, self.bound, self.samples]

    @classmethod
    def from_xcom(cls, data: object) -> RecordedSeries:
        if not isinstance(data, list | tuple) or len(data) != 5:
            raise RecordUnreadable(f"a series {data!r} is not [transaction, metric, value, bound, samples]")
        label, metric, value, bound, samples = data
        if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int)):
            raise RecordUnreadable(f"a series' samples {samples!r} is not a whole number")
        return cls(
            _text_or_none(label, "a series' transaction"),
            _known_metric(metric),
            _number_or_none(value, "value"),
            _number_or_none(bound, "bound"),
            samples,
        )


@dataclass(frozen=True)
class NightRecord:
    """One judged night: who it was, what was judged, and what a person said of it."""

    bench_result_id: str
    scenario_id: str
    #: When the run happened, epoch seconds: the service's own time of the run where its answer gave
    #: one (the report's ``created``), else when the start was sent (or the sensor first saw the run).
    ran_at: float
    series: tuple[RecordedSeries, ...] = ()
    #: The applied load as judged by the load rule: (metric, value, least value it had to reach).
    loads: tuple[tuple[str, float | None, float | None], ...] = ()
    #: The metrics whose change a person accepted as the new normal on this night.
    accepted: frozenset[str] = frozenset()
    passed: bool | None = None
    #: What the history this night ended with holds: a digest of its last nights, this one included
    #: (``chain_of``). That saved history is used as it is only while those nights still digest to the
    #: same (a night cleared, recorded late, or accepted on another copy since makes it stale).
    chain: str | None = None
    dag_run_id: str | None = None
    map_index: int = -1
    logical_date: str | None = None
    #: When this record was written (epoch seconds): of two records of one bench result, the first wins.
    recorded_at: float = 0.0

    @property
    def order(self) -> tuple[float, str]:
        return (self.ran_at, self.bench_result_id)

    @property
    def when(self) -> str:
        """The night as a date, for the log ("since 2026-03-05")."""
        return date_of(self.ran_at)

    def to_xcom(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT,
            "bench_result_id": self.bench_result_id,
            "scenario_id": self.scenario_id,
            "ran_at": self.ran_at,
            "series": [s.to_xcom() for s in self.series],
            "loads": [list(load) for load in self.loads],
            "accepted": sorted(self.accepted),
            "passed": self.passed,
            "chain": self.chain,
            "dag_run_id": self.dag_run_id,
            "map_index": self.map_index,
            "logical_date": self.logical_date,
            "recorded_at": self.recorded_at,
        }

    @classmethod
    def from_xcom(cls, data: object) -> NightRecord:
        """``RecordUnreadable`` for anything that is not the form ``to_xcom`` writes."""
        if not isinstance(data, Mapping):
            raise RecordUnreadable(f"a record is {type(data).__name__}, not a mapping")
        if data.get("format") != RECORD_FORMAT:
            raise RecordUnreadable(f"a record of form {data.get('format')!r}, not {RECORD_FORMAT}")
        bench, scenario = data.get("bench_result_id"), data.get("scenario_id")
        if not isinstance(bench, str) or not bench or not isinstance(scenario, str):
            raise RecordUnreadable("a record without a bench result id or a scenario id")
        ran_at = _number_or_none(data.get("ran_at"), "ran_at")
        if ran_at is None or not _EARLIEST <= ran_at <= _LATEST:
            raise RecordUnreadable(f"record of run {bench} has no plausible time ({ran_at!r})")
        series, loads, accepted = data.get("series"), data.get("loads", []), data.get("accepted", [])
        if not isinstance(series, list) or not isinstance(loads, list) or not isinstance(accepted, list):
            raise RecordUnreadable(f"record of run {bench}: 'series', 'loads' and 'accepted' must be lists")
        parsed_loads = []
        for load in loads:
            if not (isinstance(load, list) and len(load) == 3 and isinstance(load[0], str)):
                raise RecordUnreadable(f"record of run {bench}: a load {load!r} is not [metric, value, min]")
            value, minimum = _number_or_none(load[1], "load value"), _number_or_none(load[2], "minimum")
            parsed_loads.append((_known_metric(load[0]), value, minimum))
        if not all(isinstance(m, str) for m in accepted):
            raise RecordUnreadable(f"record of run {bench}: 'accepted' must list metric ids")
        map_index, passed = data.get("map_index", -1), data.get("passed")
        return cls(
            bench_result_id=bench,
            scenario_id=scenario,
            ran_at=ran_at,
            series=tuple(RecordedSeries.from_xcom(s) for s in series),
            loads=tuple(parsed_loads),
            accepted=frozenset(accepted),
            passed=passed if isinstance(passed, bool) else None,
            chain=_text_or_none(data.get("chain"), "chain"),
            dag_run_id=_text_or_none(data.get("dag_run_id"), "dag_run_id"),
            map_index=map_index if isinstance(map_index, int) and not isinstance(map_index, bool) else -1,
            logical_date=_text_or_none(data.get("logical_date"), "logical_date"),
            recorded_at=_number_or_none(data.get("recorded_at"), "recorded_at") or 0.0,
        )

    def series_specs(self) -> list[SeriesSpec]:
        """The series as ``judge_gate`` takes them (a value not measured that night fails again as not
        measured, and leaves its history as it was)."""
        from airflow_provider_loadtest.decisions.gate.judging import SeriesSpec
        from airflow_provider_loadtest.decisions.gate.rows import Unreadable

        return [
            SeriesSpec(
                (s.transaction, s.metric),
                s.value if s.value is not None else Unreadable("not measured that night"),
                None,
                s.bound,
                s.samples,
            )
            for s in self.series
        ]

    def load_series(self) -> list[LoadSeries]:
        from airflow_provider_loadtest.decisions.gate.load import LoadSeries
        from airflow_provider_loadtest.decisions.gate.rows import Unreadable

        return [
            LoadSeries(metric, value if value is not None else Unreadable("not measured that night"), minimum)
            for metric, value, minimum in self.loads
        ]


#: Beyond this a stored number is no measurement (and sums of a few would overflow): unreadable.
_LARGEST = 1e15
#: Epoch seconds of a plausible night: from 2000 to 2100.
_EARLIEST, _LATEST = 946_684_800.0, 4_102_444_800.0


def date_of(ran_at: float) -> str:
    """A night's date (ISO) as the gate says it ("crept ... since 2026-03-05")."""
    return datetime.fromtimestamp(ran_at, UTC).strftime("%Y-%m-%d")


def _number_or_none(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RecordUnreadable(f"{what} {value!r} is not a finite number")
    if abs(value) > _LARGEST:
        raise RecordUnreadable(f"{what} {value!r} is beyond any measurement")
    return float(value)


def _text_or_none(value: object, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise RecordUnreadable(f"{what} {value!r} is not text")
    return value


def _known_metric(metric: object) -> str:
    from airflow_provider_loadtest.decisions.gate.rules import METRIC_DIRECTIONS

    if not isinstance(metric, str) or metric not in METRIC_DIRECTIONS:
        raise RecordUnreadable(f"a series' metric {metric!r} is not a metric id this release knows")
    return metric


#: How many of the nights before a night its chain digests: beyond the longest window (100) and the
#: recent nights, a night cleared or removed (``airflow db clean``) no longer changes the history.
CHAIN_NIGHTS = 110


def chain_of(nights: Sequence[NightRecord]) -> str:
    """The digest of the last ``CHAIN_NIGHTS`` of ``nights`` (oldest first): each bench result and what
    a person accepted on it, in order."""
    text = "\n".join(f"{n.bench_result_id}:{','.join(sorted(n.accepted))}" for n in nights[-CHAIN_NIGHTS:])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Memory:
    """What tonight's history is made of (``recall``).

    ``before``: the recorded nights of tonight's scenario that ran before tonight, oldest first, one
    per bench result; ``checkpoint``: the newest of them whose saved history holds exactly the nights
    before it (None: none does); ``replay``: the nights to judge again onto it, in order; ``again``:
    tonight's own bench result as another DAG run already recorded it (a sensor judging one run on
    several nights: it is judged at its own place and counted once); ``later``: nights of the scenario
    recorded as having run after tonight (tonight is a backfill, or late); ``notes``: what the log
    says about it."""

    before: tuple[NightRecord, ...] = ()
    checkpoint: NightRecord | None = None
    replay: tuple[NightRecord, ...] = ()
    again: NightRecord | None = None
    later: int = 0
    notes: tuple[str, ...] = ()
    unreadable: int = 0


def recall(
    stored: Iterable[object],
    *,
    scenario_id: str | None,
    bench_result_id: str | None = None,
    ran_at: float | None = None,
    max_replay: int = MAX_REPLAY,
) -> Memory:
    """From every stored record (in any order, duplicates and other scenarios included), the nights
    tonight's history is made of. ``bench_result_id``/``ran_at``: tonight's run (None before the
    start: every night of the scenario). A record that does not parse is left out and counted."""
    unreadable, why = 0, ""
    mine: dict[str, list[NightRecord]] = {}
    for data in stored:
        if scenario_id is not None and isinstance(data, Mapping) and data.get("scenario_id") != scenario_id:
            continue  # another scenario's night: not even parsed
        try:
            record = NightRecord.from_xcom(data)
        except RecordUnreadable as exc:
            unreadable, why = unreadable + 1, why or str(exc)
            continue
        mine.setdefault(record.bench_result_id, []).append(record)
    nights = []
    for copies in mine.values():
        # One bench result is one night, whichever DAG runs judged it: the first record wins, and a
        # change a person accepted on any of them holds (the chains after it then differ: replayed).
        copies.sort(key=lambda r: r.recorded_at)
        accepted = frozenset().union(*(c.accepted for c in copies))
        nights.append(replace(copies[0], accepted=accepted))
    nights.sort(key=lambda r: r.order)
    notes: list[str] = []
    again = None
    if bench_result_id is not None:
        again = next((n for n in nights if n.bench_result_id == bench_result_id), None)
        if again is not None:
            nights.remove(again)
            ran_at = again.ran_at
            notes.append(
                f"Run {bench_result_id} was judged before (DAG run {again.dag_run_id or '?'}): it is judged "
                "again against the nights before it and counted once in the history"
            )
    if ran_at is not None:
        tonight = (ran_at, bench_result_id or "")
        before = [n for n in nights if n.order < tonight]
        later = len(nights) - len(before)
    else:
        before, later = nights, 0
    if later:
        notes.append(
            f"{later} night(s) of this scenario ran after this one: it is judged against the history as it "
            "was before it ran (a backfilled or late night), and the later nights' histories take it in"
        )
    if unreadable:
        notes.append(
            f"{unreadable} stored night record(s) ({NIGHT_XCOM_KEY}) did not parse and were left out of "
            f"the history, each alone (the first: {why})"
        )
    checkpoint_at = next(
        (i for i in range(len(before) - 1, -1, -1) if before[i].chain == chain_of(before[: i + 1])), -1
    )
    start = checkpoint_at + 1 if checkpoint_at >= 0 else max(0, len(before) - max_replay)
    return Memory(
        before=tuple(before),
        checkpoint=before[checkpoint_at] if checkpoint_at >= 0 else None,
        replay=tuple(before[start:]),
        again=again,
        later=later,
        notes=tuple(notes),
        unreadable=unreadable,
    )


def forget_gone(
    history: GateHistory, recent: Sequence[NightRecord], settings: HistorySettings
) -> GateHistory:
    """A series that none of the last ``window`` nights before this one judged (a transaction renamed
    or removed) leaves the history rather than be kept forever (``recent``: the nights before, oldest
    first). Applied before each night is judged, replayed or not, so replaying is judging in order."""
    recent = recent[-settings.window :]
    if len(recent) < settings.window:
        return history
    keys = {(s.transaction, s.metric) for night in recent for s in night.series}
    keys |= {(None, metric) for night in recent for metric, _v, _m in night.loads}
    kept = {key: value for key, value in history.series.items() if key in keys}
    return history if len(kept) == len(history.series) else replace(history, series=kept)


def night_after(history: GateHistory, night: NightRecord, settings: HistorySettings) -> GateHistory:
    """The history after judging ``night`` again on ``history``, as the operator judged it: every
    series together (``judge_gate``), the applied load by its own rule, and a night that did not apply
    its usual load leaving the history as it was (``judging.evaluate``)."""
    from airflow_provider_loadtest.decisions.gate.judging import judge_gate, load_rules

    _rows, after, _family = judge_gate(
        night.series_specs(), history, settings, accepted=night.accepted, when=night.when
    )
    if night.loads:
        load = load_rules()
        load_rows, kept = load.judge_loads(night.load_series(), history, settings, accepted=night.accepted)
        if load.load_untrusted(load_rows):
            return history
        after = replace(after, series={**after.series, **kept})
    return after


def fold(history: GateHistory, memory: Memory, settings: HistorySettings) -> GateHistory:
    """``history`` (the checkpoint's, or where the replay starts) after judging each of the memory's
    nights to replay again, in order, then what tonight forgets: tonight's history."""
    first = len(memory.before) - len(memory.replay)
    for index in range(first, len(memory.before)):
        history = forget_gone(history, memory.before[:index], settings)
        history = night_after(history, memory.before[index], settings)
    return forget_gone(history, memory.before, settings)
