"""Gates per transaction in the run lifecycle: the run's JTL files listed and streamed into one reader once
the run ended, each (transaction, metric) judged by the gate's own code into the log table, XCom and the
asset event, the slowest transactions logged, regression bounds against a baseline run or the history,
and every way the files can fail to read failing the transaction rows closed. The operator and the
sensor share the lifecycle: both are driven here."""

from __future__ import annotations

import gzip
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pytest
import requests_mock as rm
from airflow.sdk import Asset

from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.decisions.gate import (
    BASELINE_XCOM_KEY,
    GateRow,
    GateSpec,
    family,
    judge_history,
)
from airflow_provider_loadtest.decisions.history import ACCEPT_CHANGE, HISTORY_XCOM_KEY, GateHistory
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from tests.conftest import BASE_URL, connection_json
from tests.unit.test_gate import SUMMARY_URL, _gate_context, _pushed
from tests.unit.test_jtl import START_MS, Sample, jtl_text
from tests.unit.test_run_lifecycle import FILES_URL, _op, _service
from tests.unit.test_run_sensor import _sensor, _states

P95 = "RESPONSE_TIME_PERCENTILE_95"
ERRORS = "ERRORS_PERCENT"
CHECKOUT = {"Checkout": {P95: "<= 800", ERRORS: "< 1"}}


def _samples(times: dict[str, list[int]], errors: dict[str, int] | None = None) -> list[Sample]:
    rows = []
    for label, values in times.items():
        failing = (errors or {}).get(label, 0)
        rows += [
            Sample(START_MS + 10 * i, value, label, i >= failing, "OK", 1000, 640, value // 2, 0)
            for i, value in enumerate(values)
        ]
    return rows


#: Two load generators: Checkout is slow on both (p95 1440 ms over the run), the rest fast.
LG1 = _samples(
    {"Checkout": list(range(500, 1500, 20)), "Home": [50] * 100, "api/items": list(range(100, 150))}
)
LG2 = _samples(
    {"Checkout": list(range(510, 1510, 20)), "Login": [300] * 20, "api/items": list(range(150, 200))}
)
FAST = _samples({"Checkout": list(range(300, 500, 2)), "Home": [50] * 100})


def _download_url(name: str, run: str = "br-1") -> str:
    return f"{BASE_URL}/analysis/logs/{run}?filename={name}"


def _files(requests_mock: rm.Mocker, files: dict[str, bytes | dict[str, Any]], run: str = "br-1") -> None:
    """The run's files as the service lists them (an agent log beside the JTLs), and their downloads."""
    url = FILES_URL if run == "br-1" else f"{BASE_URL}/analysis/logs/list/{run}"
    requests_mock.get(url, json=[*files, "lg-1-agent.log"])
    for name, answer in files.items():
        requests_mock.get(
            _download_url(name, run), **({"content": answer} if isinstance(answer, bytes) else answer)
        )


def _two_generators(requests_mock: rm.Mocker) -> None:
    _files(
        requests_mock,
        {"lg-1.jtl.gz": gzip.compress(jtl_text(LG1).encode()), "lg-2.jtl": jtl_text(LG2).encode()},
    )


def _rows(rows: list[dict[str, Any]]) -> dict[tuple[str | None, str], GateRow]:
    return {(row["transaction"], row["metric"]): GateRow.from_xcom(row) for row in rows}


def _downloads(requests_mock: rm.Mocker) -> list[str]:
    return [r.qs["filename"][0] for r in requests_mock.request_history if "filename" in r.qs]


# --- the verdict -------------------------------------------------------------------------------------


def test_a_slow_transaction_fails_the_gate_while_the_run_s_figures_pass(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[700.0])
    _two_generators(requests_mock)
    context = _gate_context()
    with pytest.raises(AirflowFailException) as caught:
        _op(metric_budgets={P95: "<= 800"}, transaction_budgets=CHECKOUT).execute(context)  # type: ignore[arg-type]

    message = str(caught.value)
    assert message.startswith(f"Quality gate failed: {P95} of 'Checkout' 1440: budget <= 800")
    rows = _rows(_pushed(context)["return_value"]["gate"])
    assert list(rows) == [(None, P95), ("Checkout", P95), ("Checkout", ERRORS)]
    assert rows[(None, P95)].passed and rows[("Checkout", ERRORS)].passed
    assert not rows[("Checkout", P95)].passed and rows[("Checkout", P95)].status == "budget"
    assert _downloads(requests_mock) == ["lg-1.jtl.gz", "lg-2.jtl"]  # every generator, no agent log
    out = capsys.readouterr().out
    table = out[out.index("Quality gate of run br-1") :]
    assert re.search(r"transaction\s+metric\s+value", table)
    assert re.search(rf"\(run\)\s+{P95}\s+700", table) and re.search(rf"Checkout\s+{P95}\s+1440", table)
    slowest = table[table.index("Slowest transactions by p95 response time (4 of 4, 320 samples in 2 JTL") :]
    assert [line.split()[0] for line in slowest.splitlines()[2:6]] == [
        "Checkout",
        "Login",
        "api/items",
        "Home",
    ]
    assert "Read 320 samples of 4 transactions from 2 JTL file(s) of run br-1" in out


def test_a_passing_transaction_gate_alone_fetches_no_summary_and_fills_xcom_and_the_asset(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    _files(requests_mock, {"lg-1.jtl": jtl_text(FAST).encode()})
    asset = Asset("loadtest://checkout")
    context = _gate_context(outlets=True)
    result = _op(
        transaction_budgets={"Checkout": {P95: "<= 800"}, "H*": {"HITS_TOTAL": ">= 100"}}, outlets=[asset]
    ).execute(context)  # type: ignore[arg-type]

    assert not [r for r in requests_mock.request_history if r.url == SUMMARY_URL]
    rows = _rows(result["gate"])
    assert list(rows) == [("Checkout", P95), ("Home", "HITS_TOTAL")]
    assert all(row.passed for row in rows.values())
    extra = context["outlet_events"][asset].extra
    assert extra["metrics"] == {}
    assert extra["transactions"] == {"Checkout": {P95: 488.0}, "Home": {"HITS_TOTAL": 100.0}}
    assert extra["gate"] == result["gate"]
    assert _pushed(context)[BASELINE_XCOM_KEY]["transactions"] == extra["transactions"]


def test_the_downloads_stream_into_the_reader_never_whole_in_memory(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    _two_generators(requests_mock)
    sinks = []
    real_call = LoadTestHook.call

    def call(hook: LoadTestHook, request: Any, sink: Any = None) -> Any:
        if request.answer == "bytes":
            sinks.append(sink)
        return real_call(hook, request, sink=sink)

    with (
        mock.patch.object(LoadTestHook, "call", call),
        mock.patch.object(LoadTestHook, "download_run_file", side_effect=AssertionError("in memory")),
        pytest.raises(AirflowFailException),
    ):
        _op(transaction_budgets=CHECKOUT).execute(_gate_context())  # type: ignore[arg-type]
    assert [type(sink).__name__ for sink in sinks] == ["JtlFile", "JtlFile"]


def test_a_run_gate_alone_reads_no_jtl_file(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    """JTL files of a long run can be hundreds of megabytes: only a task with a transaction gate reads
    them (and then lists the slowest transactions, named by a budget or not)."""
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[700.0])
    _two_generators(requests_mock)
    result = _op(metric_budgets={P95: "<= 800"}).execute(_gate_context())  # type: ignore[arg-type]
    assert [row["transaction"] for row in result["gate"]] == [None]
    assert not [r for r in requests_mock.request_history if "/analysis/logs" in r.url]
    assert "Slowest transactions" not in capsys.readouterr().out


def test_the_sensor_judges_the_transactions_of_a_run_started_elsewhere(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _states(requests_mock, ["FINISHED"])
    _two_generators(requests_mock)
    context = _gate_context()
    with pytest.raises(AirflowFailException, match=f"{P95} of 'Checkout' 1440"):
        _sensor(transaction_budgets=CHECKOUT).execute(context)  # type: ignore[arg-type]


# --- fail closed --------------------------------------------------------------------------------------


def _failing_rows(context: dict[str, Any]) -> list[GateRow]:
    rows = [GateRow.from_xcom(row) for row in _pushed(context)["return_value"]["gate"]]
    assert rows and all(not row.passed and row.status == "not_measured" for row in rows), rows
    return rows


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        (
            {},
            "Run br-1 has no JTL file (*.jtl or *.jtl.gz) to read transactions from; its files: lg-1-agent",
        ),
        ({"lg-1.jtl": b""}, "The download of JTL file 'lg-1.jtl' of run br-1 was empty (0 bytes)"),
        (
            {"lg-1.jtl.gz": gzip.compress(jtl_text(LG1).encode())[:-40]},
            "lg-1.jtl.gz ends before the end of its gzip stream (a truncated download?)",
        ),
        ({"lg-1.jtl": b"<?xml version='1.0'?><testResults/>"}, "lg-1.jtl is an XML JTL"),
        ({"lg-1.jtl": jtl_text(LG1).encode() + b"1,2,3\r\n"}, "lg-1.jtl line 202: the sample has 3 fields"),
        ({"lg-1.jtl": {"status_code": 404}}, "the JTL files of run br-1 could not be downloaded:"),
        ({"../lg-1.jtl": b"x"}, "filename='../lg-1.jtl' is not a valid file name"),
    ],
    ids=["no-jtl", "empty-download", "cut-gzip", "xml", "malformed", "gone", "bad-name"],
)
def test_jtl_files_that_cannot_be_read_fail_every_transaction_row_as_not_measured(
    loadtest_conn: str, requests_mock: rm.Mocker, files: dict[str, Any], reason: str
) -> None:
    _service(requests_mock, ["FINISHED"])
    _files(requests_mock, files)
    context = _gate_context()
    with pytest.raises(AirflowFailException, match="Quality gate failed") as caught:
        _op(transaction_budgets=CHECKOUT).execute(context)  # type: ignore[arg-type]
    rows = _failing_rows(context)
    assert [(row.transaction, row.metric) for row in rows] == [("Checkout", P95), ("Checkout", ERRORS)]
    assert all(reason in (row.reason or "") for row in rows), rows[0].reason
    assert reason in str(caught.value)


def test_a_download_the_service_fails_for_now_fails_the_task_for_a_retry_to_judge_again(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    _service(requests_mock, ["FINISHED"])
    _files(requests_mock, {"lg-1.jtl": {"status_code": 503}})
    context = _gate_context()
    with pytest.raises(LoadTestApiError, match="503"):
        _op(transaction_budgets=CHECKOUT).execute(context)  # type: ignore[arg-type]
    assert "return_value" not in _pushed(context)  # no verdict: the retry re-attaches and judges


def test_a_transaction_never_sampled_fails_naming_the_labels_seen_closest_first(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    _two_generators(requests_mock)
    context = _gate_context()
    with pytest.raises(AirflowFailException, match="the run never sampled 'Check out'"):
        _op(transaction_budgets={"Check out": {P95: "<= 800"}}).execute(context)  # type: ignore[arg-type]
    (row,) = _failing_rows(context)
    assert row.transaction == "Check out"
    assert "labels sampled (closest first): 'Checkout', " in (row.reason or "")


# --- regression bounds per transaction ------------------------------------------------------------


def test_a_transaction_regression_against_the_previous_run_s_value_in_xcom(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    _two_generators(requests_mock)
    previous = {"bench_result_id": "br-0", "metrics": {}, "transactions": {"Checkout": {P95: 1000.0}}}
    context = _gate_context(previous=previous)
    with pytest.raises(AirflowFailException) as caught:
        _op(baseline="previous", transaction_max_regression_pct={"Checkout": {P95: 10}}).execute(context)  # type: ignore[arg-type]
    assert f"{P95} of 'Checkout' 1440 vs baseline 1000 (+44.0 %)" in str(caught.value)
    (row,) = _rows(_pushed(context)["return_value"]["gate"]).values()
    assert (row.status, row.baseline, row.max_regression_pct) == ("regression", 1000.0, 10.0)
    assert not [name for name in _downloads(requests_mock) if "br-0" in name]


def test_a_pinned_baseline_run_s_transactions_are_read_from_its_own_jtl_files(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    _two_generators(requests_mock)
    _files(requests_mock, {"lg-1.jtl": jtl_text(FAST).encode()}, run="br-0")
    context = _gate_context()
    with pytest.raises(AirflowFailException) as caught:
        _op(baseline="br-0", transaction_max_regression_pct={"*": {P95: 50}}).execute(context)  # type: ignore[arg-type]
    rows = _rows(_pushed(context)["return_value"]["gate"])
    assert rows[("Checkout", P95)].baseline == 488.0 and rows[("Checkout", P95)].status == "regression"
    assert rows[("Home", P95)].passed  # the same speed in both runs
    # Login and api/items were not sampled by the baseline run: nothing to compare with, not passed
    for label in ("Login", "api/items"):
        assert rows[(label, P95)].status == "not_measured"
        assert f"the baseline run has no value of {P95} for '{label}'" in (rows[(label, P95)].reason or "")
    assert "of 'Checkout'" in str(caught.value)


def test_no_previous_run_yet_checks_the_transaction_budgets_only(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    _files(requests_mock, {"lg-1.jtl": jtl_text(FAST).encode()})
    result = _op(
        baseline="previous",
        transaction_budgets={"Checkout": {P95: "<= 800"}},
        transaction_max_regression_pct={"Checkout": {P95: 10}},
    ).execute(_gate_context())  # type: ignore[arg-type]
    (row,) = _rows(result["gate"]).values()
    assert row.passed and row.baseline is None and row.max_regression_pct == 10


def _season(nights: int = 12) -> GateHistory:
    """The history of a task whose Checkout p95 was about 1000 ms and run p95 about 700 ms."""
    spec = GateSpec.parse(None, {P95: 10}, "history")
    history = GateHistory()
    for night in range(nights):
        wobble = 1 + 0.02 * ((night % 5) - 2)
        _, history_1 = judge_history(spec, {P95: 700 * wobble}, None, history=history)
        assert history_1 is not None
        _, after = judge_history(spec, {P95: 1000 * wobble}, None, history=history_1, transaction="Checkout")
        assert after is not None
        history = after
    return history


def _history_context(stored: Any, *, conf: Any = None) -> dict[str, Any]:
    context = _gate_context()
    context["ti"].xcom_pull.side_effect = lambda **kw: stored if kw.get("key") == HISTORY_XCOM_KEY else None
    if conf is not None:
        context["dag_run"] = mock.MagicMock(name="dag_run", conf=conf)
    return context


HISTORY_GATE = {
    "baseline": "history",
    "max_regression_pct": {P95: 10},
    "transaction_max_regression_pct": {"Checkout": {P95: 10}},
}


def test_a_transaction_regression_against_its_own_history_while_the_run_is_noise(
    loadtest_conn: str, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkout's p95 comes from 100 samples (5 beyond it): counted as a measurement here, see the
    # test after this one for the default.
    monkeypatch.setattr(family, "MIN_TAIL_SAMPLES", 5)
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[705.0])
    _two_generators(requests_mock)
    season = _season()
    context = _history_context(season.to_xcom())
    with pytest.raises(AirflowFailException, match=f"{P95} of 'Checkout' 1440 vs history centre"):
        _op(**HISTORY_GATE).execute(context)  # type: ignore[arg-type]
    pushed = _pushed(context)
    rows = _rows(pushed["return_value"]["gate"])
    assert rows[(None, P95)].status == "noise" and rows[("Checkout", P95)].status == "regression"
    history = GateHistory.from_xcom(pushed[HISTORY_XCOM_KEY])
    assert history.series[("Checkout", P95)].recent[-1] == (1440.0, "regression_one_night")
    assert 1440.0 not in history.series[("Checkout", P95)].values
    assert history.series[(None, P95)].recent[-1] == (705.0, "noise")


def test_a_p95_from_too_few_samples_is_judged_by_its_budget_only_and_stays_out_of_the_history(
    loadtest_conn: str, requests_mock: rm.Mocker, capsys: pytest.CaptureFixture[str]
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[705.0])
    _two_generators(requests_mock)
    season = _season()
    context = _history_context(season.to_xcom())
    result = _op(**HISTORY_GATE).execute(context)  # type: ignore[arg-type]
    row = _rows(result["gate"])[("Checkout", P95)]
    assert row.passed and row.status == "pass" and row.value == 1440.0
    assert row.note is not None and "only 100 samples" in row.note and "at least 400" in row.note
    assert "needs at least 400 to be a measurement" in capsys.readouterr().out
    history = GateHistory.from_xcom(_pushed(context)[HISTORY_XCOM_KEY])
    assert history.series[("Checkout", P95)] == season.series[("Checkout", P95)]


def test_a_person_accepts_a_transaction_s_change_and_its_history_restarts(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[705.0])
    _two_generators(requests_mock)
    context = _history_context(_season().to_xcom(), conf={ACCEPT_CHANGE: [P95]})
    result = _op(**HISTORY_GATE).execute(context)  # type: ignore[arg-type]
    assert all(row.passed for row in _rows(result["gate"]).values())
    history = GateHistory.from_xcom(_pushed(context)[HISTORY_XCOM_KEY])
    assert history.series[("Checkout", P95)].values == (1440.0,)


def test_a_history_gate_without_jtl_files_leaves_the_transaction_s_history_as_it_was(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    requests_mock.post(SUMMARY_URL, json=[705.0])
    season = _season()
    context = _history_context(season.to_xcom())
    with pytest.raises(AirflowFailException, match="not measured"):
        _op(**HISTORY_GATE).execute(context)  # type: ignore[arg-type]
    history = GateHistory.from_xcom(_pushed(context)[HISTORY_XCOM_KEY])
    assert history.series[("Checkout", P95)] == season.series[("Checkout", P95)]


# --- the settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transaction_budgets": {"Checkout": {"RESPONSE_TIME_APDEX": ">= 0.9"}}}, "cannot be computed"),
        ({"transaction_budgets": {"Checkout": {P95: "under 800"}}}, r"\['Checkout'\]\['RESPONSE_TIME_PERC"),
        ({"transaction_max_regression_pct": {"Checkout": {P95: 10}}}, "needs a baseline"),
        (
            {
                "transaction_max_regression_pct": {"Checkout": {"SENT_BYTES_TOTAL": 10}},
                "baseline": "previous",
            },
            r"transaction_max_regression_pct\['Checkout'\]: SENT_BYTES_TOTAL is neither better nor worse",
        ),
        (
            {"transaction_max_regression_pct": {"Checkout": {P95: "ten"}}, "baseline": "previous"},
            r"transaction_max_regression_pct\['Checkout'\]\['RESPONSE_TIME_PERCENTILE_95'\]: 'ten' is not",
        ),
        ({"transaction_max_regression_pct": ["Checkout"], "baseline": "previous"}, "must be a mapping"),
        ({"transaction_budgets": CHECKOUT, "wait_for_completion": False}, "need wait_for_completion=True"),
    ],
)
def test_the_settings_are_checked_when_the_dag_is_parsed(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _op(**kwargs)
    if "wait_for_completion" not in kwargs:
        with pytest.raises(ValueError, match=message):
            _sensor(**kwargs)


def test_templated_settings_pass_parse_time_and_fail_before_the_run_starts(
    loadtest_conn: str, requests_mock: rm.Mocker
) -> None:
    _service(requests_mock, ["FINISHED"])
    op = _op(
        transaction_budgets={"Checkout": {P95: "{{ var.value.checkout_p95 }}"}, "{{ var.value.x }}": {}},
        transaction_max_regression_pct="{{ var.value.bounds }}",
        baseline="previous",
    )
    assert {"transaction_budgets", "transaction_max_regression_pct"} <= set(op.template_fields)
    op.transaction_budgets = {"Checkout": {P95: "<= 800"}}  # as rendered
    op.transaction_max_regression_pct = {"Checkout": {P95: "ten"}}
    with pytest.raises(AirflowFailException, match="'ten' is not a percentage"):
        op.execute(_gate_context())  # type: ignore[arg-type]
    assert requests_mock.call_count == 0


# --- a download cut on the way, through the real transport ---------------------------------------

FULL_JTL = jtl_text(LG1).encode()
#: The body stops at a line boundary: read as a file it would be a smaller, valid JTL.
CUT_AT = FULL_JTL.index(b"\r\n", len(FULL_JTL) // 2) + 2


class _CutDownloads(BaseHTTPRequestHandler):
    """Lists one JTL file and sends it cut: half its bytes, then the connection closes."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        listing = self.path.startswith("/analysis/logs/list/")
        body = json.dumps(["lg-1.jtl"]).encode() if listing else FULL_JTL
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body if body is not FULL_JTL else body[:CUT_AT])
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def cutting_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CutDownloads)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(
        "AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(f"http://127.0.0.1:{server.server_address[1]}")
    )
    monkeypatch.setattr(hook_module, "_sleep", lambda seconds: None)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_download_cut_on_the_way_is_an_error_never_a_smaller_file(cutting_server: None) -> None:
    from airflow_provider_loadtest.decisions.gate import Unreadable
    from airflow_provider_loadtest.decisions.transactions import TransactionGate

    op = _op(transaction_budgets=CHECKOUT)
    gate = TransactionGate.parse(CHECKOUT, None, None)
    with pytest.raises(LoadTestApiError, match=r"lg-1\.jtl"):
        op._transaction_figures("br-1", gate, must=True)  # the run FINISHED: a retry judges again
    unread = op._transaction_figures("br-1", gate, must=False)
    assert isinstance(unread, Unreadable)
    assert unread.reason.startswith("the JTL files of run br-1 could not be downloaded:")
