"""A ``transaction_budgets`` label that looks like a typo of one the history of the last nights knows fails
before the (billed) start; one that may be new is said in the log; without a history, the log says the
labels can only be checked once the run ended."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
import requests_mock as rm

from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY, GateHistory, SeriesHistory
from airflow_provider_loadtest.decisions.labels import check_labels
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator
from tests.conftest import BASE_URL
from tests.unit.test_hook import BENCH_REPORT, RUN_URL

P95 = "RESPONSE_TIME_PERCENTILE_95"
KNOWN = ("Checkout", "Login", "Add to cart")


def _history(labels: tuple[str, ...] = KNOWN) -> dict[str, Any]:
    series = {(label, P95): SeriesHistory(values=(900.0, 910.0)) for label in labels}
    series[(None, P95)] = SeriesHistory(values=(700.0,))  # the run's own series: no label
    return GateHistory(series=series).to_xcom()


def _context(history: dict[str, Any] | None) -> dict[str, Any]:
    ti = mock.MagicMock(name="ti")
    ti.map_index = -1
    ti.xcom_pull.side_effect = lambda **kw: history if kw.get("key") == HISTORY_XCOM_KEY else None
    return {"ti": ti}


def _op(budgets: dict[str, Any], baseline: str | None = "history") -> RunScenarioOperator:
    return RunScenarioOperator(
        task_id="run",
        scenario_id="sc-1",
        baseline=baseline,
        transaction_budgets=budgets,
    )


@pytest.mark.parametrize("typo", ["checkout", "Chekout", "LOGIN"])
def test_a_typo_of_a_known_label_fails_before_the_start(
    loadtest_conn: str, requests_mock: rm.Mocker, typo: str
) -> None:
    requests_mock.post(RUN_URL, json=BENCH_REPORT)
    with pytest.raises(AirflowFailException) as caught:
        _op({typo: {P95: "<= 2500"}}).execute(_context(_history()))  # type: ignore[arg-type]
    message = str(caught.value)
    assert f"transaction_budgets names {typo!r}, a label the last nights' runs did not have" in message
    assert "did you mean" in message and "Nothing was started." in message
    assert requests_mock.request_history == []  # not billed


def _start_refused(requests_mock: rm.Mocker) -> None:
    """The start is sent and refused (409): enough to see the check let it through."""
    requests_mock.post(RUN_URL, status_code=409, text="busy")


def _started(requests_mock: rm.Mocker) -> int:
    return sum(1 for r in requests_mock.request_history if r.method == "POST" and r.path.endswith("/sc-1"))


def test_known_labels_and_a_new_one_start(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _start_refused(requests_mock)
    budgets = {"Checkout": {P95: "<= 2500"}, "Search": {P95: "<= 900"}, "api/*": {P95: "<= 900"}}
    with pytest.raises(LoadTestApiError, match="HTTP 409"):
        _op(budgets).execute(_context(_history()))  # type: ignore[arg-type]
    assert _started(requests_mock) == 1
    log = capsys.readouterr().out
    assert "'Search' is not among the labels the history knows" in log
    assert "the pattern 'api/*' matches no label the history knows" in log


@pytest.mark.parametrize(
    ("baseline", "history", "why"),
    [
        ("history", None, "the history has none yet"),
        ("previous", _history(), "only baseline='history' keeps them"),
    ],
)
def test_without_a_history_the_log_says_it_cannot_know(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    capsys: pytest.CaptureFixture[str],
    baseline: str,
    history: dict[str, Any] | None,
    why: str,
) -> None:
    _start_refused(requests_mock)
    with pytest.raises(LoadTestApiError, match="HTTP 409"):
        _op({"checkout": {P95: "<= 2500"}}, baseline).execute(_context(history))  # type: ignore[arg-type]
    assert _started(requests_mock) == 1
    log = capsys.readouterr().out
    assert "The transaction labels are checked once the run ended" in log
    assert why in log


def test_the_bounds_are_checked_too() -> None:
    found = check_labels(
        {"transaction_budgets": {}, "transaction_max_regression_pct": {"login": {}}}, frozenset(KNOWN)
    )
    assert found.refusals and found.refusals[0].startswith("transaction_max_regression_pct names 'login'")
    assert check_labels({"transaction_budgets": {"login": {}}}, frozenset()).refusals == ()


def test_a_retry_that_re_attaches_is_not_refused_on_labels(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    """The check guards the start only: a try that finds its earlier try's run going watches it (a run
    left unwatched would go on billing), whatever the history says of the labels."""
    from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
    from tests.airflow_context import TaskStateStore, mock_ti, task_context
    from tests.unit.test_run_lifecycle import STATE_URL, _saved_record, _service

    _service(requests_mock, ["RUNNING", "FINISHED"])
    ti = mock_ti(try_number=2, max_tries=2)
    ti.xcom_pull.side_effect = lambda **kw: _history() if kw.get("key") == HISTORY_XCOM_KEY else None
    context = task_context(ti, TaskStateStore({RUN_RECORD_KEY: _saved_record()}))
    requests_mock.post(f"{BASE_URL}/analysis/metrics/summary", json=[])
    with pytest.raises(AirflowFailException) as caught:  # the typo fails as not measured, after the run
        _op({"checkout": {P95: "<= 2500"}}).execute(context)  # type: ignore[arg-type]
    assert "did you mean" not in str(caught.value)
    assert _started(requests_mock) == 0
    assert sum(1 for r in requests_mock.request_history if r.url == STATE_URL) >= 2  # it watched the run
