"""The "Load tests" view under the attack of issue 35, in a real API server (Airflow's app under uvicorn,
in this process, on 127.0.0.1): what a view costs when XCom is large and many look at once.

Seeded (``--seed``, in its own process, so the measuring process's peak memory is the views' own):

- ``attack_many``: ``tasks`` gated tasks x ``nights`` nights x ``rows`` gate rows (300 x 90 x 50: before
  issue 35 the DAG's tab cost 32-37 s of CPU per view, all before the first byte);
- ``attack_notes``: ``notes`` nights whose gate rows carry a note of ``note_mb`` MB each (20 x 25 MB:
  the process went from 228 to 732 MB, for good);
- ``attack_nested``: 3 nights, one of them a value nested 1,000 levels deep (a direct database write:
  a 500 before).

Measured (``--measure``): the DAG's tab cold (nothing decoded yet) and warm: CPU of the process per
view, wall time, bytes, the database connections checked out at most (the pool's own events); the peak
RSS of the process (``ru_maxrss``); ``viewers`` simultaneous cold views (CPU, wall, answers, connections
at most, and the slowest answer of Airflow's own ``dagRuns`` list meanwhile); two viewers who hang up
after ``HANG_UP_S`` (the CPU the process still spends once they left); the notes' DAG (RSS growth kept
after the views); the nested value (the answer's status).

    .venv/bin/python benchmarks/view_attack.py --seed|--measure PATH [--small]
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import resource
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

MANY, NOTES, NESTED = "attack_many", "attack_notes", "attack_nested"
TASK = "run_load_test"
#: Full size (the issue's attack) and the smoke size CI runs.
SIZES = {
    "full": {"tasks": 300, "nights": 90, "rows": 50, "notes": 20, "note_mb": 25, "viewers": 20},
    "small": {"tasks": 12, "nights": 8, "rows": 10, "notes": 3, "note_mb": 1, "viewers": 4},
}
#: How long a viewer who hangs up reads before leaving, and how long the CPU is watched after.
HANG_UP_S, WATCH_S = 0.3, 3.0


def _rows(count: int, night: int, note: str | None = None) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        row = {"metric": f"METRIC_{i:02d}", "value": 400.0 + (night * 7 + i) % 50, "passed": True}
        rows.append({**row, "status": "pass", "budget": "<= 1000", **({"note": note} if note else {})})
    return rows


def _seed_dag(dag_id: str, tasks: list[str], nights: int, value: Any) -> None:
    """``nights`` DAG runs of ``dag_id``, each with a run record and ``value(night)`` for every task,
    written as the Task Execution API stores them (a ``str`` value: written as its text, as a direct
    database write stores it)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    start = datetime(2026, 1, 1, 2, tzinfo=UTC)
    with create_session() as session:
        dag = {"dag_id": dag_id, "bundle_name": "bench", "max_active_tasks": 16}
        dag.update(max_consecutive_failed_dag_runs=0, has_task_concurrency_limits=False)
        session.execute(DagModel.__table__.insert(), [dag])
        runs = [
            {
                "dag_id": dag_id,
                "run_id": f"scheduled__{night:04d}",
                "logical_date": start + timedelta(days=night),
                "run_after": start + timedelta(days=night),
                "run_type": "scheduled",
                "state": "success",
            }
            for night in range(nights)
        ]
        session.execute(DagRun.__table__.insert(), runs)
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id).where(DagRun.dag_id == dag_id)).all())
    for night in range(nights):  # a night at a time: the seeding's memory stays that of one night
        run_id = f"scheduled__{night:04d}"
        made = value(night)
        with create_session() as session:
            tis, xcoms = [], []
            for task in tasks:
                tis.append({"dag_id": dag_id, "task_id": task, "run_id": run_id, "map_index": -1})
                tis[-1].update(state="success", try_number=1, pool="default_pool", pool_slots=1)
                for key, stored in (
                    ("loadtest_run", {"bench_result_id": f"br-{night}"}),
                    ("return_value", made),
                ):
                    xcoms.append(
                        {
                            "dag_run_id": ids[run_id],
                            "task_id": task,
                            "map_index": -1,
                            "key": key,
                            "dag_id": dag_id,
                            "run_id": run_id,
                            "value": None if isinstance(stored, str) else stored,
                        }
                    )
            session.execute(TaskInstance.__table__.insert(), tis)
            session.execute(XComModel.__table__.insert(), xcoms)
            if isinstance(made, str):
                session.connection().exec_driver_sql(
                    "UPDATE xcom SET value = ? WHERE dag_run_id = ? AND key = 'return_value'",
                    (made, ids[run_id]),
                )


def seed(size: dict[str, int]) -> None:
    tasks = [f"gate_{i:03d}" for i in range(size["tasks"])]
    _seed_dag(
        MANY,
        tasks,
        size["nights"],
        lambda night: {"bench_result_id": f"br-{night}", "gate": _rows(size["rows"], night)},
    )
    note = "n" * (size["note_mb"] * 2**20)
    _seed_dag(NOTES, [TASK], size["notes"], lambda night: {"gate": _rows(3, night, note)})
    deep = "[" * 1000 + "]" * 1000
    _seed_dag(NESTED, [TASK], 3, lambda night: deep if night == 1 else {"gate": _rows(3, night)})


# --- measuring, against a real server ---------------------------------------------------------------------


class Server:
    """Airflow's API app (the plugin mounted from its entry point) under uvicorn, in this process."""

    def __init__(self) -> None:
        import uvicorn
        from airflow.api_fastapi.app import create_app, get_auth_manager
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

        app = create_app()
        self.token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="viewer", role="viewer"))
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        threading.Thread(target=self.server.run, daemon=True).start()
        while not self.server.started:
            time.sleep(0.05)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def get(self, path: str) -> tuple[int, int, float]:
        """Status, body bytes, wall seconds of one GET."""
        began = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        connection.request("GET", path, headers={"Authorization": f"Bearer {self.token}"})
        answer = connection.getresponse()
        body = answer.read()
        connection.close()
        return answer.status, len(body), time.perf_counter() - began

    def hang_up(self, path: str, after: float) -> None:
        """A viewer who reads the start of ``path`` and leaves after ``after`` seconds."""
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n\r\n"
            sock.sendall(request.encode())
            sock.recv(4096)
            time.sleep(after)

    def stop(self) -> None:
        self.server.should_exit = True


class Connections:
    """The pool's connections checked out now and at most (SQLAlchemy's pool events)."""

    def __init__(self) -> None:
        from airflow import settings
        from sqlalchemy import event

        self.now = self.most = 0
        self.lock = threading.Lock()
        engine = settings.engine
        assert engine is not None  # Airflow's ORM is configured on import
        event.listen(engine, "checkout", self._out)
        event.listen(engine, "checkin", self._in)

    def _out(self, *_: Any) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def _in(self, *_: Any) -> None:
        with self.lock:
            self.now -= 1

    def reset(self) -> None:
        with self.lock:
            self.most = self.now


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(size: dict[str, int]) -> dict[str, Any]:
    from airflow_provider_loadtest.plugins.decoded import RESULTS

    server = Server()
    held = Connections()
    dag_tab = f"/loadtest/dags/{MANY}"
    figures: dict[str, Any] = {"size": size}
    try:

        def one(path: str, cold: bool) -> dict[str, float]:
            if cold:
                RESULTS.clear()
            held.reset()
            began = time.process_time()
            code, length, wall = server.get(path)
            assert code == 200, (path, code)
            return {
                "cpu_ms": (time.process_time() - began) * 1000,
                "wall_ms": wall * 1000,
                "bytes": length,
                "connections": held.most,
            }

        server.get(dag_tab)  # the template, Airflow's first-request work
        figures["dag_tab_cold"] = one(dag_tab, cold=True)
        figures["dag_tab_warm"] = one(dag_tab, cold=False)
        figures["peak_rss_mb_after_views"] = peak_mb()

        figures["concurrent"] = crowd(server, held, dag_tab, size["viewers"])
        figures["hang_up"] = hang_ups(server, dag_tab)
        figures["notes"] = notes(server, size)
        code, _, _ = server.get(f"/loadtest/dags/{NESTED}/tasks/{TASK}")
        figures["nested"] = {"status": code}
        figures["peak_rss_mb"] = peak_mb()
    finally:
        server.stop()
    return figures


def crowd(server: Server, held: Connections, dag_tab: str, viewers: int) -> dict[str, Any]:
    """``viewers`` simultaneous cold views of ``dag_tab``, and Airflow's own API meanwhile."""
    from airflow_provider_loadtest.plugins.decoded import RESULTS

    RESULTS.clear()
    held.reset()
    codes: list[int] = []
    api: list[float] = []
    storm = threading.Event()

    def viewer() -> None:
        codes.append(server.get(dag_tab)[0])

    def airflow_api() -> None:
        while not storm.is_set():
            api.append(server.get("/api/v2/dags/~/dagRuns?limit=1")[2] * 1000)
            time.sleep(0.1)

    watcher = threading.Thread(target=airflow_api)
    watcher.start()
    threads = [threading.Thread(target=viewer) for _ in range(viewers)]
    began, began_cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    storm.set()
    watcher.join()
    return {
        "viewers": viewers,
        "wall_s": time.perf_counter() - began,
        "cpu_s": time.process_time() - began_cpu,
        "answers": {str(c): codes.count(c) for c in sorted(set(codes))},
        "connections": held.most,
        "airflow_api_max_ms": max(api) if api else 0.0,
        "peak_rss_mb": peak_mb(),
    }


def hang_ups(server: Server, dag_tab: str) -> dict[str, float]:
    """Two cold viewers who hang up after ``HANG_UP_S``: the CPU spent once they left, beyond an idle
    process's over as long."""
    from airflow_provider_loadtest.plugins.decoded import RESULTS

    RESULTS.clear()
    time.sleep(0.5)
    idle = time.process_time()
    time.sleep(WATCH_S)
    idle_cpu = time.process_time() - idle
    leavers = [threading.Thread(target=server.hang_up, args=(dag_tab, HANG_UP_S)) for _ in range(2)]
    began_cpu = time.process_time()
    for thread in leavers:
        thread.start()
    for thread in leavers:
        thread.join()
    left = time.process_time()
    time.sleep(WATCH_S)
    return {
        "cpu_while_reading_s": left - began_cpu,
        "cpu_after_leaving_s": time.process_time() - left - idle_cpu,
        "watched_s": WATCH_S,
    }


def notes(server: Server, size: dict[str, int]) -> dict[str, float]:
    """The notes' DAG viewed (its tab, its task's, its JSON): the RSS the process keeps after."""
    from airflow_provider_loadtest.plugins.decoded import RESULTS

    RESULTS.clear()
    gc.collect()
    before = rss_mb()
    for path in (
        f"/loadtest/dags/{NOTES}",
        f"/loadtest/dags/{NOTES}/tasks/{TASK}",
        f"/loadtest/api/dags/{NOTES}/tasks/{TASK}",
    ):
        code, _, _ = server.get(path)
        assert code == 200, (path, code)
    gc.collect()
    return {
        "nights": size["notes"],
        "note_mb": size["note_mb"],
        "rss_growth_mb": rss_mb() - before,
        "kept_bytes": RESULTS.bytes,
    }


def report(figures: dict[str, Any]) -> list[str]:
    """The attack's figures as lines."""
    size, cold, warm = figures["size"], figures["dag_tab_cold"], figures["dag_tab_warm"]
    many, gone, noted = figures["concurrent"], figures["hang_up"], figures["notes"]
    peak = figures["peak_rss_mb_after_views"]
    return [
        f"The attack (issue 35): a DAG of {size['tasks']} gated tasks x {size['nights']} nights x "
        f"{size['rows']} rows, its tab (a real server, uvicorn on 127.0.0.1):",
        f"  cold: {cold['cpu_ms']:.0f} ms of CPU, {cold['wall_ms']:.0f} ms wall, "
        f"{cold['bytes'] / 2**20:.1f} MiB, {cold['connections']} database connection(s) at most",
        f"  warm: {warm['cpu_ms']:.0f} ms of CPU, {warm['wall_ms']:.0f} ms wall, "
        f"{warm['connections']} connection(s) at most; peak RSS of the process {peak:.0f} MB",
        f"  {many['viewers']} simultaneous cold viewers: {many['wall_s']:.1f} s wall, "
        f"{many['cpu_s']:.1f} s of CPU, answers {many['answers']}, {many['connections']} "
        f"connection(s) at most (Airflow's pool: 5 + 10), Airflow's own dagRuns list answered in "
        f"{many['airflow_api_max_ms']:.0f} ms at worst meanwhile; peak RSS {many['peak_rss_mb']:.0f} MB",
        f"  2 viewers who hang up after {HANG_UP_S:g} s: {gone['cpu_while_reading_s']:.2f} s of CPU "
        f"while they read, {gone['cpu_after_leaving_s']:.2f} s in the {gone['watched_s']:g} s "
        "after they left",
        f"  {noted['nights']} nights with a {noted['note_mb']} MB note each (tab, task tab, JSON): RSS "
        f"{noted['rss_growth_mb']:+.0f} MB kept, {noted['kept_bytes'] / 2**20:.2f} MiB of results kept",
        f"  a value nested 1,000 deep: HTTP {figures['nested']['status']}; "
        f"peak RSS {figures['peak_rss_mb']:.0f} MB",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", action="store_true")
    parser.add_argument("--measure", type=Path)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    size = SIZES["small" if args.small else "full"]
    if args.seed:
        seed(size)
    if args.measure:
        args.measure.write_text(json.dumps(measure(size)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
