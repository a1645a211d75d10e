"""The gate's memory under attack (issue 33): an adversarial review's reproductions, kept as guards.

Each test reproduced a way the first version of the night records broke a promise: a scenario judged
against another's saved history, a stale saved history trusted after a night was cleared and judged
again, a series forgotten differently when replayed, hostile stored values crashing the task, the
labels check mixing scenarios, an earlier release's history lost, old DAG runs read every night.
Same harness as ``test_gate_nights`` (the real operator, requests-mock, Airflow's XCom table faked).
"""

from __future__ import annotations

import copy
import random
from datetime import timedelta
from typing import Any

import pytest

import tests.unit.test_gate_nights as tgn
from airflow_provider_loadtest.decisions.gate.history import GateHistory
from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY, NightRecord, RecordedSeries
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from tests.airflow_context import TaskStateStore
from tests.unit.test_gate_nights import START, Service, _judged_in_order, _same, _season, night
from tests.xcom_table import XComTable, nightly


def inject(
    table: XComTable,
    run_id: str,
    value: object,
    *,
    key: str = NIGHT_XCOM_KEY,
    task: str = "run",
    mi: int = -1,
) -> None:
    """Write a stored value straight into the XCom table (as the REST API or another release could)."""
    table.rows[(run_id, task, mi, key)] = (next(table._stamp), value)


def records(table: XComTable) -> list[NightRecord]:
    return [
        NightRecord.from_xcom(v) for (_r, _t, _m, k), (_s, v) in table.rows.items() if k == NIGHT_XCOM_KEY
    ]


def day(i: float) -> Any:
    return START + timedelta(days=i)


# --- a DAG run cleared: its night judged again with a new bench result (a clear starts a new load test)


@pytest.mark.parametrize("cleared", [0, 2], ids=["first-night-cleared", "middle-night-cleared"])
def test_a_cleared_night_leaves_the_history(loadtest_conn, requests_mock, cleared):
    """Night `cleared` first ran at 660 ms (an infra hiccup: +10 %), is cleared and run again at 600.
    Middle night: night 3's record names the deleted bench result, the chain breaks there, the old value
    is dropped (right). First night: night 1 is before[0], and recall trusts index 0 whatever its
    `previous` names (the first version `i == 0 or ...`), assuming db clean removed it: its checkpoint
    still holds the deleted 660 ms night, and so does every later history."""
    values = [601.0, 598.0, 603.0, 597.0, 602.0, 599.0, 600.0]
    bad = 660.0
    table, service = XComTable(), Service(requests_mock)
    ids = nightly(table, START, 7)
    for i in range(6):
        night(table, service, ids[i], bad if i == cleared else values[i], ran_at=day(i))
    # The DAG run is cleared: its try clears its XComs and starts a new load test, which runs now.
    night(table, service, ids[cleared], values[cleared], ran_at=day(5.5))
    row = night(table, service, ids[6], values[6], ran_at=day(6))
    survivors = [values[i] for i in range(6) if i != cleared] + [values[cleared], values[6]]
    oracle = _judged_in_order(requests_mock, survivors)
    _same(row, oracle[-1])


def test_a_cleared_night_once_judged_late_leaves_no_stale_saved_history(loadtest_conn, requests_mock):
    """Nights 4 and 5 in flight at once, 5 judged first (previous = 3), 4 judged late at 660 ms
    (previous = 3), 6 judged after both (its checkpoint holds 4). Night 4 is then cleared and run again
    (new bench result, 600 ms, running after 6): its old record is deleted. Now the chain 3 <- 5 <- 6
    holds again (5 named 3, which is its predecessor once 4 is gone), so night 6's checkpoint is trusted,
    although it was made with the deleted 660 ms night in it (the first version: `previous` links prove
    adjacency, not the set of nights a checkpoint holds)."""
    values = [601.0, 598.0, 603.0, 597.0, 602.0, 599.0, 600.0, 601.0]
    table, service = XComTable(), Service(requests_mock)
    ids = nightly(table, START, 8)
    for i in range(4):
        night(table, service, ids[i], values[i], ran_at=day(i))
    table.ti(ids[4]).set_state("running")
    night(table, service, ids[5], values[5], ran_at=day(5))
    night(table, service, ids[4], 660.0, ran_at=day(4))
    night(table, service, ids[6], values[6], ran_at=day(6))
    night(table, service, ids[4], values[4], ran_at=day(6.5))  # cleared: a new load test, now
    row = night(table, service, ids[7], values[7], ran_at=day(7))
    oracle = _judged_in_order(requests_mock, [*values[:4], values[5], values[6], values[4], values[7]])
    _same(row, oracle[-1])


# --- a series forgotten alike whether its nights are replayed or judged in order


P95, AVG = "RESPONSE_TIME_PERCENTILE_95", "RESPONSE_TIME_AVG"


class TwoMetrics(Service):
    def _summary(self, request: Any, context: Any) -> list[float | None]:
        bench = request.json()["metrics"][0]["benchResultId"]
        steady = {"USERLOAD": 50.0, "HITS_RATE": 100.0, AVG: self.avg}
        return [
            self.values[self.runs[bench]] if m["id"] == P95 else steady.get(m["id"])
            for m in request.json()["metrics"]
        ]


def _run(requests_mock, monkeypatch, *, overlap: bool):
    gated: dict[str, float] = {}

    def op(scenario: str = "sc-1") -> RunScenarioOperator:
        return RunScenarioOperator(
            task_id="run",
            scenario_id=scenario,
            workspace_id="ws-1",
            template_id="t-1",
            deferrable=False,
            timeout=3600,
            baseline="history",
            max_regression_pct=dict(gated),
            history_settings={"window": 5, "min_history": 4},
        )

    monkeypatch.setattr(tgn, "_op", op)
    table, service = XComTable(), TwoMetrics(requests_mock)
    ids = nightly(table, START, 20)

    def one(i: int):
        gated.clear()
        gated[P95] = 5
        if i < 5 or i >= 13:
            gated[AVG] = 5  # gated nights 0-4, dropped (renamed) nights 5-12, gated again from 13
        service.avg = 300.0 if i < 5 else 400.0  # the new AVG is another definition: a new series
        night(table, service, ids[i], 600.0 + (i % 3), ran_at=day(i))

    one(0)
    if overlap:  # nights 1 and 2 in flight at once, 2 ends first: the chain breaks at 2, for good
        table.ti(ids[1]).set_state("running")
        one(2)
        one(1)
    else:
        one(1)
        one(2)
    for i in range(3, 15):
        one(i)
    saved = GateHistory.from_xcom(table.rows[(ids[14], "run", -1, "loadtest_gate_history")][1])
    return saved.series[(None, AVG)].values


def test_a_series_gated_again_after_window_nights_is_judged_alike_whether_replayed_or_not(
    requests_mock, monkeypatch, loadtest_conn
):
    in_order = _run(requests_mock, monkeypatch, overlap=False)
    replayed = _run(requests_mock, monkeypatch, overlap=True)
    assert in_order == (400.0, 400.0)  # restarted when it came back
    assert replayed == in_order, replayed  # the first version: the 300 ms nights were back


# --- bad or hostile stored values never crash the task: left out, said in the log


def _five_nights(requests_mock):
    table, service = XComTable(), Service(requests_mock)
    ids = nightly(table, START, 7)
    for i in range(5):
        night(table, service, ids[i], _season(1, 5)[i], ran_at=day(i))
    return table, service, ids


def test_a_record_with_an_unhashable_dag_run_id_is_left_out(loadtest_conn, requests_mock):
    """A record whose dag_run_id is a list (a newer release's form of it, a REST-API edit): TypeError
    in stored_records' set comprehension, outside any try: the task fails, and so does every later
    night until the DAG run is cleaned."""
    table, service, ids = _five_nights(requests_mock)
    bad = copy.deepcopy(next(v for (r, t, m, k), (s, v) in table.rows.items() if k == "loadtest_gate_night"))
    bad["dag_run_id"] = ["scheduled", "x"]  # not a str
    inject(table, ids[0], bad, mi=3)
    row = night(table, service, ids[5], 601.0, ran_at=day(5))  # raises TypeError: unhashable type: 'list'
    assert row.passed


def test_a_record_with_a_metric_this_release_does_not_know_is_left_out(loadtest_conn, requests_mock):
    """A record (format 1) naming a metric id this release has no direction for (a newer release's
    metric after a downgrade, or an edited value) is replayed through judge_gate: KeyError in
    METRIC_DIRECTIONS[...], uncaught -> the task crashes every night it is replayed."""
    table, service, ids = _five_nights(requests_mock)
    rec = records(table)[-1].to_xcom()
    rec.update(bench_result_id="br-x", ran_at=day(4.5).timestamp(), dag_run_id=ids[0], map_index=7)
    rec["series"] = [*rec["series"], [None, "SOME_FUTURE_METRIC", 1.0, 5.0, None]]
    inject(table, ids[0], rec, mi=7)
    row = night(table, service, ids[5], 601.0, ran_at=day(5))
    assert row.passed


def test_a_record_with_an_out_of_range_time_is_left_out(loadtest_conn, requests_mock):
    """ran_at=-1e13 is finite, so it parses; the log line of _gate_history formats before[-1].when
    (datetime.fromtimestamp) eagerly: ValueError 'year is out of range' -> the task crashes."""
    table, service = XComTable(), Service(requests_mock)
    ids = nightly(table, START, 2)
    night(table, service, ids[0], 600.0, ran_at=day(0))
    rec = records(table)[0].to_xcom()
    for r, t, m, k in list(table.rows):
        if k == "loadtest_gate_night":
            del table.rows[(r, t, m, k)]
    rec.update(ran_at=-1e13)
    inject(table, ids[0], rec)
    row = night(table, service, ids[1], 601.0, ran_at=day(1))
    assert row.passed


def test_huge_samples_in_a_record(loadtest_conn, requests_mock):
    """samples is any int: 10**400 is a whole number JSON carries."""
    table, service, ids = _five_nights(requests_mock)
    rec = records(table)[-1].to_xcom()
    rec.update(bench_result_id="br-x", ran_at=day(4.5).timestamp(), dag_run_id=ids[0], map_index=7)
    rec["series"] = [[s[0], s[1], s[2], s[3], 10**400] for s in rec["series"]]
    inject(table, ids[0], rec, mi=7)
    row = night(table, service, ids[5], 601.0, ran_at=day(5))
    assert row.passed


def test_finite_but_huge_values_in_records_are_left_out(loadtest_conn, requests_mock):
    """value=1e308 is finite, so _number_or_none accepts it; two such nights replayed through the
    history's statistics overflow math.fsum (OverflowError: intermediate overflow in fsum), uncaught."""
    table, service, ids = _five_nights(requests_mock)
    base = records(table)[-1].to_xcom()
    for k, when in enumerate((-2, -1)):
        rec = copy.deepcopy(base)
        rec.update(
            bench_result_id=f"br-x{k}", ran_at=day(when).timestamp(), dag_run_id=ids[0], map_index=7 + k
        )
        rec["series"] = [[s[0], s[1], 1e308, s[3], s[4]] for s in rec["series"]]
        inject(table, ids[0], rec, mi=7 + k)
    row = night(table, service, ids[5], 601.0, ran_at=day(5))
    assert not row.passed or row.passed  # reaching here at all is the point: it must not raise


# --- before the start, the labels check reads this scenario's nights


P95 = "RESPONSE_TIME_PERCENTILE_95"


def test_the_labels_check_before_the_start_reads_this_scenarios_nights_only(loadtest_conn):
    """Map index 0 judges scenario sc-a (label 'checkout'); map index 1 judges sc-b, whose script
    names 'Checkout' and has never run. Before sc-b's start, _gate_history(context) (no run) derives the
    history of every scenario of the task (recall(scenario_id=None), the first version): 'Checkout' is
    refused as a typo of sc-a's 'checkout' and nothing starts."""
    table = XComTable()
    ids = nightly(table, START, 4)
    for i in range(3):
        rec = NightRecord(
            f"br-{i}",
            "sc-a",
            day(i).timestamp(),
            (RecordedSeries(None, P95, 600.0, 5.0, None), RecordedSeries("checkout", P95, 300.0, 5.0, 10000)),
            dag_run_id=ids[i],
            map_index=0,
            recorded_at=float(i),
        )
        inject(table, ids[i], rec.to_xcom(), mi=0)
    op = RunScenarioOperator(
        task_id="run",
        scenario_id="sc-b",
        workspace_id="ws-1",
        template_id="t-1",
        deferrable=False,
        timeout=3600,
        baseline="history",
        max_regression_pct={P95: 5},
        transaction_max_regression_pct={"Checkout": {P95: 10}},
    )
    ti = table.ti(ids[3], map_index=1)
    context = ti.context(task_state_store=TaskStateStore())
    spec = op._gate_spec()
    op._check_labels_before_start(
        context, spec, op._transaction_gate(spec)
    )  # ValueError: did you mean 'checkout'?


# --- the history an earlier release left, and no record yet


def _forget_records(table: XComTable) -> None:
    """What the previous release left: only loadtest_gate_history, no loadtest_gate_night."""
    for key in [k for k in table.rows if k[3] == NIGHT_XCOM_KEY]:
        del table.rows[key]
    for key, (stamp, value) in list(table.rows.items()):
        if isinstance(value, dict) and "night_of" in value:
            table.rows[key] = (stamp, {k: v for k, v in value.items() if k != "night_of"})


def test_upgrade_night_of_a_mapped_gate_keeps_every_scenarios_legacy_history(loadtest_conn, requests_mock):
    """.expand(scenario_id=[sc-a, sc-b]) run one map index at a time (max_active_tis_per_dag=1, usual for
    load tests sharing one service). Upgrade night: map index 0 judges first from its legacy history and
    records a night; map index 1 then finds `stored` non-empty (sc-a's record, same DAG run) and skips
    _legacy (the first version `elif not stored`), so sc-b's history restarts from nothing, for good."""
    table, service = XComTable(), Service(requests_mock)
    centres = {"sc-a": 600.0, "sc-b": 800.0}
    ids = nightly(table, START, 9)

    def mapped_night(i: int) -> list:
        rows = []
        for index, scenario in enumerate(["sc-a", "sc-b"]):
            value = centres[scenario] * (1 + random.Random(i * 7 + index).gauss(0, 0.02))
            rows.append(
                night(
                    table,
                    service,
                    ids[i],
                    value,
                    ran_at=day(i) + timedelta(minutes=index),
                    scenario=scenario,
                    map_index=index,
                )
            )
        return rows

    for i in range(8):
        mapped_night(i)
    _forget_records(table)  # the nights so far were judged by the previous release
    a, b = mapped_night(8)
    assert a.history_n == b.history_n, (a.history_n, b.history_n)


def test_the_earlier_release_history_holds_when_the_first_recorded_night_is_not_the_earliest(
    loadtest_conn, requests_mock
):
    """Upgrade night n1 goes on from the legacy history (8 nights). A manual run m (accepting nothing)
    that ran two hours before n1 ends after it: `stored` holds n1's record, so m starts from an empty
    history, and on the next night recall orders m before n1: checkpoint = m (history {m}), n1 replayed
    onto it: the 8 legacy nights are gone for good."""
    table, service = XComTable(), Service(requests_mock)
    values = _season(7, 11)
    ids = nightly(table, START, 11)
    for i in range(8):
        night(table, service, ids[i], values[i], ran_at=day(i))
    _forget_records(table)
    n1 = night(table, service, ids[8], values[8], ran_at=day(8))
    assert n1.history_n == 6  # the 8 legacy nights, as judged in order
    table.add_run("manual__m", None, day(8) - timedelta(hours=1))
    m = night(table, service, "manual__m", values[9], ran_at=day(8) - timedelta(hours=2))
    n2 = night(table, service, ids[9], values[10], ran_at=day(9))
    assert m.history_n >= 6 and n2.history_n >= 7, (m.history_n, n2.history_n)  # the first version: (0, 2)


def test_a_new_scenario_never_takes_another_scenarios_saved_history_for_an_earlier_release(
    loadtest_conn, requests_mock
):
    """In a first version the legacy history was read whenever *this scenario* had no record, and
    _legacy pulled the newest loadtest_gate_history of this map index, the key every night of this
    release writes too (its saved history): a templated scenario id that
    changes (sc-1 -> sc-2), or a scenario inserted into a mapped list, is judged against the other
    scenario's history. sc-2 runs at 900 ms where sc-1 ran at 600: a first night of sc-2 must not be a
    regression against sc-1."""
    table, service = XComTable(), Service(requests_mock)
    values = _season(8, 9)
    ids = nightly(table, START, 10)
    for i in range(9):
        night(table, service, ids[i], values[i], ran_at=day(i))
    first = night(table, service, ids[9], 900.0, ran_at=day(9), scenario="sc-2")
    assert first.history_n in (0, None) and first.passed, (first.status, first.history_n, first.centre)


# --- hundreds of DAG runs without a record: read once, not every night


@pytest.mark.parametrize("old_runs", [400, 600])
def test_an_acceptance_dated_after_tonight_holds_behind_hundreds_of_runs_without_a_record(
    loadtest_conn, requests_mock, old_runs
):
    """600 asset-triggered DAG runs of the previous release (success, no loadtest_gate_night). A change is
    accepted by a manual run (no logical date) triggered after the next scheduled run's logical date
    (a data-interval timetable): it is found only through get_task_states. The 500 single reads are
    spent, in run-id order, on 'asset_triggered__...' (< 'manual__...'), the acceptance is never read,
    and the next night fails as a regression against the old normal, with no note in the log."""
    table, service = XComTable(), Service(requests_mock)
    for k in range(old_runs):
        when = START - timedelta(days=400) + timedelta(hours=k)
        table.add_run(f"asset_triggered__{when.isoformat()}", None, when)
        table.ti(f"asset_triggered__{when.isoformat()}").set_state("success")
    values = _season(1, 10)
    ids = nightly(table, START, 10)
    for i, (run_id, value) in enumerate(zip(ids, values, strict=False)):
        night(table, service, run_id, value, ran_at=day(i))
    step = day(10)
    table.add_run("scheduled__step", step, step)
    assert night(table, service, "scheduled__step", 700, ran_at=step).status == "regression"
    manual = step + timedelta(hours=10)
    table.add_run("manual__accept", None, manual, loadtest_accept_change=True)
    assert night(table, service, "manual__accept", 702, ran_at=manual).passed
    when = step + timedelta(days=1)
    table.add_run("scheduled__1", when - timedelta(days=1), when)
    after = night(table, service, "scheduled__1", 700 * 1.02, ran_at=when)
    assert after.passed, (after.status, after.history_n)


def test_old_runs_without_a_record_are_read_once_not_every_night(loadtest_conn, requests_mock, monkeypatch):
    """Counts the XCom reads one ordinary night makes with 300 DAG runs of the previous release."""
    import tests.xcom_table as xt

    calls = [0]
    real = xt.FakeTI.xcom_pull

    def counting(self, *a, **k):
        calls[0] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(xt.FakeTI, "xcom_pull", counting)
    table, service = XComTable(), Service(requests_mock)
    for k in range(300):
        when = START - timedelta(days=400) + timedelta(days=k)
        table.add_run(f"scheduled__{when.isoformat()}", when, when)
        table.ti(f"scheduled__{when.isoformat()}").set_state("success")
    ids = nightly(table, START, 3)
    for i in range(3):
        calls[0] = 0
        night(table, service, ids[i], 600.0, ran_at=day(i))
    assert calls[0] < 20, calls[0]
