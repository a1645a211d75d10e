"""What the view reads from XCom: one task run's result and its gate rows.

A gate row is read by the gate's own reader, ``decisions.gate.GateRow.from_xcom``: it knows every shape
the gate ever wrote (rows without a ``status`` before the history judgement, the history's centre and
noise band, the per-transaction ``transaction``) and ignores keys it does not know. XCom is written by
tasks, not trusted: before that reader sees a row, each known field whose value is not of the type
``GateRow`` declares (a string for a number, a NaN, a negative count) is dropped, so a malformed row
shows with the field missing instead of failing the page; what is not a row at all is skipped.

``decisions.gate`` is plain Python (no Airflow, no HTTP client, no third-party import) and only the API
server imports this module (``plugins/__init__.py`` loads it when Airflow asks for the app), so workers
pay nothing for it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from functools import cached_property, lru_cache
from typing import Annotated, Any, get_type_hints

import msgspec  # apache-airflow-core's own dependency (>= 0.19 since 3.1.0, the floor): no new one

from airflow_provider_loadtest.decisions.gate import GateRow
from airflow_provider_loadtest.decisions.gate.family import NightEffect
from airflow_provider_loadtest.plugins.bounds import (
    COLUMNS,
    DECODED_CHARS,
    FAILING_LISTED,
    ROWS_PER_NIGHT,
    SERIES_DRAWN,
    URL_CHARS,
    clip,
)


class Status(Enum):
    """One metric's status on one night (``GateRow.status``, the gate's ``decisions.history`` names)."""

    PASS = "pass"  # noqa: S105 (a verdict, not a password)
    #: Moved, but within the history's usual noise: passes.
    NOISE = "noise"
    #: Beyond the bound and the usual noise on one night, not (yet) a regression: passes, worth a look.
    SUSPECTED = "suspected"
    REGRESSION = "regression"
    BUDGET = "budget"
    NOT_MEASURED = "not_measured"

    @property
    def failed(self) -> bool:
        return self in (Status.REGRESSION, Status.BUDGET, Status.NOT_MEASURED)

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Status.PASS: "pass",
    Status.NOISE: "noise",
    Status.SUSPECTED: "suspected",
    Status.REGRESSION: "regression",
    Status.BUDGET: "over budget",
    Status.NOT_MEASURED: "not measured",
}

#: How the history gate marks a night whose change a person accepted: its ``note`` begins so
#: (``decisions.history.judge_night``; tests/unit/test_load_tests_view.py holds the two together).
ACCEPTED_NOTE = "change accepted"


@dataclass(frozen=True)
class Row(GateRow):
    """One gated metric (of one transaction, or of all requests) on one night: the gate's own row,
    with what the view derives from it."""

    @cached_property  # read for each mark, cell and tooltip
    def kind(self) -> Status:
        """``status`` as the view's enum (``GateRow.from_xcom`` guarantees one the gate knows)."""
        return Status(self.status)

    @property
    def accepted(self) -> str | None:
        """The gate's note when this night's change was accepted as the new normal, else None."""
        return self.note if _accepts(self.note) else None

    @cached_property
    def band(self) -> tuple[float, float] | None:
        """The history's noise band: as stored, else centre +- noise."""
        if self.band_low is not None and self.band_high is not None:
            return (min(self.band_low, self.band_high), max(self.band_low, self.band_high))
        if self.centre is not None and self.noise is not None:
            return (self.centre - abs(self.noise), self.centre + abs(self.noise))
        return None


def _accepts(note: object) -> bool:
    """Whether a row's note says a person accepted the night's change."""
    return isinstance(note, str) and note.lower().startswith(ACCEPTED_NOTE)


def _number(value: object) -> float | None:
    """A finite number as a float; None for anything else, an integer beyond a float's range included
    (a 401-digit integer: ``float()`` of it raises, and no chart or table could show it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _text(value: object) -> str | None:
    """A non-empty text, clipped as it is decoded (``DECODED_CHARS``: a 25 MB note is kept as 1,000
    characters, never whole in the results kept across requests)."""
    return clip(value, DECODED_CHARS) if isinstance(value, str) and value else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


#: A checker per type ``GateRow`` declares: the value if it is of that type, else None (dropped).
_CHECKERS: dict[object, Callable[[object], object]] = {
    float | None: _number,
    float: _number,
    str | None: _text,
    str: _text,
    int | None: _count,
    int: _count,
    bool: _flag,
}


def _field_checkers() -> dict[str, Callable[[object], object]]:
    """Each ``GateRow`` field's checker, from the field's declared type. A field of a type with no
    checker is left out (read as its default): a unit test requires a checker for every field."""
    hints = get_type_hints(GateRow)
    return {f.name: _CHECKERS[hints[f.name]] for f in fields(GateRow) if hints[f.name] in _CHECKERS}


FIELD_CHECKERS = _field_checkers()


def _http_url(value: object) -> str | None:
    """A link we may put in the page: http(s) only (XCom is written by tasks, not trusted)."""
    if (
        isinstance(value, str)
        and len(value) <= URL_CHARS
        and value.lower().startswith(("https://", "http://"))
    ):
        return value
    return None


@lru_cache(maxsize=256)
def _derived_status(passed: bool | None, reason: str | None) -> Status:
    """The status of a row without a known one, as the gate's reader derives it (``GateRow.from_xcom``)
    from ``passed`` and ``reason``: rows differ in their values, not in these, so once per shape."""
    known = {"metric": "-", "passed": passed, "reason": reason}
    return Status(GateRow.from_xcom({k: v for k, v in known.items() if v is not None}).status)


_STATUS_VALUES = {status.value: status for status in Status}
_KNOWN_CODES = frozenset(_STATUS_VALUES)
_FAILED_CODES = frozenset(status.value for status in Status if status.failed)


def _status(entry: Any) -> Status:
    """A ``WireRow``'s status as the gate's reader reads it, without making the row."""
    return _STATUS_VALUES.get(entry.status) or _derived_status(entry.passed, entry.reason)


def _clean(data: object) -> dict[str, Any] | None:
    """The fields of one row whose values are of the type ``GateRow`` declares (None: not a row)."""
    if not isinstance(data, Mapping) or _text(data.get("metric")) is None:
        return None
    clean: dict[str, Any] = {}
    for name, check in FIELD_CHECKERS.items():
        value = check(data.get(name))
        if value is not None:
            clean[name] = value
    return clean


def gate_row(data: object) -> Row | None:
    """One row as ``GateRow.to_xcom()`` wrote it (any version), or None when it is not one."""
    clean = _clean(data)
    if clean is None:
        return None
    row = Row.from_xcom(clean)  # a classmethod: builds a Row (typed as returning GateRow)
    return row if isinstance(row, Row) else None


#: Rows a result keeps once made (``RunResult.row``): what one page asks of a night, twice over.
ROWS_KEPT = 2 * (SERIES_DRAWN + COLUMNS + FAILING_LISTED)

#: The night effect's statuses (``decisions.gate.family.NightEffect``: never over budget, never unmeasured).
EFFECT_STATUSES = ("pass", "noise", "suspected", "regression")
#: The largest count (series, nights of history) the view reads: beyond, a count is not one.
_MAX_COUNT = 10**9


def night_effect(data: object) -> NightEffect | None:
    """The gate's night effect as ``NightEffect.to_xcom()`` wrote it, or None (absent: a gate of fewer
    than 8 series). Untrusted as a row is: each field not of its type is dropped (read as the gate's
    reader reads it missing), a status the night effect never has is derived from ``passed``; without a
    finite ``shift_sd`` there is nothing to show."""
    if not isinstance(data, Mapping):
        return None
    shift = _number(data.get("shift_sd"))
    if shift is None:
        return None
    status = data.get("status")
    if not isinstance(status, str) or status not in EFFECT_STATUSES:
        status = "regression" if data.get("passed") is False else "pass"
    series, history_n = _count(data.get("series")), _count(data.get("history_n"))
    # Every field given, each of its type, the status one the night effect has: what
    # ``NightEffect.from_xcom`` would make of it, made at once (the overview reads 1,800 nights cold).
    return NightEffect(
        shift_sd=shift,
        series=series if series is not None and series < _MAX_COUNT else 0,
        status=status,
        centre=_number(data.get("centre")),
        noise=_number(data.get("noise")),
        history_n=history_n if history_n is not None and history_n < _MAX_COUNT else 0,
        change_pct=_number(data.get("change_pct")),
        reason=_text(data.get("reason")),
        note=_text(data.get("note")),
    )


def gate_rows(data: object) -> list[Row]:
    """The rows of a ``gate`` list, skipping what is not a row."""
    if not isinstance(data, list):
        return []
    return [row for row in map(gate_row, data) if row is not None]


def _row(entry: Any) -> Row:
    """A ``WireRow`` as ``gate_row`` reads it: its types are ``GateRow``'s already (msgspec checked
    them, or ``_clean`` did), so what is left is ``_clean``'s other rules: no empty text, no negative
    count (a unit test holds the two readers together), and ``GateRow.from_xcom``'s: ``passed`` false
    when missing, a status the gate does not know derived (``_status``). A page makes a row per night
    of each drawn series (2,190 for a year of 6 series): made from the entry's fields at once, it takes
    a quarter of the time ``GateRow.from_xcom`` and the frozen dataclass's ``__init__`` took (which
    sets its 18 fields one ``object.__setattr__`` at a time): the same row, equal and hashed alike."""
    values = msgspec.structs.asdict(entry)  # every ``GateRow`` field (a unit test holds the two alike)
    if "" in values.values():
        values.update((name, None) for name, value in values.items() if value == "")
    if values["passed"] is None:
        values["passed"] = False
    values["status"] = _status(entry).value
    history_n = values["history_n"]
    if history_n is not None and history_n < 0:
        values["history_n"] = None
    row = object.__new__(Row)
    row.__dict__.update(values)
    row.__dict__["kind"] = _status(entry)  # ``Row.kind``, known already (as the property reads it)
    return row


def _wire_row() -> type[msgspec.Struct]:
    """A gate row as decoded straight from JSON: ``GateRow``'s fields that ``_clean`` checks, with their
    types (each optional but the metric; other keys are skipped, as ``_clean`` skips them). A row of
    another shape, or with a text longer than ``DECODED_CHARS``, fails the whole decode, and the night is
    read by ``json`` and ``gate_row`` instead (``RunResult.from_json``), which clip it. A field the gate
    adds reaches the view on both paths alike."""
    hints = get_type_hints(GateRow)
    short = Annotated[str, msgspec.Meta(max_length=DECODED_CHARS)]

    def typed(name: str) -> Any:
        kind = hints[name]
        return short if kind is str else (short | None if kind == str | None else kind)

    spec = [
        (f.name, typed(f.name)) if f.name == "metric" else (f.name, typed(f.name) | None, None)
        for f in fields(GateRow)
        if f.name in FIELD_CHECKERS
    ]
    return msgspec.defstruct("WireRow", spec, kw_only=True, gc=False)


WireRow = _wire_row()


@dataclass(frozen=True, eq=False)
class RunResult:
    """What ``RunScenarioOperator`` left in XCom for one task run (its ``return_value``, or only its
    run record while the run goes on or when the task ended without a verdict).

    Its gate rows are kept as read (``entries``, ``WireRow``s: a year of a gate of 200 series is 73,000
    rows, and a page shows a few thousand), each made a ``Row`` when the page shows it (``row``)."""

    bench_result_id: str | None
    report_url: str | None
    state: str | None
    scenario_id: str | None
    test_name: str | None
    #: The night's gate rows, at most ``bounds.ROWS_PER_NIGHT`` (a night with more is read only this
    #: far: the page says how many it left out, and how many of those failed), in the gate's order.
    entries: tuple[Any, ...]
    #: False when only the run record exists: the task has not returned (yet).
    has_result: bool
    #: Gate rows past ``ROWS_PER_NIGHT`` (not read), and how many of those failed.
    left_out: int = 0
    left_out_failing: int = 0
    #: Every series' shared movement this night and its judgement (None: a gate of fewer than 8 series).
    night_effect: NightEffect | None = None
    #: Characters of the JSON text it was decoded from (0: decoded by the driver), for ``decoded.size_of``.
    text_chars: int = 0

    @cached_property
    def codes(self) -> tuple[str, ...]:
        """Each entry's status as the gate names it (``Status.value``), as the gate's reader reads it.

        A year of a gate of 200 series is 73,000 entries and a page asks each night's verdict: each
        entry's text read in one comprehension, then set operations on the texts (in C), not a Python
        step per entry; only a night with a status the gate does not know is read entry by entry."""
        codes = [e.status for e in self.entries]
        if not _KNOWN_CODES.issuperset(codes):
            pairs = zip(codes, self.entries, strict=True)
            codes = [code if code in _KNOWN_CODES else _status(e).value for code, e in pairs]
        return tuple(codes)

    @cached_property
    def statuses(self) -> tuple[Status, ...]:
        """Each entry's status, as the gate's reader reads it."""
        return tuple(map(_STATUS_VALUES.__getitem__, self.codes))

    @cached_property
    def _rows(self) -> dict[int, Row]:
        return {}

    def row(self, index: int) -> Row:
        """Entry ``index`` as a ``Row``: made once for the first ``ROWS_KEPT`` asked (a page asks for the
        same few again: drawn series, columns, failing rows), made anew past them, so a result kept across
        requests holds a bounded number of rows whatever pages (or JSON answers) asked for."""
        made = self._rows.get(index)
        if made is None:
            made = _row(self.entries[index])
            if len(self._rows) < ROWS_KEPT:
                self._rows[index] = made
        return made

    @cached_property
    def rows(self) -> tuple[Row, ...]:
        return tuple(self.row(i) for i in range(len(self.entries)))

    @cached_property
    def by_series(self) -> dict[tuple[str, str | None], int]:
        """Each series' (metric, transaction) first entry this night, for the charts' lookups (shared
        with the nights before when they list the same series: ``_series_index``; never changed)."""
        transactions = tuple([e.transaction for e in self.entries])
        if "" in transactions:  # read as none, as ``_clean`` reads an empty text
            transactions = tuple([t or None for t in transactions])
        return _series_index(tuple([e.metric for e in self.entries]), transactions)

    def row_of(self, metric: str, transaction: str | None) -> Row | None:
        index = self.by_series.get((metric, transaction))
        return None if index is None else self.row(index)

    @cached_property
    def failing_entries(self) -> tuple[int, ...]:
        """The entries that failed (by index: the page makes rows of the few it lists)."""
        codes = self.codes
        if _FAILED_CODES.isdisjoint(codes):  # most nights: one pass in C
            return ()
        return tuple([i for i, code in enumerate(codes) if code in _FAILED_CODES])

    @property
    def failing(self) -> tuple[Row, ...]:
        return tuple(map(self.row, self.failing_entries))

    @property
    def suspected(self) -> bool:
        return Status.SUSPECTED.value in self.codes

    @cached_property
    def accepted(self) -> tuple[Row, ...]:
        """The rows whose change a person accepted (the gate's note says so)."""
        notes = [e.note for e in self.entries]
        if not any(notes):  # most nights: no note at all, one pass in C
            return ()
        return tuple(self.row(i) for i, note in enumerate(notes) if _accepts(note))

    @classmethod
    def from_xcom(cls, result: object, record: object = None, text_chars: int = 0) -> RunResult:
        """``result``: the task's ``return_value``, decoded; ``record``: its run record (``loadtest_run``)."""
        data: Mapping[str, Any] = result if isinstance(result, Mapping) else {}
        gate = data.get("gate")
        rows = [WireRow(**clean) for clean in map(_clean, gate if isinstance(gate, list) else []) if clean]
        return cls._made(data, record, isinstance(result, Mapping), rows, text_chars)

    @classmethod
    def from_json(cls, text: str | bytes, record: object = None) -> RunResult:
        """``from_xcom`` of a ``return_value`` still as its JSON text: decoded by ``msgspec`` (which Airflow
        itself depends on) straight into ``WireRow``s, 4 to 10 times faster than ``json`` and then
        ``gate_row`` on each. Whatever that decode refuses (a NaN, a number beyond a float, a row of
        another shape, a text too long to keep) is decoded by ``json`` and read by ``from_xcom``, field by
        field. A value nested deeper than either decoder goes (``RecursionError``: a direct database
        write can store one 1,000 levels deep) is unreadable: the night shows "no verdict", as a value
        that is not JSON does."""
        try:
            decoded = _RESULT.decode(text)
            if isinstance(decoded, str):  # a JSON string holding the JSON (``XComModel.serialize_value``)
                text = decoded
                decoded = _RESULT.decode(text)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            decoded = None
        if decoded is not None and not isinstance(decoded, str):
            found = {name: getattr(decoded, name) for name in (*_RESULT_FIELDS, "night_effect")}
            return cls._made(found, record, True, [r for r in decoded.gate or () if r.metric], len(text))
        return cls.from_xcom(loads(text), record, len(text))

    @classmethod
    def _made(
        cls, data: Mapping[str, Any], record: object, has_result: bool, rows: list[Any], text_chars: int = 0
    ) -> RunResult:
        start: Mapping[str, Any] = record if isinstance(record, Mapping) else {}

        def pick(key: str) -> str | None:
            return _text(data.get(key)) or _text(start.get(key))

        rest = rows[ROWS_PER_NIGHT:]
        return cls(
            bench_result_id=pick("bench_result_id"),
            report_url=_http_url(data.get("report_url")) or _http_url(start.get("report_url")),
            state=_text(data.get("state")),
            scenario_id=pick("scenario_id"),
            test_name=pick("test_name"),
            entries=tuple(rows[:ROWS_PER_NIGHT]),
            has_result=has_result,
            left_out=len(rest),
            left_out_failing=sum(1 for entry in rest if _status(entry).failed),
            night_effect=night_effect(data.get("night_effect")),
            text_chars=text_chars,
        )


#: The series of the last night indexed, and their index (``_series_index``).
_LAST_INDEXED: list[tuple[tuple[str, ...], tuple[str | None, ...], dict[tuple[str, str | None], int]]] = []


def _series_index(
    metrics: tuple[str, ...], transactions: tuple[str | None, ...]
) -> dict[tuple[str, str | None], int]:
    """Each (metric, transaction) and its first entry. A task's nights list the same series in the same
    order night after night: a night like the last one indexed shares its index (two comparisons of
    texts in C), so a year of a gate of 201 series makes its 201 keys once, not 73,000 tuples that the
    garbage collector walks on the page's time. One index is kept (at most ``ROWS_PER_NIGHT`` keys of
    texts clipped to ``DECODED_CHARS``); the dictionaries are shared, read, never changed."""
    last = _LAST_INDEXED[0] if _LAST_INDEXED else None
    if last is not None and last[0] == metrics and last[1] == transactions:
        return last[2]
    keys = list(zip(metrics, transactions, strict=True))
    index = dict(zip(keys, range(len(keys)), strict=True))
    if len(index) != len(keys):  # a series written twice: its first row, in the order the gate wrote
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
        index = {key: first[key] for key in dict.fromkeys(keys)}
    _LAST_INDEXED[:] = [(metrics, transactions, index)]
    return index


def loads(text: str | bytes) -> Any:
    """A stored value's JSON text decoded by ``json`` (a JSON string holding JSON decoded again), or None
    when it is no JSON: a custom XCom backend's reference, an integer of 4,300 digits, or a value nested
    deeper than the decoder's depth (``RecursionError``, which would otherwise fail the whole page)."""
    try:
        value = json.loads(text)
        if isinstance(value, str):
            value = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return value


_RESULT_FIELDS = ("bench_result_id", "report_url", "state", "scenario_id", "test_name")


class _ResultHead(msgspec.Struct):
    """A ``return_value``'s fields the view reads (checked by ``_text`` and ``_http_url`` as any)."""

    bench_result_id: object = None
    report_url: object = None
    state: object = None
    scenario_id: object = None
    test_name: object = None
    night_effect: object = None
    gate: list[WireRow] | None = None  # type: ignore[valid-type]  # made by defstruct


_RESULT = msgspec.json.Decoder(_ResultHead | str)
