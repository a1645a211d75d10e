"""The simulator's transactions move with the night and on their own: ``transactionNoisePct`` gives each
transaction its own run-to-run noise (the run's average holds), ``busyRuns`` slows every transaction of a
run together, ``slowShare`` 1 puts a run's slowdown on its ``slowTransaction`` alone; and ``times_csv``
gives the samples' times ``render`` writes, for the runs the simulator never served (a gate's season)."""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.decisions.jtl import jtl_files, read_jtl
from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary
from airflow_provider_loadtest.simulator import jtl as sim_jtl
from airflow_provider_loadtest.simulator.figures import NOISE_BOUND_SD, RunFigures
from airflow_provider_loadtest.simulator.seed import MetricProfile, load_seed
from airflow_provider_loadtest.simulator.state import FakeClock, SimulatorState

SCENARIO = "checkout-scenario"
METRICS = ["RESPONSE_TIME_PERCENTILE_95", "RESPONSE_TIME_AVG"]


def _served(state: SimulatorState) -> tuple[JtlSummary, RunFigures, int]:
    run, _ = state.start_run(SCENARIO)
    assert isinstance(state.clock, FakeClock)
    state.clock.advance(1000)
    names = jtl_files(state.log_files(run.id), run.id)
    summary = read_jtl((name, [state.log_file(run.id, name)]) for name in names)
    return summary, run.figures(state.clock.now()), run.ordinal


def _figures(summary: JtlSummary) -> dict[str, dict[str, float | None]]:
    return {label: {m: s.metric(m) for m in METRICS} for label, s in summary.transactions.items()}


def test_times_csv_reads_as_the_served_files_do() -> None:
    state = SimulatorState(clock=FakeClock(), run_seconds=6.0)
    scenario = load_seed().scenario(SCENARIO)
    assert scenario is not None
    for _ in range(2):  # the busy night, then Checkout slower
        served, figures, ordinal = _served(state)
        text = sim_jtl.times_csv(
            figures,
            slowdown=(1 + scenario.slowdown_per_run) ** (ordinal - 1),
            slow_transaction=scenario.slow_transaction,
            slow_share=scenario.slow_share,
            own=sim_jtl.own_noise(scenario.metrics.transaction_noise_pct, ordinal),
        )
        assert _figures(read_jtl([("x.jtl", [text.encode()])])) == _figures(served)


def test_each_transaction_has_its_own_noise_and_the_run_its_average() -> None:
    assert sim_jtl.own_noise(0, 3) == {}
    draws = [sim_jtl.own_noise(3, run) for run in range(1, 201)]
    assert draws == [sim_jtl.own_noise(3, run) for run in range(1, 201)]  # deterministic per run
    checkout = [d["Checkout"] for d in draws]
    assert len(set(checkout)) == 200 and all(abs(f - 1) <= 0.03 * NOISE_BOUND_SD + 1e-12 for f in checkout)
    assert 0.02 < (sum((f - 1) ** 2 for f in checkout) / 200) ** 0.5 < 0.04
    assert draws[0]["Checkout"] != draws[0]["Home"]  # not the night's: each transaction its own
    figures = RunFigures.of(MetricProfile(avg_response_time_ms=400), 100.0, 1.0, 1)
    means = sim_jtl.means(figures, 1.0, None, own=draws[0])
    quiet = sim_jtl.means(figures, 1.0, None)
    ratios = {t.label: means[t.label] / quiet[t.label] for t in sim_jtl.TRANSACTIONS}
    assert len({round(r, 6) for r in ratios.values()}) == len(ratios)
    weighted = sum(t.share * means[t.label] for t in sim_jtl.TRANSACTIONS) / sum(
        t.share for t in sim_jtl.TRANSACTIONS
    )
    assert weighted == pytest.approx(400)


def test_a_busy_run_slows_everything_together_and_slow_share_one_slows_one_transaction() -> None:
    profile = MetricProfile(avg_response_time_ms=400, noise_pct=4)
    plain = RunFigures.of(profile, 100.0, 1.0, 1, run_index=1)
    busy = RunFigures.of(profile, 100.0, 1.0, 1, run_index=1, busy=0.15)
    assert busy.avg_response_time_ms == pytest.approx(1.15 * plain.avg_response_time_ms, abs=0.1)
    assert sim_jtl.means(busy, 1.0, None) == pytest.approx(
        {k: 1.15 * v for k, v in sim_jtl.means(plain, 1.0, None).items()}, rel=1e-3
    )
    slower = RunFigures.of(profile, 100.0, 1.1, 1, run_index=1)
    alone = sim_jtl.means(slower, 1.1, "Checkout", slow_share=1.0)
    before = sim_jtl.means(plain, 1.0, None)
    assert {k: v for k, v in alone.items() if k != "Checkout"} == pytest.approx(
        {k: v for k, v in before.items() if k != "Checkout"}, rel=1e-3
    )
    assert alone["Checkout"] > 1.3 * before["Checkout"]
    scenario = load_seed().scenario(SCENARIO)
    assert scenario is not None and scenario.busy_runs == {1: 0.15} and scenario.slow_share == 1.0
