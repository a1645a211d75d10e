"""The simulator's run-to-run noise: nights of one scenario vary by a few percent, deterministically per
run, so a gate's history has noise to judge against (``baseline="history"``)."""

from __future__ import annotations

import statistics

import pytest

from airflow_provider_loadtest.models.enums import MetricId
from airflow_provider_loadtest.simulator.figures import NOISE_BOUND_SD, RunFigures, run_noise
from airflow_provider_loadtest.simulator.seed import MetricProfile, load_seed

P95 = MetricId("RESPONSE_TIME_PERCENTILE_95")


def test_noise_is_deterministic_per_run_and_of_the_stated_size() -> None:
    factors = [run_noise(3, i) for i in range(1, 401)]
    assert factors == [run_noise(3, i) for i in range(1, 401)]  # same run, same figures
    assert len(set(factors[:10])) == 10  # ... and the nights differ
    assert statistics.stdev(factors) == pytest.approx(0.03, rel=0.15)
    assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.005)
    assert all(abs(f - 1) <= 0.03 * NOISE_BOUND_SD + 1e-12 for f in factors)  # noise, no outlier night
    assert run_noise(0, 5) == 1.0


def test_noise_moves_the_times_of_a_run_and_the_slowdown_still_applies() -> None:
    noisy = MetricProfile(avg_response_time_ms=400, noise_pct=3)
    first, second = (RunFigures.of(noisy, 100, 1.0, 1, run_index=i) for i in (1, 2))
    assert first.avg_response_time_ms == pytest.approx(400 * run_noise(3, 1), abs=0.05)
    assert first.summary_value(P95) != second.summary_value(P95)
    assert first.hits == second.hits and first.errors == second.errors  # the load is the same
    slower = RunFigures.of(noisy, 100, 1.2, 1, run_index=2)
    assert slower.avg_response_time_ms == pytest.approx(400 * 1.2 * run_noise(3, 2), abs=0.05)
    quiet = MetricProfile(avg_response_time_ms=400)
    assert RunFigures.of(quiet, 100, 1.0, 1, run_index=7) == RunFigures.of(quiet, 100, 1.0, 1)


def test_the_default_seed_gives_noise_to_the_regression_scenarios_only() -> None:
    seed = load_seed()
    profiles = {s.id: s.metrics.noise_pct for s in seed.scenarios}
    assert profiles.pop("slower-scenario") == 3
    assert profiles.pop("checkout-scenario") == 4  # its transactions: test_simulator_transaction_noise
    assert set(profiles.values()) == {0.0}  # the other scenarios' figures stay as documented
