"""The simulator's light scenario: a run that applies a fraction of its users (load generators that did
not start), so that a gate's load check has something real to catch (``decisions.gate.load``)."""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.models.enums import MetricId
from airflow_provider_loadtest.simulator.figures import LIGHT_SPEEDUP, RunFigures
from airflow_provider_loadtest.simulator.seed import MetricProfile, load_seed
from airflow_provider_loadtest.simulator.state import SimulatorState

USERLOAD, HITS_RATE, AVG = (MetricId(m) for m in ("USERLOAD", "HITS_RATE", "RESPONSE_TIME_AVG"))


def test_a_run_that_applies_a_fifth_of_its_users_sends_a_fifth_of_the_hits_and_answers_faster() -> None:
    profile = MetricProfile(users=500, hits_per_second=150, avg_response_time_ms=300)
    full = RunFigures.of(profile, 100, 1.0, 1)
    light = RunFigures.of(profile, 100, 1.0, 1, applied=0.2)
    assert (full.summary_value(USERLOAD), light.summary_value(USERLOAD)) == (500, 100)
    assert light.summary_value(HITS_RATE) == pytest.approx(full.summary_value(HITS_RATE) * 0.2)
    assert light.summary_value(AVG) == pytest.approx(300 * (1 - LIGHT_SPEEDUP * 0.8), abs=0.05)


def test_the_light_scenario_applies_its_users_on_its_first_runs_then_a_fifth() -> None:
    state = SimulatorState()
    scenario = load_seed().scenario("light-scenario")
    assert scenario is not None and scenario.metrics.users == 500
    shares = []
    for _ in range(6):
        run = state.start_run("light-scenario")[0]
        shares.append(run.applied_share)
    assert shares == [1.0, 1.0, 1.0, 1.0, 0.2, 0.2]
