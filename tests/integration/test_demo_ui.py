"""``make demo-ui``: the demo's Airflow home served with the "Load tests" view, signed in, until Ctrl-C; then
the api-server and every process it started are gone.

The home is what ``make demo`` leaves (a migrated Airflow marked as the demo's, the release gate's DAG run
in it), made here without running load tests: ``earlier_season`` left on one DAG run, as the demo does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from devtools.demo import GATE_BOUNDS, GATE_DAG_ID, GATE_TASK_ID, HOME_MARK, earlier_season
from devtools.local_airflow import AirflowHome

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(600)
def test_demo_ui_serves_the_view_until_ctrl_c(tmp_path: Path) -> None:
    from airflow_provider_loadtest.decisions.gate.history import HISTORY_XCOM_KEY

    home = AirflowHome(tmp_path / "demo-airflow", [ROOT / "example_dags"])
    (home.path / HOME_MARK).write_text("made by the test")
    left = home.leave_xcom(
        GATE_DAG_ID,
        GATE_TASK_ID,
        HISTORY_XCOM_KEY,
        earlier_season("slower-scenario", GATE_BOUNDS),
        "2026-10-31",
    )
    assert left.succeeded, left.output[-4000:]
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    server = subprocess.Popen(
        [sys.executable, "-m", "devtools.demo", "--serve", "--home", str(home.path), "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        view = f"http://127.0.0.1:{port}/loadtest/dags/{GATE_DAG_ID}"
        deadline = time.monotonic() + 240
        page = ""
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(view, timeout=10) as answer:
                    assert answer.status == 200
                    page = answer.read().decode()
                break
            except OSError:
                time.sleep(1)
        assert f"<title>Load tests · {GATE_DAG_ID}</title>" in page, page[:2000]  # the view, signed in
        group = _api_server_pids(server.pid)
        assert group, "no api-server process under the demo-ui"
        server.send_signal(signal.SIGINT)  # what Ctrl-C sends
        output, _ = server.communicate(timeout=60)
        assert server.returncode == 0, output
        assert view in output and "api-server stopped" in output
        time.sleep(1)
        assert not [pid for pid in group if _alive(pid)], "processes of the api-server outlived demo-ui"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)


def _api_server_pids(parent: int) -> list[int]:
    """The api-server and its workers: the process group the demo-ui started (its child's group)."""
    done = subprocess.run(
        ["ps", "-eo", "pid,ppid,pgid,args"],  # noqa: S607 - procps, as on every Linux
        capture_output=True,
        text=True,
        check=False,
        timeout=10,
    )
    rows = [line.split(None, 3) for line in done.stdout.splitlines()[1:]]
    children = {int(row[2]) for row in rows if len(row) == 4 and int(row[1]) == parent}
    return [int(row[0]) for row in rows if len(row) == 4 and int(row[2]) in children]
