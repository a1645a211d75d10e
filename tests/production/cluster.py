"""Airflow as an operator deploys it: PostgreSQL, Celery on Redis, every component its own service.

``ProdCluster`` runs, from one AIRFLOW_HOME: an API server, a scheduler, a DAG processor, two
triggerers and two Celery workers, each in its own process group and restarted when it dies (as a
service manager with ``Restart=always`` would), except while an attack holds it. Every component is
named after the host it stands for (``tests.production.hostname``), so the database says which worker
runs a task instance and which triggerer holds a trigger. Log servers are not started
(``--skip-serve-logs``: they would bind every interface); the API server binds 127.0.0.1.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from airflow_provider_loadtest.simulator import SimulatorHandle
from devtools.airflow_cluster import AirflowProcesses, clean_environ, free_port, wait_for
from tests.production.services import Postgres, Redis

DAG_SOURCE = Path(__file__).with_name("dags") / "prod_dags.py"
DAG_IDS = ("prod_sync", "prod_deferrable")
TASK_ID = "load_test"

#: Shortened from Airflow's defaults (300 s and 30 s) so a lost worker or triggerer is noticed within a
#: round, yet longer than the database outage, so the scheduler never declares a task dead for the
#: outage alone: what fails a task then is its own supervisor (``[workers] max_failed_heartbeats``).
TASK_HEARTBEAT_TIMEOUT_S = 60
TRIGGERER_HEALTH_THRESHOLD_S = 10
STARTUP_TIMEOUT_S = 420.0
RESTART_AFTER_S = 5.0  # RestartSec

WORKERS = ("worker-1", "worker-2")
TRIGGERERS = ("triggerer-1", "triggerer-2")


@dataclass(frozen=True)
class Component:
    command: str
    args: tuple[str, ...] = ()


class ProdCluster(AirflowProcesses):
    """The components of one production-like deployment, and what the attacks need to see and do."""

    def __init__(self, home: Path, sim: SimulatorHandle, pg: Postgres, broker: Redis) -> None:
        self.sim = sim
        self.pg = pg
        self.port = free_port()
        env = clean_environ()
        env.update(
            AIRFLOW_HOME=str(home),
            AIRFLOW__CORE__DAGS_FOLDER=str(home / "dags"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__UNIT_TEST_MODE="False",
            AIRFLOW__CORE__EXECUTOR="CeleryExecutor",
            AIRFLOW__CORE__PARALLELISM="32",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__CORE__HOSTNAME_CALLABLE="tests.production.hostname.from_env",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{self.port}/execution/",
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=pg.url,
            AIRFLOW__CELERY__BROKER_URL=broker.url,
            # SQLAlchemy 2.x names the driver: Celery's plain db+postgresql:// would not load.
            AIRFLOW__CELERY__RESULT_BACKEND=f"db+{pg.url}",
            AIRFLOW__CELERY__WORKER_CONCURRENCY="4",
            AIRFLOW__CELERY__SYNC_PARALLELISM="1",
            AIRFLOW__API__HOST="127.0.0.1",
            AIRFLOW__API__PORT=str(self.port),
            AIRFLOW__API__WORKERS="1",
            AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
            AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT=str(TASK_HEARTBEAT_TIMEOUT_S),
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL="5",
            AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="5",
            AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC="1",
            AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD=str(TRIGGERER_HEALTH_THRESHOLD_S),
            AIRFLOW_CONN_LOADTEST_DEFAULT=json.dumps(
                {"conn_type": "loadtest", "host": sim.url, "password": sim.api_key}
            ),
        )
        super().__init__(home, env)
        (home / "dags").mkdir(parents=True, exist_ok=True)
        (home / "dags" / DAG_SOURCE.name).write_text(DAG_SOURCE.read_text())
        self.components: dict[str, Component] = {
            "api-server": Component("api-server"),
            "scheduler": Component("scheduler", ("--skip-serve-logs",)),
            "dag-processor": Component("dag-processor"),
            **{name: Component("triggerer", ("--skip-serve-logs",)) for name in TRIGGERERS},
            **{
                name: Component("celery", ("worker", "--skip-serve-logs", "--celery-hostname", f"{name}@%h"))
                for name in WORKERS
            },
        }
        #: Environment for some components only (``production_rig(loaded=True)``: slow state reads).
        self.component_env: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()
        self._held: set[str] = set()
        self._closing = threading.Event()
        self._watcher: threading.Thread | None = None
        self.restarts: list[tuple[float, str, int | None]] = []
        self._token: str | None = None
        self._http = requests.Session()
        self.keep_home = False

    # --- the services ---------------------------------------------------------------------------

    def boot(self) -> None:
        """Migrate the database, start every component, wait until each does its job."""
        self.run(["db", "migrate"], timeout=600)
        for name in self.components:
            self.start_component(name)
        self._watcher = threading.Thread(target=self._watch, name="rig-restarts", daemon=True)
        self._watcher.start()
        try:
            wait_for("the API server", self._api_up, STARTUP_TIMEOUT_S, every=2)
            wait_for(
                "the DAGs to be parsed",
                lambda: len(self.query("select dag_id from dag where dag_id like 'prod_%%'")) == len(DAG_IDS),
                STARTUP_TIMEOUT_S,
                every=2,
            )
            wait_for("both triggerers", lambda: len(self.alive_triggerers()) == len(TRIGGERERS), 120, 2)
            wait_for("both Celery workers", lambda: all(self.worker_ready(w) for w in WORKERS), 180, 2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.log_tail()}") from None

    def start_component(self, name: str) -> None:
        spec = self.components[name]
        with self._lock:
            env = {"LOADTEST_RIG_HOSTNAME": name, **self.component_env.get(name, {})}
            self.start(name, *spec.args, command=spec.command, env=env)

    def close(self) -> None:
        self._closing.set()
        if self._watcher is not None:
            self._watcher.join(10)
        with self._lock:
            self.stop_all()

    @contextmanager
    def held(self, *names: str) -> Iterator[None]:
        """Leave ``names`` to the caller (an attack): not restarted while held, restarted if dead after."""
        with self._lock:
            self._held.update(names)
        try:
            yield
        finally:
            with self._lock:
                self._held.difference_update(names)
                for name in names:
                    if not self.alive(name):
                        self.start_component(name)

    def _watch(self) -> None:
        """``Restart=always``: a component that exited unasked is started again after RestartSec."""
        dead_since: dict[str, float] = {}
        while not self._closing.wait(1.0):
            with self._lock:
                for name in self.components:
                    if name in self._held or self.alive(name):
                        dead_since.pop(name, None)
                        continue
                    first = dead_since.setdefault(name, time.monotonic())
                    if time.monotonic() - first >= RESTART_AFTER_S:
                        proc = self.procs.get(name)
                        code = proc.returncode if proc is not None else None
                        self.restarts.append((time.time(), name, code))
                        self.start_component(name)
                        dead_since.pop(name, None)

    def worker_ready(self, name: str) -> bool:
        log = self.home / f"{name}.log"
        return (
            self.alive(name)
            and log.exists()
            and f"{name}@" in log.read_text(errors="replace")
            and (" ready." in log.read_text(errors="replace"))
        )

    # --- what Airflow knows (its database) ------------------------------------------------------

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of ``sql``; [] while the database is down (callers poll)."""
        import psycopg2  # the prod group's: the rig's checks import this module without it

        try:
            conn = psycopg2.connect(self.pg.dsn(), connect_timeout=3)
        except psycopg2.OperationalError:
            return []
        try:
            with conn, conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        except psycopg2.Error:
            return []
        finally:
            conn.close()

    def alive_triggerers(self) -> dict[str, int]:
        """Triggerer name -> its running job id, for the triggerers that heartbeat lately."""
        rows = self.query(
            "select hostname, max(id) from job where job_type = 'TriggererJob' and state = 'running' "
            "and latest_heartbeat > now() - make_interval(secs => %s) group by hostname",
            TRIGGERER_HEALTH_THRESHOLD_S,
        )
        return {str(host): int(job) for host, job in rows}

    def task_instance(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        rows = self.query(
            "select ti.state, ti.try_number, ti.max_tries, ti.hostname, ti.start_date, ti.end_date, "
            "j.hostname from task_instance ti left join trigger t on t.id = ti.trigger_id "
            "left join job j on j.id = t.triggerer_id "
            "where ti.dag_id = %s and ti.run_id = %s and ti.task_id = %s",
            dag_id,
            run_id,
            TASK_ID,
        )
        if not rows:
            return None
        state, try_number, max_tries, host, start, end, triggerer = rows[0]
        return {
            "state": state,
            "try_number": try_number,
            "max_tries": max_tries,
            "hostname": host,
            "start_date": start,
            "end_date": end,
            "triggerer": triggerer,
        }

    def dag_run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.query("select state from dag_run where dag_id = %s and run_id = %s", dag_id, run_id)
        return str(rows[0][0]) if rows else None

    # --- what a person does (the REST API) ------------------------------------------------------

    def _api_up(self) -> bool:
        try:
            return self._http.get(f"{self.api_url}/api/v2/monitor/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call the public REST API as an admin (the simple auth manager's all-admins token)."""
        for _ in range(2):
            if self._token is None:
                got = self._http.get(f"{self.api_url}/auth/token", timeout=30)
                got.raise_for_status()
                self._token = got.json()["access_token"]
            answer = self._http.request(
                method,
                f"{self.api_url}/api/v2{path}",
                json=body,
                headers={"Authorization": f"Bearer {self._token}"},
                timeout=60,
            )
            if answer.status_code == 401:
                self._token = None
                continue
            if answer.status_code >= 400:
                raise AssertionError(f"{method} {path}: {answer.status_code} {answer.text[:500]}")
            return answer.json() if answer.content else None
        raise AssertionError(f"{method} {path}: refused twice (401)")

    def trigger(self, dag_id: str, run_id: str, conf: dict[str, Any]) -> None:
        self.api(
            "POST", f"/dags/{dag_id}/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf}
        )

    def clear(self, dag_id: str, run_id: str) -> None:
        """What the UI's "Clear" does on one running task instance."""
        self.api(
            "POST",
            f"/dags/{dag_id}/clearTaskInstances",
            {
                "dry_run": False,
                "dag_run_id": run_id,
                "task_ids": [TASK_ID],
                "only_failed": False,
                "reset_dag_runs": True,
            },
        )

    def mark_failed(self, dag_id: str, run_id: str) -> None:
        """What the UI's "Mark as failed" does on one task instance."""
        self.api("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{TASK_ID}", {"new_state": "failed"})

    # --- where a task instance's logs are ----------------------------------------------------------

    def task_log_folder(self, dag_id: str, run_id: str) -> Path:
        return self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={TASK_ID}"

    def task_logs(self, dag_id: str, run_id: str) -> dict[str, str]:
        """File name -> text of every log of the task instance: one per try, and the triggerers'."""
        folder = self.task_log_folder(dag_id, run_id)
        if not folder.exists():
            return {}
        return {p.name: p.read_text(errors="replace") for p in sorted(folder.glob("*.log*"))}

    def component_names(self, prefix: str) -> Sequence[str]:
        return [name for name in self.components if name.startswith(prefix)]
