"""The season ``make demo`` leaves (``devtools.demo.season_nights``), without Airflow: one DAG run a
night, each with what the gated task leaves, so that the Load tests view draws every night and the next
real night's gate reads them as its memory (the last night's saved history taken as it is, nothing
judged again); dated as nights of a few minutes (a back-dated run ending today showed 28 days)."""

from __future__ import annotations

import time
from datetime import date, timedelta
from itertools import pairwise
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY
from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY, recall
from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY, RunRecord
from airflow_provider_loadtest.lifecycle.night_records import SAVED_BY_RECORDS
from airflow_provider_loadtest.plugins.rows import RunResult
from devtools import demo


@pytest.fixture(scope="module")
def season() -> list[dict[str, Any]]:
    values = demo.release_values(demo.GATE_SCENARIO, demo.GATE_BOUNDS)
    return demo.season_nights(demo.GATE_TASK_ID, demo.GATE_SCENARIO, values, demo.GATE_BOUNDS)


def test_one_dag_run_a_night_dated_as_a_short_night(season: list[dict[str, Any]]) -> None:
    assert len(season) == demo.SEASON_NIGHTS
    dates = [date.fromisoformat(night["logical_date"]) for night in season]
    assert dates[-1] == date.fromisoformat(demo.SEASON_DATE)
    assert all(later - earlier == timedelta(days=1) for earlier, later in pairwise(dates))
    assert all(0 < night["minutes"] <= 15 for night in season)


def test_each_night_is_drawn_by_the_view(season: list[dict[str, Any]]) -> None:
    for night in season:
        pushed = night["xcom"][demo.GATE_TASK_ID]
        record = RunRecord.from_store(pushed[RUN_RECORD_KEY])
        assert record is not None and record.scenario_id == demo.GATE_SCENARIO
        result = RunResult.from_xcom(pushed["return_value"], pushed[RUN_RECORD_KEY])
        assert result.has_result and result.state == "FINISHED"
        drawn = {(row.metric, row.transaction) for row in result.rows}
        assert drawn == {(metric, None) for metric in demo.GATE_BOUNDS}
        assert all(row.passed for row in result.rows)


def test_the_next_nights_gate_takes_the_season_as_its_memory(season: list[dict[str, Any]]) -> None:
    """What dag_test.py stores (the DAG run's id filled in), read as tonight's gate reads it."""
    stored = []
    for number, night in enumerate(season):
        record = dict(night["xcom"][demo.GATE_TASK_ID][NIGHT_XCOM_KEY])
        assert record["dag_run_id"] is None  # filled with the DAG run's id once it is made
        stored.append({**record, "dag_run_id": f"manual__{number}"})
    memory = recall(stored, scenario_id=demo.GATE_SCENARIO, bench_result_id="tonight", ran_at=time.time())
    assert len(memory.before) == demo.SEASON_NIGHTS
    last = season[-1]["xcom"][demo.GATE_TASK_ID]
    assert memory.checkpoint is not None
    assert memory.checkpoint.bench_result_id == last[HISTORY_XCOM_KEY][SAVED_BY_RECORDS]
    assert memory.replay == ()  # the saved history is taken as it is: no night judged again
