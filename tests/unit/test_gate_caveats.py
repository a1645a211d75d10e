"""The service's own trust caveats (``decisions.gate.caveats``): more than 40 % of 304 answers (counted by
the JTL reader), an alarm showing an overloaded load generator, a run too small for the service's
insights; said in the log beside the verdict, and with ``fail_on_trust_caveats`` failing the gate."""

from __future__ import annotations

import pytest
import requests_mock as rm

from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.decisions.gate.caveats import caveat_rows, trust_caveats
from airflow_provider_loadtest.decisions.jtl import read_jtl
from tests.unit.test_gate import SUMMARY_URL, _gate_context, _pushed
from tests.unit.test_run_lifecycle import _op, _service

P95 = "RESPONSE_TIME_PERCENTILE_95"
GENERATOR_ALARM = {
    "id": "al-7",
    "name": "Load generator CPU < 80 %",
    "severity": "WARNING",
    "message": "lg-1 CPU at 97 %",
}


def test_more_than_forty_percent_of_304_answers_is_a_caveat() -> None:
    (caveat,) = trust_caveats(samples=1000, not_modified=450)
    assert caveat.metric == "HTTP_RESPONSE_CODES" and caveat.value == 45.0
    assert caveat.text.startswith("45 % of the samples were answered 304 Not Modified (over 40 %)")
    assert trust_caveats(samples=1000, not_modified=400) == []  # exactly 40 %: not more
    assert trust_caveats(samples=0, not_modified=0) == []


def test_an_alarm_naming_a_load_generator_is_a_caveat_when_raised() -> None:
    (caveat,) = trust_caveats(alarms=[GENERATOR_ALARM])
    assert caveat.metric == "LOAD_GENERATOR"
    assert "Load generator CPU < 80 % (WARNING) show an overloaded load generator" in caveat.text
    assert trust_caveats(alarms=[{**GENERATOR_ALARM, "severity": "PASSED"}]) == []
    other = {"id": "a", "name": "Errors < 1 %", "severity": "CRITICAL", "message": "1.2 %"}
    assert trust_caveats(alarms=[other]) == []


def test_a_small_short_run_is_said_never_failed() -> None:
    (caveat,) = trust_caveats(userload=10, duration_s=300)
    assert not caveat.may_fail and "at least 50 virtual users or 20 minutes" in caveat.text
    assert (
        trust_caveats(userload=10, duration_s=1800) == [] and trust_caveats(userload=60, duration_s=60) == []
    )
    assert caveat_rows([caveat], fail=True) == []


def test_caveat_rows_fail_only_when_asked() -> None:
    caveats = trust_caveats(samples=10, not_modified=9, alarms=[GENERATOR_ALARM])
    assert caveat_rows(caveats, fail=False) == []
    rows = caveat_rows(caveats, fail=True)
    assert [(r.metric, r.status, r.passed) for r in rows] == [
        ("HTTP_RESPONSE_CODES", "not_measured", False),
        ("LOAD_GENERATOR", "not_measured", False),
    ]


def test_the_jtl_reader_counts_the_samples_answered_304() -> None:
    header = "timeStamp,elapsed,label,responseCode,responseMessage,success,failureMessage\n"
    rows = [
        "1,304,Home,304,Not Modified,true,\n",
        "2,1304,Home,200,OK,true,\n",  # a 304 in another column is not an answer
        "3,12,Logo,304,Not Modified,true,\n",
        "4,12,Logo,500,Error,false,boom\n",
    ]
    summary = read_jtl([("lg-1.jtl", [(header + "".join(rows)).encode()])])
    assert (summary.samples, summary.not_modified) == (4, 2)
    none = read_jtl([("lg-1.jtl", [(header + rows[1]).encode()])])
    assert none.not_modified == 0


def test_an_overloaded_generator_is_said_beside_the_verdict_and_fails_only_when_asked(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"], alarms=[GENERATOR_ALARM])
    requests_mock.post(SUMMARY_URL, json=[600.0])
    result = _op(metric_budgets={P95: "<= 800"}).execute(_gate_context())  # type: ignore[arg-type]
    assert [row["metric"] for row in result["gate"]] == [P95]
    assert (
        "Trust caveat: the service's alarm(s) Load generator CPU < 80 % (WARNING)" in capsys.readouterr().out
    )
    context = _gate_context()
    with pytest.raises(AirflowFailException, match="LOAD_GENERATOR -: not trusted: the service's alarm"):
        _op(metric_budgets={P95: "<= 800"}, fail_on_trust_caveats=True).execute(context)  # type: ignore[arg-type]
    rows = _pushed(context)["return_value"]["gate"]
    assert [(r["metric"], r["status"]) for r in rows] == [(P95, "pass"), ("LOAD_GENERATOR", "not_measured")]
