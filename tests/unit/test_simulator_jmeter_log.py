"""The simulator's ``jmeter.log``: a run that ends in ERROR or ABORTED logs JMeter's own ERROR lines
(as JMeter 5 writes them), which ``decisions.samples.jmeter_log`` picks out; a finished run logs none."""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.decisions.samples.jmeter_log import jmeter_log_errors
from airflow_provider_loadtest.simulator.state import FakeClock, SimulatorState


def _log_after(scenario: str, *, stop: bool = False) -> str:
    state = SimulatorState(clock=FakeClock(), run_seconds=6.0)
    run = state.start_run(scenario)[0]
    assert isinstance(state.clock, FakeClock)
    state.clock.advance(5.0 if stop else 200.0)
    if stop:
        state.stop(run.id)
        state.clock.advance(200.0)
    return state.log_file(run.id, "jmeter.log").decode()


def test_an_error_run_logs_jmeter_errors_with_a_trace() -> None:
    errors = jmeter_log_errors(_log_after("failing-scenario"))
    assert errors.total == 5
    first = errors.entries[0]
    assert first.message == "o.a.j.s.FileServer: Failed to open users.csv"
    assert first.trace[0] == "java.io.FileNotFoundException: users.csv (No such file or directory)"
    assert [entry.count for entry in errors.entries] == [1, 3, 1]


def test_an_aborted_run_logs_that_jmeter_stopped() -> None:
    (entry,) = jmeter_log_errors(_log_after("demo-scenario", stop=True)).entries
    assert entry.message == "o.a.j.e.StandardJMeterEngine: Test stopped: the run was aborted"


@pytest.mark.parametrize("scenario", ["demo-scenario", "slow-scenario"])
def test_a_finished_run_logs_no_error(scenario: str) -> None:
    assert jmeter_log_errors(_log_after(scenario)).total == 0
