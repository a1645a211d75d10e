"""Run DAGs in a throwaway local Airflow (``airflow dags test``) and read back what happened.

Used by ``make demo``, the end-to-end tests and the benchmarks: a real scheduler loop, task runner and
triggerer, each run in a subprocess (``devtools/dag_test.py``: ``dag.test()``, as ``airflow dags test``
does), with results read from the DagRun that ``dag.test()`` returns, never from Airflow's tables.
Imports nothing heavy: Airflow runs in the subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAG_TEST = str(Path(__file__).with_name("dag_test.py"))


@dataclass
class DagRunResult:
    """What a DAG test run did: exit code, output, and the run's summary (see ``dag_test.py``)."""

    returncode: int
    output: str
    seconds: float
    home: Path
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0

    def _tasks(self, dag_id: str) -> dict[str, Any]:
        if self.summary.get("dag_id") != dag_id:
            raise KeyError(f"this result is a run of {self.summary.get('dag_id')!r}, not {dag_id!r}")
        tasks: dict[str, Any] = self.summary["tasks"]
        return tasks

    def task_states(self, dag_id: str) -> dict[str, tuple[str, int]]:
        """task_id -> (state, try_number) in this run of ``dag_id``."""
        return {task: (ti["state"], ti["try_number"]) for task, ti in self._tasks(dag_id).items()}

    def task_end(self, dag_id: str, task_id: str) -> datetime | None:
        """When the task instance ended (timezone-aware), or None if it never did."""
        end = self._tasks(dag_id)[task_id]["end_date"]
        return None if end is None else datetime.fromisoformat(end)

    def xcom(self, dag_id: str, task_id: str, key: str = "return_value") -> Any:
        """The XCom ``key`` the task pushed in this run, or None."""
        ti = self._tasks(dag_id).get(task_id)
        return None if ti is None else ti["xcom"].get(key)


class AirflowHome:
    """A migrated AIRFLOW_HOME (SQLite) in ``path`` whose DAGs folder holds copies of ``dag_sources``."""

    def __init__(self, path: Path, dag_sources: list[Path]) -> None:
        self.path = path
        self.dags = path / "dags"
        self.dags.mkdir(parents=True)
        for source in dag_sources:
            for dag_file in source.glob("*.py"):
                shutil.copy(dag_file, self.dags / dag_file.name)
        self._run([AIRFLOW, "db", "migrate"], {}, timeout=300).check_returncode()

    @classmethod
    def existing(cls, path: Path) -> AirflowHome:
        """A home made (and migrated) earlier, as it is: ``make demo-ui`` serves the last demo's."""
        home = cls.__new__(cls)
        home.path, home.dags = path, path / "dags"
        return home

    def env(self, extra: dict[str, str]) -> dict[str, str]:
        """This process's environment, minus connections and variables of ours, plus this home."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_", "LOADTEST_E2E_"))
        }
        env.update(
            AIRFLOW_HOME=str(self.path),
            AIRFLOW__CORE__DAGS_FOLDER=str(self.dags),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__UNIT_TEST_MODE="False",
        )
        env.update(extra)
        return env

    def _run(
        self, argv: list[str], extra: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            check=False,
            env=self.env(extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def dags_test(
        self,
        dag_id: str,
        extra: dict[str, str],
        timeout: float = 300,
        logical_date: str | None = None,
        conf: dict[str, Any] | None = None,
    ) -> DagRunResult:
        """``airflow dags test dag_id [logical_date] [--conf conf]`` (as ``dag.test()``) with ``extra``
        environment (connections, variables); runs on different logical dates in one home see each
        other's XCom."""
        return self._dag_test(dag_id, extra, timeout, logical_date, conf=conf)

    def leave_xcom(
        self, dag_id: str, task_id: str, key: str, value: Any, logical_date: str, timeout: float = 300
    ) -> DagRunResult:
        """Stand in for an earlier run of ``dag_id`` on ``logical_date``: its tasks marked successful
        (not run) and ``task_id``'s XCom ``key`` set to ``value``, as the task would have left it."""
        return self._dag_test(dag_id, {}, timeout, logical_date, leave=(task_id, key, value))

    def leave_nights(self, dag_id: str, nights: list[dict[str, Any]], timeout: float = 600) -> DagRunResult:
        """Stand in for a season of earlier runs of ``dag_id`` at once (``dag_test.py --leave-nights``):
        per night ``{"logical_date", "minutes", "xcom": {task_id: {key: value}}}``, a DAG run dated as
        that night ran, its tasks marked successful and its XComs set; ``summary["run_ids"]``."""
        with tempfile.TemporaryDirectory(prefix="loadtest-nights-") as scratch:
            source = Path(scratch) / "nights.json"
            source.write_text(json.dumps(nights))
            return self._dag_test(dag_id, {}, timeout, None, nights=source)

    def _dag_test(
        self,
        dag_id: str,
        extra: dict[str, str],
        timeout: float,
        logical_date: str | None,
        *,
        conf: dict[str, Any] | None = None,
        leave: tuple[str, str, Any] | None = None,
        nights: Path | None = None,
    ) -> DagRunResult:
        with tempfile.TemporaryDirectory(prefix="loadtest-dag-test-") as scratch:
            summary_path = Path(scratch) / "summary.json"
            started = time.monotonic()
            argv = [
                sys.executable,
                DAG_TEST,
                dag_id,
                str(summary_path),
                *([logical_date] if logical_date else []),
                *(["--conf", json.dumps(conf)] if conf is not None else []),
                *(["--leave-xcom", leave[0], leave[1], json.dumps(leave[2])] if leave else []),
                *(["--leave-nights", str(nights)] if nights else []),
            ]
            done = self._run(argv, extra, timeout)
            seconds = time.monotonic() - started
            summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        return DagRunResult(done.returncode, done.stdout + done.stderr, seconds, self.path, summary)


def connection_env(url: str, api_key: str) -> dict[str, str]:
    """The ``loadtest_default`` connection as an environment variable."""
    return {
        "AIRFLOW_CONN_LOADTEST_DEFAULT": json.dumps(
            {"conn_type": "loadtest", "host": url, "password": api_key}
        )
    }
