"""Only a logged-in user allowed to read the DAG gets the "Load tests" view and its data.

One real night of ``loadtest_release_gate`` against the simulator leaves real XCom; then Airflow's own API
app (with the plugin mounted from its entry point, as the API server does) is asked as nobody, with a
forged token, as a user the auth manager refuses the DAG, and as a user it allows
(tests/integration/load_tests_view_probe.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.simulator import run_simulator
from devtools.local_airflow import AirflowHome, connection_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROBE = "tests.integration.load_tests_view_probe"


def probe(home: AirflowHome, secret: str) -> dict[str, Any]:
    env = home.env(
        {
            "AIRFLOW__CORE__AUTH_MANAGER": f"{PROBE}.OneDagAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "reader:viewer,stranger:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "PYTHONPATH": str(ROOT),
        }
    )
    done = subprocess.run(
        # imported, not run as __main__: Airflow imports the auth manager class from the same module
        [sys.executable, "-c", f"from {PROBE} import main; main({secret!r})"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("PROBE:")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    found: dict[str, Any] = json.loads(lines[0].removeprefix("PROBE:"))
    return found


def test_no_data_without_login_or_without_access_to_the_dag(tmp_path: Path) -> None:
    home = AirflowHome(tmp_path / "home", [ROOT / "example_dags"])
    with run_simulator(run_seconds=1.0) as sim:
        night = home.dags_test("loadtest_release_gate", connection_env(sim.url, sim.api_key))
    assert night.succeeded, night.output[-3000:]
    secret = night.xcom("loadtest_release_gate", "run_load_test")["bench_result_id"]

    found = probe(home, secret)

    for what in ("dag", "task", "data", "other_dag", "missing_dag"):
        assert found[f"nobody {what}"]["status"] == 401, found
        assert found[f"garbage {what}"]["status"] in (401, 403), found
        assert found[f"stranger {what}"]["status"] == 403, found  # whether the DAG exists or not
    for key, answer in found.items():
        if not key.startswith("reader"):
            assert not answer["has_data"], key
        if "cache_control" in answer:
            assert answer["cache_control"] == "no-store", key
            assert answer["vary"].startswith("Authorization, Cookie"), key  # then Airflow's gzip
    for what in ("dag", "task", "data"):
        answer = found[f"reader {what}"]
        assert (answer["status"], answer["has_data"], answer["cache_control"]) == (200, True, "no-store"), (
            what
        )
    assert found["reader other_dag"]["status"] == 200 and not found["reader other_dag"]["has_data"]
    assert found["reader bad_id"]["status"] == 404
    assert found["reader missing_dag"]["status"] == 404  # not "No load test in this DAG yet"
    assert found["reader by cookie dag"] == {"status": 200, "has_data": True}
    # a night still running shows from its run record, newest first; the finished one from its result
    assert found["reader running night"] == [
        ["running", "br-running", "http://127.0.0.1:9/ui/report/r-running"],
        ["pass", secret, night.xcom("loadtest_release_gate", "run_load_test")["report_url"]],
    ]
