"""``baseline="history"``: judge tonight against the run-to-run noise of the last passing nights.

One night compared with one earlier night (``baseline="previous"``) cries wolf on ordinary noise and is
hostage to one lucky night. Here each gated series (a metric, for the whole run or one transaction)
keeps the values of its last passing nights, in Airflow's XCom beside the verdict (no store of ours):

* the **centre** is their median and the **noise** a robust estimate of their spread (Rousseeuw and
  Croux's Qn: one outlier night moves neither), both on a log scale when every value is positive, so
  a change is a ratio and right-skewed noise (response times) is symmetric;
* tonight is a **regression** when it is worse than the centre by more than ``max_regression_pct`` (the
  smallest change that matters to the user) *and* by more than the noise explains: ``fail_z`` noise
  standard deviations, widened for a short history (the centre's own error, and a Student-like
  correction for a spread estimated from few nights): a nominal 0.8 % a night under Gaussian noise;
* a change too small to tell on one night is caught when it **persists**: the mean of the last two or
  three nights (none of them a one-night failure, each worse than the centre) against ``persist_z``
  standard deviations of such a mean (nominal 0.3 % each). Meanwhile a night beyond ``suspect_z`` is
  **suspected**: said in the log, kept out of the history, still passing. A confirmed regression keeps
  failing while it lasts;
* a night joins the history once ``persist_nights - 1`` later nights have been judged, if it was noise
  or a suspicion they cleared; a failing night never does, nor do the nights of a change that persisted,
  so a regression never becomes the new normal by itself. A person accepts a change with the DAG-run
  conf ``{"loadtest_accept_change": true}`` (see ``accepted_metrics``): the history restarts from it;
* with fewer than ``min_history`` nights the judgement says so and falls back to today's rule (the bound
  alone, against the median of the nights so far; every warm-up night joins).

docs/gate_quality.md measures it (false alarms, steps caught) beside ``"previous"`` and Apache Otava.

Read, not copied: Apache Otava (formerly Hunter) and MongoDB's E-Divisive work detect change points in
a whole series after the fact; a gate must decide on the night, so this is a one-sided online test with
a persistence rule, the same spirit (separate a change from the noise of the series) in a form that
fits one task run. Pure Python (``statistics`` only): it runs on workers and in the triggerer, and
statsmodels' ``qn_scale`` would bring numpy and scipy for a dozen lines.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: ``baseline="history"``.
HISTORY = "history"
#: XCom key under which a task leaves its gate history, for the next DAG run of the task.
HISTORY_XCOM_KEY = "loadtest_gate_history"
#: DAG-run conf key with which a person accepts tonight's values as the new normal.
ACCEPT_CHANGE = "loadtest_accept_change"
#: Version of the XCom form: a form this code does not know is read as unreadable (fail closed).
HISTORY_FORMAT = 1

# A row's ``status``.
PASS = "pass"  # noqa: S105 - passed, nothing compared against noise (budgets only, too little history, accepted)
NOISE = "noise"  # passed: within the noise, or a change smaller than max_regression_pct
SUSPECTED = "suspected"  # passed, but beyond the noise on one night: kept out of the history
REGRESSION = "regression"  # failed: worse than the bound and than the noise explains
BUDGET = "budget"  # failed its budget
NOT_MEASURED = "not_measured"  # failed: a value the gate needs could not be read
STATUSES = (PASS, NOISE, SUSPECTED, REGRESSION, BUDGET, NOT_MEASURED)

#: A gated series: (transaction label or None for the whole run, metric id).
SeriesKey = tuple[str | None, str]

_Z_PROBABILITY = statistics.NormalDist()
#: Variance of the median of n Gaussian values is about pi/2 sigma^2 / n.
_MEDIAN_VARIANCE = math.pi / 2
#: Qn's Gaussian efficiency: a spread from n values is worth about this share of n for a t correction.
_QN_EFFICIENCY = 0.82


@dataclass(frozen=True)
class HistorySettings:
    """How ``baseline="history"`` judges; the defaults are what docs/gate_quality.md measured."""

    window: int = 30
    min_history: int = 8
    fail_z: float = 2.4
    persist_z: float = 2.8
    suspect_z: float = 1.6
    persist_nights: int = 3

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
    admitted, each with the status it was given (a night joins ``values`` once it is old enough)."""

    values: tuple[float, ...] = ()
    recent: tuple[tuple[float, str], ...] = ()

    def to_xcom(self) -> dict[str, Any]:
        return {"values": list(self.values), "recent": [[v, s] for v, s in self.recent]}

    @classmethod
    def from_xcom(cls, data: object) -> SeriesHistory:
        """``HistoryUnreadable`` for anything that is not exactly the form ``to_xcom`` writes."""
        if not isinstance(data, Mapping):
            raise HistoryUnreadable(f"a series is {type(data).__name__}, not a mapping")
        values, recent = data.get("values"), data.get("recent", [])
        if not isinstance(values, list) or not isinstance(recent, list):
            raise HistoryUnreadable("'values' and 'recent' must be lists")
        parsed = tuple(_finite(v, "a value") for v in values)
        nights = []
        for night in recent:
            if not (isinstance(night, list | tuple) and len(night) == 2 and night[1] in _RECENT_STATUSES):
                raise HistoryUnreadable(f"a recent night {night!r} is not [value, status]")
            nights.append((_finite(night[0], "a recent value"), str(night[1])))
        return cls(parsed, tuple(nights))


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

    def get(self, key: SeriesKey) -> SeriesHistory:
        """The series' history (empty when it has none yet); ``HistoryUnreadable`` when it did not parse."""
        if self.error is not None:
            raise HistoryUnreadable(self.error)
        if key in self.broken:
            raise HistoryUnreadable(self.broken[key])
        return self.series.get(key, SeriesHistory())

    def to_xcom(self) -> dict[str, Any]:
        return {
            "format": HISTORY_FORMAT,
            "series": [
                {"metric": metric, "transaction": label, **history.to_xcom()}
                for (label, metric), history in self.series.items()
            ],
        }

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
        return cls(series, broken)


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


# --- robust statistics (pure Python) -------------------------------------------------------------


def qn_scale(values: Sequence[float]) -> float:
    """Rousseeuw and Croux's Qn: a Gaussian-consistent spread from the pairwise distances' lower
    quartile (breakdown 50 %, efficiency 82 %: far steadier than the MAD on 10 to 30 nights).
    With the small-sample factors of Croux and Rousseeuw (1992). O(n^2): fine for a window of nights."""
    n = len(values)
    if n < 2:
        return 0.0
    distances = sorted(abs(a - b) for i, a in enumerate(values) for b in values[i + 1 :])
    h = n // 2 + 1
    k = h * (h - 1) // 2
    small = {2: 0.399, 3: 0.994, 4: 0.512, 5: 0.844, 6: 0.611, 7: 0.857, 8: 0.669, 9: 0.872}
    factor = small.get(n) or (n / (n + 1.4) if n % 2 else n / (n + 3.8))
    return 2.2219 * factor * distances[k - 1]


def threshold_factor(z: float, n: int, m: int = 1) -> float:
    """How many noise standard deviations the mean of ``m`` nights may be from a centre estimated
    from ``n`` nights at the Gaussian quantile ``z``: the mean's own spread, the centre's error
    (median: pi/2 / n), and a first-order Student correction for a spread estimated from n nights."""
    freedom = max(1.0, _QN_EFFICIENCY * (n - 1))
    student = 1 + (z * z + 1) / (4 * freedom)
    return z * student * math.sqrt(1 / m + _MEDIAN_VARIANCE / n)


def nominal_false_alarm_rate(z: float) -> float:
    """The one-sided Gaussian tail beyond ``z``: the stated false-alarm rate of a test at ``z``."""
    return 1 - _Z_PROBABILITY.cdf(z)


#: In a persistence test every night must be this many noise standard deviations worse than the
#: centre: two ordinary nights and one bad one are not a change that persists.
PERSIST_FLOOR_Z = 0.5
#: The statuses with which a night joins the history once it is old enough. A suspected night whose
#: next nights did not turn it into part of a regression was noise after all: refusing it would cut
#: the history's upper tail, bias its centre and noise low, and double the false alarms (measured).
_ADMITTED = (NOISE, SUSPECTED)
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
    noise: float | None = None  # one noise standard deviation, in the metric's units at the centre
    band_low: float | None = None  # what one night's noise explains at fail_z, in the metric's units
    band_high: float | None = None
    history_n: int = 0
    baseline: float | None = None  # the value compared against (centre, or the last night on fallback)
    reason: str | None = None  # why it failed
    note: str | None = None  # what the log should say (suspected, too little history, accepted)


def _worse(direction_sign: int, value: float, reference: float) -> float:
    return direction_sign * (value - reference)


def _pct_worse(direction_sign: int, value: float, reference: float) -> float:
    """How much worse than ``reference``, in percent (from 0, any worsening is infinitely worse)."""
    if reference == 0:
        return 0.0 if value == 0 else (math.inf if _worse(direction_sign, value, 0) > 0 else -math.inf)
    return _worse(direction_sign, value, reference) / abs(reference) * 100


def judge_night(
    value: float,
    history: SeriesHistory,
    *,
    worse_higher: bool,
    max_regression_pct: float,
    settings: HistorySettings,
    accepted: bool = False,
) -> tuple[NightJudgement, SeriesHistory]:
    """Judge one night of one series and return the history for the next night.

    ``worse_higher`` is the metric's direction; values and history are plain numbers, so the same code
    judges a metric for the whole run or for one transaction.
    """
    sign = 1 if worse_higher else -1
    n = len(history.values)
    if accepted:
        return (
            NightJudgement(
                PASS,
                history_n=n,
                note="change accepted as the new normal: the history restarts from this night",
            ),
            SeriesHistory((value,)),
        )
    if n < settings.min_history:
        return _judge_previous(value, history, sign, max_regression_pct, settings)

    positive = value > 0 and all(v > 0 for v in history.values) and all(v > 0 for v, _ in history.recent)
    scale: Any = math.log if positive else float
    points = [scale(v) for v in history.values]
    centre = statistics.median(points)
    noise = qn_scale(points)
    unscale: Any = math.exp if positive else float
    centre_value = unscale(centre)
    band = threshold_factor(settings.fail_z, n) * noise
    judged = dict(
        centre=centre_value,
        noise=(centre_value * noise) if positive else noise,
        band_low=unscale(centre - band),
        band_high=unscale(centre + band),
        history_n=n,
        baseline=centre_value,
    )

    def beyond(nights: Sequence[float], z: float) -> bool:
        """Are these nights (ending tonight) together worse than the bound and the noise at z?"""
        deviations = [_worse(sign, scale(v), centre) for v in nights]
        if min(deviations) <= (PERSIST_FLOOR_Z * noise if len(nights) > 1 else 0):
            return False
        mean_value = unscale(centre + sign * statistics.fmean(deviations))
        pct = _pct_worse(sign, mean_value, centre_value)
        if pct <= max_regression_pct:
            return False
        return statistics.fmean(deviations) > threshold_factor(z, n, len(nights)) * noise

    # The trailing run of recent nights not failed, so an earlier failure (an outlier) cannot carry
    # a later ordinary night over the line.
    run: list[float] = []
    for recent_value, recent_status in reversed(history.recent):
        if recent_status == _ONE_NIGHT or len(run) >= settings.persist_nights - 1:
            break
        run.insert(0, recent_value)
    single = beyond([value], settings.fail_z)
    persistent = next(
        (m for m in range(2, len(run) + 2) if beyond([*run[-(m - 1) :], value], settings.persist_z)),
        None,
    )
    continuing = bool(history.recent) and history.recent[-1][1] == REGRESSION
    pct = _pct_worse(sign, value, centre_value)
    marked: set[int] = set()
    reason: str | None = None
    if single or persistent or (continuing and beyond([value], settings.suspect_z)):
        if single:
            over = "the last night"
        elif persistent:
            over = f"the last {persistent} nights together"
            marked = {len(history.recent) - i for i in range(1, persistent)}
        else:
            over = "the last night, continuing the regression of the night before,"
        reason = (
            f"{over} worse than the history's centre {_fmt(centre_value)} by more than "
            f"{_fmt(max_regression_pct)} % and than its noise explains"
        )
        status = REGRESSION
    elif beyond([value], settings.suspect_z):
        status = SUSPECTED
    else:
        status = NOISE
    note = None
    if status == SUSPECTED:
        note = (
            f"suspected: {_fmt(pct)} % worse than the history's centre {_fmt(centre_value)}, beyond the "
            "noise on one night but not enough to fail; a regression if the next nights confirm it "
            "(kept out of the history meanwhile)"
        )
    tonight = _ONE_NIGHT if single and not persistent and not continuing else status
    return (
        NightJudgement(status, reason=reason, note=note, **judged),
        _admit(history, value, tonight, marked, settings),
    )


def _admit(
    history: SeriesHistory, value: float, status: str, marked: set[int], settings: HistorySettings
) -> SeriesHistory:
    """Tonight joins the recent nights (the ``marked`` ones became part of a regression); the oldest
    recent night leaves them, and joins the history if it was noise or a suspicion since cleared."""
    recent = [(v, REGRESSION if i in marked else s) for i, (v, s) in enumerate(history.recent)]
    recent.append((value, status))
    values = list(history.values)
    while len(recent) > settings.persist_nights - 1:
        old_value, old_status = recent.pop(0)
        if old_status in _ADMITTED:
            values.append(old_value)
    return SeriesHistory(tuple(values[-settings.window :]), tuple(recent))


def _judge_previous(
    value: float, history: SeriesHistory, sign: int, max_regression_pct: float, settings: HistorySettings
) -> tuple[NightJudgement, SeriesHistory]:
    """Too little history: today's rule (the bound alone) against the median of the nights so far, said
    so. Every measured warm-up night joins, whatever its verdict: a few nights cannot tell a lucky night
    from the normal, and refusing the nights that fail would let one lucky night lock the gate (as it
    locks ``baseline="previous"``, which keeps comparing with it)."""
    n = len(history.values)
    note = (
        f"{n} night{'s' if n != 1 else ''} of history, {settings.min_history} needed to judge against "
        "the noise: "
        + (
            "judged against their median by max_regression_pct alone; tonight joins the history whatever "
            "its verdict"
            if n
            else "no earlier night: budgets only"
        )
    )
    joined = SeriesHistory((*history.values, value)[-settings.window :])
    if not n:
        return NightJudgement(PASS, history_n=0, note=note), joined
    centre = statistics.median(history.values)
    pct = _pct_worse(sign, value, centre)
    if pct > max_regression_pct:
        reason = f"more than {_fmt(max_regression_pct)} % worse than the median of the {n} nights of history"
        return NightJudgement(REGRESSION, history_n=n, baseline=centre, reason=reason, note=note), joined
    return NightJudgement(PASS, history_n=n, baseline=centre, note=note), joined


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "from 0"
    return f"{value:.4g}"
