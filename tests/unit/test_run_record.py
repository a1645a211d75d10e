"""The start-once rules' own small pieces, without an operator: what mutants of them showed untested.

``make mutation`` found these promises held by no test (the operator tests pass through them with the
values a first try gives); each test here fails on the mutant named in its docstring.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from airflow_provider_loadtest.decisions.run_record import (
    read_clear_number,
    read_max_tries,
    read_try_number,
    uncertain_start_message,
)
from airflow_provider_loadtest.decisions.stops import decision, explain, utc_text

SENT = 1795438800.0  # 2026-11-23 13:00:00 UTC


@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The worker's local time is not UTC (Airflow's default_timezone says nothing of the process's)."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_times_are_said_in_utc_whatever_the_workers_zone(tokyo: None) -> None:
    """Kills ``datetime.fromtimestamp(epoch)`` (local time, labelled UTC)."""
    assert utc_text(SENT) == "2026-11-23 13:00:00 UTC"
    assert explain(decision("br-1", "timeout", SENT)).startswith("it was stopped at 2026-11-23 13:00:00 UTC")


def test_the_uncertain_start_message_says_the_cause_only_when_there_is_one() -> None:
    """Kills the mutants of the cause's parentheses and of the message's last two sentences."""
    plain = uncertain_start_message("sc-1", SENT)
    assert plain == (
        "A start of scenario 'sc-1' was sent at 2026-11-23 13:00:00 UTC and its outcome is unknown: the "
        "service may have started (and be billing) a load test. Not starting another. Check the "
        "scenario's runs in the service for one started then: let it finish or stop it there. Clear this "
        "task to start a new run."
    )
    with_cause = uncertain_start_message("sc-1", SENT, "read timed out")
    assert with_cause == plain.replace("is unknown:", "is unknown (read timed out):")


def test_what_airflow_did_not_give_reads_as_unknown() -> None:
    """Kills ``getattr(ti, "try_number")`` without its default (an AttributeError on an older ti) and
    the like: a missing or non-integer value is ``None``, never a crash nor a guess."""
    bare = SimpleNamespace()
    assert read_try_number(bare) is None
    assert read_max_tries(bare) is None
    assert read_clear_number({}) is None
    assert read_clear_number({"dag_run": bare}) is None
    assert read_clear_number(None) is None  # no context at all
    flags = SimpleNamespace(try_number=True, max_tries=False, clear_number=True)
    assert (read_try_number(flags), read_max_tries(flags), read_clear_number({"dag_run": flags})) == (
        None,
        None,
        None,
    )
    given = SimpleNamespace(try_number=2, max_tries=3, clear_number=1)
    assert (read_try_number(given), read_max_tries(given), read_clear_number({"dag_run": given})) == (2, 3, 1)


@pytest.mark.parametrize(
    ("state", "restart", "stopped_here", "clear_seen", "step"),
    [
        ("FINISHED", True, False, True, "judge"),
        ("ABORTED", False, False, False, "judge"),  # a plain retry: no clear unless told (the default)
        ("ABORTED", False, False, True, "restart"),
        ("ABORTED", True, True, True, "judge"),  # this package stopped it: its own verdict
        ("ERROR", True, False, False, "restart"),
        ("ERROR", False, False, True, "judge"),
        ("RUNNING", False, False, False, "attach"),
        ("RUNNING", False, False, True, "settle"),
        ("SOMETHING_NEW", False, False, False, "attach"),
    ],
)
def test_what_a_retry_does_with_its_recorded_run(
    state: str, restart: bool, stopped_here: bool, clear_seen: bool, step: str
) -> None:
    """The table of ``on_recorded_run``, defaults included (kills ``clear_seen=True`` as the default
    and a misspelt ``"restart"``, which the operator would take for a restart anyway)."""
    from airflow_provider_loadtest.decisions.run_record import on_recorded_run

    kwargs = {"stopped_here": stopped_here} if stopped_here else {}
    if clear_seen:
        kwargs["clear_seen"] = True
    assert on_recorded_run(state, restart_failed_runs=restart, **kwargs) == step


def test_a_new_run_in_the_record_drops_a_stop_decided_for_the_one_before() -> None:
    """Kills ``with_run`` keeping ``stopped``: a decision about the earlier run is not the new one's."""
    from airflow_provider_loadtest.decisions.run_record import RunRecord

    stopped = RunRecord("sc-1", SENT, 0, run={"bench_result_id": "br-1"}).with_stop(
        decision("br-1", "clear", SENT)
    )
    assert stopped.stopped is not None
    renewed = stopped.with_run({"bench_result_id": "br-2"})
    assert (renewed.run, renewed.stopped) == ({"bench_result_id": "br-2"}, None)


def test_the_stop_hint_names_the_run_the_report_and_the_call() -> None:
    """Kills the hint without its report, or with "Report: None"."""
    from airflow_provider_loadtest.decisions.run_record import stop_hint

    assert stop_hint("br-1", "https://x/ui/r", "loadtest_default") == (
        "Run br-1 may still be going and billing. Report: https://x/ui/r. To stop it, use the web UI or "
        'LoadTestHook("loadtest_default").stop_run("br-1").'
    )
    assert stop_hint("br-1", None, "lt") == (
        "Run br-1 may still be going and billing. To stop it, use the web UI or "
        'LoadTestHook("lt").stop_run("br-1").'
    )


@pytest.mark.parametrize(
    ("reason", "state", "restart", "store_works", "final"),
    [
        ("gate_unchecked", "FINISHED", False, True, False),  # a retry re-reads the alarms
        ("gate_unchecked", "FINISHED", False, False, True),  # ...only if it can find the run
        ("ended", "ERROR", True, True, False),  # the opt-in to a second run
        ("ended", "ABORTED", False, True, True),
        ("ended", "ERROR", True, False, True),  # no store: never a second run
        ("alarm", "FINISHED", True, True, True),
        ("timeout", "RUNNING", True, True, True),
    ],
)
def test_which_verdicts_are_final(
    reason: str, state: str, restart: bool, store_works: bool, final: bool
) -> None:
    """Kills ``verdict_is_final`` answering "not final" without a store, and a misspelt reason."""
    from airflow_provider_loadtest.decisions.run_record import verdict_is_final

    assert (
        verdict_is_final(reason=reason, state=state, restart_failed_runs=restart, store_works=store_works)
        is final
    )
