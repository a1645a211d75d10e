"""Judging a night: fetch the run's values, judge each series (budgets, a baseline run or the history),
the verdict and what an asset event carries.

Driven like ``watch.watch_run`` (``evaluate`` is a generator that yields API requests and log lines),
so the sync and the deferrable mode reach the same verdict through this one module.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.api.validation import validate_path_id
from airflow_provider_loadtest.decisions.gate.rows import (
    BUDGET,
    NOT_MEASURED,
    PASS,
    REGRESSION,
    GateRow,
    Unreadable,
    change_pct,
    format_number,
)
from airflow_provider_loadtest.decisions.gate.rules import (
    BASELINE_XCOM_KEY,
    HISTORY,
    METRIC_DIRECTIONS,
    Budget,
    Direction,
    GateSpec,
    check_metric_id,
    load_history,
    parse_regression,
)
from airflow_provider_loadtest.decisions.gate.verdict import Verdict

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.caveats import Caveat
    from airflow_provider_loadtest.decisions.gate.family import FamilyNight
    from airflow_provider_loadtest.decisions.gate.history import (
        GateHistory,
        HistorySettings,
        NightJudgement,
        SeriesHistory,
        SeriesKey,
    )

# --- fetching the values --------------------------------------------------------------------------


def report_metrics(items: Iterable[Any] | None, metric_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The metrics the service built itself in the run's own report (its ``SummaryReportItem``s),
    by metric id, for the wanted ids: reused as they are rather than built by us."""
    wanted = set(metric_ids)
    found: dict[str, dict[str, Any]] = {}
    for item in items or ():
        if getattr(item, "kind", None) != "SummaryReportItem":
            continue
        for metric in getattr(item, "metrics", None) or ():
            metric_id = str(getattr(metric, "id", None) or "")
            if metric_id in wanted and metric_id not in found:
                found[metric_id] = metric.to_api()
    return found


def summary_metric(
    bench_result_id: str, metric_id: str, known: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One metric of a summary request for a run: the report's own definition retargeted at the run,
    else built as the spec shows."""
    validate_path_id("bench_result_id", bench_result_id)
    if known:
        return {**known, "benchResultId": bench_result_id}
    return {"id": metric_id, "type": "HIT", "filters": [], "benchResultId": bench_result_id, "configs": []}


def measure(
    bench_result_id: str, metric_ids: Iterable[str], known: Mapping[str, Mapping[str, Any]]
) -> Generator[Any, Any, dict[str, float | Unreadable | None]]:
    """Ask the service for the summary values of a run; a value it does not give is ``None``.

    The answer is a list aligned with the metrics asked: one of another length cannot be aligned, so
    every value of it is ``Unreadable`` (never guessed by position)."""
    from airflow_provider_loadtest.api import endpoints

    ids = list(metric_ids)
    if not ids:
        return {}
    metrics = [summary_metric(bench_result_id, m, known.get(m)) for m in ids]
    values: object = yield endpoints.summary_metric_values(bench_result_id, metrics)
    if not isinstance(values, list) or len(values) != len(ids):
        got = f"{len(values)} values" if isinstance(values, list) else type(values).__name__
        why = Unreadable(f"the service answered {got} for {len(ids)} metrics of run {bench_result_id}")
        return dict.fromkeys(ids, why)
    return dict(zip(ids, values, strict=True))


# --- the verdict ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """The run compared against, and the values already known for it (from Airflow's XCom).

    ``unreadable`` is set when XCom held something that is not a baseline: the gate fails the metrics
    it bounds rather than take it for "no baseline yet"."""

    bench_result_id: str
    metrics: Mapping[str, float | None]
    unreadable: str | None = None
    #: Per transaction (JTL label), its gated values: kept apart from the run's ``metrics``.
    transactions: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)

    @classmethod
    def from_xcom(cls, data: object) -> Baseline | None:
        if data is None:
            return None
        if not isinstance(data, Mapping) or not isinstance(data.get("bench_result_id"), str):
            return cls("", {}, unreadable=f"the baseline in XCom ({BASELINE_XCOM_KEY}) does not parse")
        metrics = data.get("metrics")
        transactions = data.get("transactions")
        return cls(
            data["bench_result_id"],
            dict(metrics) if isinstance(metrics, Mapping) else {},
            transactions={
                str(label): dict(values)
                for label, values in (transactions.items() if isinstance(transactions, Mapping) else ())
                if isinstance(values, Mapping)
            },
        )

    def to_xcom(self) -> dict[str, Any]:
        return {
            "bench_result_id": self.bench_result_id,
            "metrics": dict(self.metrics),
            "transactions": {label: dict(values) for label, values in self.transactions.items()},
        }


def _usable(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _unread(raw: object, what: str) -> str:
    return raw.reason if isinstance(raw, Unreadable) else f"no {what} from the service"


def judge_metric(
    metric: str,
    raw_value: object,
    *,
    budget: Budget | None = None,
    bound: float | None = None,
    baseline: object = None,
    history: SeriesHistory | Unreadable | None = None,
    settings: HistorySettings | None = None,
    accepted: bool = False,
    judged_night: tuple[NightJudgement, SeriesHistory | None] | None = None,
) -> tuple[GateRow, SeriesHistory | None]:
    """One series' row (and, with a ``history``, the history for the next night).

    Plain values in, so a caller judges the same metric for the whole run or for one transaction
    alike. ``baseline`` is the compared run's value (``None``: no baseline run; a value that does not
    read fails a bounded metric as not measured); ``history`` (``baseline="history"``: a
    ``SeriesHistory``, judged with ``settings``, the defaults when None) replaces it;
    ``judged_night``: its judgement against the history made beforehand with the other series of the
    night (``judge_gate``), used as it is.
    Whatever cannot be read fails, saying so: an unmeasured gate never passes.
    """
    value = _usable(raw_value)
    reasons: list[str] = []
    status = PASS
    judged: dict[str, Any] = {}
    next_history: SeriesHistory | None = None
    if value is None:
        reasons.append(f"not measured: {_unread(raw_value, 'value')}")
        status = NOT_MEASURED
    if value is not None and bound is not None and isinstance(history, Unreadable):
        reasons.append(f"not measured: {history.reason}")
        status = NOT_MEASURED
    elif value is not None and bound is not None and history is not None:
        if judged_night is None:
            judging = load_history()
            judged_night = judging.judge_night(
                value,
                history,
                worse_higher=METRIC_DIRECTIONS[metric] is Direction.HIGHER_IS_WORSE,
                max_regression_pct=bound,
                settings=settings or judging.HistorySettings(),
                accepted=accepted,
            )
        night, next_history = judged_night
        status = night.status
        if night.reason:
            reasons.append(night.reason)
        judged = {
            "baseline": night.baseline,
            "centre": night.centre,
            "noise": night.noise,
            "band_low": night.band_low,
            "band_high": night.band_high,
            "history_n": night.history_n,
            "note": night.note,
        }
    elif value is not None and bound is not None and baseline is not None:
        base = _usable(baseline)
        if base is None:
            reasons.append(f"not measured: {_unread(baseline, 'baseline value')}")
            status = NOT_MEASURED
        else:
            judged["baseline"] = base
            worse = value - base if METRIC_DIRECTIONS[metric] is Direction.HIGHER_IS_WORSE else base - value
            change = change_pct(value, base)
            if worse > 0 and (change is None or worse / abs(base) * 100 > bound):
                reasons.append(f"more than {format_number(bound)} % worse than the baseline")
                status = REGRESSION
    elif bound is None and baseline is not None:
        judged["baseline"] = _usable(baseline)  # shown, not judged
    if value is not None and budget is not None and not budget.allows(value):
        reasons.append(f"budget {budget}")
        if status not in (NOT_MEASURED, REGRESSION):
            status = BUDGET
    base = judged.get("baseline")
    change = change_pct(value, base) if value is not None and base is not None else None
    row = GateRow(
        metric=metric,
        value=value,
        passed=not reasons,
        budget=str(budget) if budget is not None else None,
        change_pct=round(change, 2) if change is not None else None,
        max_regression_pct=bound,
        reason="; ".join(reasons) or None,
        status=status,
        **judged,
    )
    return row, next_history


def judge(
    spec: GateSpec,
    values: Mapping[str, object],
    baseline: Mapping[str, object] | None,
    *,
    history: GateHistory | None = None,
    accepted: Iterable[str] = (),
    transaction: str | None = None,
) -> list[GateRow]:
    """One row per gated metric (see ``judge_metric``); with ``history`` given, ``judge_history``
    also returns the next history."""
    return judge_history(spec, values, baseline, history=history, accepted=accepted, transaction=transaction)[
        0
    ]


def judge_history(
    spec: GateSpec,
    values: Mapping[str, object],
    baseline: Mapping[str, object] | None,
    *,
    history: GateHistory | None = None,
    accepted: Iterable[str] = (),
    transaction: str | None = None,
) -> tuple[list[GateRow], GateHistory | None]:
    """The rows, and the history to leave for the next night (None without ``baseline="history"``).

    A metric the baseline lacks fails its bound as not measured (the service was asked for it). Under
    ``baseline="history"`` the metrics are judged together by ``judge_gate`` (with no ``history``
    read, every bounded metric fails as not measured: a caller that forgot to read it must not pass a
    regression).
    """

    def value_of(metric: str) -> object:
        return values.get(metric, Unreadable(f"the service gave no value of {metric}"))

    if spec.baseline == HISTORY:
        series = spec_series(spec, values, transaction)
        rows, after, _ = judge_gate(series, history, spec.history, accepted=accepted)
        return rows, after
    rows = []
    for metric in spec.metric_ids:
        base: object = None
        if baseline is not None:
            base = baseline.get(metric)
            if base is None:
                base = Unreadable(f"the baseline run gave no value of {metric}")
        row, _ = judge_metric(
            metric,
            value_of(metric),
            budget=spec.budgets.get(metric),
            bound=spec.max_regression_pct.get(metric),
            baseline=base,
        )
        rows.append(replace(row, transaction=transaction) if transaction is not None else row)
    return rows, None


@dataclass(frozen=True)
class SeriesSpec:
    """One series a gate judges tonight: its key (transaction label or None, metric id), its value (or
    ``Unreadable``), its budget and regression bound, and for a transaction the samples behind it."""

    key: SeriesKey
    value: object
    budget: Budget | None = None
    bound: float | None = None
    samples: int | None = None


def spec_series(
    spec: GateSpec, values: Mapping[str, object], transaction: str | None = None
) -> list[SeriesSpec]:
    """The series a ``GateSpec`` gates tonight, for ``judge_gate`` (a value the service did not give
    is ``Unreadable``: it fails as not measured)."""
    return [
        SeriesSpec(
            (transaction, metric),
            values.get(metric, Unreadable(f"the service gave no value of {metric}")),
            spec.budgets.get(metric),
            spec.max_regression_pct.get(metric),
        )
        for metric in spec.metric_ids
    ]


def load_family() -> Any:
    from airflow_provider_loadtest.decisions.gate import family

    return family


def judge_gate(
    series: Iterable[SeriesSpec],
    history: GateHistory | None,
    settings: HistorySettings | None = None,
    *,
    accepted: Iterable[str] = (),
    when: str | None = None,
) -> tuple[list[GateRow], GateHistory, FamilyNight | None]:
    """Every series of a night judged together against the history (``baseline="history"``): the run's
    metrics and every transaction's, under one false-alarm budget, with the night effect taken out
    (``family.judge_family``). The operator, the run sensor, ``replay_gate`` and the benchmarks judge
    with this one function.

    Returns the rows (in the order given), the history for the next night and the family's judgement
    (None when no series had a value and a readable history). A series whose history did not parse
    fails as not measured and restarts tomorrow; a series not judged tonight keeps its history.

    ``when``: the night's date or time (ISO, from the caller), kept with a reference level that begins
    tonight (the first night, an accepted change) and said in a creep's message ("crept +18 % (3.1 sd)
    over 41 nights since 2026-03-05"); without it the message counts the nights."""
    judging, family_rules = load_history(), load_family()
    settings = settings or judging.HistorySettings()
    accepted = frozenset(accepted)
    series = list(series)
    own: dict[SeriesKey, SeriesHistory | Unreadable] = {}
    nights = []
    for one in series:
        if one.bound is None:
            continue
        if history is None:
            own[one.key] = Unreadable("no gate history was read for baseline='history'")
            continue
        try:
            own[one.key] = history.get(one.key)
        except judging.HistoryUnreadable as exc:
            own[one.key] = Unreadable(str(exc))
            continue
        value = _usable(one.value)
        if value is not None:
            worse_higher = METRIC_DIRECTIONS[one.key[1]] is Direction.HIGHER_IS_WORSE
            nights.append(
                family_rules.SeriesNight(
                    one.key, value, worse_higher, one.bound, one.key[1] in accepted, one.samples
                )
            )
    family: FamilyNight | None = None
    if nights and history is not None:

        def alone(night: Any, past: SeriesHistory) -> tuple[NightJudgement, SeriesHistory]:
            return judging.judge_night(  # type: ignore[no-any-return]
                night.value,
                past,
                worse_higher=night.worse_higher,
                max_regression_pct=night.max_regression_pct,
                settings=settings,
                when=when,
            )

        family = family_rules.judge_family(nights, history, settings, fallback=alone, when=when)
    kept = dict(history.series) if history is not None else {}
    rows = []
    for one in series:
        judged = family.judgements.get(one.key) if family is not None else None
        row, after = judge_metric(
            one.key[1],
            one.value,
            budget=one.budget,
            bound=one.bound,
            history=own.get(one.key),
            settings=settings,
            judged_night=judged,
        )
        if family is not None and one.key in family.own_sd:
            night_sd = family.night.shift_sd if family.night is not None else None
            row = replace(
                row,
                own_sd=round(family.own_sd[one.key], 3),
                night_sd=round(night_sd, 3) if night_sd is not None else None,
            )
        rows.append(replace(row, transaction=one.key[0]) if one.key[0] is not None else row)
        if after is not None:
            kept[one.key] = after
    night_history = family.night_history if family is not None else (history.night if history else None)
    scale = family.scale if family is not None else (history.scale if history else None)
    return rows, judging.GateHistory(kept, night=night_history, scale=scale), family


def replay_gate(
    nights: Iterable[Mapping[SeriesKey, object]],
    *,
    max_regression_pct: float | Mapping[str, float],
    samples: Iterable[Mapping[SeriesKey, int]] | None = None,
    whens: Iterable[str | None] | None = None,
    **settings: Any,
) -> list[Verdict]:
    """The verdict the gate would have given on each night (oldest first), every series of a night
    judged together (``judge_gate``), with the history it would have had then and nobody accepting a
    change. A night maps ``(transaction label or None, metric id)`` to its value;
    ``max_regression_pct`` is one percentage for every series or a mapping by metric id (a series
    whose metric has none is judged by nothing: give every gated metric a bound); ``samples``, night
    for night, the samples behind a transaction's values; ``settings`` are ``HistorySettings`` fields.
    Each verdict's ``history`` is the state after that night: replay a branch from it with
    ``replay_gate_night``. ``whens``: night for night, its date (ISO), for the creep messages."""
    parsed = load_history().HistorySettings.parse(**settings)
    bounds = _bounds(max_regression_pct)
    history = load_history().GateHistory()
    verdicts = []
    counts = iter(samples) if samples is not None else None
    dates = iter(whens) if whens is not None else None
    for night in nights:
        verdict = replay_gate_night(
            night,
            history,
            bounds=bounds,
            settings=parsed,
            samples=next(counts, {}) if counts else None,
            when=next(dates, None) if dates else None,
        )
        verdicts.append(verdict)
        history = verdict.history
    return verdicts


def replay_gate_night(
    night: Mapping[SeriesKey, object],
    history: GateHistory,
    *,
    bounds: float | Mapping[str, float],
    settings: HistorySettings,
    samples: Mapping[SeriesKey, int] | None = None,
    when: str | None = None,
    accepted: Iterable[str] = (),
) -> Verdict:
    """One night of ``replay_gate`` from a given history (``Verdict.history`` is the next one).

    The run's load metrics (``(None, "USERLOAD")``, and ``(None, "HITS_RATE")`` unless a mapping of
    bounds names it) are judged by the load rule (``load.py``), as the operator judges them: outside
    the family, and a night that did not apply its usual load leaves the history as it was. ``when``:
    the night's date (``judge_gate``); ``accepted``: the metric ids whose change a person accepted."""
    wanted = _bounds(bounds)
    load = load_rules()
    series = []
    loads = []
    for key, value in night.items():
        if (
            key[0] is None
            and key[1] in load.LOAD_METRICS
            and not (isinstance(wanted, dict) and key[1] in wanted)
        ):
            loads.append(load.LoadSeries(key[1], value))
            continue
        bound = wanted if isinstance(wanted, float) else wanted.get(key[1])
        if isinstance(wanted, float):
            check_metric_id("max_regression_pct", key[1], regression=True)
        series.append(SeriesSpec(key, value, None, bound, (samples or {}).get(key)))
    rows, after, family = judge_gate(series, history, settings, accepted=accepted, when=when)
    if loads:
        load_rows, kept = load.judge_loads(loads, history, settings, accepted=accepted)
        rows = [*load_rows, *rows]
        after = history if load.load_untrusted(load_rows) else replace(after, series={**after.series, **kept})
    return Verdict(
        rows=tuple(rows),
        baseline_id=None,
        history=after,
        night=family.night if family is not None else None,
        budget_text=family.budget_text if family is not None else None,
    )


def _bounds(value: float | Mapping[str, float]) -> float | dict[str, float]:
    if isinstance(value, Mapping):
        return parse_regression(value)
    return parse_regression({"RESPONSE_TIME_AVG": value})["RESPONSE_TIME_AVG"]


def replay_history(
    metric_id: str, values: Iterable[object], *, max_regression_pct: float, **settings: Any
) -> list[GateRow]:
    """The row the gate would have given on each night of one metric's values (oldest first), with the
    history it would have had then and nobody accepting a change: the benchmark and the operator
    judge with this same code. ``settings`` are ``HistorySettings`` fields."""
    spec = GateSpec.parse(None, {metric_id: max_regression_pct}, HISTORY, settings)
    history = load_history().GateHistory()
    rows = []
    for value in values:
        night_rows, next_history = judge_history(spec, {metric_id: value}, None, history=history)
        rows.extend(night_rows)
        history = next_history or history
    return rows


def evaluate(
    spec: GateSpec,
    bench_result_id: str,
    *,
    known_metrics: Mapping[str, Mapping[str, Any]],
    baseline: Baseline | None,
    baseline_note: str | None = None,
    history: GateHistory | None = None,
    accepted: Iterable[str] = (),
    transaction_rows: Iterable[GateRow] = (),
    transaction_history: Mapping[SeriesKey, SeriesHistory] | None = None,
    transactions_log: str | None = None,
    transaction_series: Iterable[SeriesSpec] = (),
    min_userload: float | None = None,
    caveats: Iterable[Caveat] = (),
    fail_on_caveats: bool = False,
    duration_s: float | None = None,
    when: str | None = None,
) -> Generator[Any, Any, Verdict]:
    """Fetch the run's values (and the baseline's that are not known yet), judge, log the table.

    Driven like ``watch.watch_run``: yields API requests and log lines, returns the ``Verdict``. Under
    ``baseline="history"`` the caller gives the ``history`` read from XCom (and the metrics a person
    ``accepted``); ``Verdict.history`` is what to leave for the next night.

    The transactions' rows, judged beforehand from the run's JTL files (``decisions.gate.transactions``),
    join the verdict after the run's (``transaction_history``: their series for the next night), and
    ``transactions_log`` (the slowest transactions) follows the table. Under ``baseline="history"``
    the transactions come as ``transaction_series`` instead, judged here with the run's metrics
    (``judge_gate``: one false-alarm budget and one night effect for every series of the night);
    ``transaction_rows`` then holds only the rows of keys no sample answered.

    The applied load (``load.py``): under ``baseline="history"`` the run's ``USERLOAD`` and ``HITS_RATE``
    are always read (in a request of their own, so that a service that does not give them never makes
    the gated metrics unreadable) and judged against their own history, outside the family; with
    ``min_userload``, ``USERLOAD`` must reach it whatever the baseline. A run that did not apply its
    usual load fails, and its night leaves the history as it was (its figures measured another load).
    ``caveats``: the service's own trust caveats for this run (``caveats.py``; with the run's
    ``duration_s`` and its measured ``USERLOAD``, a run too small for the service's insights is one
    more), said beside the verdict; with ``fail_on_caveats`` those that may fail the gate are rows.
    ``when``: the night's date (ISO), for ``judge_gate`` (a creep's "since").
    """
    from airflow_provider_loadtest.decisions.watch import Log

    transaction_series = list(transaction_series)
    values = yield from measure(bench_result_id, spec.metric_ids, known_metrics)
    load_ids = _load_metric_ids(spec, min_userload)
    load_values = yield from _measure_load(bench_result_id, load_ids, values, known_metrics)
    base_values: dict[str, object] | None = None
    if spec.baseline == HISTORY:
        baseline = None
    elif baseline is not None and baseline.unreadable is not None:
        base_values = dict.fromkeys(spec.metric_ids, Unreadable(baseline.unreadable))
    elif baseline is not None:
        base_values = {m: _usable(baseline.metrics.get(m)) for m in spec.metric_ids}
        missing = [m for m, v in base_values.items() if v is None]
        base_values.update((yield from measure(baseline.bench_result_id, missing, known_metrics)))
    family: FamilyNight | None = None
    judged: tuple[SeriesSpec, ...] = ()
    if spec.baseline == HISTORY:
        judged = (*_run_series(spec, values, load_ids), *transaction_series)
        rows, next_history, family = judge_gate(judged, history, spec.history, accepted=accepted, when=when)
    else:
        unbounded, next_history = judge_history(spec, values, base_values)[0], None
        rows = [row for row in unbounded if row.metric not in load_ids]
    load_rows, load_kept = _judge_load(spec, load_ids, load_values, history, min_userload, accepted)
    caveats = _all_caveats(caveats, load_values, duration_s)
    run_rows = len(rows) - len(transaction_series)  # judge_gate keeps the order given: the run's first
    rows = [
        *rows[:run_rows],
        *load_rows,
        *caveat_rules().caveat_rows(caveats, fail=fail_on_caveats),
        *rows[run_rows:],
        *transaction_rows,
    ]
    if next_history is not None and (transaction_history or load_kept):
        next_history = replace(
            next_history, series={**next_history.series, **(transaction_history or {}), **load_kept}
        )
    untrusted = load_rules().load_untrusted(load_rows)
    if untrusted and spec.baseline == HISTORY and history is not None:
        # Its figures measured another load: no series learns from this night (not even the load's).
        next_history = history
    verdict = Verdict(
        rows=tuple(rows),
        baseline_id=baseline.bench_result_id if baseline and not baseline.unreadable else None,
        note=baseline_note,
        history=next_history,
        night=family.night if family is not None else None,
        budget_text=family.budget_text if family is not None else None,
        judged=judged,
        judged_loads=tuple(_load_series(spec, load_ids, load_values, min_userload)) if judged else (),
    )
    if spec.baseline == HISTORY:
        heading = f"Quality gate of run {bench_result_id} against the history of the last passing runs:"
    elif baseline is not None and baseline.unreadable is None:
        heading = f"Quality gate of run {bench_result_id} against baseline run {baseline.bench_result_id}:"
    elif baseline is not None:
        heading = f"Quality gate of run {bench_result_id}: {baseline.unreadable}:"
    elif spec.baseline is not None:
        heading = (
            f"Quality gate of run {bench_result_id}: {baseline_note or 'no baseline yet'}, "
            "so budgets only were checked:"
        )
    else:
        heading = f"Quality gate of run {bench_result_id} (budgets):"
    said = [*verdict.notes(), *_previous_cost(spec, verdict)]
    if untrusted and spec.baseline == HISTORY:
        said.append(
            "The run did not apply its usual load: this night is kept out of every series' history "
            "(its figures describe another load)."
        )
    said += [f"Trust caveat: {caveat.text}" for caveat in caveats]
    notes = "".join(f"\n{line}" for line in said)
    after = f"\n{transactions_log}" if transactions_log else ""
    yield Log(f"{heading}\n{verdict.table()}{notes}{after}")
    return verdict


def _run_series(spec: GateSpec, values: Mapping[str, object], load_ids: tuple[str, ...]) -> list[SeriesSpec]:
    """The run's series judged by the family (its load metrics are judged by the load rule)."""
    return [one for one in spec_series(spec, values) if one.key[1] not in load_ids]


def _all_caveats(
    given: Iterable[Caveat], load_values: Mapping[str, object], duration_s: float | None
) -> list[Caveat]:
    """The caveats given (alarms, 304 answers) and, with the run's measured ``USERLOAD`` and its
    duration, whether it was too small for the service's insights."""
    found = list(given)
    userload = _usable(load_values.get("USERLOAD"))
    if userload is not None and duration_s is not None:
        found += caveat_rules().trust_caveats(userload=userload, duration_s=duration_s)
    return found


def caveat_rules() -> Any:
    from airflow_provider_loadtest.decisions.gate import caveats

    return caveats


def load_rules() -> Any:
    from airflow_provider_loadtest.decisions.gate import load

    return load


def _load_metric_ids(spec: GateSpec, min_userload: float | None) -> tuple[str, ...]:
    """The load metrics the gate reads and judges by the load rule: under ``baseline="history"``
    ``USERLOAD`` and ``HITS_RATE`` (unless the gate bounds ``HITS_RATE`` as a regression: it is then
    one of the family's series), else ``USERLOAD`` when ``min_userload`` states the load to reach."""
    if spec.baseline == HISTORY:
        return tuple(m for m in load_rules().LOAD_METRICS if m not in spec.max_regression_pct)
    return ("USERLOAD",) if min_userload is not None else ()


def _measure_load(
    bench_result_id: str,
    metric_ids: tuple[str, ...],
    known: Mapping[str, object],
    definitions: Mapping[str, Mapping[str, Any]],
) -> Generator[Any, Any, dict[str, object]]:
    """The load metrics' values: those the gate's own request already read, the others asked for in a
    request of their own; a failed request leaves them ``Unreadable`` (said, never raised: the
    gate's own metrics were read)."""
    from airflow_provider_loadtest.api.errors import LoadTestApiError

    found: dict[str, object] = {m: known[m] for m in metric_ids if m in known}
    wanted = [m for m in metric_ids if m not in found]
    if wanted:
        try:
            found.update((yield from measure(bench_result_id, wanted, definitions)))
        except LoadTestApiError as exc:
            found.update(dict.fromkeys(wanted, Unreadable(f"the service did not give it ({exc})")))
    return found


def _judge_load(
    spec: GateSpec,
    load_ids: tuple[str, ...],
    values: Mapping[str, object],
    history: GateHistory | None,
    min_userload: float | None,
    accepted: Iterable[str],
) -> tuple[list[GateRow], dict[SeriesKey, SeriesHistory]]:
    """The load rows (``load.judge_loads``) and their histories for the next night."""
    if not load_ids:
        return [], {}
    load = load_rules()
    loads = _load_series(spec, load_ids, values, min_userload)
    settings = spec.history or load_history().HistorySettings()
    judged = history if spec.baseline == HISTORY else None
    if spec.baseline == HISTORY and judged is None:
        judged = load_history().GateHistory(error="no gate history was read for baseline='history'")
    return load.judge_loads(loads, judged, settings, accepted=accepted)  # type: ignore[no-any-return]


def _load_series(
    spec: GateSpec, load_ids: tuple[str, ...], values: Mapping[str, object], min_userload: float | None
) -> list[Any]:
    """The run's load metrics as the load rule judges them (``load.LoadSeries``)."""
    load = load_rules()
    return [
        load.LoadSeries(
            metric,
            values.get(metric, Unreadable(f"the service gave no value of {metric}")),
            minimum=min_userload if metric == "USERLOAD" else None,
            budget=spec.budgets.get(metric),
        )
        for metric in load_ids
    ]


def _previous_cost(spec: GateSpec, verdict: Verdict) -> list[str]:
    """Under ``baseline="previous"`` (or a pinned run) with many bounded series, what it costs: each
    series is judged against one night with no measure of its noise, so a clean night fails when any
    of them strays; said once, in the log of every run."""
    if spec.baseline == HISTORY or spec.baseline is None:
        return []
    bounded = [row for row in verdict.rows if row.max_regression_pct is not None]
    if len(bounded) < FAMILY_SIZE_TO_WARN:
        return []
    return [
        f"Note: baseline={spec.baseline!r} judges each of these {len(bounded)} series against one "
        "earlier night, with no measure of its noise: a clean night fails whenever any one of them "
        "strays beyond its bound by chance, and the more series, the more often (measured on "
        "simulated clean nights in docs/gate_quality.md). baseline='history' judges them together "
        "under one false-alarm budget for the whole gate."
    ]


#: From this many bounded series on, a ``"previous"`` gate says in its log what it costs.
FAMILY_SIZE_TO_WARN = 5


def asset_extra(result: Mapping[str, Any], *, passed: bool, verdict: Verdict | None) -> dict[str, Any]:
    """What an outlet asset event carries, so a DAG scheduled on the asset can read the verdict: the
    run, the values (``metrics`` for the run, ``transactions`` per JTL label), and the gate's rows (the
    same fields as in XCom, ``GateRow.from_xcom`` reads them), and the night effect (every series'
    shared movement, judged once for the run as a whole; None without one)."""
    return {
        "scenario_id": result.get("scenario_id"),
        "bench_result_id": result.get("bench_result_id"),
        "report_url": result.get("report_url"),
        "state": result.get("state"),
        "passed": passed,
        "metrics": verdict.metrics if verdict is not None else {},
        "transactions": verdict.transactions if verdict is not None else {},
        "gate": [row.to_xcom() for row in verdict.rows] if verdict is not None else [],
        "night_effect": verdict.night.to_xcom() if verdict is not None and verdict.night else None,
    }
