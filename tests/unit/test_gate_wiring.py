"""``baseline="history"`` in the run lifecycle: the history read from the earlier DAG runs' XCom, the
verdict's new fields in the log, XCom and the asset event, the next history pushed on passing and failing
nights, a person's acceptance from the DAG-run conf, and ``history_settings`` checked like the other gate
settings. The operator and the sensor share the lifecycle: both are driven here."""

from __future__ import annotations

import random
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm
from airflow.sdk import Asset

from airflow_provider_loadtest.compat import AirflowException, AirflowFailException, TaskDeferred
from airflow_provider_loadtest.decisions.gate import BASELINE_XCOM_KEY, GateRow, GateSpec, judge_history
from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY
from airflow_provider_loadtest.decisions.history import (
    ACCEPT_CHANGE,
    HISTORY_XCOM_KEY,
    GateHistory,
    SeriesHistory,
)
from airflow_provider_loadtest.lifecycle import dag_run_conf, history_settings_of
from tests.unit.test_gate import SUMMARY_URL, _gate_context, _pushed
from tests.unit.test_run_lifecycle import _op, _service
from tests.unit.test_run_sensor import _sensor, _states

P95 = "RESPONSE_TIME_PERCENTILE_95"
GATED = {
    "metric_budgets": {P95: "<= 800", "ERRORS_PERCENT": "< 1"},
    "baseline": "history",
    "max_regression_pct": {P95: 10},
}


def _kept(history: SeriesHistory | None) -> object:
    """The nights a history keeps (its reference level's bookkeeping, issue 33, aside)."""
    assert history is not None
    return (history.values, history.recent, history.shifts, history.recent_shifts)


def _season(nights: int = 20, *, base: float = 600.0, cv: float = 0.03) -> GateHistory:
    """The history a task would have left after ``nights`` ordinary nights (the gate's own code)."""
    rng = random.Random(7)
    spec = GateSpec.parse(GATED["metric_budgets"], GATED["max_regression_pct"], "history")
    history = GateHistory()
    for _ in range(nights):
        values = {P95: round(base * (1 + cv * rng.gauss(0, 1)), 1), "ERRORS_PERCENT": 0.2}
        _, after = judge_history(spec, values, None, history=history)
        assert after is not None
        history = after
    return history


SEASON = _season()


def _context_with(
    stored: Any, *, conf: Any = None, params: Any = None, outlets: bool = False
) -> dict[str, Any]:
    """A task context whose ti's ``xcom_pull`` answers ``stored`` for the history key (what the latest
    earlier DAG run of the task left), nothing for the others."""
    context = _gate_context(outlets=outlets)
    context["ti"].xcom_pull.side_effect = lambda **kw: stored if kw.get("key") == HISTORY_XCOM_KEY else None
    if conf is not None:
        context["dag_run"] = mock.MagicMock(name="dag_run", conf=conf)
    if params is not None:
        context["params"] = params
    return context


def _pulled_keys(context: dict[str, Any]) -> list[str]:
    return [c.kwargs["key"] for c in context["ti"].xcom_pull.call_args_list]


def _series(pushed: dict[str, Any]) -> SeriesHistory:
    return GateHistory.from_xcom(pushed[HISTORY_XCOM_KEY]).series[(None, P95)]


# --- a night judged against the history -----------------------------------------------------------


def test_an_ordinary_night_is_noise_and_its_history_is_pushed_for_the_next_night(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[612.0, 0.2])
    context = _context_with(SEASON.to_xcom())
    result = _op(**GATED).execute(context)  # type: ignore[arg-type]

    assert context["ti"].xcom_pull.call_args_list == [
        mock.call(task_ids="run", key=NIGHT_XCOM_KEY, include_prior_dates=True),
        mock.call(task_ids="run", key=HISTORY_XCOM_KEY, include_prior_dates=True, map_indexes=-1),
    ]  # the recorded nights (none yet), then the history an earlier release left; no baseline run is read
    row = GateRow.from_xcom(result["gate"][0])
    assert (row.metric, row.passed, row.status) == (P95, True, "noise")
    centre = SEASON.series[(None, P95)]
    assert row.history_n == len(centre.values) and row.baseline == row.centre
    assert row.band_low is not None and row.band_high is not None and row.band_low < 612 < row.band_high
    assert row.noise is not None and 5 < row.noise < 40  # about 3 % of 600
    assert GateRow.from_xcom(result["gate"][1]).status == "pass"  # a budget only: nothing to judge against
    pushed = _pushed(context)
    assert _series(pushed).recent[-1] == (612.0, "noise")  # joins once the next nights have been judged
    assert pushed[BASELINE_XCOM_KEY]["bench_result_id"] == "br-1"  # "previous" still works after a switch
    out = capsys.readouterr().out
    assert "against the history of the last passing runs" in out
    assert "noise band" in out and f"(mean of {row.history_n})" in out


def test_a_regression_fails_and_its_night_is_remembered_without_joining_the_history(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[760.0, 0.2])  # +27 %: beyond the bound and the noise
    context = _context_with(SEASON.to_xcom())
    with pytest.raises(AirflowFailException) as caught:
        _op(**GATED).execute(context)  # type: ignore[arg-type]
    message = str(caught.value)
    assert f"{P95} 760 vs history centre" in message and "worse than the history's centre" in message
    pushed = _pushed(context)
    row = GateRow.from_xcom(pushed["return_value"]["gate"][0])
    assert (row.passed, row.status) == (False, "regression")
    assert row.centre is not None and row.change_pct is not None and row.change_pct > 20
    series = _series(pushed)
    before = SEASON.series[(None, P95)]
    assert 760.0 not in series.values
    assert series.values == (*before.values, before.recent[0][0])  # the oldest waiting night joined
    assert series.recent[-1][0] == 760.0  # remembered, so a change that persists is caught
    assert BASELINE_XCOM_KEY not in pushed


def test_a_run_that_did_not_finish_leaves_the_history_as_it_was(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["ERROR"])
    requests_mock.post(SUMMARY_URL, json=[900.0, 0.2])
    context = _context_with(SEASON.to_xcom())
    with pytest.raises(AirflowException, match="ERROR"):
        _op(**GATED).execute(context)  # type: ignore[arg-type]
    assert HISTORY_XCOM_KEY not in _pushed(context)


def test_the_first_night_has_no_history_and_says_budgets_only(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[600.0, 0.2])
    context = _context_with(None)
    result = _op(**GATED).execute(context)  # type: ignore[arg-type]
    assert result["gate"][0]["status"] == "pass" and result["gate"][0]["history_n"] == 0
    assert _kept(_series(_pushed(context))) == _kept(SeriesHistory((600.0,)))
    assert "no earlier night: budgets only" in capsys.readouterr().out


def test_a_history_in_xcom_that_does_not_parse_fails_as_not_measured(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[600.0, 0.2])
    context = _context_with({"format": 99})
    with pytest.raises(AirflowFailException, match="not measured"):
        _op(**GATED).execute(context)  # type: ignore[arg-type]
    saved = dict(_pushed(context)[HISTORY_XCOM_KEY])
    assert saved.pop("night_of") == "br-1"  # saved by this release beside the night's record
    assert saved.pop("runs_without_record") == []
    assert saved == GateHistory().to_xcom()  # restarts from the next night


def test_the_asset_event_carries_the_new_fields(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[612.0, 0.2])
    asset = Asset("loadtest://nightly")
    context = _context_with(SEASON.to_xcom(), outlets=True)
    result = _op(**GATED, outlets=[asset]).execute(context)  # type: ignore[arg-type]
    extra = context["outlet_events"][asset].extra
    assert extra["gate"] == result["gate"]
    assert {"status", "centre", "noise", "band_low", "band_high", "history_n", "note"} <= set(
        extra["gate"][0]
    )
    assert extra["gate"][0]["status"] == "noise"


def test_the_deferred_wait_judges_against_the_same_history(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["RUNNING"])
    requests_mock.post(SUMMARY_URL, json=[760.0, 0.2])
    context = _context_with(SEASON.to_xcom())
    with pytest.raises(TaskDeferred) as caught:
        _op(**GATED, deferrable=True).execute(context)  # type: ignore[arg-type]
    run_record = caught.value.trigger.serialize()[1]["run_record"]
    outcome = {"bench_result_id": "br-1", "state": "FINISHED", "reason": "finished", "succeeded": True,
               "message": "Run br-1 FINISHED", "duration_s": 1.0}  # fmt: skip
    with pytest.raises(AirflowFailException, match="worse than the history's centre"):
        _op(**GATED, deferrable=True).execute_complete(  # type: ignore[arg-type]
            context, {"status": "done", "run": run_record, "outcome": outcome}
        )
    assert _series(_pushed(context)).recent[-1][0] == 760.0


def test_the_sensor_judges_against_the_history_too(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _states(requests_mock, ["RUNNING", "FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[612.0, 0.2])
    context = _context_with(SEASON.to_xcom())
    result = _sensor(**GATED).execute(context)  # type: ignore[arg-type]
    assert result["gate"][0]["status"] == "noise"
    context["ti"].xcom_pull.assert_any_call(
        task_ids="wait", key=HISTORY_XCOM_KEY, include_prior_dates=True, map_indexes=-1
    )
    assert _series(_pushed(context)).recent[-1] == (612.0, "noise")


def test_previous_and_pinned_baselines_read_no_history_and_push_none(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[612.0, 0.2])
    context = _context_with(SEASON.to_xcom(), conf={ACCEPT_CHANGE: True})  # not for this task: ignored
    result = _op(**{**GATED, "baseline": "previous"}).execute(context)  # type: ignore[arg-type]
    assert result["gate"][0]["status"] == "pass"
    assert _pulled_keys(context) == [BASELINE_XCOM_KEY]
    assert HISTORY_XCOM_KEY not in _pushed(context)


# --- accepting a change -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        {"conf": {ACCEPT_CHANGE: True}},
        {"conf": {ACCEPT_CHANGE: [P95]}},
        {"conf": {ACCEPT_CHANGE: {"run": True, "other_task": [P95]}}},
        {"conf": {}, "params": {ACCEPT_CHANGE: True}},  # a DAG's Param, ticked in the trigger form
    ],
)
def test_a_person_accepts_the_change_in_the_dag_run_conf_and_the_history_restarts(
    loadtest_conn: str, requests_mock: rm.Mocker, where: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[760.0, 0.2])
    context = _context_with(SEASON.to_xcom(), **where)
    result = _op(**GATED).execute(context)  # type: ignore[arg-type]
    row = GateRow.from_xcom(result["gate"][0])
    assert (row.passed, row.status) == (True, "pass") and "accepted" in (row.note or "")
    assert _kept(_series(_pushed(context))) == _kept(SeriesHistory((760.0,)))
    out = "".join(capsys.readouterr())
    assert f"accepts the change of {P95}" in out and "change accepted as the new normal" in out


def test_an_accepted_night_still_meets_its_budget(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[900.0, 0.2])
    context = _context_with(SEASON.to_xcom(), conf={ACCEPT_CHANGE: True})
    with pytest.raises(AirflowFailException, match="budget <= 800"):
        _op(**GATED).execute(context)  # type: ignore[arg-type]


def test_the_conf_wins_over_the_params_and_a_param_left_false_accepts_nothing() -> None:
    dag_run = mock.MagicMock(conf={ACCEPT_CHANGE: [P95]})
    assert dag_run_conf({"dag_run": dag_run, "params": {ACCEPT_CHANGE: False}}) == {ACCEPT_CHANGE: [P95]}
    assert dag_run_conf({"dag_run": mock.MagicMock(conf={}), "params": {ACCEPT_CHANGE: False}}) == {
        ACCEPT_CHANGE: False
    }
    assert dag_run_conf({"dag_run": mock.MagicMock(conf=None)}) == {}
    assert dag_run_conf({}) == {}


@pytest.mark.parametrize(
    ("conf", "match"),
    [
        ({ACCEPT_CHANGE: ["RESPONSE_TIME_PERCENTILE_99"]}, "not gated by task 'run'"),
        ({ACCEPT_CHANGE: "yes"}, "not gated by task 'run'"),
        ({ACCEPT_CHANGE: 1}, "must be true, a list of metric ids"),
    ],
)
def test_an_acceptance_that_does_not_read_fails_before_the_run_starts(
    loadtest_conn: str, requests_mock: rm.Mocker, conf: dict[str, Any], match: str
) -> None:
    _service(requests_mock, ["FINISHED"])
    with pytest.raises(AirflowFailException, match=match):
        _op(**GATED).execute(_context_with(SEASON.to_xcom(), conf=conf))  # type: ignore[arg-type]
    assert requests_mock.call_count == 0


# --- history_settings ----------------------------------------------------------------------------------


def test_history_settings_are_checked_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match="unknown history setting"):
        _op(**GATED, history_settings={"windw": 20})
    with pytest.raises(ValueError, match=r"window \(3\)"):
        _op(**GATED, history_settings={"window": 3})
    with pytest.raises(ValueError, match="apply to baseline='history'"):
        _op(**{**GATED, "baseline": "previous"}, history_settings={"window": 20})
    with pytest.raises(ValueError, match="must be a mapping"):
        _op(**GATED, history_settings=[("window", 20)])
    with pytest.raises(ValueError, match="unknown history setting"):
        _op(**GATED, history_settings={"colour": "{{ var.value.colour }}"})  # a name is never templated
    # templates are checked once rendered
    _op(**GATED, history_settings={"window": "{{ var.value.window }}", "min_history": 8})
    _op(**{**GATED, "baseline": "{{ var.value.baseline }}"}, history_settings={"window": 20})
    _op(**GATED, history_settings="{{ var.json.history_settings }}")
    assert {"history_settings"} <= set(_op(**GATED).template_fields)
    assert {"history_settings"} <= set(_sensor(**GATED).template_fields)
    with pytest.raises(ValueError, match=r"window \(3\)"):
        _sensor(**GATED, history_settings={"window": 3})


def test_rendered_history_settings_read_numbers_and_fail_before_the_run(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    assert history_settings_of({"window": "20", "fail_z": "2.5"}, "history") == {"window": 20, "fail_z": 2.5}
    _service(requests_mock, ["FINISHED"])
    op = _op(**GATED, history_settings={"window": "{{ var.value.window }}"})
    op.history_settings = {"window": "many"}  # as rendered
    with pytest.raises(AirflowFailException, match="window='many' must be a whole number"):
        op.execute(_context_with(None))  # type: ignore[arg-type]
    assert requests_mock.call_count == 0


def test_history_settings_change_the_judgement(loadtest_conn: str, requests_mock: rm.Mocker) -> None:
    """Four nights are enough by default (``min_history`` 4); with ``min_history=8`` the same night is
    a warm-up night, judged by the bound alone."""
    short = _season(4)
    for settings, status in (({}, "noise"), ({"min_history": 8}, "pass")):
        _service(requests_mock, ["FINISHED"])
        requests_mock.post(SUMMARY_URL, json=[603.0, 0.2])
        result = _op(**GATED, history_settings=settings).execute(_context_with(short.to_xcom()))  # type: ignore[arg-type]
        assert result["gate"][0]["status"] == status
