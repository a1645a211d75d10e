"""The applied load, checked before the run's figures are trusted: did the run apply its usual load?

A run whose load generators did not all start, or whose user-load profile was edited by mistake, applies
100 virtual users instead of 500; a lightly loaded system answers faster, so every response-time row
passes ("the test passed because it generated no load"). Every ``baseline="history"`` gate therefore
reads the run's ``USERLOAD`` and ``HITS_RATE`` (no gate has to name them) and judges them here, against
their own history, by a rule of their own:

* **Too light** (the row fails, status ``not_measured``: the night's figures do not describe the usual
  load, so they are no measurement of it): tonight's value is below ``(1 - LIGHT_PCT/100)`` of the
  usual centre **and** more than ``NOISE_Z`` noise standard deviations below it. ``USERLOAD``: 20 %
  fewer users than usual. Why 20 %: response times grow with the load non-linearly (a queue near
  saturation), so a fifth fewer users can hide a real regression, while a few percent (a user that
  started late in the ramp-up, a profile rounded differently) changes little and must not cry wolf; a
  user load is normally the same every night, so its noise is 0 and the percentage decides.
  ``HITS_RATE`` is a **trust check**, not a regression: far below usual (half, ``LIGHT_PCT`` 50, and
  beyond its noise), the load did not apply (a think time or pacing edited, an open workload whose
  arrival rate was cut). It is looser than ``USERLOAD``'s because a closed workload sends fewer hits when
  the system slows down: a slower system is the response times' to judge (the family of series,
  ``family.py``), and the message says both readings. A gate that bounds ``HITS_RATE`` with
  ``max_regression_pct`` judges it as a regression among the other series instead, not here.
* **Heavier than usual** (more than ``LIGHT_PCT`` above the centre): passes, with a note: the run is
  measured, under more load than its history (slower times may be the load's doing).
* **The history**: ``SeriesHistory.values`` of its key (``(None, "USERLOAD")``), the centre and noise by
  ``history.estimate`` (the mean and sd within the robust fence) from ``settings.min_history`` nights,
  the median of the nights so far before that (one earlier night is enough to know the usual load). A
  night that is not too light joins it (at most ``settings.window`` nights); a light night never does,
  so a broken load generator never becomes the usual. A deliberate change is accepted like any other
  (``loadtest_accept_change``, ``history.accepted_metrics``): it passes, and the history restarts from it.
* **Without a history**, ``minimum`` (``min_userload`` on the operator) states the users the run must
  reach; with a history both apply.
* **Not given by the service**: said in a note, not a failure (an older service version, or a result
  recorded before it, may not give them; the check is on top of what the user gated), unless a
  ``minimum`` was asked for: then the row fails as not measured.

These rows never enter the family's night effect nor its false-alarm budget (``USERLOAD`` is
``Direction.NEUTRAL``: it is neither better nor worse, only the usual or not). Sans-I/O, pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_loadtest.decisions.gate.rows import (
    BUDGET,
    NOT_MEASURED,
    PASS,
    GateRow,
    Unreadable,
    change_pct,
    format_number,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.history import (
        GateHistory,
        HistorySettings,
        SeriesHistory,
        SeriesKey,
    )
    from airflow_provider_loadtest.decisions.gate.rules import Budget

__all__ = [
    "LIGHT_PCT",
    "LOAD_METRICS",
    "NOISE_Z",
    "LoadSeries",
    "judge_load",
    "judge_loads",
    "load_untrusted",
]

#: The metrics of the applied load every history gate reads.
LOAD_METRICS: tuple[str, ...] = ("USERLOAD", "HITS_RATE")
#: How far below its usual centre (in percent of it) a load metric must be to fail.
LIGHT_PCT: Mapping[str, float] = {"USERLOAD": 20.0, "HITS_RATE": 50.0}
#: And how many of its noise standard deviations below it (a load that varies from night to night).
NOISE_Z = 3.0
#: What the message calls each metric's unit.
_UNITS = {"USERLOAD": "users", "HITS_RATE": "hits/s"}


@dataclass(frozen=True)
class LoadSeries:
    """A load metric of tonight's run: its value (or ``Unreadable``), the least value it must reach
    (``min_userload``; None: none stated) and its budget when the gate also gave it one."""

    metric: str
    value: object
    minimum: float | None = None
    budget: Budget | None = None


def _usable(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _usual(history: SeriesHistory, settings: HistorySettings) -> tuple[float, float, int]:
    """The usual value and its noise (one sd; 0 on a short history) from the nights kept."""
    from airflow_provider_loadtest.decisions.gate.history import estimate

    values = list(history.values)
    if len(values) >= settings.min_history:
        fit = estimate(values)
        return fit.centre, fit.sd, len(values)
    ordered = sorted(values)
    half = len(ordered) // 2
    median = ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
    return median, 0.0, len(values)


def judge_load(
    series: LoadSeries,
    history: SeriesHistory | Unreadable | None,
    settings: HistorySettings,
    *,
    accepted: bool = False,
) -> tuple[GateRow, SeriesHistory | None]:
    """One load metric's row and its history for the next night (None: leave it as it was).

    ``history``: the metric's ``SeriesHistory`` (``baseline="history"``), ``Unreadable`` when it did not
    parse (the load is then judged by ``minimum`` alone and its history restarts from the next night,
    as every series' does), None without one."""
    from airflow_provider_loadtest.decisions.gate.history import SeriesHistory

    metric, unit = series.metric, _UNITS.get(series.metric, "")
    value = _usable(series.value)
    reasons: list[str] = []
    notes: list[str] = []
    status = PASS
    centre = noise = None
    n: int | None = None
    after: SeriesHistory | None = None
    if value is None:
        why = series.value.reason if isinstance(series.value, Unreadable) else "the service gave no value"
        if series.minimum is not None:
            reasons.append(f"not measured: {why}: the applied load could not be checked")
            status = NOT_MEASURED
        else:
            notes.append(f"the applied load is not checked: {why}")
    else:
        if series.minimum is not None and value < series.minimum:
            least = format_number(series.minimum)
            reasons.append(
                f"the run applied {format_number(value)} {unit}, fewer than the {least} it must reach "
                f"({'min_userload' if metric == 'USERLOAD' else 'its minimum'}): its response times do "
                "not describe the intended load"
            )
            status = NOT_MEASURED
        if isinstance(history, Unreadable):
            notes.append(f"not judged against its history ({history.reason}), which restarts")
        elif history is not None and accepted:
            notes.append("change of load accepted as the new normal: its history restarts from this night")
            after = SeriesHistory((value,))
        elif history is not None:
            light = False
            if history.values:
                centre, noise, n = _usual(history, settings)
                pct = LIGHT_PCT.get(metric, LIGHT_PCT["USERLOAD"])
                below = centre - value
                if below > centre * pct / 100 and below > NOISE_Z * noise:
                    light = True
                    reasons.append(_light_reason(metric, value, centre))
                    status = NOT_MEASURED
                elif value - centre > centre * pct / 100 and value - centre > NOISE_Z * noise:
                    notes.append(
                        f"the run applied {format_number(value)} of its usual {_usual_text(centre)} {unit}: "
                        "more load than its history, so slower response times may be the load's doing"
                    )
            else:
                notes.append("no earlier night: the applied load is judged from the next night on")
            after = None if light else SeriesHistory((*history.values, value)[-settings.window :])
    if value is not None and series.budget is not None and not series.budget.allows(value):
        reasons.append(f"budget {series.budget}")
        if status != NOT_MEASURED:
            status = BUDGET
    change = change_pct(value, centre) if value is not None and centre is not None else None
    row = GateRow(
        metric=metric,
        value=value,
        passed=not reasons,
        budget=str(series.budget) if series.budget is not None else None,
        baseline=centre,
        change_pct=round(change, 2) if change is not None else None,
        reason="; ".join(reasons) or None,
        status=status,
        centre=centre if n is not None and n >= settings.min_history else None,
        noise=noise if n is not None and n >= settings.min_history else None,
        history_n=n,
        note="; ".join(notes) or None,
    )
    return row, after


def _usual_text(centre: float) -> str:
    return format_number(round(centre, 3))


def _light_reason(metric: str, value: float, centre: float) -> str:
    if metric == "USERLOAD":
        return (
            f"the run applied {format_number(value)} of its usual {_usual_text(centre)} users: its response "
            "times do not describe the usual load"
        )
    return (
        f"the run sent {format_number(value)} of its usual {_usual_text(centre)} hits/s: the load did not "
        "apply as usual (or the system served it far more slowly: see the response times), so its "
        "figures do not describe the usual load"
    )


def judge_loads(
    loads: Iterable[LoadSeries],
    history: GateHistory | None,
    settings: HistorySettings,
    *,
    accepted: Iterable[str] = (),
) -> tuple[list[GateRow], dict[SeriesKey, SeriesHistory]]:
    """The run's load metrics judged (``judge_load``), and the histories to keep for the next night
    (keyed ``(None, metric)``; a metric left out keeps its history as it was). ``history`` None: no
    history gate (``minimum`` alone)."""
    from airflow_provider_loadtest.decisions.gate.history import HistoryUnreadable

    accepted = frozenset(accepted)
    rows: list[GateRow] = []
    kept: dict[SeriesKey, SeriesHistory] = {}
    for series in loads:
        key: SeriesKey = (None, series.metric)
        own: SeriesHistory | Unreadable | None = None
        if history is not None:
            try:
                own = history.get(key)
            except HistoryUnreadable as exc:
                own = Unreadable(str(exc))
        row, after = judge_load(series, own, settings, accepted=series.metric in accepted)
        rows.append(row)
        if after is not None:
            kept[key] = after
    return rows, kept


def load_untrusted(rows: Iterable[GateRow]) -> bool:
    """Did a load row fail because the load was not applied (its figures are then no measurement)?"""
    return any(
        row.metric in LOAD_METRICS and row.status == NOT_MEASURED and row.value is not None for row in rows
    )
