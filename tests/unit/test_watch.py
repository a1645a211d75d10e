"""The shared watch logic, driven by a scripted fake service and a fake clock (no I/O at all)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from airflow_provider_loadtest.api.endpoints import ApiRequest
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.decisions.runs import breaking_alarms, check_gate_severity, is_terminal
from airflow_provider_loadtest.decisions.watch import (
    MAX_FIRST_POLL_DELAY_S,
    Log,
    RunOutcome,
    Sleep,
    WatchOptions,
    first_poll_delay,
    watch_run,
)

RUN = "br-1"
CRITICAL = {"id": "a1", "severity": "CRITICAL", "name": "Avg response time"}
WARNING = {"id": "a2", "severity": "WARNING", "name": "Errors"}
PASSED = {"id": "a3", "severity": "PASSED", "name": "Hits"}


class FakeService:
    """Answers the watch's requests from scripts; records calls; a fake clock moves on each Sleep."""

    def __init__(
        self,
        states: list[str],
        alarms: list[dict[str, Any]] | Exception | None = None,
        alarms_while_running: list[dict[str, Any]] | None = None,
    ) -> None:
        self.states = list(states)
        self.alarms = alarms if alarms is not None else []
        self.alarms_while_running = alarms_while_running
        self.clock = 1000.0
        self.calls: list[str] = []
        self.logs: list[str] = []
        self.sleeps: list[float] = []
        self.state = "CREATED"
        self.progress: dict[str, Any] = {"value": 40}

    def answer(self, request: ApiRequest[Any]) -> Any:
        self.calls.append(f"{request.method} {request.path}")
        path = request.path
        if path == f"/runtime/bench-results/{RUN}":
            if self.states:
                self.state = self.states.pop(0)
            return request.parse({"id": RUN, "state": self.state})
        if path.startswith("/runtime/bench-results/progress/"):
            return request.parse(self.progress)
        if path.startswith("/analysis/metrics/global/"):
            return request.parse(
                {
                    "metrics": [
                        {"name": "Hits", "value": 120, "unit": ""},
                        {"name": "Avg", "value": 80, "unit": "ms"},
                    ]
                }
            )
        if path == "/analysis/threshold-alarms":
            alarms = (
                self.alarms_while_running
                if self.state == "RUNNING" and self.alarms_while_running is not None
                else self.alarms
            )
            if isinstance(alarms, Exception):
                raise alarms
            return request.parse(alarms)
        if path.startswith("/runtime/bench-results/stop/"):
            self.state = "ABORTED"
            return None
        raise AssertionError(f"unexpected call {path}")

    def drive(self, steps: Generator[Any, Any, RunOutcome]) -> RunOutcome:
        send: Any = None
        error: Exception | None = None
        for _ in range(1000):
            try:
                action = steps.throw(error) if error else steps.send(send)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            send, error = None, None
            if isinstance(action, Sleep):
                self.sleeps.append(action.seconds)
                self.clock += action.seconds
            elif isinstance(action, Log):
                self.logs.append(action.message)
            else:
                try:
                    send = self.answer(action)
                except LoadTestApiError as exc:
                    error = exc
        raise AssertionError("the watch did not end")

    def watch(self, **options: Any) -> RunOutcome:
        return self.drive(
            watch_run(RUN, WatchOptions(**options), started_at=self.clock, now=lambda: self.clock)
        )


def _api_error() -> LoadTestApiError:
    return LoadTestApiError(
        operation="Read alarms", method="POST", path="/analysis/threshold-alarms", status=500, detail="boom"
    )


def test_finished_succeeds_with_alarms_metrics_and_duration() -> None:
    service = FakeService(["PENDING", "RUNNING", "RUNNING", "FINISHED"], alarms=[PASSED])
    outcome = service.watch(check_interval_s=10)
    assert outcome.succeeded and outcome.reason == "finished" and outcome.state == "FINISHED"
    assert outcome.duration_s == 30.0
    assert service.sleeps == [10, 10, 10]
    assert outcome.alarms[0]["severity"] == "PASSED"
    assert outcome.metrics == {"Hits": {"value": 120, "unit": ""}, "Avg": {"value": 80, "unit": "ms"}}
    assert not any("stop" in c for c in service.calls)


@pytest.mark.parametrize("state", ["ERROR", "ABORTED"])
def test_error_and_aborted_fail(state: str) -> None:
    outcome = FakeService(["PREPARING", state]).watch()
    assert not outcome.succeeded
    assert outcome.reason == "ended"
    assert state in outcome.message and RUN in outcome.message


def test_unknown_state_is_not_terminal() -> None:
    outcome = FakeService(["WARMING_UP", "FINISHED"]).watch(check_interval_s=5)
    assert outcome.succeeded
    assert outcome.duration_s == 5
    assert not is_terminal("WARMING_UP")


@pytest.mark.parametrize(
    ("gate", "alarms", "passes"),
    [
        (None, [CRITICAL], True),
        ("CRITICAL", [WARNING, PASSED], True),
        ("CRITICAL", [CRITICAL, PASSED], False),
        ("WARNING", [WARNING], False),
        ("WARNING", [CRITICAL], False),
        ("WARNING", [PASSED], True),
        ("WARNING", [{"id": "x", "severity": "SOMETHING_NEW"}], False),  # fails closed (issue 10)
    ],
)
def test_gate_after_the_run(gate: str | None, alarms: list[dict[str, Any]], passes: bool) -> None:
    outcome = FakeService(["RUNNING", "FINISHED"], alarms=alarms).watch(fail_on_alarm_severity=gate)
    assert outcome.succeeded is passes
    assert [a["id"] for a in outcome.alarms] == [a["id"] for a in alarms]  # in the result either way
    if not passes:
        assert outcome.reason == "alarm"
        assert f"({gate})" in outcome.message


def test_gate_while_running_stops_the_run() -> None:
    service = FakeService(["RUNNING", "RUNNING", "RUNNING", "FINISHED"], alarms_while_running=[CRITICAL])
    outcome = service.watch(fail_on_alarm_severity="CRITICAL", stop_on_alarm=True)
    assert not outcome.succeeded and outcome.reason == "alarm" and outcome.stopped
    assert f"POST /runtime/bench-results/stop/{RUN}" in service.calls
    assert "Avg response time" in outcome.message


def test_gate_without_stop_on_alarm_reads_alarms_only_at_the_end() -> None:
    service = FakeService(
        ["RUNNING", "RUNNING", "FINISHED"], alarms=[PASSED], alarms_while_running=[CRITICAL]
    )
    outcome = service.watch(fail_on_alarm_severity="CRITICAL")
    assert outcome.succeeded
    assert service.calls.count("POST /analysis/threshold-alarms") == 1


def test_unreadable_alarms_fail_a_gated_run_but_not_an_ungated_one() -> None:
    gated = FakeService(["FINISHED"], alarms=_api_error()).watch(fail_on_alarm_severity="WARNING")
    assert not gated.succeeded and gated.reason == "gate_unchecked"
    ungated = FakeService(["FINISHED"], alarms=_api_error())
    assert ungated.watch().succeeded
    assert any("Could not read the threshold alarms" in line for line in ungated.logs)


def test_deadline_stops_the_run_and_fails() -> None:
    service = FakeService(["RUNNING"] * 100)
    outcome = service.watch(check_interval_s=10, deadline=1000.0 + 25)
    assert not outcome.succeeded and outcome.reason == "timeout" and outcome.stopped
    assert service.sleeps == [10, 10, 5]  # the last pause is cut to the deadline
    assert f"POST /runtime/bench-results/stop/{RUN}" in service.calls


def test_progress_logged_at_a_readable_pace() -> None:
    service = FakeService(["PENDING"] + ["RUNNING"] * 30 + ["FINISHED"])
    service.watch(check_interval_s=10, log_every_s=60)
    progress_lines = [line for line in service.logs if line.startswith(f"Run {RUN}:")]
    # one line for PENDING, one when RUNNING starts, then one a minute over 300 s of RUNNING
    assert 6 <= len(progress_lines) <= 8
    assert any("40.0% done" in line and "Hits 120" in line and "Avg 80 ms" in line for line in progress_lines)


@pytest.mark.parametrize(
    ("value", "shown"), [(12.345, "12.3% done"), (0.5, "0.5% done"), (100, "100.0% done")]
)
def test_progress_is_a_percentage_logged_with_one_decimal(value: float, shown: str) -> None:
    """Issue 9, point 8: the service answers 0 to 100 with decimals; 0.5 is half a percent, not 50 %."""
    service = FakeService(["RUNNING", "FINISHED"])
    service.progress = {"value": value}
    service.watch(check_interval_s=10)
    assert any(shown in line for line in service.logs if line.startswith(f"Run {RUN}:")), service.logs


def test_progress_without_a_number_is_logged_without_a_percentage() -> None:
    service = FakeService(["RUNNING", "FINISHED"])
    service.progress = {}
    outcome = service.watch(check_interval_s=10)
    assert outcome.succeeded
    assert any(line.startswith(f"Run {RUN}: RUNNING, Hits 120") for line in service.logs), service.logs


def test_options_and_outcome_round_trip_as_json() -> None:
    options = WatchOptions(
        check_interval_s=3, deadline=5.5, fail_on_alarm_severity="WARNING", stop_on_alarm=True
    )
    assert WatchOptions.from_json(options.to_json()) == options
    outcome = FakeService(["FINISHED"], alarms=[WARNING]).watch()
    assert RunOutcome.from_json(outcome.to_json()) == outcome


def test_gate_severity_checks() -> None:
    assert check_gate_severity("critical") == "CRITICAL"
    assert check_gate_severity(None) is None
    with pytest.raises(ValueError, match="fail_on_alarm_severity"):
        check_gate_severity("PASSED")
    assert breaking_alarms([CRITICAL, WARNING, PASSED], "WARNING") == [CRITICAL, WARNING]


# --- the first poll's delay in the triggerer (issue 13) -------------------------------------------


def test_first_poll_delay_is_within_one_interval_capped_and_the_same_each_time() -> None:
    delays = [first_poll_delay(f"br-{i}", 10.0) for i in range(2000)]
    assert all(0.0 <= d < 10.0 for d in delays)
    assert delays == [first_poll_delay(f"br-{i}", 10.0) for i in range(2000)]  # a restart keeps the phase
    assert all(0.0 <= first_poll_delay(f"br-{i}", 3600.0) < MAX_FIRST_POLL_DELAY_S for i in range(200))
    assert first_poll_delay("br-1", 0.0) == 0.0


def test_first_poll_delays_spread_waits_over_the_interval() -> None:
    """Sequential run ids (as the service numbers them) must not bunch: every tenth of the interval
    gets between 5 % and 15 % of 2,000 waits."""
    delays = [first_poll_delay(f"br-{i}", 10.0) for i in range(2000)]
    per_tenth = [sum(1 for d in delays if k <= d < k + 1) for k in range(10)]
    assert all(100 <= count <= 300 for count in per_tenth), per_tenth


def test_watch_puts_off_its_first_poll_then_polls_at_the_interval() -> None:
    service = FakeService(["RUNNING", "FINISHED"])
    outcome = service.drive(
        watch_run(
            RUN,
            WatchOptions(check_interval_s=10),
            started_at=service.clock,
            now=lambda: service.clock,
            first_delay_s=4.5,
        )
    )
    assert outcome.succeeded
    assert service.sleeps == [4.5, 10]
    assert service.calls[0] == f"GET /runtime/bench-results/{RUN}"


def test_the_first_delay_never_runs_past_the_deadline() -> None:
    service = FakeService(["RUNNING"] * 5)
    outcome = service.drive(
        watch_run(
            RUN,
            WatchOptions(check_interval_s=10, deadline=service.clock + 2),
            started_at=service.clock,
            now=lambda: service.clock,
            first_delay_s=9.0,
        )
    )
    assert service.sleeps[0] == 2.0
    assert outcome.reason == "timeout" and outcome.stopped


def test_no_first_delay_when_the_deadline_has_passed() -> None:
    service = FakeService(["RUNNING"])
    outcome = service.drive(
        watch_run(
            RUN,
            WatchOptions(check_interval_s=10, deadline=service.clock - 1),
            started_at=service.clock - 100,
            now=lambda: service.clock,
            first_delay_s=9.0,
        )
    )
    assert service.sleeps == []
    assert outcome.reason == "timeout"
