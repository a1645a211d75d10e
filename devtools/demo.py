"""The one-command demo: the example DAGs, end to end, in a real Airflow, fully offline.

``make demo`` (or ``python -m devtools.demo``) starts the bundled service simulator on
127.0.0.1, prepares an Airflow home in ``./demo-airflow`` (made anew by every demo, kept afterwards),
points ``loadtest_default`` at the simulator, runs ``airflow dags test`` for the example DAGs
(``loadtest_nightly``, then ``loadtest_nightly_report``, whose PDF report and run files are kept in
``./demo-reports``), then the release gate (``loadtest_release_gate``, ``baseline="history"``, on the
simulator's ``slower-scenario``: a few percent of noise from run to run, and 20 % slower at every run).
A real season of nightly load tests would take weeks, so the demo stands in for one: 20 passing nights
at the scenario's usual speed (the simulator's own figures and noise, judged by the gate's own code),
each a DAG run of its own dated as a night of a few minutes, with what the gated task would have left in
XCom (``season_nights``: the view draws them, the next night's gate reads them). Then two real nights:
the first is judged noise against that history and passes, the second (20 % slower) is a regression
and fails. Last, the transaction gate (``loadtest_transaction_gate``: every transaction's p95 judged
together against the history, one false-alarm budget for the gate) on ``checkout-scenario``, after a
season of 24 nights drawn from the simulator's own samples (in a thread while the first DAGs run), left
the same way:
a busy night, every transaction about 15 % slower together, passes (the night effect explains it),
and the demo shows that judging each series alone (``replay_history``) would have failed a row; the
next night Checkout alone is about 40 % slower and fails as Checkout's own regression, beyond the
night's shared movement, while the other transactions and the run pass. It prints what happened,
then how to see those nights in the "Load tests" view, and stops the simulator even when a step
fails. Exits non-zero when a DAG run did not end as expected.

``make demo-ui`` (``python -m devtools.demo --serve``) serves that Airflow home with Airflow's
api-server on 127.0.0.1 (port 8080 unless ``--port``), everyone signed in as admin (Airflow's simple
auth manager), until Ctrl-C; then the api-server and its workers stop.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.history import SeriesKey

STARTUP_TIMEOUT_S = 60.0


@contextmanager
def simulator_process(run_seconds: float) -> Iterator[tuple[str, str]]:
    """Run the simulator CLI in its own process (as a user would); yield its URL and API key."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "airflow_provider_loadtest.simulator",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--run-seconds",
            str(run_seconds),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(process, lines), daemon=True).start()
    try:
        found: dict[str, str] = {}
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while len(found) < 2:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                raise RuntimeError("the simulator did not start (no URL printed in time)")
            try:
                line = lines.get(timeout=min(remaining, 1.0)).strip()
            except queue.Empty:
                continue
            key, _, value = line.partition("=")
            if key in {"LOADTEST_SIMULATOR_URL", "LOADTEST_SIMULATOR_API_KEY"}:
                found[key] = value
        yield found["LOADTEST_SIMULATOR_URL"], found["LOADTEST_SIMULATOR_API_KEY"]
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _pump(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    """Forward the simulator's output lines to ``lines`` (a thread, so reading can time out)."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)


def _simulator_requests(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/_simulator/requests", timeout=10) as answer:
        data = json.load(answer)
    return list(data["requests"] if isinstance(data, dict) else data)


#: Where the demo keeps its Airflow home (relative to the folder it runs in), and the file that marks
#: a folder as one the demo made (so that it never deletes anything else).
DEMO_HOME = Path("demo-airflow")
HOME_MARK = ".loadtest-demo-home"
UI_PORT = 8080


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dag-id",
        action="append",
        dest="dag_ids",
        help="a DAG to run (repeatable; default: loadtest_nightly and loadtest_nightly_report)",
    )
    parser.add_argument(
        "--reports-dir",
        type=Path,
        default=Path.cwd() / "demo-reports",
        help="where the report DAG saves the PDF and the run's files (kept after the demo)",
    )
    parser.add_argument("--dags-folder", type=Path, default=Path.cwd() / "example_dags")
    parser.add_argument(
        "--run-seconds", type=float, default=6.0, help="how long each simulated load test lasts"
    )
    parser.add_argument(
        "--home", type=Path, default=DEMO_HOME, help="the demo's Airflow home (default: ./demo-airflow)"
    )
    parser.add_argument(
        "--serve", action="store_true", help="serve the home of the last demo with the Load tests view"
    )
    parser.add_argument("--port", type=int, default=UI_PORT, help="the port --serve listens on")
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.home, args.port)

    dag_ids = args.dag_ids or ["loadtest_nightly", "loadtest_nightly_report"]
    started = time.monotonic()
    home_dir = fresh_home(args.home)
    failed = []
    season: Future[Any] | None = None
    if not args.dag_ids:  # a few seconds of CPU, drawn while the first DAGs wait on their runs
        drawing = ThreadPoolExecutor(max_workers=1)
        season = drawing.submit(transaction_season_samples, TRANSACTION_SCENARIO, TRANSACTION_BOUNDS)
        drawing.shutdown(wait=False)
    with simulator_process(args.run_seconds) as (url, api_key):
        print(f"[demo] simulator listening on {url}")
        print(f"[demo] preparing Airflow in {home_dir} (airflow db migrate; kept after the demo)")
        home = AirflowHome(home_dir, [args.dags_folder])
        (home_dir / HOME_MARK).write_text("made by make demo; make demo makes it anew\n")
        env = {
            **connection_env(url, api_key),
            "AIRFLOW_VAR_LOADTEST_REPORT_ROOT": str(args.reports_dir.resolve()),
        }
        for dag_id in dag_ids:
            starts_before = _count_starts(url)
            print(f"[demo] running: airflow dags test {dag_id}")
            result = home.dags_test(dag_id, env)
            (home_dir / f"{dag_id}.log").write_text(result.output)
            _describe(dag_id, result, starts=_count_starts(url) - starts_before)
            if not result.succeeded:
                failed.append(dag_id)
                print(result.output[-4000:], file=sys.stderr)
        if not args.dag_ids and not _gate_demo(home, env):
            failed.append(GATE_DAG_ID)
        if season is not None and not _transaction_demo(home, env, season):
            failed.append(TRANSACTION_DAG_ID)
        print(f"[demo] demo wall time {time.monotonic() - started:.1f} s")
    print(how_to_see_the_view(home_dir, [] if args.dag_ids else [GATE_DAG_ID, TRANSACTION_DAG_ID]))
    return 1 if failed else 0


def fresh_home(path: Path) -> Path:
    """``path``, empty: a home an earlier demo made is removed first; anything else there is refused."""
    path = path.resolve()
    if path.exists():
        if not (path / HOME_MARK).exists():
            raise SystemExit(f"[demo] {path} exists and was not made by the demo: move it, or pass --home")
        shutil.rmtree(path)
    return path


def how_to_see_the_view(home: Path, dag_ids: list[str], port: int = UI_PORT) -> str:
    """What the demo prints last: where its Airflow is, and the command and URLs of the Load tests view."""
    lines = [
        f"[demo] Airflow home kept in {home} (each make demo makes it anew).",
        "[demo] To see these nights in the Load tests view: run `make demo-ui` (until Ctrl-C), then open",
    ]
    lines.append(f"[demo]   http://127.0.0.1:{port}/loadtest/ (every gated task at a glance)")
    lines += [f"[demo]   http://127.0.0.1:{port}/loadtest/dags/{dag_id}" for dag_id in dag_ids]
    if not dag_ids:
        lines.append(f"[demo]   http://127.0.0.1:{port}/loadtest/dags/<dag_id> (a DAG with a gated task)")
    return "\n".join(lines)


def serve(home: Path, port: int) -> int:
    """Airflow's api-server on the demo's home, signed in as admin, until Ctrl-C (or SIGTERM)."""
    import signal

    from devtools.browser_check import CheckFailed, api_server

    home = home.resolve()
    if not (home / HOME_MARK).exists():
        print(f"[demo-ui] no demo Airflow home in {home}: run `make demo` first", file=sys.stderr)
        return 2
    airflow = AirflowHome.existing(home)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C even where the shell started us ignoring it
        signal.signal(signum, lambda *_: stop.set())
    log = home / "api-server.log"
    print(f"[demo-ui] starting Airflow's api-server on {home} (log: {log})")
    try:
        with api_server(airflow, log, port=port) as url:
            print(f"[demo-ui] Airflow: {url} (signed in as admin)")
            print(f"[demo-ui] Load tests, every gate at a glance: {url}/loadtest/")
            for dag_id in (GATE_DAG_ID, TRANSACTION_DAG_ID):
                print(f"[demo-ui] Load tests view: {url}/loadtest/dags/{dag_id}")
            print("[demo-ui] Ctrl-C stops it")
            while not stop.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except CheckFailed as exc:
        print(f"[demo-ui] {exc}", file=sys.stderr)
        return 1
    print("[demo-ui] api-server stopped")
    return 0


GATE_DAG_ID = "loadtest_release_gate"
GATE_TASK_ID = "run_load_test"
GATE_SCENARIO = "slower-scenario"
#: The example release gate's regression bounds (``max_regression_pct`` in
#: example_dags/loadtest_release_gate.py): the earlier season is judged as that task would have judged it.
GATE_BOUNDS = {"RESPONSE_TIME_PERCENTILE_95": 10.0, "RESPONSE_TIME_AVG": 10.0}
#: Nights of the season that stands in for the weeks before the demo (8 are needed to judge the noise).
SEASON_NIGHTS = 20
SEASON_DATE = "2026-10-31"
NIGHTS = ("2026-11-01", "2026-11-02")


def earlier_season(
    scenario_id: str,
    bounds: Mapping[str, float],
    nights: int = SEASON_NIGHTS,
    seed: str | Path | dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The gate history (its XCom form) that ``nights`` passing nights of ``scenario_id`` at its usual
    speed would have left: each night the simulator's figures with its run-to-run noise (the runs before
    this simulator started, -``nights`` to -1), judged by the gate's own code, night after night."""
    from airflow_provider_loadtest.decisions.gate import GateSpec, judge_history
    from airflow_provider_loadtest.decisions.history import GateHistory

    spec = GateSpec.parse(None, dict(bounds), "history")
    history = GateHistory()
    for run_index, night in zip(
        range(-nights, 0), release_values(scenario_id, bounds, nights, seed), strict=True
    ):
        values = {metric: night[(None, metric)] for metric in spec.metric_ids}
        rows, after = judge_history(spec, values, None, history=history)
        if after is None or not all(row.passed for row in rows):
            raise RuntimeError(f"night {run_index} of the season did not pass: {rows}")
        history = after
    return history.to_xcom()


def release_values(
    scenario_id: str,
    bounds: Mapping[str, float],
    nights: int = SEASON_NIGHTS,
    seed: str | Path | dict[str, Any] | None = None,
) -> list[dict[SeriesKey, float]]:
    """Each of ``nights`` runs' figures of ``bounds``' metrics before this simulator started (runs
    -``nights`` to -1: the scenario's usual speed and run-to-run noise), oldest first."""
    from airflow_provider_loadtest.models.enums import MetricId
    from airflow_provider_loadtest.simulator.figures import RunFigures
    from airflow_provider_loadtest.simulator.seed import load_seed

    scenario = load_seed(seed).scenario(scenario_id)
    if scenario is None:
        raise ValueError(f"the seed has no scenario {scenario_id!r}")
    values: list[dict[SeriesKey, float]] = []
    for run_index in range(-nights, 0):
        figures = RunFigures.of(scenario.metrics, 100.0, 1.0, scenario.agents, run_index=run_index)
        values.append({(None, metric): float(figures.summary_value(MetricId(metric))) for metric in bounds})
    return values


def season_dates(nights: int, last: str = SEASON_DATE) -> list[str]:
    """``nights`` dates (ISO), one a day, ending on ``last``."""
    from datetime import date, timedelta

    end = date.fromisoformat(last)
    return [(end - timedelta(days=nights - 1 - i)).isoformat() for i in range(nights)]


def season_nights(
    task_id: str,
    scenario_id: str,
    values: Sequence[Mapping[SeriesKey, float]],
    bounds: Mapping[str, float],
    samples: Sequence[Mapping[SeriesKey, int]] | None = None,
    test_name: str = "nightly",
) -> list[dict[str, Any]]:
    """A season of nights as the gated task would have left them, one DAG run each
    (``AirflowHome.leave_nights``): each night judged by the gate's own code, every series together
    (``replay_gate``), and in XCom what ``RunScenarioOperator`` leaves: its run record, its
    ``return_value`` (the gate's rows and night effect: what the Load tests view draws), the night's
    record and the history it ended with (what the next night's gate reads). Raises when a night of
    the season did not pass: the season stands in for passing nights."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from airflow_provider_loadtest.decisions.gate import replay_gate
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY
    from airflow_provider_loadtest.decisions.gate.nights import NIGHT_XCOM_KEY, NightRecord, chain_of
    from airflow_provider_loadtest.decisions.run_record import RUN_RECORD_KEY, RunRecord
    from airflow_provider_loadtest.decisions.runs import StartedRun
    from airflow_provider_loadtest.lifecycle.night_records import (
        SAVED_BY_RECORDS,
        WITHOUT_RECORD,
        night_record,
    )

    dates = season_dates(len(values))
    verdicts = replay_gate(values, max_regression_pct=dict(bounds), samples=samples, whens=dates)
    records: list[NightRecord] = []
    nights = []
    for when, verdict in zip(dates, verdicts, strict=True):
        if not verdict.passed or verdict.history is None:
            raise RuntimeError(f"the night of {when} of the season did not pass: {verdict.rows}")
        ran_at = datetime.fromisoformat(f"{when}T02:01:00+00:00").timestamp()
        run = StartedRun(
            scenario_id=scenario_id,
            report_id=f"season-report-{when}",
            bench_result_id=f"season-{scenario_id}-{when}",
            project_id="demo-project",
            template_id=None,
            workspace_id="demo-workspace",
            test_name=f"{test_name} {when}",
            report_url=None,
            started_at=ran_at,
            created_at=ran_at,
        )
        logical = datetime.fromisoformat(when).replace(tzinfo=UTC).isoformat()
        record = night_record(run, verdict, accepted=(), memory=None, context_ids=(None, -1, logical))
        record = replace(
            record, chain=chain_of([*records, record]), recorded_at=ran_at + SEASON_RUN_MINUTES * 60
        )
        records.append(record)
        result: dict[str, Any] = {
            **run.to_xcom(),
            "state": "FINISHED",
            "gate": [row.to_xcom() for row in verdict.rows],
        }
        if verdict.night is not None:
            result["night_effect"] = verdict.night.to_xcom()
        started = RunRecord(scenario_id=scenario_id, start_sent_at=ran_at, max_tries=3, run=run.to_xcom())
        saved = {**verdict.history.to_xcom(), SAVED_BY_RECORDS: run.bench_result_id, WITHOUT_RECORD: []}
        pushed = {
            RUN_RECORD_KEY: started.to_store(),
            "return_value": result,
            HISTORY_XCOM_KEY: saved,
            NIGHT_XCOM_KEY: record.to_xcom(),  # its dag_run_id (None here) is the DAG run's, once made
        }
        nights.append({"logical_date": when, "minutes": SEASON_RUN_MINUTES, "xcom": {task_id: pushed}})
    return nights


#: How long a night of the season ran (its DAG run's start and end dates: plausible, not weeks).
SEASON_RUN_MINUTES = 4


def _gate_demo(home: AirflowHome, env: dict[str, str]) -> bool:
    """A season of history, then two real nights of the release gate on a scenario that gets slower at
    every run: the first is judged noise and passes, the second a regression and fails. True when that
    happened."""
    env = {**env, "AIRFLOW_VAR_LOADTEST_RELEASE_GATE_SCENARIO_ID": GATE_SCENARIO}
    print(
        f"[demo] standing in for an earlier season: {SEASON_NIGHTS} passing nights of {GATE_SCENARIO} at "
        f"its usual speed, one DAG run each up to {SEASON_DATE}, judged by the gate's own code"
    )
    nights = season_nights(
        GATE_TASK_ID,
        GATE_SCENARIO,
        release_values(GATE_SCENARIO, GATE_BOUNDS),
        GATE_BOUNDS,
        test_name="release gate",
    )
    if not _leave_season(home, GATE_DAG_ID, nights):
        return False
    outcomes, judged = [], []
    for night in NIGHTS:
        result, run = _gated_night(home, env, GATE_DAG_ID, night, GATE_SCENARIO)
        outcomes.append(result.succeeded)
        judged.append({row["status"] for row in run.get("gate", []) if row["metric"] in GATE_BOUNDS})
    expected = outcomes == [True, False] and judged == [{"noise"}, {"regression"}]
    print(
        "[demo] release gate: "
        + (
            "the first night was judged noise and passed, the slower second night a regression and failed, "
            "as expected"
            if expected
            else f"UNEXPECTED (passed: {outcomes}, judged: {judged})"
        )
    )
    return expected


def _leave_season(home: AirflowHome, dag_id: str, nights: list[dict[str, Any]]) -> bool:
    """Leave ``nights`` (``season_nights``) as DAG runs of ``dag_id``, as its gated task would have."""
    season = home.leave_nights(dag_id, nights)
    if not season.succeeded:
        print(season.output[-4000:], file=sys.stderr)
        return False
    print(f"[demo] {len(nights)} nights left as DAG runs in {season.seconds:.1f} s")
    return True


#: The gate's failure line as the demo prints it (the whole line is in the night's log).
FAILURE_CHARS = 600


def _gated_night(
    home: AirflowHome, env: dict[str, str], dag_id: str, night: str, scenario: str
) -> tuple[DagRunResult, dict[str, Any]]:
    """One real night of a gated DAG: run it, keep its log, print its gate's table and failure; return
    the result and the task's ``return_value``."""
    from airflow_provider_loadtest.decisions.samples.masking import clip_words

    print(f"[demo] running: airflow dags test {dag_id} {night} (scenario {scenario})")
    result = home.dags_test(dag_id, env, logical_date=night)
    (home.path / f"{dag_id}-{night}.log").write_text(result.output)
    run = result.xcom(dag_id, GATE_TASK_ID) or {}
    print(f"[demo] --- {dag_id} {night}: run {run.get('bench_result_id')} {run.get('state')} ---")
    start = result.output.find("Quality gate of run")
    if start >= 0:
        print(result.output[start:].split(" [airflow.task", 1)[0])
    failure = result.output.find("Quality gate failed")
    if failure >= 0:
        print("[demo] " + clip_words(result.output[failure:].splitlines()[0], FAILURE_CHARS))
    print(f"[demo] DAG run {'succeeded' if result.succeeded else 'FAILED'} in {result.seconds:.1f} s")
    return result, run


TRANSACTION_DAG_ID = "loadtest_transaction_gate"
TRANSACTION_SCENARIO = "checkout-scenario"
#: The example transaction gate's regression bound per transaction (``transaction_max_regression_pct``
#: in example_dags/loadtest_transaction_gate.py, for every label).
TRANSACTION_BOUNDS = {"RESPONSE_TIME_PERCENTILE_95": 10.0}
#: Nights of the transaction gate's season (24: the night effect's own history and each transaction's
#: line against it need some nights past the 4-night warm-up).
TRANSACTION_SEASON_NIGHTS = 24


def transaction_season(
    scenario_id: str,
    bounds: Mapping[str, float],
    nights: int = TRANSACTION_SEASON_NIGHTS,
    seed: str | Path | dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[dict[SeriesKey, float]]]:
    """``transaction_season_samples`` without the samples: the history (XCom form) and each night's values."""
    history, values, _samples = transaction_season_samples(scenario_id, bounds, nights, seed)
    return history, values


def transaction_season_samples(
    scenario_id: str,
    bounds: Mapping[str, float],
    nights: int = TRANSACTION_SEASON_NIGHTS,
    seed: str | Path | dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[dict[SeriesKey, float]], list[dict[SeriesKey, int]]]:
    """The gate history (its XCom form) that ``nights`` nights of ``scenario_id`` at its usual speed
    would have left for a transaction gate bounding ``bounds`` of every label it samples, and each
    night's values (oldest first). Each night is the simulator's own samples of that run (the runs
    before this simulator started, -``nights`` to -1: its shared and per-transaction noise, no busy
    night, no slowdown), read by the operator's JTL reader and judged by the gate's own code, every
    series together (``replay_gate``). Raises when a night of the season did not pass."""
    from airflow_provider_loadtest.decisions.gate import replay_gate
    from airflow_provider_loadtest.decisions.samples.jtl import read_jtl
    from airflow_provider_loadtest.simulator import jtl
    from airflow_provider_loadtest.simulator.figures import RunFigures
    from airflow_provider_loadtest.simulator.seed import load_seed

    scenario = load_seed(seed).scenario(scenario_id)
    if scenario is None:
        raise ValueError(f"the seed has no scenario {scenario_id!r}")
    values: list[dict[SeriesKey, float]] = []
    samples: list[dict[SeriesKey, int]] = []
    for run_index in range(-nights, 0):
        figures = RunFigures.of(scenario.metrics, 100.0, 1.0, scenario.agents, run_index=run_index)
        own = jtl.own_noise(scenario.metrics.transaction_noise_pct, run_index)
        text = jtl.times_csv(figures, own=own)
        summary = read_jtl([(f"run{run_index}.jtl", [text.encode()])], list(bounds))
        night: dict[SeriesKey, float] = {}
        counts: dict[SeriesKey, int] = {}
        for label, stats in summary.transactions.items():
            for metric in bounds:
                value = stats.metric(metric)
                if value is not None:
                    night[(label, metric)], counts[(label, metric)] = value, stats.hits
        values.append(night)
        samples.append(counts)
    verdicts = replay_gate(values, max_regression_pct=dict(bounds), samples=samples)
    for run_index, verdict in zip(range(-nights, 0), verdicts, strict=True):
        if not verdict.passed:
            raise RuntimeError(f"night {run_index} of the season did not pass: {verdict.rows}")
    history = verdicts[-1].history
    if history is None:
        raise RuntimeError("the season left no gate history")
    return history.to_xcom(), values, samples


def alone_verdicts(
    season: Sequence[Mapping[SeriesKey, float]], rows: Iterable[Mapping[str, Any]]
) -> dict[SeriesKey, str]:
    """Tonight's bounded rows judged as before the family gate: each series alone, with
    ``replay_history`` on its season's values and tonight's (the per-series rule); its status per
    series."""
    from airflow_provider_loadtest.decisions.gate import replay_history

    found = {}
    for row in rows:
        key = (row.get("transaction"), row["metric"])
        if row.get("max_regression_pct") is None or row.get("value") is None:
            continue
        values = [night[key] for night in season if key in night] + [row["value"]]
        alone = replay_history(key[1], values, max_regression_pct=row["max_regression_pct"])
        found[key] = alone[-1].status
    return found


def _series_name(key: SeriesKey) -> str:
    return f"{key[0] or 'the run'}'s {key[1]}"


def _transaction_demo(home: AirflowHome, env: dict[str, str], season: Future[Any]) -> bool:
    """Two real nights of the transaction gate (``baseline="history"``) after a season of history: a
    busy night that every transaction shares, which the gate passes although judging each series
    alone would have failed some, then Checkout slower on its own, which fails as Checkout's own
    regression while the night and the run pass. True when that happened."""
    from airflow_provider_loadtest.decisions.gate import REGRESSION

    env = {**env, "AIRFLOW_VAR_LOADTEST_TRANSACTION_GATE_SCENARIO_ID": TRANSACTION_SCENARIO}
    _history, values, samples = season.result()
    print(
        f"[demo] standing in for an earlier season of the transaction gate: {TRANSACTION_SEASON_NIGHTS} "
        f"passing nights of {TRANSACTION_SCENARIO} (each transaction's p95 from the simulator's samples, "
        f"judged together), one DAG run each up to {SEASON_DATE}"
    )
    nights = season_nights(
        GATE_TASK_ID, TRANSACTION_SCENARIO, values, TRANSACTION_BOUNDS, samples, test_name="transaction gate"
    )
    if not _leave_season(home, TRANSACTION_DAG_ID, nights):
        return False
    busy, slow = NIGHTS
    print(f"[demo] {busy}: a busy night, every transaction about 15 % slower together")
    result, run = _gated_night(home, env, TRANSACTION_DAG_ID, busy, TRANSACTION_SCENARIO)
    alone = alone_verdicts(values, run.get("gate", []))
    failing_alone = sorted((k for k, status in alone.items() if status == REGRESSION), key=str)
    print(
        "[demo] the same night judged series by series (replay_history, each series alone: the rule "
        f"before one budget for the gate): {len(failing_alone)} of {len(alone)} rows would have failed"
        + "".join(f"; {_series_name(k)} {_row_change(run, k)}" for k in failing_alone)
    )
    night = run.get("night_effect") or {}
    busy_ok = result.succeeded and bool(failing_alone) and night.get("passed") is True
    print(
        "[demo] judged together: "
        + (
            f"the night effect ({night['shift_sd']:+.2f} sd, {night['status']}) is the busy night, "
            "shared by every transaction and judged once; no transaction moved beyond it by more than its "
            "noise explains: the night passed"
            if busy_ok
            else f"UNEXPECTED (succeeded: {result.succeeded}, failing alone: {failing_alone}, night: {night})"
        )
    )
    print(f"[demo] {slow}: Checkout alone about 40 % slower, the other transactions within their noise")
    result, run = _gated_night(home, env, TRANSACTION_DAG_ID, slow, TRANSACTION_SCENARIO)
    rows = run.get("gate", [])
    failing = {(row.get("transaction"), row["metric"]) for row in rows if not row["passed"]}
    checkout: dict[str, Any] = next(
        (r for r in rows if r.get("transaction") == "Checkout" and not r["passed"]), {}
    )
    night = run.get("night_effect") or {}
    slow_ok = (
        not result.succeeded
        and failing == {("Checkout", "RESPONSE_TIME_PERCENTILE_95")}
        and checkout.get("status") == REGRESSION
        and "beyond the night's shared movement" in (checkout.get("reason") or "")
        and night.get("passed") is True
    )
    print(
        "[demo] transaction gate: "
        + (
            "Checkout failed as its own regression, beyond the night's shared movement; the night "
            "effect, the other transactions and the run's own figures passed: the task failed, as expected"
            if slow_ok
            else f"UNEXPECTED (succeeded: {result.succeeded}, failing: {failing}, night: {night})"
        )
    )
    return busy_ok and slow_ok


def _row_change(run: Mapping[str, Any], key: SeriesKey) -> str:
    """A row's value and change from its usual, as the log's table says them."""
    from airflow_provider_loadtest.decisions.gate import format_number

    row = next(r for r in run.get("gate", []) if (r.get("transaction"), r["metric"]) == key)
    change = "" if row.get("change_pct") is None else f"{row['change_pct']:+.1f} % from its usual; "
    beyond = (
        "" if row.get("own_sd") is None else f", {row['own_sd']:+.1f} sd beyond the night's shared movement"
    )
    return f"{format_number(row['value'])} ({change}judged together: {row['status']}{beyond})"


def _count_starts(url: str) -> int:
    return sum(1 for r in _simulator_requests(url) if r.get("route") == "run_scenario")


def _describe(dag_id: str, result: DagRunResult, *, starts: int) -> None:
    """Print what a user would look for: task states, the run, and the files saved."""
    print(f"[demo] --- {dag_id} ---")
    for task, (state, tries) in sorted(result.task_states(dag_id).items()):
        print(f"[demo] task {task}: {state} (try {tries})")
    template = result.xcom(dag_id, "wait_for_template")
    run = result.xcom(dag_id, "run_load_test") or {}
    if template:
        print(f"[demo] template chosen by the sensor: {template!r}")
    print(f"[demo] template id: {run.get('template_id')}  run id: {run.get('bench_result_id')}")
    print(f"[demo] final state: {run.get('state')}  duration: {run.get('duration_s')} s")
    print(f"[demo] alarms: {[(a.get('name'), a.get('severity')) for a in run.get('alarms', [])]}")
    print(f"[demo] report URL: {run.get('report_url')}")
    if run.get("junit"):
        print(f"[demo] JUnit XML: {run['junit']['path']} ({run['junit']['size']} bytes)")
    pdf = result.xcom(dag_id, "save_report_pdf")
    if pdf:
        print(f"[demo] PDF report: {pdf['path']} ({pdf['size']} bytes, {_pages(pdf['path'])})")
    for saved in result.xcom(dag_id, "save_run_files") or []:
        print(f"[demo] run file: {saved['path']} ({saved['size']} bytes)")
    print(f"[demo] start calls received by the service: {starts}")
    print(f"[demo] DAG run {'succeeded' if result.succeeded else 'FAILED'} in {result.seconds:.1f} s")


def _pages(path: str) -> str:
    """The PDF's page count, read with pypdf when it is installed (it comes with the test extras)."""
    try:
        from pypdf import PdfReader
    except ImportError:
        return "install pypdf to count pages"
    return f"{len(PdfReader(path).pages)} page(s)"


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
