"""The simulator's JTL files: read by the package's own reader, they add up to the run's summary
figures, and ``slower-scenario`` slows Checkout far more than the run as a whole."""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.decisions.jtl import jtl_files, read_jtl
from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary
from airflow_provider_loadtest.models.enums import MetricId
from airflow_provider_loadtest.simulator import jtl as sim_jtl
from airflow_provider_loadtest.simulator.state import FakeClock, SimulatorState

DURATION = 6.0


def _finished(state: SimulatorState, scenario: str, count: int = 1) -> list[str]:
    runs = [state.start_run(scenario)[0].id for _ in range(count)]
    assert isinstance(state.clock, FakeClock)
    state.clock.advance(DURATION * 20)
    return runs


def _summary(state: SimulatorState, run_id: str) -> JtlSummary:
    names = jtl_files(state.log_files(run_id), run_id)
    return read_jtl((name, [state.log_file(run_id, name)]) for name in names)


def _value(state: SimulatorState, run_id: str, metric: str) -> float:
    (value,) = state.summary_values([(run_id, MetricId(metric))])
    return float(value)


@pytest.fixture
def state() -> SimulatorState:
    return SimulatorState(clock=FakeClock(), run_seconds=DURATION)


@pytest.mark.parametrize("scenario", ["demo-scenario", "warning-scenario", "slow-scenario"])
def test_the_samples_add_up_to_the_run_summary(state: SimulatorState, scenario: str) -> None:
    (run_id,) = _finished(state, scenario)
    summary = _summary(state, run_id)
    transactions = summary.transactions.values()
    assert len(transactions) == len(sim_jtl.TRANSACTIONS)
    hits = sum(t.hits for t in transactions)
    assert hits == _value(state, run_id, "HITS_TOTAL")
    assert sum(t.errors for t in transactions) == _value(state, run_id, "ERRORS_TOTAL")
    assert sum(t.elapsed.total for t in transactions) / hits == _value(state, run_id, "RESPONSE_TIME_AVG")
    assert sum(t.bytes_total or 0 for t in transactions) == _value(state, run_id, "THROUGHPUT_TOTAL")
    assert sum(t.sent_bytes.total for t in transactions if t.sent_bytes) == _value(
        state, run_id, "SENT_BYTES_TOTAL"
    )
    assert hits / (summary.span_s or 0) == pytest.approx(_value(state, run_id, "HITS_RATE"), rel=0.02)
    everything = sorted(v for t in transactions for v, c in t.elapsed.counts for _ in range(c))
    p95 = everything[int(0.95 * len(everything)) - 1]
    assert p95 == pytest.approx(_value(state, run_id, "RESPONSE_TIME_PERCENTILE_95"), rel=0.05)


def test_every_generator_has_its_file_deterministically(state: SimulatorState) -> None:
    (run_id,) = _finished(state, "slow-scenario")  # two load generators
    assert jtl_files(state.log_files(run_id)) == ["lg-1.jtl.gz", "lg-2.jtl.gz"]
    first = state.log_file(run_id, "lg-2.jtl.gz")
    state._jtl_files.clear()  # rendered again: the same bytes
    assert state.log_file(run_id, "lg-2.jtl.gz") == first
    summary = _summary(state, run_id)
    assert summary.files == ("lg-1.jtl.gz", "lg-2.jtl.gz")


def test_slower_scenario_slows_checkout_while_the_run_grows_twenty_percent(state: SimulatorState) -> None:
    first, second = _finished(state, "slower-scenario", count=2)
    before, after = _summary(state, first), _summary(state, second)
    run_growth = _value(state, second, "RESPONSE_TIME_PERCENTILE_95") / _value(
        state, first, "RESPONSE_TIME_PERCENTILE_95"
    )
    from airflow_provider_loadtest.simulator.figures import run_noise

    noise = run_noise(3, 2) / run_noise(3, 1)  # slower-scenario's run-to-run noise (noisePct 3)
    assert run_growth == pytest.approx(1.2 * noise, rel=0.01)

    def p95(summary: JtlSummary, label: str) -> float:
        return summary.transactions[label].metric("RESPONSE_TIME_PERCENTILE_95") or 0.0

    assert p95(after, "Checkout") / p95(before, "Checkout") > 2.5
    assert p95(after, "Home") / p95(before, "Home") < 1.1 * noise
    assert [t.label for t in after.slowest(1)] == ["Checkout"]


def test_the_samples_are_bounded(monkeypatch: pytest.MonkeyPatch, state: SimulatorState) -> None:
    monkeypatch.setattr(sim_jtl, "MAX_SAMPLES", 1000)
    (run_id,) = _finished(state, "demo-scenario")
    assert _summary(state, run_id).samples == 1000


def test_each_transaction_fails_its_own_way_and_a_secret_it_echoes_is_masked(state: SimulatorState) -> None:
    """The per-label failure messages a failed gate shows: each transaction's first way of failing is
    its most frequent; they add up to its errors; Login's echoed password is masked."""
    (run_id,) = _finished(state, "warning-scenario")
    summary = _summary(state, run_id)
    failures = summary.failures
    assert failures.failed == sum(t.errors for t in summary.transactions.values()) > 0
    for transaction in sim_jtl.TRANSACTIONS:
        label = failures.labels[transaction.label]
        assert label.failed == summary.transactions[transaction.label].errors
        code, message, failure = transaction.failures[0]
        assert label.codes[0].text == code
        shown = label.messages[0].text
        assert shown == " ".join((failure or message).split())  # one line
        assert sum(item.count for item in label.messages) == label.failed
    login = [item.text for item in failures.labels["Login"].messages]
    assert "Login refused for https://shop.example.test/login?user=demo&password=***" in login
    assert not any("demo-Secret-1" in text for text in login)
