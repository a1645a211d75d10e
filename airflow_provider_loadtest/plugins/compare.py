"""A night beside another (issue 35): two nights of one task, per series, with the noise beside the change.

What the service's trend report (``computeType: DELTA``) and the compare pages of Gatling Enterprise and
BlazeMeter give, plus how far beyond the noise each change is: a change of 40 ms on a series whose nights
scatter by 5 ms is news, on one that scatters by 200 ms it is not.

**The noise.** A change is divided by the noise the gate itself measured for the series (``noise`` in the
gate's row: one standard deviation of its history's nights, within their robust fence), read from the
compared night's row, else from the reference night's: the same yardstick the gate judged with, in the
metric's units. A series the gate judged without a history (``baseline="previous"``, a pinned run, budgets
only) has no such noise; for it the spread of its values over the newest ``SPREAD_NIGHTS`` nights shown is
used (1.4826 times their median absolute deviation: a standard deviation that one wild night does not
inflate), from ``MIN_SPREAD_NIGHTS`` nights on. Each line says which it used ("gate" or "spread").

**The picks.** A night is named in links by a short key (``night_key``): its date, 10 hex digits of a
hash of its run id (a run id may be 100 KB long: it is not a URL's business), and its map index when the
task is mapped. Keys are looked up among the nights the page read (``?nights=``); anything else is said
on the page, never a 500. Defaults: the newest night with gate rows, beside the last earlier night on
which a person accepted a change (the new normal's first night), else the night at the centre of the
gate's history window (half the history's nights back, ``history_n`` in the newest night's rows), else the
night before; on a mapped task, nights of the same map index only (its instances are other scenarios).
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_loadtest.plugins.bounds import NAME_CHARS, clip
from airflow_provider_loadtest.plugins.charts import number, percent, signed, unit_of
from airflow_provider_loadtest.plugins.history import Night, TaskHistory

#: Series listed in a comparison (the largest changes beyond the noise; the rest are counted).
COMPARE_ROWS = 50
#: Nights whose values give a series' spread when the gate measured no noise for it (the gate's own
#: default history window: ``HistorySettings.window``), and the fewest that say anything.
SPREAD_NIGHTS, MIN_SPREAD_NIGHTS = 60, 4
#: The longest pick a link may carry (a key is at most 10 + 1 + 10 + 1 + 11 characters: room to spare).
KEY_CHARS = 64
#: 1.4826 x the median absolute deviation: a normal distribution's standard deviation.
MAD_TO_SD = 1.4826

#: A map index is a 32-bit integer (Airflow's column); -1 is "not mapped", another negative one only a
#: direct database write stores, and its key must still tell it from the unmapped night of its run.
_KEY = re.compile(r"\d{4}-\d{2}-\d{2}\.[0-9a-f]{10}(\.-?\d{1,10})?")
#: Where the page's comparison is (the links jump to it).
ANCHOR = "compare"


def night_key(night: Night) -> str:
    """A short, stable name for ``night`` in a link: ``2026-03-01.3f9a1c2e7b`` (``.2`` for map index 2, and
    any index but -1, the unmapped one, is written)."""
    digest = hashlib.sha256(night.run_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{night.day}.{digest}" + (f".{night.map_index}" if night.map_index != -1 else "")


def compare_href(page: str, night: str | None, reference: str | None) -> str:
    """The task page comparing the night keyed ``night`` with the one keyed ``reference`` (None: the
    default one). Keys are ``night_key``'s, made of digits, letters a-f, dots and dashes: nothing to
    quote (a table of 365 nights writes 730 of these links)."""
    picks = [f"{name}={key}" for name, key in (("compare", night), ("with", reference)) if key]
    return f"{page}?{'&'.join(picks)}#{ANCHOR}"


@dataclass(frozen=True)
class Line:
    """One series on both nights: its values, the change, and the change in noise standard deviations."""

    metric: str
    transaction: str | None
    unit: str
    reference: str
    night: str
    change: str
    change_pct: str
    noise: str
    #: The change in noise standard deviations, signed as the change ("" without a noise).
    beyond: str
    #: Where the noise comes from: "gate" (the gate's row), "spread" (the nights shown), "" (none).
    source: str
    #: "worse", "better" or "" (no direction known, no change, or a value missing).
    verdict: str
    #: The series' status on the compared night (a CSS class, as the table's cells).
    status: str
    #: The unformatted change in noise standard deviations, for ordering (None without a noise).
    sd: float | None


@dataclass(frozen=True)
class Comparison:
    """Two nights of a task side by side (``message``: why not, when the picks could not be compared)."""

    night: Night | None = None
    reference: Night | None = None
    night_key: str = ""
    reference_key: str = ""
    lines: tuple[Line, ...] = ()
    #: Series compared but not listed (smaller changes, past ``COMPARE_ROWS``).
    more: int = 0
    #: Why there is no comparison ("" when there is one).
    message: str = ""
    #: How the default reference was chosen ("" when the viewer picked it).
    why: str = ""


def comparable(night: Night) -> bool:
    """Whether ``night`` has gate rows to compare (a night still running, or without a gate, has none)."""
    return night.result.has_result and bool(night.result.entries)


def default_reference(candidates: Sequence[Night], night: Night) -> tuple[Night | None, str]:
    """The night to set beside ``night`` by default (``candidates``: comparable nights, newest first), and
    why it was chosen: the last accepted night before it, else the centre of the gate's history window. Only
    nights of its own map index count: a mapped task's instances are other scenarios (``.expand()``), not
    earlier nights of this one."""
    earlier = [n for n in candidates if n.map_index == night.map_index and n.at < night.at]
    if not earlier:
        return None, ""
    accepted = next((n for n in earlier if n.result.accepted), None)
    if accepted is not None:
        return accepted, "the last night on which a person accepted a change"
    history = max((e.history_n or 0 for e in night.result.entries), default=0)
    if history >= 2:
        back = min(history // 2, len(earlier)) - 1
        return earlier[back], f"the centre of the gate's history ({history} nights)"
    return earlier[0], "the night before"


def _pick(key: str, by_key: dict[str, Night], shown: int, role: str) -> tuple[Night | None, str]:
    """The night keyed ``key``, or why not, said so that the viewer knows what to do."""
    if not _KEY.fullmatch(key):
        return None, (
            f"The {role} {clip(key, 40)!r} is not a night's key (a date, a dot and 10 hex digits, as the "
            "table's compare links write it)."
        )
    found = by_key.get(key)
    if found is None:
        return None, (
            f"No night {key} among the {shown:,} newest nights of this task (ask for more with "
            "?nights=, or pick one from the table)."
        )
    if not comparable(found):
        return None, f"The night {key} has no gate rows to compare (it is running, or ran without a gate)."
    return found, ""


def compare(
    history: TaskHistory, night_pick: str | None = None, reference_pick: str | None = None
) -> Comparison:
    """``history``'s two nights keyed ``night_pick`` and ``reference_pick`` (each defaults as the module
    says) side by side. Linear in the two nights' rows, plus ``SPREAD_NIGHTS`` lookups per series the gate
    measured no noise for; at most ``COMPARE_ROWS`` lines are formatted."""
    candidates = [n for n in history.nights if comparable(n)]
    by_key = {night_key(n): n for n in history.nights}
    shown = len(history.nights)
    night: Night | None
    if night_pick:
        night, said = _pick(night_pick, by_key, shown, "night")
        if night is None:
            return Comparison(message=said)
    elif candidates:
        night = candidates[0]
    else:
        return Comparison(message="No night of this task has gate rows to compare yet.")
    why = ""
    reference: Night | None
    if reference_pick:
        reference, said = _pick(reference_pick, by_key, shown, "reference")
        if reference is None:
            return Comparison(message=said)
    else:
        reference, why = default_reference(candidates, night)
        if reference is None:
            return Comparison(
                message="Only one night of this task has gate rows: nothing to compare it with."
            )
    if reference is night:
        return Comparison(message="Pick two different nights: these links name the same night twice.")
    own = [n for n in candidates if n.map_index == night.map_index]  # a mapped task's own scenario
    lines, more = _lines(night, reference, own[:SPREAD_NIGHTS])
    return Comparison(night, reference, night_key(night), night_key(reference), lines, more, "", why)


# --- the lines -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Measure:
    """One series' figures before formatting (every series is measured; only the listed are formatted)."""

    key: tuple[str, str | None]
    night: float | None
    reference: float | None
    change: float | None
    change_pct: float | None
    noise: float | None
    source: str
    sd: float | None
    status: str


def _noise(entry: Any) -> float | None:
    noise = None if entry is None else entry.noise
    return abs(noise) if noise is not None and math.isfinite(noise) and noise != 0 else None


def spread(values: Sequence[float]) -> float | None:
    """1.4826 x the median absolute deviation of ``values`` (None from fewer than ``MIN_SPREAD_NIGHTS``, or
    when at least half of them are equal: no spread to divide by)."""
    if len(values) < MIN_SPREAD_NIGHTS:
        return None
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values)
    sd = MAD_TO_SD * mad
    return sd if sd > 0 and math.isfinite(sd) else None


#: A night's rows as the spread reads them: each series' entry index, and the entries.
_Table = tuple[dict[tuple[str, str | None], int], tuple[Any, ...]]


def _values(key: tuple[str, str | None], tables: Sequence[_Table]) -> list[float]:
    """The series' finite values over the nights of ``tables``, read straight from the rows as decoded."""
    found = []
    for by_series, entries in tables:
        index = by_series.get(key)
        if index is not None:
            value = entries[index].value
            if value is not None and math.isfinite(value):
                found.append(value)
    return found


def _measure(
    key: tuple[str, str | None], night: Night, reference: Night, spread_tables: Sequence[_Table]
) -> _Measure:
    from airflow_provider_loadtest.decisions.gate import change_pct

    i, j = night.result.by_series.get(key), reference.result.by_series.get(key)
    entry = None if i is None else night.result.entries[i]
    before = None if j is None else reference.result.entries[j]
    after_value = None if entry is None else entry.value
    before_value = None if before is None else before.value
    change = pct = None
    if after_value is not None and before_value is not None:
        change = after_value - before_value
        change = change if math.isfinite(change) else None
        pct = change_pct(after_value, before_value) if change is not None else None
    noise, source = _noise(entry) or _noise(before), "gate"
    if noise is None and change is not None:
        noise, source = spread(_values(key, spread_tables)), "spread"
    sd = None if noise is None or change is None else change / noise
    sd = sd if sd is not None and math.isfinite(sd) else None
    status = "none" if i is None else night.result.statuses[i].value
    return _Measure(key, after_value, before_value, change, pct, noise, source if noise else "", sd, status)


def _order(m: _Measure) -> tuple[bool, float, bool, float]:
    """Largest change beyond the noise first; then the changes without a noise, by their size in %; then
    the series on one night only."""
    return (m.sd is None, -abs(m.sd or 0.0), m.change_pct is None, -abs(m.change_pct or 0.0))


def _verdict(metric: str, change: float | None) -> str:
    from airflow_provider_loadtest.decisions.gate import METRIC_DIRECTIONS, Direction

    direction = METRIC_DIRECTIONS.get(metric)
    if change is None or change == 0 or direction is None:
        return ""
    worse = change > 0 if direction is Direction.HIGHER_IS_WORSE else change < 0
    return "worse" if worse else "better"


def _line(m: _Measure) -> Line:
    metric, transaction = m.key
    unit = unit_of(metric)
    return Line(
        metric=clip(metric, NAME_CHARS),
        transaction=None if transaction is None else clip(transaction, NAME_CHARS),
        unit=unit,
        reference=number(m.reference),
        night=number(m.night),
        change="-" if m.change is None else f"{'+' if m.change > 0 else ''}{number(m.change)}",
        change_pct="" if m.change_pct is None else percent(m.change_pct),
        noise=number(m.noise),
        beyond="" if m.sd is None else signed(m.sd, "sd"),
        source=m.source,
        verdict=_verdict(metric, m.change),
        status=m.status,
        sd=m.sd,
    )


def _lines(night: Night, reference: Night, spread_nights: Sequence[Night]) -> tuple[tuple[Line, ...], int]:
    keys = list(dict.fromkeys([*night.result.by_series, *reference.result.by_series]))
    tables = [(n.result.by_series, n.result.entries) for n in spread_nights]
    measures = sorted((_measure(k, night, reference, tables) for k in keys), key=_order)
    return tuple(_line(m) for m in measures[:COMPARE_ROWS]), max(len(measures) - COMPARE_ROWS, 0)
