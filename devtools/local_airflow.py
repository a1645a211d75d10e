"""Run DAGs in a throwaway local Airflow (``airflow dags test``) and read back what happened.

Used by ``make demo`` and the end-to-end tests, and handy in your own DAG tests: a real scheduler loop,
task runner and triggerer, each run in a subprocess, with results read from the metadata database.
Imports nothing heavy: Airflow runs in the subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


@dataclass
class DagRunResult:
    """What ``airflow dags test`` did: its exit code and output, and the database to query."""

    returncode: int
    output: str
    seconds: float
    home: Path

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0

    def _query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.home / "airflow.db") as db:
            return db.execute(sql, args).fetchall()

    def task_states(self, dag_id: str) -> dict[str, tuple[str, int]]:
        """task_id -> (state, try_number) of the latest run of ``dag_id``."""
        rows = self._query(
            "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ? AND run_id = "
            "(SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1)",
            dag_id,
            dag_id,
        )
        return {task: (state, tries) for task, state, tries in rows}

    def xcom(self, dag_id: str, task_id: str, key: str = "return_value") -> Any:
        rows = self._query(
            "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = ? "
            "ORDER BY dag_run_id DESC LIMIT 1",
            dag_id,
            task_id,
            key,
        )
        if not rows:
            return None
        value = rows[0][0]
        return json.loads(value) if isinstance(value, (str, bytes)) else value


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
        self, dag_id: str, extra: dict[str, str], timeout: float = 300, logical_date: str | None = None
    ) -> DagRunResult:
        """``airflow dags test dag_id [logical_date]`` with ``extra`` environment (connections,
        variables); runs on different logical dates in one home see each other's XCom."""
        started = time.monotonic()
        argv = [AIRFLOW, "dags", "test", dag_id, *([logical_date] if logical_date else [])]
        done = self._run(argv, extra, timeout)
        return DagRunResult(done.returncode, done.stdout + done.stderr, time.monotonic() - started, self.path)


def connection_env(url: str, api_key: str) -> dict[str, str]:
    """The ``loadtest_default`` connection as an environment variable."""
    return {
        "AIRFLOW_CONN_LOADTEST_DEFAULT": json.dumps(
            {"conn_type": "loadtest", "host": url, "password": api_key}
        )
    }
