"""The gate remembers every night once and in order, whatever kind of DAG run Airflow made (issue 33).

Each test drives the real ``RunScenarioOperator`` (or ``LoadTestRunSensor``) night after night against a
requests-mock service, with the XCom table and task states faked as Airflow queries them
(``tests.xcom_table``: PostgreSQL's and SQLite's NULL ordering, include_prior_dates by
``coalesce(logical_date, run_after)``, a try clearing its own XComs). The oracle is the same nights
judged in the order they ran, one DAG run at a time: a history derived from the records must judge
tonight exactly as that chain would have.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.decisions.gate import GateRow
from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY, NightRecord
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from airflow_provider_loadtest.sensors.run import LoadTestRunSensor
from tests.airflow_context import TaskStateStore
from tests.conftest import BASE_URL
from tests.unit.test_gate import SUMMARY_URL
from tests.xcom_table import XComTable, nightly

P95 = "RESPONSE_TIME_PERCENTILE_95"
GATED = {"baseline": "history", "max_regression_pct": {P95: 5}}
START = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
DIALECTS = ["postgresql", "sqlite"]


@dataclass
class Service:
    """The load-testing service: each start answers a new bench result; the summary answers tonight's
    value of the scenario's p95 (and a steady applied load)."""

    mocker: rm.Mocker
    values: dict[str, float] = field(default_factory=dict)  # scenario id -> tonight's p95
    created: dict[str, float] = field(default_factory=dict)  # scenario id -> epoch s of tonight's run
    runs: dict[str, str] = field(default_factory=dict)  # bench result id -> scenario id
    count: int = 0

    def __post_init__(self) -> None:
        m = self.mocker
        m.post(re.compile(rf"{BASE_URL}/runtime/scenarios/run/[\w-]+"), json=self._start)
        m.get(re.compile(rf"{BASE_URL}/runtime/bench-results/br-\d+$"), json=self._state)
        m.get(re.compile(rf"{BASE_URL}/runtime/bench-results/progress/.*"), json={"value": 100})
        m.get(re.compile(rf"{BASE_URL}/analysis/metrics/global/.*"), json={"metrics": []})
        m.get(re.compile(rf"{BASE_URL}/analysis/logs/list/.*"), json=[])
        m.post(f"{BASE_URL}/analysis/threshold-alarms", json=[])
        m.post(re.compile(rf"{BASE_URL}/runtime/bench-results/stop/.*"), text="")
        m.post(SUMMARY_URL, json=self._summary)

    def _start(self, request: Any, context: Any) -> dict[str, Any]:
        scenario = request.path.rsplit("/", 1)[1]
        self.count += 1
        bench = f"br-{self.count}"
        self.runs[bench] = scenario
        return {
            "id": f"rep-{self.count}",
            "projectId": "proj-1",
            "name": "nightly",
            "benchResultIds": [bench],
            "created": int(self.created[scenario] * 1000),
            "configs": [],
            "items": [],
        }

    def _state(self, request: Any, context: Any) -> dict[str, Any]:
        bench = request.path.rsplit("/", 1)[1]
        return {"id": bench, "state": "FINISHED", "scenarioId": self.runs.get(bench, "sc-1")}

    def _summary(self, request: Any, context: Any) -> list[float | None]:
        bench = request.json()["metrics"][0]["benchResultId"]
        scenario = self.runs[bench]
        steady = {"USERLOAD": 50.0, "HITS_RATE": 100.0}
        return [
            self.values[scenario] if m["id"] == P95 else steady.get(m["id"])
            for m in request.json()["metrics"]
        ]


def _op(scenario: str = "sc-1") -> RunScenarioOperator:
    return RunScenarioOperator(
        task_id="run",
        scenario_id=scenario,
        workspace_id="ws-1",
        template_id="t-1",
        deferrable=False,
        timeout=3600,
        **GATED,
    )


def night(
    table: XComTable,
    service: Service,
    run_id: str,
    value: float,
    *,
    ran_at: datetime,
    scenario: str = "sc-1",
    map_index: int = -1,
    store: TaskStateStore | None = None,
) -> GateRow:
    """One try of the gated task in DAG run ``run_id``: the run's p95 is ``value``; the row of p95."""
    ti = table.ti(run_id, map_index=map_index)
    ti.clear_try()
    ti.set_state("running")
    service.values[scenario] = value
    service.created[scenario] = ran_at.timestamp()
    context = ti.context(task_state_store=store or TaskStateStore())
    try:
        with mock.patch(
            "airflow_provider_loadtest.operators.run_scenario.time.time", return_value=ran_at.timestamp()
        ):
            result = _op(scenario).execute(context)  # type: ignore[arg-type]
        ti.set_state("success")
    except AirflowFailException:
        ti.set_state("failed")
        result = ti.xcom_pull(key="return_value", map_indexes=map_index)
    return next(GateRow.from_xcom(r) for r in result["gate"] if r["metric"] == P95)


def _season(seed: int, nights: int, centre: float = 600.0) -> list[float]:
    rng = random.Random(seed)
    return [centre * (1 + rng.gauss(0, 0.02)) for _ in range(nights)]


def _records(table: XComTable) -> list[NightRecord]:
    return [
        NightRecord.from_xcom(v) for (_r, _t, _m, k), (_s, v) in table.rows.items() if k == NIGHT_XCOM_KEY
    ]


def _judged_in_order(requests_mock: rm.Mocker, values: list[float]) -> list[GateRow]:
    """The oracle: the same nights, one scheduled DAG run after another, in the order they ran."""
    table, service = XComTable(), Service(requests_mock)
    ids = nightly(table, START, len(values))
    return [
        night(table, service, r, v, ran_at=START + timedelta(days=i))
        for i, (r, v) in enumerate(zip(ids, values, strict=False))
    ]


def _same(row: GateRow, oracle: GateRow) -> None:
    assert (row.status, row.history_n) == (oracle.status, oracle.history_n)
    assert row.centre == pytest.approx(oracle.centre) and row.noise == pytest.approx(oracle.noise)


# --- acceptance by a run without a logical date ---------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("manual_after_next", [False, True], ids=["cron-trigger", "data-interval"])
def test_a_change_accepted_by_a_run_without_a_logical_date_holds_and_the_history_grows_again(
    loadtest_conn: str, requests_mock: rm.Mocker, dialect: str, manual_after_next: bool
) -> None:
    """The documented way to accept a change (``airflow dags trigger --conf`` : no logical date). Before:
    on PostgreSQL every later night read the accepted run's history (history_n 1, 1, 1, a +9 % night
    passed); on SQLite the acceptance was lost and the next night stayed red."""
    table, service = XComTable(dialect=dialect), Service(requests_mock)
    values = _season(1, 10)
    ids = nightly(table, START, 10)
    for i, (run_id, value) in enumerate(zip(ids, values, strict=False)):
        night(table, service, run_id, value, ran_at=START + timedelta(days=i))
    step = START + timedelta(days=10)
    table.add_run("scheduled__step", step, step)
    assert night(table, service, "scheduled__step", 700, ran_at=step).status == "regression"
    # A person accepts +16 %: a manual run, no logical date, dated by when it was triggered. With a
    # data-interval timetable the next scheduled run's logical date lies before that.
    manual = step + timedelta(hours=10)
    table.add_run("manual__accept", None, manual, loadtest_accept_change=True)
    accepted = night(table, service, "manual__accept", 702, ran_at=manual)
    assert accepted.passed and "accepted" in (accepted.note or "")
    later = []
    for i in range(1, 7):
        when = step + timedelta(days=i)
        logical = when - timedelta(days=1) if manual_after_next else when
        table.add_run(f"scheduled__{i}", logical, when)
        later.append(night(table, service, f"scheduled__{i}", 700 * (1 + 0.02 * ((-1) ** i)), ran_at=when))
    assert all(row.passed for row in later), [(r.status, r.reason) for r in later]
    grown = [row.history_n or 0 for row in later]  # the history grows from the accepted night
    assert grown[0] == 1 and grown == sorted(grown) and grown[-1] >= 4, grown
    # ... and judges again: +17 % over the new normal fails.
    when = step + timedelta(days=8)
    table.add_run("scheduled__9pc", when, when)
    assert night(table, service, "scheduled__9pc", 820, ran_at=when).status == "regression"


# --- nights out of order, at once, backfilled -----------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_nights_in_flight_are_both_recorded_and_the_next_night_is_judged_as_in_order(
    loadtest_conn: str, requests_mock: rm.Mocker, dialect: str
) -> None:
    """max_active_runs=2: the later run ends first. Before: a passed night never joined the history."""
    values = _season(2, 14)
    oracle = _judged_in_order(requests_mock, values)
    without_11 = oracle_without(requests_mock, values, 11)
    table, service = XComTable(dialect=dialect), Service(requests_mock)
    ids = nightly(table, START, 14)
    for i in range(11):
        night(table, service, ids[i], values[i], ran_at=START + timedelta(days=i))
    # Nights 11 and 12 run at once; 12 ends (and is judged) first, while 11's task is still running.
    table.ti(ids[11]).set_state("running")
    _same(night(table, service, ids[12], values[12], ran_at=START + timedelta(days=12)), without_11[11])
    night(table, service, ids[11], values[11], ran_at=START + timedelta(days=11))
    _same(night(table, service, ids[13], values[13], ran_at=START + timedelta(days=13)), oracle[13])
    assert sorted(r.bench_result_id for r in _records(table)) == sorted(f"br-{i}" for i in range(1, 15))


def oracle_without(requests_mock: rm.Mocker, values: list[float], left_out: int) -> list[GateRow]:
    return _judged_in_order(requests_mock, [v for i, v in enumerate(values) if i != left_out])


def test_a_backfilled_night_is_judged_against_the_nights_before_it_ran(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """A backfill of an old date, judged last: against the history as it was then, and taken in by
    the nights after it in its place. Before: judged against that date's stale chain."""
    values = _season(3, 14)
    oracle = _judged_in_order(requests_mock, values)
    table, service = XComTable(), Service(requests_mock)
    ids = nightly(table, START, 14)
    order = [i for i in range(13) if i != 6]
    for i in order:
        night(table, service, ids[i], values[i], ran_at=START + timedelta(days=i))
    _same(night(table, service, ids[6], values[6], ran_at=START + timedelta(days=6)), oracle[6])
    _same(night(table, service, ids[13], values[13], ran_at=START + timedelta(days=13)), oracle[13])


# --- one bench result, judged on several nights ---------------------------------------------------


def test_a_sensor_judging_one_bench_result_on_several_nights_counts_it_once(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """A Variable not moved on: the sensor judges br-1 five nights running. Before: five nights of
    history, and a noise computed from copies of one value (sd 0)."""
    table, service = XComTable(), Service(requests_mock)
    service.runs["br-1"] = "sc-1"
    service.values["sc-1"] = 600.0
    ids = nightly(table, START, 5)
    rows = []
    for run_id in ids:
        ti = table.ti(run_id, task_id="wait")
        ti.set_state("running")
        sensor = LoadTestRunSensor(task_id="wait", bench_result_id="br-1", poke_interval=0.01, **GATED)
        result = sensor.execute(ti.context(task_state_store=TaskStateStore()))  # type: ignore[arg-type]
        ti.set_state("success")
        result = result or ti.xcom_pull(key="return_value")
        rows.append(next(GateRow.from_xcom(r) for r in result["gate"] if r["metric"] == P95))
    assert [row.history_n for row in rows] == [0, 0, 0, 0, 0]  # judged each time against the nights before it
    assert all(row.noise is None for row in rows)  # never a noise made of copies of one value


# --- a mapped gate whose list changes order -------------------------------------------------------


def test_a_mapped_gate_reordered_is_judged_per_scenario_not_per_map_index(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """``.expand(scenario_id=[...])`` whose list changes order. Before: a night where nothing got
    slower failed +33 % against the other scenario's history."""
    table, service = XComTable(), Service(requests_mock)
    centres = {"sc-a": 600.0, "sc-b": 800.0}
    ids = nightly(table, START, 9)
    for i, run_id in enumerate(ids):
        order = ["sc-a", "sc-b"] if i < 8 else ["sc-b", "sc-a"]
        rows = []
        for index, scenario in enumerate(order):
            value = centres[scenario] * (1 + random.Random(i * 7 + index).gauss(0, 0.02))
            rows.append(
                night(
                    table,
                    service,
                    run_id,
                    value,
                    ran_at=START + timedelta(days=i, minutes=index),
                    scenario=scenario,
                    map_index=index,
                )
            )
        assert all(row.passed for row in rows), [(r.status, r.reason) for r in rows]
    assert rows[0].history_n == rows[1].history_n and (rows[0].history_n or 0) >= 6


# --- a retry after judging ------------------------------------------------------------------------


def test_a_retry_after_judging_judges_the_same_night_again_and_records_it_once(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    """The gate failed, the task retries: it re-attaches to the same run (its record in the state
    store), judges it against the same nights, and the night is recorded once."""
    table, service = XComTable(), Service(requests_mock)
    values = _season(4, 8)
    ids = nightly(table, START, 9)
    for i in range(8):
        night(table, service, ids[i], values[i], ran_at=START + timedelta(days=i))
    store = TaskStateStore()
    first = night(table, service, ids[8], 720, ran_at=START + timedelta(days=8), store=store)
    again = night(table, service, ids[8], 720, ran_at=START + timedelta(days=8), store=store)
    assert first.status == again.status == "regression"
    assert (first.history_n, first.centre) == (again.history_n, again.centre)
    assert service.count == 9  # no second load test
    assert sorted(r.bench_result_id for r in _records(table)) == sorted(f"br-{i}" for i in range(1, 10))


def test_a_backfill_is_a_night_of_when_it_ran_and_the_log_says_so(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    """``airflow backfill`` of an old date runs its load test today: its figures measure the system as it
    is now, so it is tonight's night, judged after every night that ran before it."""
    table, service = XComTable(), Service(requests_mock)
    values = _season(5, 6)
    ids = nightly(table, START, 6)
    for i in range(5):
        night(table, service, ids[i], values[i], ran_at=START + timedelta(days=i))
    capsys.readouterr()
    old = START - timedelta(days=30)
    table.add_run("backfill__old", old, START + timedelta(days=5))
    row = night(table, service, "backfill__old", values[5], ran_at=START + timedelta(days=5))
    assert row.history_n == 4  # the five nights before it: four kept, the last waiting for the next
    out = capsys.readouterr().out
    assert "logical date 2026-01-30 lies 35 days before its load test ran (a backfill" in out, out[-2000:]
