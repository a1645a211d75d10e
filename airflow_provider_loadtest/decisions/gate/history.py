"""``baseline="history"``: judge tonight against the run-to-run noise of the last passing nights.

One night compared with one earlier night (``baseline="previous"``) cries wolf on ordinary noise and is
hostage to one lucky night. Here each gated series (a metric, for the whole run or one transaction)
keeps the values of its last passing nights, in Airflow's XCom beside the verdict (no store of ours):

* the **centre** and the **noise** are the mean and the standard deviation of the history's values
  within a robust fence (``median +- FENCE x 1.4826 x MAD``): one outlier night moves neither, while
  the tails that belong to the noise count (a robust spread such as Qn measures the core of the noise
  and, on heavy-tailed noise, cries wolf; the median costs a one-night test 5 points of detection);
* tonight is a **regression** when it is worse than the centre by more than ``max_regression_pct`` (the
  smallest change that matters to the user) *and* by more than the noise explains at ``fail_z``: the
  threshold is Student's t for the history's length (``threshold_factor``), so the stated false-alarm
  rate, ``1 - Phi(fail_z)`` = 0.6 % a night, holds under Gaussian noise for any history length;
* a change too small to tell on one night is caught when it **persists**: the mean of the last
  ``persist_nights`` nights (none of them a one-night failure, each worse than the centre by
  ``PERSIST_FLOOR_Z`` noise sd) against ``persist_z`` (0.26 %). Meanwhile a night beyond ``suspect_z``
  is **suspected**: said in the log, kept out of the history, still passing. A confirmed regression
  keeps failing while it lasts;
* a night joins the history once ``persist_nights - 1`` later nights have been judged: if it was
  noise, a suspicion they did not turn into a regression, or a one-night failure they cleared (each
  of them noise: it was an outlier of the noise, not a change). Nights of a change that persisted never
  join, so a regression never becomes the new normal by itself. A person accepts a change with the
  DAG-run conf ``{"loadtest_accept_change": true}`` (see ``accepted_metrics``): the history restarts;
* with fewer than ``min_history`` nights the judgement says so and falls back to today's rule (the bound
  alone, against the median of the nights so far); a warm-up night that fails beyond the noise of the
  nights so far does not join, and after an accepted change the nights are judged against the accepted
  night (``_judge_previous``);
* a **creep** is a regression (issue 33): the first ``REFERENCE_NIGHTS`` nights that joined since the
  last accepted change are the series' reference level, kept with the date it began (``when``), and the
  mean of its last ``CREEP_WINDOWS`` nights worse than it beyond the bound and the noise fails, saying
  how much, over how many nights and since when (``creep_test``; a gate of many series: ``family.py``).

docs/gate_quality.md measures it (false alarms, steps caught) beside ``"previous"`` and Apache Otava.

Read, not copied: Apache Otava (formerly Hunter) and MongoDB's E-Divisive work detect change points in
a whole series after the fact; a gate must decide on the night, so this is a one-sided online test (the
prediction interval of the next night) with a persistence rule, the same spirit in a form that fits one
task run. Pure Python (``math`` only: no ``statistics``, whose exact fractions cost 20 times more here,
nor scipy for one t quantile): it runs on workers and in the triggerer, and loads only for the gates
that use it (``gate.py`` imports it on first use).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_loadtest.decisions.gate.rows import (
    BUDGET,
    NOISE,
    NOT_MEASURED,
    PASS,
    REGRESSION,
    STATUSES,
    SUSPECTED,
)

__all__ = [  # noqa: RUF022 - grouped by meaning, not sorted
    "HISTORY",
    "HISTORY_XCOM_KEY",
    "ACCEPT_CHANGE",
    "HISTORY_FORMAT",
    "PASS",
    "NOISE",
    "SUSPECTED",
    "REGRESSION",
    "BUDGET",
    "NOT_MEASURED",
    "STATUSES",
    "SeriesKey",
    "HistorySettings",
    "HistoryUnreadable",
    "SeriesHistory",
    "GateHistory",
    "accepted_metrics",
    "FENCE",
    "FENCE_FROM",
    "NoiseEstimate",
    "estimate",
    "t_quantile",
    "threshold_factor",
    "nominal_false_alarm_rate",
    "PERSIST_FLOOR_Z",
    "NightJudgement",
    "judge_night",
]

#: ``baseline="history"`` (``gate.HISTORY`` is the same string).
HISTORY = "history"
#: XCom key under which a task leaves its gate history, for the next DAG run of the task.
HISTORY_XCOM_KEY = "loadtest_gate_history"
#: DAG-run conf key with which a person accepts tonight's values as the new normal.
ACCEPT_CHANGE = "loadtest_accept_change"
#: Version of the XCom form: a form this code does not know is read as unreadable (fail closed).
HISTORY_FORMAT = 1

#: A gated series: (transaction label or None for the whole run, metric id).
SeriesKey = tuple[str | None, str]


@dataclass(frozen=True)
class HistorySettings:
    """How ``baseline="history"`` judges; the defaults are what docs/gate_quality.md measured.

    ``window``: the passing nights kept; ``min_history``: fewer, and the gate falls back to the bound
    alone; ``fail_z``, ``persist_z``, ``suspect_z``: the one-night test, the persistence test and a
    suspicion, each as a one-sided Gaussian quantile (its stated false-alarm rate is ``1 - Phi(z)``,
    whatever the history's length); ``persist_nights``: the nights whose mean the persistence test
    judges (1: no persistence test); ``false_alarm_budget``: the red clean nights the whole gate may
    have, per night, however many series it judges (``family.py`` shares it among them; default 1 in
    100). One series alone is judged at the quantiles above, or higher ones if the budget asks less."""

    window: int = 60
    min_history: int = 4
    fail_z: float = 2.5
    persist_z: float = 2.8
    suspect_z: float = 1.6
    persist_nights: int = 3
    false_alarm_budget: float = 0.01

    @classmethod
    def parse(cls, **settings: Any) -> HistorySettings:
        """Check user settings (``ValueError`` names the bad one); unknown names are refused."""
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown history setting(s) {unknown}; known: {sorted(known)}")
        merged = {**cls().__dict__, **settings}
        for name in ("window", "min_history", "persist_nights"):
            value = merged[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"history setting {name}={value!r} must be a whole number")
        for name in ("fail_z", "persist_z", "suspect_z"):
            value = merged[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 100:
                raise ValueError(f"history setting {name}={value!r} must be a positive number")
            merged[name] = float(value)
        budget = merged["false_alarm_budget"]
        if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0.0001 <= budget <= 0.2:
            raise ValueError(
                f"history setting false_alarm_budget ({budget!r}) must be a number from 0.0001 to 0.2 (the "
                "share of clean nights the whole gate may fail: 0.01 is one night in 100)"
            )
        merged["false_alarm_budget"] = float(budget)
        if not 5 <= merged["window"] <= 100:
            raise ValueError(f"history setting window ({merged['window']}) must be 5 to 100 nights")
        if not 4 <= merged["min_history"] <= merged["window"]:
            raise ValueError(
                f"history setting min_history ({merged['min_history']}) must be 4 to window "
                f"({merged['window']}): a spread from fewer than 4 nights says nothing"
            )
        if not 1 <= merged["persist_nights"] <= 5:
            raise ValueError(f"history setting persist_nights ({merged['persist_nights']}) must be 1 to 5")
        if merged["suspect_z"] > merged["fail_z"]:
            raise ValueError("history setting suspect_z must not exceed fail_z")
        return cls(**merged)


# --- the state kept in XCom ---------------------------------------------------------------------


class HistoryUnreadable(ValueError):
    """A history from XCom that does not parse: the gate cannot judge against it (fail closed)."""


@dataclass(frozen=True)
class SeriesHistory:
    """One series' memory: the admitted passing nights (oldest first) and the last nights not yet
    admitted, each with the status it was given (a night joins ``values`` once it is old enough).

    ``shifts`` go with ``values`` night for night, ``recent_shifts`` with ``recent``: the night effect
    of each night (every series' shared movement, ``family.py``), None where a night had none (a gate
    of too few series, or a history older than them). A gate of few series has none at all, and the
    XCom form then leaves them out: an older reader reads the same form it wrote."""

    values: tuple[float, ...] = ()
    recent: tuple[tuple[float, str], ...] = ()
    shifts: tuple[float | None, ...] = ()
    recent_shifts: tuple[float | None, ...] = ()
    #: The reference level (issue 33): the first ``REFERENCE_NIGHTS`` nights that joined since the
    #: last accepted change (or since the history began), with their night effects; a creep is judged
    #: against their mean, which does not move with it. Empty in a history an older release wrote:
    #: the oldest nights kept stand in for it (``with_reference``).
    reference: tuple[float, ...] = ()
    reference_shifts: tuple[float | None, ...] = ()
    #: When the reference began (the caller's ``when`` of that night; None when not told).
    since: str | None = None
    #: Nights judged since the reference began, and nights that joined since (reference included).
    age: int = 0
    joined: int = 0
    #: The reference began at a change a person accepted (not at the history's first night).
    accepted: bool = False
    #: The last nights measured, whatever their verdict (up to the longest creep window): the creep test's
    #: "last m nights" (a night that failed is one of them: a false alarm clears as ordinary nights come,
    #: and a creep keeps failing), and how many were measured since the reference was complete.
    last: tuple[float, ...] = ()
    after: int = 0

    def to_xcom(self) -> dict[str, Any]:
        data: dict[str, Any] = {"values": list(self.values), "recent": [[v, s] for v, s in self.recent]}
        if any(f is not None for f in (*self.shifts, *self.recent_shifts)):
            data["shifts"] = [self.shift(i) for i in range(len(self.values))]
            data["recent_shifts"] = [self.recent_shift(i) for i in range(len(self.recent))]
        if self.reference:
            data["reference"] = {
                "values": list(self.reference),
                "shifts": [self.reference_shift(i) for i in range(len(self.reference))]
                if any(f is not None for f in self.reference_shifts)
                else [],
                "since": self.since,
                "age": self.age,
                "joined": self.joined,
                "accepted": self.accepted,
                "last": list(self.last),
                "after": self.after,
            }
        return data

    @classmethod
    def from_xcom(cls, data: object) -> SeriesHistory:
        """``HistoryUnreadable`` for anything that is not exactly the form ``to_xcom`` writes."""
        if not isinstance(data, Mapping):
            raise HistoryUnreadable(f"a series is {type(data).__name__}, not a mapping")
        values, recent = data.get("values"), data.get("recent", [])
        shifts, recent_shifts = data.get("shifts", []), data.get("recent_shifts", [])
        if not (
            isinstance(values, list)
            and isinstance(recent, list)
            and isinstance(shifts, list)
            and isinstance(recent_shifts, list)
        ):
            raise HistoryUnreadable("'values', 'recent', 'shifts' and 'recent_shifts' must be lists")
        parsed = tuple(_finite(v, "a value") for v in values)
        nights = []
        for night in recent:
            if not (isinstance(night, list | tuple) and len(night) == 2 and night[1] in _RECENT_STATUSES):
                raise HistoryUnreadable(f"a recent night {night!r} is not [value, status]")
            nights.append((_finite(night[0], "a recent value"), str(night[1])))
        if (shifts or recent_shifts) and (len(shifts) != len(parsed) or len(recent_shifts) != len(nights)):
            raise HistoryUnreadable("'shifts' and 'recent_shifts' must go with 'values' and 'recent'")
        reference = _reference_from_xcom(data.get("reference"))
        return cls(
            parsed,
            tuple(nights),
            tuple(None if f is None else _finite(f, "a night effect") for f in shifts),
            tuple(None if f is None else _finite(f, "a night effect") for f in recent_shifts),
            **reference,
        )

    def shift(self, index: int) -> float | None:
        """The night effect of ``values[index]``'s night (None when unknown)."""
        return self.shifts[index] if len(self.shifts) == len(self.values) else None

    def recent_shift(self, index: int) -> float | None:
        """The night effect of ``recent[index]``'s night (None when unknown)."""
        return self.recent_shifts[index] if len(self.recent_shifts) == len(self.recent) else None

    def reference_shift(self, index: int) -> float | None:
        """The night effect of ``reference[index]``'s night (None when unknown)."""
        return self.reference_shifts[index] if len(self.reference_shifts) == len(self.reference) else None


def _reference_from_xcom(data: object) -> dict[str, Any]:
    """The reference level as ``to_xcom`` wrote it; nothing (no reference yet) when absent."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise HistoryUnreadable("'reference' must be a mapping")
    values, shifts = data.get("values"), data.get("shifts", [])
    since, age, joined = data.get("since"), data.get("age", 0), data.get("joined", 0)
    last, after = data.get("last", []), data.get("after", 0)
    if not isinstance(last, list):
        raise HistoryUnreadable("the reference's 'last' must be a list")
    if not (isinstance(values, list) and isinstance(shifts, list) and len(shifts) in (0, len(values))):
        raise HistoryUnreadable("the reference's 'values' and 'shifts' must be lists that go together")
    if since is not None and not isinstance(since, str):
        raise HistoryUnreadable(f"the reference's 'since' {since!r} is not a string")
    for name, count in (("age", age), ("joined", joined), ("after", after)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise HistoryUnreadable(f"the reference's {name!r} {count!r} is not a count of nights")
    return {
        "reference": tuple(_finite(v, "a reference value") for v in values),
        "reference_shifts": tuple(None if f is None else _finite(f, "a night effect") for f in shifts)
        if any(f is not None for f in shifts)
        else (),
        "since": since,
        "age": age,
        "joined": joined,
        "accepted": data.get("accepted") is True,
        "last": tuple(_finite(v, "a last value") for v in last),
        "after": after,
    }


#: The nights whose mean is a series' reference level: the first that join after an accepted change
#: (or after the history began).
REFERENCE_NIGHTS = 40
#: The creep test's windows: the mean of the last m nights (none of them a reference night) against
#: the reference level; several, under one budget (a fast creep is seen by the short ones first, a
#: slow one by the long one).
CREEP_WINDOWS = (10, 20, 40)
#: A reference of fewer nights is no level to judge a creep against.
CREEP_REFERENCE_FROM = 5
#: One series judged alone: the false-alarm rate a night its creep test adds (shared by the windows).
CREEP_ALONE = 0.0005


def with_reference(history: SeriesHistory) -> SeriesHistory:
    """The history with a reference level: a history written before there was one (a release before
    issue 33) takes its oldest nights kept (up to ``REFERENCE_NIGHTS``) as its reference."""
    if history.reference or not history.values:
        return history
    count = min(REFERENCE_NIGHTS, len(history.values))
    known = len(history.shifts) == len(history.values)
    return replace(
        history,
        reference=history.values[:count],
        reference_shifts=history.shifts[:count]
        if known and any(f is not None for f in history.shifts[:count])
        else (),
        age=max(history.age, len(history.values) + len(history.recent)),
        joined=max(history.joined, len(history.values)),
        last=(*history.values, *(v for v, _ in history.recent))[-max(CREEP_WINDOWS) :],
        after=max(0, len(history.values) - count) + len(history.recent),
    )


def _finite(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HistoryUnreadable(f"{what} {value!r} is not a finite number")
    return float(value)


@dataclass(frozen=True)
class GateHistory:
    """Every series' history for one task, as read from (and written to) XCom.

    ``error`` is set when the whole XCom value did not parse, ``broken`` names the series whose entry
    did not: those series cannot be judged against their noise and fail as not measured.
    """

    series: Mapping[SeriesKey, SeriesHistory] = field(default_factory=dict)
    broken: Mapping[SeriesKey, str] = field(default_factory=dict)
    error: str | None = None
    #: The night effect's own history (``family.py``): its value each night, in noise sd; None until a
    #: night of the gate had enough series to measure it.
    night: SeriesHistory | None = None
    #: The scale the gate was last judged on (``family.LOG`` or ``family.LINEAR``; None: not yet).
    scale: str | None = None

    def get(self, key: SeriesKey) -> SeriesHistory:
        """The series' history (empty when it has none yet); ``HistoryUnreadable`` when it did not parse."""
        if self.error is not None:
            raise HistoryUnreadable(self.error)
        if key in self.broken:
            raise HistoryUnreadable(self.broken[key])
        return self.series.get(key, SeriesHistory())

    def to_xcom(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": HISTORY_FORMAT,
            "series": [
                {"metric": metric, "transaction": label, **history.to_xcom()}
                for (label, metric), history in self.series.items()
            ],
        }
        if self.night is not None:
            data["night"] = self.night.to_xcom()
        if self.scale is not None:
            data["scale"] = self.scale
        return data

    @classmethod
    def from_xcom(cls, data: object) -> GateHistory:
        """None (no earlier run left one) is an empty history; anything else that is not the written
        form is kept as an error, never mistaken for "no history"."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping) or data.get("format") != HISTORY_FORMAT:
            return cls(error=f"the gate history in XCom ({HISTORY_XCOM_KEY}) is not of a known form")
        entries = data.get("series")
        if not isinstance(entries, list):
            return cls(error=f"the gate history in XCom ({HISTORY_XCOM_KEY}) has no list of series")
        series: dict[SeriesKey, SeriesHistory] = {}
        broken: dict[SeriesKey, str] = {}
        for entry in entries:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("metric"), str):
                return cls(
                    error=f"the gate history in XCom ({HISTORY_XCOM_KEY}) has an entry without a metric"
                )
            label = entry.get("transaction")
            key = (label if isinstance(label, str) else None, entry["metric"])
            try:
                series[key] = SeriesHistory.from_xcom(entry)
            except HistoryUnreadable as exc:
                broken[key] = f"its history in XCom does not parse: {exc}"
        night = None
        if data.get("night") is not None:
            try:
                night = SeriesHistory.from_xcom(data["night"])
            except HistoryUnreadable as exc:
                return cls(
                    error=f"the night effect's history in XCom ({HISTORY_XCOM_KEY}) does not parse: {exc}"
                )
        scale = data.get("scale")
        return cls(series, broken, night=night, scale=scale if scale in ("log", "linear") else None)


# --- accepting a change ---------------------------------------------------------------------------


def accepted_metrics(
    conf: Mapping[str, Any] | None, task_id: str, metric_ids: Iterable[str]
) -> frozenset[str]:
    """The metrics whose change a person accepted for this DAG run (``dag_run.conf``), for ``task_id``.

    ``{"loadtest_accept_change": true}`` accepts every gated metric of every gated task of the DAG run;
    a list of metric ids accepts those; a mapping ``{task_id: true | [metric ids]}`` scopes it to tasks.
    Accepted metrics skip the regression test tonight (budgets still apply) and their history restarts
    from tonight's value. Anything else is a ``ValueError`` (a typo must not pass a regression).
    """
    wanted = list(metric_ids)
    value = (conf or {}).get(ACCEPT_CHANGE)
    if isinstance(value, Mapping):
        unknown_tasks = [k for k in value if not isinstance(k, str)]
        if unknown_tasks:
            raise ValueError(f"{ACCEPT_CHANGE}: task ids must be strings, got {unknown_tasks!r}")
        value = value.get(task_id)
    if value is None or value is False:
        return frozenset()
    if value is True:
        return frozenset(wanted)
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and all(isinstance(m, str) for m in value):
        unknown = sorted(set(value) - set(wanted))
        if unknown:
            raise ValueError(
                f"{ACCEPT_CHANGE}: {unknown} {'is' if len(unknown) == 1 else 'are'} not gated by task "
                f"{task_id!r} (it gates {wanted})"
            )
        return frozenset(value)
    raise ValueError(
        f"{ACCEPT_CHANGE} must be true, a list of metric ids, or a mapping of task id to either; "
        f"got {value!r}"
    )


# --- the statistics (pure Python) ----------------------------------------------------------------

#: ``1.4826 x MAD`` is a Gaussian-consistent spread that half the nights could not move.
_MAD_TO_SD = 1.4826
#: History values further than this many robust standard deviations (``1.4826 x MAD``) from the
#: median are left out of the centre and the noise: an outlier night (a hiccup, a lucky night) moves
#: neither, while the tails that belong to the noise still count (a Gaussian night lies beyond the
#: fence once in 10^5; a Student-t(3) night, scaled to the same sd, about once in 70).
FENCE = 4.5
#: Below this many nights the MAD is too unsteady to fence with: it set ordinary nights aside and the
#: band came out too narrow (measured: 1.6 false alarms per 100 Gaussian nights with 4 to 9 nights of
#: history, 0.6 without the fence). A short history is judged with all its nights.
FENCE_FROM = 10


@dataclass(frozen=True)
class NoiseEstimate:
    """The history's centre and one noise standard deviation, and the nights behind them (within
    the fence)."""

    centre: float
    sd: float
    n: int


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def estimate(points: Sequence[float]) -> NoiseEstimate:
    """Mean and standard deviation of the values within the robust fence (see ``FENCE``; from
    ``FENCE_FROM`` nights on).

    Not the median and a robust spread (Qn) themselves, which the first version used: the median's
    variance is pi/2 times the mean's on Gaussian noise (a one-night test loses about 5 points of
    detection to it), and a robust spread measures the core of the noise, not its tails: on
    heavy-tailed noise it is well below the standard deviation that steps are measured in, so a
    threshold in its units cried wolf (3 false alarms per 100 nights on t(3) noise, measured).
    """
    kept = list(points)
    median = _median(points)
    spread = _MAD_TO_SD * _median([abs(p - median) for p in points])
    if len(points) >= FENCE_FROM and spread > 0:
        kept = [p for p in points if abs(p - median) <= FENCE * spread]
    if len(kept) < 2:
        return NoiseEstimate(median, 0.0, len(kept))
    mean = math.fsum(kept) / len(kept)
    variance = math.fsum((p - mean) ** 2 for p in kept) / (len(kept) - 1)
    return NoiseEstimate(mean, math.sqrt(variance), len(kept))


def t_quantile(z: float, dof: int) -> float:
    """Student's t quantile with ``dof`` degrees of freedom at the probability where the standard
    normal quantile is ``z``: exact for 1 and 2 degrees of freedom, else the Cornish-Fisher expansion
    in 1/dof (Abramowitz and Stegun 26.7.5), within 1 % of the exact value at 3 degrees of freedom and
    0.1 % from 7 on (z <= 3.3).

    Why by hand: the standard library has no t distribution, and scipy (checked: ``scipy.stats.t``
    gives these values) would bring numpy into every worker for a dozen lines."""
    if dof <= 2:
        tail = nominal_false_alarm_rate(z)  # 1 - p, kept apart from 1 for precision
        if dof <= 1:
            return 1 / math.tan(math.pi * tail)
        return (1 - 2 * tail) / math.sqrt(2 * tail * (1 - tail))
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / dof + g2 / dof**2 + g3 / dof**3 + g4 / dof**4


def threshold_factor(z: float, n: int, m: int = 1) -> float:
    """How many noise standard deviations (as estimated from ``n`` nights) the mean of the last ``m``
    nights may lie from the history's mean before the test at the Gaussian quantile ``z`` fails it.

    Exact under Gaussian noise: ``(mean of m) - (mean of n)`` over the estimated sd is Student's t with
    ``n - 1`` degrees of freedom times ``sqrt(1/m + 1/n)`` (the prediction interval of the next
    nights), so a test set at ``z`` has the false-alarm rate ``1 - Phi(z)`` whatever the history's
    length: a short history widens the band rather than crying wolf."""
    return t_quantile(z, max(1, n - 1)) * math.sqrt(1 / m + 1 / n)


def nominal_false_alarm_rate(z: float) -> float:
    """The one-sided Gaussian tail beyond ``z``: the stated false-alarm rate of a test at ``z``."""
    return 0.5 * math.erfc(z / math.sqrt(2))


#: In the persistence test every night must be this many noise standard deviations worse than the
#: centre: two ordinary nights and one bad one are not a change that persists.
PERSIST_FLOOR_Z = 0.5
#: A recent night that failed on its own (an outlier, or the first night of a big step): it takes no
#: part in a persistence test, so one bad night cannot carry the ordinary nights after it over the line.
#: A night that failed as part of a persisting change is REGRESSION: the next night that is still
#: beyond ``suspect_z`` continues it (a confirmed regression keeps failing until a person accepts it).
_ONE_NIGHT = "regression_one_night"
_RECENT_STATUSES = (NOISE, SUSPECTED, REGRESSION, _ONE_NIGHT)

# --- one night of one series ----------------------------------------------------------------------


@dataclass(frozen=True)
class NightJudgement:
    """What the history says of tonight's value for one series (before budgets)."""

    status: str  # PASS, NOISE, SUSPECTED, REGRESSION or NOT_MEASURED
    centre: float | None = None
    noise: float | None = None  # one noise standard deviation, in the metric's units
    band_low: float | None = None  # what one night's noise explains at fail_z, in the metric's units
    band_high: float | None = None
    history_n: int = 0
    baseline: float | None = None  # the value compared against (centre, or the median on fallback)
    reason: str | None = None  # why it failed
    note: str | None = None  # what the log should say (suspected, too little history, accepted)


def _pct_worse(direction_sign: int, value: float, reference: float) -> float:
    """How much worse than ``reference``, in percent (from 0, any worsening is infinitely worse)."""
    worse = direction_sign * (value - reference)
    if reference == 0:
        return 0.0 if value == 0 else (math.inf if worse > 0 else -math.inf)
    return worse / abs(reference) * 100


@dataclass(frozen=True)
class Quantiles:
    """The one-sided Gaussian quantiles a series is judged at tonight: the one-night test, the
    persistence test and a suspicion (each widened to Student's t for the history's length). One
    series alone is judged at the settings' own; a gate of many at higher ones (``family.py``)."""

    fail_z: float
    persist_z: float
    suspect_z: float
    #: Persistence tests as (nights, quantile), each of the mean of that many nights ending tonight;
    #: empty: the one test of ``persist_nights`` nights at ``persist_z``. A gate of many series, whose
    #: one-night test is too strict to catch a 4 sd step at once, also tests two nights (``family.py``).
    windows: tuple[tuple[int, float], ...] = ()
    #: The creep tests as (nights, quantile): the mean of that many nights against the reference level.
    creep: tuple[tuple[int, float], ...] = ()

    @classmethod
    def of(cls, settings: HistorySettings) -> Quantiles:
        return cls(settings.fail_z, settings.persist_z, settings.suspect_z, creep=creep_windows(CREEP_ALONE))

    def persistence(self, persist_nights: int) -> tuple[tuple[int, float], ...]:
        """The persistence tests to run: (nights, quantile), longest last."""
        windows = self.windows or ((persist_nights, self.persist_z),)
        return tuple(sorted(w for w in windows if w[0] > 1))


def creep_windows(budget: float) -> tuple[tuple[int, float], ...]:
    """The creep tests at ``budget`` false alarms a night in all: each window its share (Bonferroni)."""
    return tuple((m, _z_of(budget / len(CREEP_WINDOWS))) for m in CREEP_WINDOWS)


def _z_of(tail: float) -> float:
    """The one-sided Gaussian quantile of ``tail`` (bisection on ``nominal_false_alarm_rate``)."""
    low, high = 0.0, 40.0
    for _ in range(100):
        middle = (low + high) / 2
        if nominal_false_alarm_rate(middle) > tail:
            low = middle
        else:
            high = middle
    return (low + high) / 2


@dataclass(frozen=True)
class Decision:
    """What the tests said of tonight (``decide``): the status, over which nights it failed, the
    recent nights that became part of a regression, and the status tonight keeps among the recent
    nights (a one-night failure is kept apart: it carries no later night over the line)."""

    status: str
    over: str | None = None
    marked: frozenset[int] = frozenset()
    kept_as: str = NOISE
    #: A creep away from the reference level (``creep_test``): it failed as one, saying so.
    creep: str | None = None


def decide(
    tonight: float,
    recent: Sequence[tuple[float | None, str]],
    *,
    noise: float,
    n: int,
    quantiles: Quantiles,
    persist_nights: int,
    change_pct: Callable[[float], float],
    max_regression_pct: float,
) -> Decision:
    """The tests of one series on one night, from deviations: how much worse than the centre tonight
    and each recent night was (in any unit, ``noise`` being one noise standard deviation in it; None
    for a recent night with no deviation known), ``n`` the nights the noise was measured on and
    ``change_pct`` what a mean deviation means in percent (checked against ``max_regression_pct``).

    The same rules whatever is deviating: a series' value from its history's centre (one series), or
    its movement beyond the night effect from its usual (a series among many, ``family.py``)."""

    def beyond(deviations: Sequence[float], z: float) -> bool:
        """Are these nights (ending tonight) together worse than the bound and the noise at z?"""
        if min(deviations) <= (PERSIST_FLOOR_Z * noise if len(deviations) > 1 else 0):
            return False
        mean = math.fsum(deviations) / len(deviations)
        if change_pct(mean) <= max_regression_pct:
            return False
        return mean > threshold_factor(z, n, len(deviations)) * noise

    # The recent nights since the last one that failed on its own (an outlier cannot carry a later
    # ordinary night over the line), of which each persistence test takes the nights it needs.
    windows = quantiles.persistence(persist_nights)
    longest = max((m for m, _ in windows), default=1)
    run: list[float] = []
    for deviation, status in reversed(recent):
        if status == _ONE_NIGHT or deviation is None or len(run) >= longest - 1:
            break
        run.insert(0, deviation)
    single = beyond([tonight], quantiles.fail_z)
    # For one series, one test of the mean of persist_nights nights: tests of shorter runs too
    # (tried) add as many false alarms as they catch steps.
    persisted = [
        m for m, z in windows if len(run) >= m - 1 and beyond([*run[len(run) - m + 1 :], tonight], z)
    ]
    persistent = bool(persisted)
    continuing = bool(recent) and recent[-1][1] == REGRESSION
    if single or persistent or (continuing and beyond([tonight], quantiles.suspect_z)):
        marked: frozenset[int] = frozenset()
        if single:
            over = "the last night"
        elif persistent:
            nights = max(persisted)
            over = f"the last {nights} nights together"
            marked = frozenset(len(recent) - i for i in range(1, nights))
        else:
            over = "the last night, continuing the regression of the night before,"
        kept = _ONE_NIGHT if single and not persistent and not continuing else REGRESSION
        return Decision(REGRESSION, over, marked, kept)
    if beyond([tonight], quantiles.suspect_z):
        return Decision(SUSPECTED, kept_as=SUSPECTED)
    return Decision(NOISE)


@dataclass(frozen=True)
class Creep:
    """A creep the test found: the mean of the last ``nights`` nights moved ``moved`` (worse: positive,
    in the test's units) from the reference level, whose noise sd is ``sd`` in those units."""

    nights: int
    moved: float
    sd: float

    @property
    def moved_sd(self) -> float:
        return self.moved / self.sd


def fenced(points: Sequence[float]) -> list[float]:
    """The points within the robust fence of their median (``FENCE``, from ``FENCE_FROM`` points)."""
    if len(points) < FENCE_FROM:
        return list(points)
    median = _median(points)
    spread = _MAD_TO_SD * _median([abs(p - median) for p in points])
    return [p for p in points if abs(p - median) <= FENCE * spread] if spread > 0 else list(points)


def drift_free_noise(levels: Sequence[float]) -> tuple[float, int]:
    """One noise sd of ``levels`` (in order) from their night-to-night differences, within the robust
    fence: a creep inside the window does not widen it as it widens the sd around the mean (a creep of
    0.05 sd a night over 60 nights would by a third). Returns the sd and its degrees of freedom
    (the differences' estimate is worth about two thirds of the sd's)."""
    diffs = fenced([b - a for a, b in itertools.pairwise(levels)])
    if len(diffs) < 3:
        return 0.0, 0
    variance = math.fsum(d * d for d in diffs) / (2 * len(diffs))
    return math.sqrt(variance), max(1, (2 * len(diffs)) // 3)


def creep_test(
    levels: Sequence[float],
    reference: Sequence[float],
    *,
    after_reference: int,
    noise: float,
    dof: int,
    windows: Sequence[tuple[int, float]],
    change_pct: Callable[[float], float],
    max_regression_pct: float,
) -> Creep | None:
    """Has the series crept away from its reference level? ``levels``: its nights in order (worse:
    positive; the last is tonight), ``reference`` the reference nights in the same units,
    ``after_reference`` how many of the last levels came after the reference. For each window (m,
    z): the mean of the last m nights against the reference's mean, which fails when it is worse by
    more than ``max_regression_pct`` and than the noise explains (Student's t, ``sqrt(1/m + 1/R)``).
    Returns the window that moved furthest beyond its threshold, None when none failed."""
    ref = fenced(reference)
    if len(ref) < CREEP_REFERENCE_FROM or noise <= 0 or dof < 1:
        return None
    level = math.fsum(ref) / len(ref)
    found: Creep | None = None
    best = 0.0
    for m, z in windows:
        if m > after_reference or m > len(levels):
            continue
        moved = math.fsum(levels[-m:]) / m - level
        if change_pct(moved) <= max_regression_pct:
            continue
        beyond = moved / (t_quantile(z, dof) * math.sqrt(1 / m + 1 / len(ref)) * noise)
        if beyond > 1 and beyond > best:
            found, best = Creep(m, moved, noise), beyond
    return found


def creep_reason(creep: Creep, pct: float, history: SeriesHistory, when: str | None) -> str:
    """What a creep says: how much, over how many nights, since when."""
    nights = max(history.age, creep.nights) + 1
    since = f" since {history.since}" if history.since else ""
    origin = "the last accepted change" if history.accepted else "the history's start"
    return (
        f"crept {_fmt_pct(pct)} % ({creep.moved_sd:.1f} sd) over {nights} nights{since}: the mean of its "
        f"last {creep.nights} nights against its reference level (its first {len(history.reference)} "
        f"nights from {origin}), beyond its noise and max_regression_pct; a creep does not become the "
        "normal without a person (loadtest_accept_change)"
    )


def _fmt_pct(value: float) -> str:
    return "from 0" if math.isinf(value) else f"{value:+.3g}"


def series_creep(
    value: float,
    history: SeriesHistory,
    *,
    to_level: Callable[[float, float | None], float | None],
    tonight_shift: float | None,
    windows: Sequence[tuple[int, float]],
    change_pct: Callable[[float], float],
    max_regression_pct: float,
) -> Creep | None:
    """The creep test of one series: its nights (the history's, the recent ones that were not a
    one-night failure, tonight) as levels (``to_level(value, night effect)``: worse positive, on its
    scale, the night effect's share taken out; None: that night cannot be placed), its reference's."""
    if not windows:
        return None
    found = creep_levels(value, history, to_level, tonight_shift)
    if found is None:
        return None
    return creep_test(
        found.levels,
        found.reference,
        after_reference=found.after_reference,
        noise=found.noise,
        dof=found.dof,
        windows=windows,
        change_pct=change_pct,
        max_regression_pct=max_regression_pct,
    )


@dataclass(frozen=True)
class Levels:
    """A series' nights for the creep test: its levels in order (the history's within the fence, the
    recent ones that were not a one-night failure, tonight last), its reference nights', how many of
    the last levels came after the reference, and the noise of its history's levels (night-to-night)."""

    levels: list[float]
    reference: list[float]
    after_reference: int
    noise: float
    dof: int


def creep_levels(
    value: float,
    history: SeriesHistory,
    to_level: Callable[[float, float | None], float | None],
    tonight_shift: float | None = None,
) -> Levels | None:
    """The series' levels (``to_level(value, night effect)``: worse positive, on its scale; None: that
    night cannot be placed); None without a reference or enough nights."""
    history = with_reference(history)
    if not history.reference:
        return None
    levels: list[float] = []
    for i, v in enumerate(history.values):
        one = to_level(v, history.shift(i))
        if one is not None:
            levels.append(one)
    past = len(levels)
    noise, dof = drift_free_noise(levels)
    if history.last:  # the last nights measured, whatever their verdict
        levels = fenced([one for v in history.last if (one := to_level(v, None)) is not None])
        kept_after = min(len(levels), history.after)
    else:  # a history an older release wrote: the nights that joined, and the recent ones
        levels = fenced(levels)
        kept_after = min(len(levels), max(0, history.joined - len(history.reference)))
        for i, (v, status) in enumerate(history.recent):
            one = to_level(v, history.recent_shift(i))
            if status != _ONE_NIGHT and one is not None:
                levels.append(one)
                kept_after += 1
    tonight = to_level(value, tonight_shift)
    if tonight is None or past < CREEP_REFERENCE_FROM:
        return None
    levels.append(tonight)
    reference = fenced(
        [
            one
            for i, v in enumerate(history.reference)
            if (one := to_level(v, history.reference_shift(i))) is not None
        ]
    )
    if len(reference) < CREEP_REFERENCE_FROM:
        return None
    return Levels(levels, reference, kept_after + 1, noise, dof)


def judge_night(
    value: float,
    history: SeriesHistory,
    *,
    worse_higher: bool,
    max_regression_pct: float,
    settings: HistorySettings,
    accepted: bool = False,
    quantiles: Quantiles | None = None,
    when: str | None = None,
) -> tuple[NightJudgement, SeriesHistory]:
    """Judge one night of one series and return the history for the next night.

    ``worse_higher`` is the metric's direction; values and history are plain numbers, so the same code
    judges a metric for the whole run or for one transaction. On the metric's own scale: a step is
    measured in it, and a log scale (tried) compresses the worse side of response times: measured, it
    caught a 4 sd step on its first night 71 % of the time at a CV of 20 %, rather than 92 %.
    ``quantiles``: where a series is judged among others without a night effect to take out (a gate of
    a few series), the higher quantiles its share of the gate's budget gives (``family.py``).
    """
    sign = 1 if worse_higher else -1
    n = len(history.values)
    if accepted:
        return accept(value, n, when=when)
    if n < settings.min_history:
        return _judge_previous(value, history, sign, max_regression_pct, settings, when=when)

    fit = estimate(history.values)
    centre, noise = fit.centre, fit.sd
    quantiles = quantiles or Quantiles.of(settings)
    band = threshold_factor(quantiles.fail_z, fit.n) * noise
    decision = decide(
        sign * (value - centre),
        [(sign * (v - centre), s) for v, s in history.recent],
        noise=noise,
        n=fit.n,
        quantiles=quantiles,
        persist_nights=settings.persist_nights,
        change_pct=lambda mean: _pct_worse(sign, centre + sign * mean, centre),
        max_regression_pct=max_regression_pct,
    )
    if decision.status != REGRESSION:
        decision = with_creep(
            decision,
            value,
            history,
            to_level=lambda v, _f: sign * v,
            tonight_shift=None,
            windows=quantiles.creep,
            change_pct=lambda moved: _pct_worse(sign, centre + sign * moved, centre),
            max_regression_pct=max_regression_pct,
            when=when,
        )
    judgement = NightJudgement(
        decision.status,
        centre=centre,
        noise=noise,
        band_low=centre - band,
        band_high=centre + band,
        history_n=n,
        baseline=centre,
        reason=decision.creep or regression_reason(decision, centre, max_regression_pct),
        note=suspicion_note(decision, _pct_worse(sign, value, centre), centre),
    )
    return judgement, admit(history, value, decision, settings)


def with_creep(
    decision: Decision,
    value: float,
    history: SeriesHistory,
    *,
    to_level: Callable[[float, float | None], float | None],
    tonight_shift: float | None,
    windows: Sequence[tuple[int, float]],
    change_pct: Callable[[float], float],
    max_regression_pct: float,
    when: str | None,
) -> Decision:
    """Tonight's decision, a regression when the series crept away from its reference level (the
    night is kept as part of a regression: it never joins the history without a person)."""
    found = series_creep(
        value,
        history,
        to_level=to_level,
        tonight_shift=tonight_shift,
        windows=windows,
        change_pct=change_pct,
        max_regression_pct=max_regression_pct,
    )
    if found is None:
        return decision
    reason = creep_reason(found, change_pct(found.moved), with_reference(history), when)
    return Decision(REGRESSION, "the last nights", kept_as=REGRESSION, creep=reason)


def accept(
    value: float, n: int, *, when: str | None = None, shift: float | None = None
) -> tuple[NightJudgement, SeriesHistory]:
    """A change a person accepted: passes, and the history restarts from tonight's value, which begins
    the reference level (the nights after it are judged against it: ``_judge_previous``)."""
    shifts = (shift,) if shift is not None else ()
    return (
        NightJudgement(
            PASS, history_n=n, note="change accepted as the new normal: the history restarts from this night"
        ),
        SeriesHistory(
            (value,),
            shifts=shifts,
            reference=(value,),
            reference_shifts=shifts,
            since=when,
            age=1,
            joined=1,
            accepted=True,
        ),
    )


def regression_reason(decision: Decision, centre: float, max_regression_pct: float) -> str | None:
    """Why a regression failed, for the row's ``reason``."""
    if decision.status != REGRESSION:
        return None
    return (
        f"{decision.over} worse than the history's centre {_fmt(centre)} by more than "
        f"{_fmt(max_regression_pct)} % and than its noise explains"
    )


def suspicion_note(decision: Decision, pct: float, centre: float) -> str | None:
    """What the log says of a suspected night."""
    if decision.status != SUSPECTED:
        return None
    return (
        f"suspected: {_fmt(pct)} % worse than the history's centre {_fmt(centre)}, beyond the "
        "noise on one night but not enough to fail; a regression if the next nights confirm it "
        "(kept out of the history meanwhile)"
    )


def admit(
    history: SeriesHistory,
    value: float,
    decision: Decision,
    settings: HistorySettings,
    shift: float | None = None,
) -> SeriesHistory:
    """Tonight joins the recent nights (the ``marked`` ones became part of a regression); the oldest
    recent night leaves them and joins the history if it was noise, a suspicion the nights after it
    did not turn into a regression, or a one-night failure that the nights after it cleared. The
    night effect of its night (``shift``, ``family.py``) goes with it.

    Why the last two join: they were the noise's own tails. Keeping every night beyond the band out
    cuts the history's upper tail, biases its noise low and raises the false alarms (measured: 1.3
    rather than 1.0 per 100 nights on Gaussian noise, 3.7 rather than 2.9 on t(3) noise); a change
    that persists still never joins."""
    history = with_reference(history)
    marked = decision.marked
    recent = [(v, REGRESSION if i in marked else s) for i, (v, s) in enumerate(history.recent)]
    recent.append((value, decision.kept_as))
    recent_shifts = [history.recent_shift(i) for i in range(len(history.recent))]
    recent_shifts.append(shift)
    values = list(history.values)
    shifts = [history.shift(i) for i in range(len(values))]
    reference = list(history.reference)
    reference_shifts = [history.reference_shift(i) for i in range(len(reference))]
    joined = history.joined
    while len(recent) > settings.persist_nights - 1:
        old_value, old_status = recent.pop(0)
        old_shift = recent_shifts.pop(0)
        cleared = all(s == NOISE for _, s in recent)
        if old_status in (NOISE, SUSPECTED) or (old_status == _ONE_NIGHT and cleared):
            values.append(old_value)
            shifts.append(old_shift)
            if joined < REFERENCE_NIGHTS and len(reference) == joined:  # the reference is still forming
                reference.append(old_value)
                reference_shifts.append(old_shift)
            joined += 1
    known = any(f is not None for f in (*shifts[-settings.window :], *recent_shifts))
    return SeriesHistory(
        tuple(values[-settings.window :]),
        tuple(recent),
        tuple(shifts[-settings.window :]) if known else (),
        tuple(recent_shifts) if known else (),
        tuple(reference),
        tuple(reference_shifts) if any(f is not None for f in reference_shifts) else (),
        history.since,
        history.age + 1,
        joined,
        history.accepted,
        *measured(history, value),
    )


def measured(history: SeriesHistory, value: float) -> tuple[tuple[float, ...], int]:
    """``last`` and ``after`` once tonight's ``value`` was measured (whatever its verdict)."""
    complete = len(history.reference) >= REFERENCE_NIGHTS
    return (*history.last, value)[-max(CREEP_WINDOWS) :], history.after + (1 if complete else 0)


def _judge_previous(
    value: float,
    history: SeriesHistory,
    sign: int,
    max_regression_pct: float,
    settings: HistorySettings,
    *,
    when: str | None = None,
) -> tuple[NightJudgement, SeriesHistory]:
    """Too little history: today's rule (the bound alone) against the median of the nights so far, said
    so. A night that fails joins only when the noise of the nights so far explains it (from two nights
    on, at ``fail_z`` widened to Student's t: a few nights' noise is wide); one beyond it does not join
    (a regression never becomes the normal without a person, warm-up included): after an accepted
    change the nights are judged against the accepted night until one passes, so a change that goes on
    getting worse from the night after it keeps failing. One exception: the
    second night of a history nobody accepted joins whatever its verdict, since nothing vouches for
    its first night (a lucky first night must not lock the gate, as it locks ``baseline="previous"``).
    The first night of a history begins its reference level (at ``when``)."""
    n = len(history.values)
    strict = n > 1 or history.accepted
    note = (
        f"{n} night{'s' if n != 1 else ''} of history, {settings.min_history} needed to judge against "
        "the noise: "
        + (
            (
                "judged against their median by max_regression_pct alone; tonight joins the history "
                + (
                    "unless it fails beyond their noise"
                    if n > 1
                    else "if it passes"
                    if strict
                    else "whatever its verdict (its first night is nobody's choice)"
                )
            )
            if n
            else "no earlier night: budgets only"
        )
    )
    if not n:
        started = SeriesHistory((value,), reference=(value,), since=when, age=1, joined=1)
        return NightJudgement(PASS, history_n=0, note=note), started
    pending = replace(history, recent=(), recent_shifts=())  # a warm-up history has no recent nights
    joined = admit(pending, value, Decision(NOISE), replace(settings, persist_nights=1))
    centre = _median(history.values)
    pct = _pct_worse(sign, value, centre)
    if pct > max_regression_pct:
        reason = f"more than {_fmt(max_regression_pct)} % worse than the median of the {n} nights of history"
        fit = estimate(history.values)
        explained = n > 1 and sign * (value - fit.centre) <= threshold_factor(settings.fail_z, fit.n) * fit.sd
        last, count = measured(history, value)
        after = (
            joined
            if explained or not strict
            else replace(history, age=history.age + 1, last=last, after=count)
        )
        return NightJudgement(REGRESSION, history_n=n, baseline=centre, reason=reason, note=note), after
    return NightJudgement(PASS, history_n=n, baseline=centre, note=note), joined


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "from 0"
    return f"{value:.4g}"
