"""The one-command demo: the example DAGs, end to end, in a real Airflow, fully offline.

``make demo`` (or ``python -m devtools.demo``) starts the bundled service simulator on
127.0.0.1, prepares an Airflow home in ``./demo-airflow`` (made anew by every demo, kept afterwards),
points ``loadtest_default`` at the simulator, runs ``airflow dags test`` for the example DAGs
(``loadtest_nightly``, then ``loadtest_nightly_report``, whose PDF report and run files are kept in
``./demo-reports``), then the release gate (``loadtest_release_gate``, ``baseline="history"``, on the
simulator's ``slower-scenario``: a few percent of noise from run to run, and 20 % slower at every run).
A real season of nightly load tests would take weeks, so the demo stands in for one: the history that
20 passing nights at the scenario's usual speed would have left (the simulator's own figures and noise,
judged by the gate's own code) is put in XCom on the DAG run of the day before. Then two real nights:
the first is judged noise against that history and passes, the second (20 % slower) is a regression
and fails. Last, one night of the transaction gate (``loadtest_transaction_gate``) on the same
scenario, whose third run has slowed Checkout almost fivefold while the run's own p95 grew by half: the
run's gate passes, Checkout's budget fails, and the log lists the slowest transactions. It prints what
happened, then how to see those nights in the "Load tests" view, and stops the simulator even when a
step fails. Exits non-zero when a DAG run did not end as expected.

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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devtools.local_airflow import AirflowHome, DagRunResult, connection_env

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
        if not args.dag_ids and not _transaction_demo(home, env):
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
    from airflow_provider_loadtest.models.enums import MetricId
    from airflow_provider_loadtest.simulator.figures import RunFigures
    from airflow_provider_loadtest.simulator.seed import load_seed

    scenario = load_seed(seed).scenario(scenario_id)
    if scenario is None:
        raise ValueError(f"the seed has no scenario {scenario_id!r}")
    spec = GateSpec.parse(None, dict(bounds), "history")
    history = GateHistory()
    for run_index in range(-nights, 0):
        figures = RunFigures.of(scenario.metrics, 100.0, 1.0, scenario.agents, run_index=run_index)
        values = {metric: figures.summary_value(MetricId(metric)) for metric in spec.metric_ids}
        rows, after = judge_history(spec, values, None, history=history)
        if after is None or not all(row.passed for row in rows):
            raise RuntimeError(f"night {run_index} of the season did not pass: {rows}")
        history = after
    return history.to_xcom()


def _gate_demo(home: AirflowHome, env: dict[str, str]) -> bool:
    """A season of history, then two real nights of the release gate on a scenario that gets slower at
    every run: the first is judged noise and passes, the second a regression and fails. True when that
    happened."""
    from airflow_provider_loadtest.decisions.history import HISTORY_XCOM_KEY

    env = {**env, "AIRFLOW_VAR_LOADTEST_RELEASE_GATE_SCENARIO_ID": GATE_SCENARIO}
    print(
        f"[demo] standing in for an earlier season: the gate history of {SEASON_NIGHTS} passing nights of "
        f"{GATE_SCENARIO} at its usual speed, left in XCom on the DAG run of {SEASON_DATE}"
    )
    season = home.leave_xcom(
        GATE_DAG_ID, GATE_TASK_ID, HISTORY_XCOM_KEY, earlier_season(GATE_SCENARIO, GATE_BOUNDS), SEASON_DATE
    )
    if not season.succeeded:
        print(season.output[-4000:], file=sys.stderr)
        return False
    print(f"[demo] season left in XCom in {season.seconds:.1f} s")
    outcomes, judged = [], []
    for night in NIGHTS:
        print(f"[demo] running: airflow dags test {GATE_DAG_ID} {night} (scenario {GATE_SCENARIO})")
        result = home.dags_test(GATE_DAG_ID, env, logical_date=night)
        (home.path / f"{GATE_DAG_ID}-{night}.log").write_text(result.output)
        run = result.xcom(GATE_DAG_ID, GATE_TASK_ID) or {}
        print(f"[demo] --- {GATE_DAG_ID} {night}: run {run.get('bench_result_id')} {run.get('state')} ---")
        start = result.output.find("Quality gate of run")
        if start >= 0:
            print(result.output[start:].split(" [airflow.task", 1)[0])
        failure = result.output.find("Quality gate failed")
        if failure >= 0:
            print("[demo] " + result.output[failure:].splitlines()[0])
        print(f"[demo] DAG run {'succeeded' if result.succeeded else 'FAILED'} in {result.seconds:.1f} s")
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


TRANSACTION_DAG_ID = "loadtest_transaction_gate"
TRANSACTION_NIGHT = "2026-11-03"


def _transaction_demo(home: AirflowHome, env: dict[str, str]) -> bool:
    """One night of the transaction gate on the scenario the release gate just ran twice (its third run:
    Checkout far slower, the run as a whole much less): the run's rows pass, Checkout's budget fails.
    True when that happened."""
    env = {**env, "AIRFLOW_VAR_LOADTEST_TRANSACTION_GATE_SCENARIO_ID": GATE_SCENARIO}
    night = f"{TRANSACTION_DAG_ID} {TRANSACTION_NIGHT}"
    print(f"[demo] running: airflow dags test {night} (scenario {GATE_SCENARIO})")
    result = home.dags_test(TRANSACTION_DAG_ID, env, logical_date=TRANSACTION_NIGHT)
    (home.path / f"{TRANSACTION_DAG_ID}.log").write_text(result.output)
    run = result.xcom(TRANSACTION_DAG_ID, GATE_TASK_ID) or {}
    print(f"[demo] --- {TRANSACTION_DAG_ID}: run {run.get('bench_result_id')} {run.get('state')} ---")
    start = result.output.find("Quality gate of run")
    if start >= 0:
        print(result.output[start:].split(" [airflow.task", 1)[0])
    failure = result.output.find("Quality gate failed")
    if failure >= 0:
        print("[demo] " + result.output[failure:].splitlines()[0][:400])
    print(f"[demo] DAG run {'succeeded' if result.succeeded else 'FAILED'} in {result.seconds:.1f} s")
    rows = run.get("gate", [])
    run_passed = [row["passed"] for row in rows if row.get("transaction") is None]
    failing = {row.get("transaction") for row in rows if not row["passed"]}
    expected = not result.succeeded and run_passed and all(run_passed) and failing == {"Checkout"}
    print(
        "[demo] transaction gate: "
        + (
            "the run's own figures passed its gate, Checkout failed its budget: the task failed, as expected"
            if expected
            else f"UNEXPECTED (succeeded: {result.succeeded}, run rows: {run_passed}, failing: {failing})"
        )
    )
    return bool(expected)


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
