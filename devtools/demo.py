"""The one-command demo: the scheduled example DAG, end to end, in a real Airflow, fully offline.

``make demo`` (or ``python -m devtools.demo``) starts the bundled service simulator on
127.0.0.1, prepares a throwaway AIRFLOW_HOME, points ``loadtest_default`` at the simulator, runs
``airflow dags test`` for the example DAGs (``loadtest_nightly``, then ``loadtest_nightly_report``,
whose PDF report and run files are kept in ``./demo-reports``), then the release gate
(``loadtest_release_gate`` on two consecutive nights of the simulator's ``slower-scenario``: the
first passes its budgets, the second fails the regression bound against it), prints what happened
and cleans up, even when a step fails. Exits non-zero when a DAG run did not end as expected.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
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
    parser.add_argument("--keep-home", action="store_true", help="keep the throwaway AIRFLOW_HOME for a look")
    args = parser.parse_args(argv)

    dag_ids = args.dag_ids or ["loadtest_nightly", "loadtest_nightly_report"]
    started = time.monotonic()
    home_dir = Path(tempfile.mkdtemp(prefix="loadtest-demo-airflow-"))
    failed = []
    try:
        with simulator_process(args.run_seconds) as (url, api_key):
            print(f"[demo] simulator listening on {url}")
            print(f"[demo] preparing a throwaway Airflow in {home_dir} (airflow db migrate)")
            home = AirflowHome(home_dir, [args.dags_folder])
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
            print(f"[demo] demo wall time {time.monotonic() - started:.1f} s")
            return 1 if failed else 0
    finally:
        if args.keep_home:
            print(f"[demo] kept {home_dir}")
        else:
            shutil.rmtree(home_dir, ignore_errors=True)


GATE_DAG_ID = "loadtest_release_gate"


def _gate_demo(home: AirflowHome, env: dict[str, str]) -> bool:
    """Two nights of the release gate on a scenario that gets slower at every run: the first has no
    baseline yet and passes, the second is compared with it and fails. True when that happened."""
    env = {**env, "AIRFLOW_VAR_LOADTEST_SCENARIO_ID": "slower-scenario"}
    outcomes = []
    for night in ("2026-11-01", "2026-11-02"):
        print(f"[demo] running: airflow dags test {GATE_DAG_ID} {night} (scenario slower-scenario)")
        result = home.dags_test(GATE_DAG_ID, env, logical_date=night)
        (home.path / f"{GATE_DAG_ID}-{night}.log").write_text(result.output)
        run = result.xcom(GATE_DAG_ID, "run_load_test") or {}
        print(f"[demo] --- {GATE_DAG_ID} {night}: run {run.get('bench_result_id')} {run.get('state')} ---")
        start = result.output.find("Quality gate of run")
        if start >= 0:
            print(result.output[start:].split(" [airflow.task", 1)[0])
        failure = result.output.find("Quality gate failed")
        if failure >= 0:
            print("[demo] " + result.output[failure:].splitlines()[0])
        print(f"[demo] DAG run {'succeeded' if result.succeeded else 'FAILED'} in {result.seconds:.1f} s")
        outcomes.append(result.succeeded)
    expected = outcomes == [True, False]
    print(
        "[demo] release gate: "
        + ("the slower second night failed its regression bound, as expected" if expected else "UNEXPECTED")
    )
    return expected


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
