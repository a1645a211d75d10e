"""The rig's own judgement, without a cluster: reading causes from Airflow's JSON task logs, the rules
per task instance, the summary table (so a rig that cannot see a broken rule cannot pass unnoticed)."""

from __future__ import annotations

import json

from tests.production.attacks import (
    ATTACKS,
    HEALTHY,
    Expect,
    TiResult,
    check,
    classify,
    log_messages,
    summary_rows,
)


def _line(event: str, exc_value: str | None = None) -> str:
    entry: dict[str, object] = {"timestamp": "2026-01-01T00:00:00Z", "level": "error", "event": event}
    if exc_value is not None:
        entry["error_detail"] = [{"exc_type": "AirflowFailException", "exc_value": exc_value}]
    return json.dumps(entry)


def _result(**changes: object) -> TiResult:
    values: dict[str, object] = {
        "attack": "worker-sigterm",
        "round": 1,
        "mode": "sync",
        "run_id": "rig-worker-sigterm-1-0-sync",
        "victim": True,
        "state": "success",
        "tries": 2,
        "starts": 1,
        "stopped": 0,
        "stop_calls": 0,
        "cause": None,
        "message": "",
        "verdict_s": 30.0,
    }
    values.update(changes)
    return TiResult(**values)  # type: ignore[arg-type]


def test_the_cause_is_read_from_the_latest_try_and_its_exception() -> None:
    logs = {
        "attempt=1.log": _line(
            "Task failed with exception", "A start of scenario 's' ... its outcome is unknown"
        ),
        "attempt=2.log": "\n".join(
            [
                _line("Run br-1: RUNNING, 50.0% done"),
                _line("Task failed with exception", "Run br-1 was aborted from outside (state ABORTED)."),
            ]
        ),
        "attempt=10.log": _line("Task failed with exception", "Run br-1 failed in the service (state ERROR)"),
    }
    cause, message = classify(log_messages(logs))
    assert cause == "failed in the service"  # attempt 10 is the latest, not attempt 2
    assert "Run br-1 failed in the service" in message
    del logs["attempt=10.log"]
    assert classify(log_messages(logs))[0] == "blamed outside"
    assert classify(log_messages({"attempt=1.log": "not json at all"})) == (None, "")


def test_a_healthy_run_stopped_by_infrastructure_breaks_the_rules() -> None:
    assert check(_result(), HEALTHY) == []
    broken = check(
        _result(state="failed", stopped=1, stop_calls=2, cause="blamed outside", message="..."), HEALTHY
    )
    assert [b.split(":")[0] for b in broken] == ["verdict", "stops", "stop calls"]


def test_blaming_outside_is_a_wrong_verdict_even_when_the_state_is_right() -> None:
    person = Expect(state="failed", starts=1, stopped=1, max_stop_calls=1)
    assert check(_result(state="failed", stopped=1, stop_calls=1, cause="server said stop"), person) == []
    wrong = check(_result(state="failed", stopped=1, stop_calls=1, cause="blamed outside"), person)
    assert wrong and wrong[0].startswith("verdict")


def test_a_task_instance_that_never_ended_or_ended_late_breaks_the_rules() -> None:
    assert check(_result(verdict_s=None), HEALTHY) == ["no verdict: the task instance did not end"]
    assert check(_result(verdict_s=HEALTHY.max_verdict_s + 1), HEALTHY)[0].startswith("slow verdict")


def test_the_summary_counts_wrong_verdicts_and_healthy_runs_stopped() -> None:
    results = [
        _result(),
        _result(state="failed", stopped=1, stop_calls=2, cause="blamed outside"),
        _result(attack="clear-sync", starts=2, stopped=1, stop_calls=1),
    ]
    for r in results:
        r.broken = check(r, ATTACKS[r.attack].expect)
    rows = {row["attack"]: row for row in summary_rows(results)}
    sigterm = rows[ATTACKS["worker-sigterm"].what]
    assert (sigterm["TIs"], sigterm["stopped"], sigterm["stop calls"]) == (2, 1, 2)
    assert (sigterm["wrong verdicts"], sigterm["healthy runs stopped"], sigterm["rules broken"]) == (1, 1, 1)
    clear = rows[ATTACKS["clear-sync"].what]
    assert (clear["starts"], clear["healthy runs stopped"], clear["rules broken"]) == (2, 0, 0)


def test_the_slow_state_reads_hold_each_read_and_say_so(monkeypatch: object, capsys: object) -> None:
    """``LOADTEST_RIG_SLOW_STATE_S`` (issue 34) holds every task-instance state read of the process that
    read it, once patched, and says each hold (the rig counts them); without it nothing changes."""
    import time

    import pytest
    from airflow.sdk.api.client import TaskInstanceOperations

    from tests.production import hostname

    mp: pytest.MonkeyPatch = monkeypatch  # type: ignore[assignment]
    mp.setattr(hostname, "_slowed", [])
    mp.setattr(TaskInstanceOperations, "get_task_states", lambda self, **kw: "answer")
    mp.delenv(hostname.SLOW_STATE_ENV, raising=False)
    hostname.from_env()
    assert TaskInstanceOperations.get_task_states(None) == "answer"  # type: ignore[arg-type]
    mp.setenv(hostname.SLOW_STATE_ENV, "0.2,0.3")
    hostname.from_env()
    hostname.from_env()  # patched once
    began = time.monotonic()
    assert TaskInstanceOperations.get_task_states(None) == "answer"  # type: ignore[arg-type]
    assert 0.2 <= time.monotonic() - began < 1.0
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert err.count(hostname.HOLD_LINE) == 1


def test_the_cpu_hog_is_busy_and_gone_after() -> None:
    import psutil  # type: ignore[import-untyped]

    from tests.load import cpu_hog

    with cpu_hog(processes=1, seconds=30) as pids:
        import time

        proc = psutil.Process(pids[0])
        before = sum(proc.cpu_times()[:2])
        time.sleep(1.0)
        assert sum(proc.cpu_times()[:2]) - before > 0.05  # it burns CPU (a share of a busy machine's)
    assert not psutil.pid_exists(pids[0]) or psutil.Process(pids[0]).status() == psutil.STATUS_ZOMBIE
