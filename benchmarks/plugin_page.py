"""The "Load tests" view's server time with a year of history, beside Airflow's own list of DAG runs.

A throwaway Airflow home (SQLite, migrated) gets ``--nights`` nights of ``loadtest_release_gate``: DAG
runs, task instances and the XCom that ``RunScenarioOperator`` leaves (its run record and its
``return_value`` with the gate's four rows, judged by the gate's own code against the history of the
nights before, ``baseline="history"``: noise, suspected nights, a step every 97 nights that fails until
a person accepts it). Then Airflow's own API app
(the plugin mounted from its entry point, as the API server does; the simple auth manager, a viewer's
JWT) answers, interleaved, round after round:

- the DAG's tab (``/loadtest/dags/<dag>?nights=N``: every night as charts and a table),
- the task's tab (``/loadtest/dags/<dag>/tasks/<task>?nights=N``),
- the same history as JSON,
- the baseline: Airflow's own ``GET /api/v2/dags/~/dagRuns?limit=100`` (a page of the same DAG's runs,
  the only DAG here, through the same app, auth and database).

Beside it, in the same home, the gates that stress the page's bounds (issue 28):

- ``loadtest_wide_gate``: a gate of 201 series (p95 of all requests and of 200 transactions) over a
  year (365 nights): the budget is its task's tab, as the release gate's;
- ``loadtest_hostile_20000`` and ``_40000``: one night of the release gate whose ``return_value`` holds
  20,000 (40,000) distinct gate rows, as any user allowed to run the DAG can write (before the bounds:
  12 s and 60 MB, 37 s and 118 MB): the task's tab with that night.

Each API server process keeps the results it decoded (``plugins/decoded.py``): the figures are of a
page whose nights an earlier view decoded, and the gate of 201 series is also measured with none
decoded yet (as after a restart), its breakdowns too.

Each figure is the median CPU time of one request inside the process (no network: what the API server
spends on it), with its spread, and the wall time beside it (on a shared machine the wall time also
counts the waits for a core: the load average is printed). The budget is the issue's: the task's tab
with 365 nights under 200 ms on 2 cores, for the release gate and for the gate of 201 series. A
breakdown of one task-tab answer (database, history and charts, template) follows.

The run fails (exit 1) when a figure that does not depend on the machine breaks its bound: a page
larger than ``bounds.PAGE_BYTES`` (sizes are exact), a hostile page costing more than
``HOSTILE_VS_BASELINE`` times Airflow's own list of runs (before the bounds: 300x and more), or the gate
of 201 series more than ``WIDE_VS_BASELINE`` times (about 6x is the 200 ms budget; 45x before), or
with none of its nights decoded more than ``WIDE_COLD_VS_BASELINE`` times: ratios in the same run, so a
slow machine does not fail them. CI runs it in its smoke size (``make bench
BENCH_ARGS=--smoke``).

Then the attack of issue 35 (``benchmarks/view_attack.py``, in the same home, a real server): a DAG of
300 gated tasks x 90 nights x 50 rows cold and warm (CPU per view, peak RSS, database connections held),
20 simultaneous viewers, viewers who hang up, 20 nights of a 25 MB note, a value nested 1,000 deep
(``--smoke``: a small attack, 30 nights, 2 rounds).

    .venv/bin/python benchmarks/plugin_page.py [--nights 365] [--rounds 15] [--json PATH] [--build-only]
                                               [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import airflow_env, spread, table  # noqa: E402

DAG_ID = "loadtest_release_gate"
WIDE_DAG_ID = "loadtest_wide_gate"
TASK_ID = "run_load_test"
BUDGET_MS = 200.0
#: The gate of 201 series: p95 of all requests and of this many transactions, over a year.
WIDE_TRANSACTIONS, WIDE_NIGHTS = 200, 365
#: One night's distinct gate rows in the hostile DAGs.
HOSTILE_ROWS = (20_000, 40_000)
#: What a hostile page and the gate of 201 series may cost, in times Airflow's own ``dagRuns`` list in
#: the same run: before the bounds, 300x and more, and 45x; the 200 ms budget is about 6x on an idle
#: machine, so twice that is a regression, not noise.
HOSTILE_VS_BASELINE = 30.0
WIDE_VS_BASELINE = 12.0
#: The gate of 201 series with none of its nights decoded (as after a restart): 11 to 14x before the
#: fast paths over a night's rows, 9 to 11x with them (the 200 ms budget is about 7x, not met: decoding
#: its 32 MB of JSON alone is 80 to 100 ms); twice that is a regression (45x when ``json`` decoded it).
WIDE_COLD_VS_BASELINE = 20.0
BASELINE = "baseline: Airflow's GET /api/v2/dags/~/dagRuns?limit=100"
WIDE = f"ours: the task's tab of a gate of {WIDE_TRANSACTIONS + 1} series, {WIDE_NIGHTS} nights"
WIDE_COLD = f"{WIDE}, none decoded yet"


def hostile(rows: int) -> str:
    return f"ours: the task's tab, one night of {rows:,} gate rows"


AIRFLOW = str(Path(sys.executable).with_name("airflow"))


#: The release gate's settings (example_dags/loadtest_release_gate.py): budgets, and regression bounds
#: judged against the history of the last passing nights.
BUDGETS = {
    "RESPONSE_TIME_PERCENTILE_95": "<= 1000",
    "ERRORS_PERCENT": "< 1",
    "HITS_SUCCESSFUL_PERCENT": ">= 99",
}
BOUNDS = {"RESPONSE_TIME_PERCENTILE_95": 10, "RESPONSE_TIME_AVG": 10}
#: Every this many nights the service gets 20 % slower; a person accepts it on the third failing night.
STEP_EVERY, STEP_AT, ACCEPT_AFTER = 97, 50, 2


def nightly_gates(nights: int, rng: random.Random) -> list[list[dict[str, Any]]]:
    """Each night's gate rows as the wired gate writes them (``GateRow.to_xcom()``): judged by the gate's
    own code (``baseline="history"``) against the history the nights before left, with 4 % of noise
    from night to night, a step now and then, and the person who accepts it."""
    from airflow_provider_loadtest.decisions.gate import GateSpec, judge_history
    from airflow_provider_loadtest.decisions.history import GateHistory

    spec = GateSpec.parse(BUDGETS, BOUNDS, "history")
    history, level, written = GateHistory(), 468.0, []
    for night in range(nights):
        if night % STEP_EVERY == STEP_AT:
            level *= 1.2
        p95 = round(level * rng.lognormvariate(0, 0.04), 1)
        errors = round(abs(rng.gauss(0.4, 0.1)), 2)
        values = {
            "RESPONSE_TIME_PERCENTILE_95": p95,
            "RESPONSE_TIME_AVG": round(p95 / 1.95, 1),
            "ERRORS_PERCENT": errors,
            "HITS_SUCCESSFUL_PERCENT": round(100 - errors, 2),
        }
        accept = night % STEP_EVERY == STEP_AT + ACCEPT_AFTER
        rows, after = judge_history(
            spec, values, None, history=history, accepted=spec.metric_ids if accept else ()
        )
        history = after or history
        written.append([row.to_xcom() for row in rows])
    return written


def hostile_dag(rows: int) -> str:
    return f"loadtest_hostile_{rows}"


def wide_gates(gates: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The release gate's nights with 201 series: the run's p95 row and, per transaction, the same row
    judged the same way (scaled: each transaction its own level), as ``GateRow.to_xcom()`` writes it."""
    scaled = ("value", "baseline", "centre", "noise", "band_low", "band_high")
    wide = []
    for gate in gates:
        p95 = gate[0]
        rows = [p95]
        for i in range(WIDE_TRANSACTIONS):
            factor = 0.2 + i / WIDE_TRANSACTIONS
            row = {k: (v * factor if k in scaled and isinstance(v, float) else v) for k, v in p95.items()}
            rows.append({**row, "transaction": f"Transaction {i:03d}"})
        wide.append(rows)
    return wide


def hostile_gate(gate: list[dict[str, Any]], rows: int) -> list[dict[str, Any]]:
    """A night's gate with ``rows`` distinct rows added (each its own metric and transaction, a few
    failing): what a DAG's author can write into its ``return_value``."""
    extra = [
        {**gate[0], "metric": f"METRIC_{i % 97}", "transaction": f"label {i}", "passed": i % 50 != 0}
        for i in range(rows)
    ]
    return [*gate, *extra]


def seed(nights: int) -> None:
    """``nights`` nights of the release gate in this home's database, as the operator leaves them;
    a year of the gate of 201 series; the hostile nights."""
    from airflow.models.dagbundle import DagBundleModel
    from airflow.utils.session import create_session

    with create_session() as session:
        session.execute(DagBundleModel.__table__.insert(), [{"name": "bench"}])
    rng = random.Random(7)  # noqa: S311 - seeded figures, not secrets
    gates = nightly_gates(max(nights, WIDE_NIGHTS), rng)
    seed_dag(DAG_ID, gates[:nights])
    seed_dag(WIDE_DAG_ID, wide_gates(gates[:WIDE_NIGHTS]))
    for rows in HOSTILE_ROWS:
        seed_dag(hostile_dag(rows), [*gates[:29], hostile_gate(gates[29], rows)])


def seed_dag(dag_id: str, gates: list[list[dict[str, Any]]]) -> None:
    """One DAG's nights, one per gate, as the operator leaves them."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    start = datetime(2026, 1, 1, 2, tzinfo=UTC)
    runs, tis, values = [], [], {}
    for i, gate in enumerate(gates):
        at = start + timedelta(days=i)
        run_id = f"scheduled__{at.isoformat()}"
        passed = all(r["passed"] for r in gate)
        state = "success" if passed else "failed"
        runs.append(
            {
                "dag_id": dag_id,
                "run_id": run_id,
                "logical_date": at,
                "run_after": at,
                "data_interval_start": at - timedelta(days=1),
                "data_interval_end": at,
                "run_type": "scheduled",
                "state": state,
                "start_date": at,
                "end_date": at + timedelta(minutes=40),
            }
        )
        tis.append(
            {
                "dag_id": dag_id,
                "task_id": TASK_ID,
                "run_id": run_id,
                "map_index": -1,
                "state": state,
                "try_number": 1,
                "pool": "default_pool",
                "pool_slots": 1,
                "operator": "RunScenarioOperator",
                "start_date": at,
                "end_date": at + timedelta(minutes=40),
            }
        )
        record = {
            "scenario_id": "demo-scenario",
            "report_id": f"report-{i}",
            "bench_result_id": f"br-{i}",
            "project_id": "demo-project",
            "template_id": "tpl-1",
            "workspace_id": "demo-workspace",
            "test_name": f"release gate {at:%Y-%m-%d}",
            "report_url": f"https://api.example/ui/workspace/w/project/p/analysis/report/report-{i}",
            "started_at": at.timestamp(),
        }
        result = {
            **record,
            "state": "FINISHED",
            "duration_s": 2400.0,
            "alarms": [],
            "metrics": {"RESPONSE_TIME_PERCENTILE_95": gate[0]["value"]},
            "stopped": False,
            "gate": gate,
            "files": {},
        }
        values[run_id] = (record, result)
    with create_session() as session:
        # Core inserts (the tables' own column defaults apply): fast, and no ORM events of Airflow's
        dag = {"dag_id": dag_id, "bundle_name": "bench", "max_active_tasks": 16}
        dag.update(max_consecutive_failed_dag_runs=0, has_task_concurrency_limits=False)
        session.execute(DagModel.__table__.insert(), [dag])
        session.execute(DagRun.__table__.insert(), runs)
        session.execute(TaskInstance.__table__.insert(), tis)
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id).where(DagRun.dag_id == dag_id)).all())
        xcoms = [
            {
                "dag_run_id": ids[run_id],
                "task_id": TASK_ID,
                "map_index": -1,
                "key": key,
                "dag_id": dag_id,
                "run_id": run_id,
                "value": value,  # stored as JSON, as the Task Execution API stores a task's XCom
            }
            for run_id, (record, result) in values.items()
            for key, value in (("loadtest_run", record), ("return_value", result))
        ]
        session.execute(XComModel.__table__.insert(), xcoms)


def measure(nights: int, rounds: int) -> dict[str, Any]:
    """In the seeded home: every request, interleaved, ``rounds`` times; and one answer's breakdown."""
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    from airflow_provider_loadtest.plugins.decoded import RESULTS

    seed(nights)
    app = create_app()
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="viewer", role="viewer"))
    task = f"{DAG_ID}/tasks/{TASK_ID}?nights={nights}"
    requests = {
        f"ours: the DAG's tab, {nights} nights": f"/loadtest/dags/{DAG_ID}?nights={nights}",
        f"ours: the task's tab, {nights} nights": f"/loadtest/dags/{task}",
        f"ours: the history as JSON, {nights} nights": f"/loadtest/api/dags/{task}",
        WIDE: f"/loadtest/dags/{WIDE_DAG_ID}/tasks/{TASK_ID}?nights={WIDE_NIGHTS}",
        WIDE_COLD: f"/loadtest/dags/{WIDE_DAG_ID}/tasks/{TASK_ID}?nights={WIDE_NIGHTS}",
        **{hostile(rows): f"/loadtest/dags/{hostile_dag(rows)}/tasks/{TASK_ID}" for rows in HOSTILE_ROWS},
        # ~: every readable DAG's runs: the per-DAG route needs a serialized DAG
        BASELINE: "/api/v2/dags/~/dagRuns?limit=100",
    }
    times: dict[str, list[float]] = {name: [] for name in requests}
    cpu: dict[str, list[float]] = {name: [] for name in requests}
    sizes: dict[str, int] = {}
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        for name, path in requests.items():  # warm: first answers build the template, the caches
            answer = client.get(path)
            assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
            sizes[name] = len(answer.content)
        assert f"br-{nights - 1}" in client.get(requests[f"ours: the task's tab, {nights} nights"]).text
        seeded = nights + WIDE_NIGHTS + 30 * len(HOSTILE_ROWS)
        assert client.get(requests[BASELINE]).json()["total_entries"] == seeded
        for _ in range(rounds):
            for name, path in requests.items():
                if name == WIDE_COLD:
                    RESULTS.clear()  # nothing decoded yet: as after a restart of the API server
                began, began_cpu = time.perf_counter(), time.process_time()
                client.get(path)
                cpu[name].append((time.process_time() - began_cpu) * 1000)
                times[name].append((time.perf_counter() - began) * 1000)
    parts = {
        f"one task-tab answer, {nights} nights": breakdown(DAG_ID, nights),
        f"the gate of {WIDE_TRANSACTIONS + 1} series": breakdown(WIDE_DAG_ID, WIDE_NIGHTS),
    }
    return {"times": times, "cpu": cpu, "sizes": sizes, "breakdown": parts}


def breakdown(dag_id: str, nights: int) -> dict[str, float]:
    """Where one task-tab answer's CPU time goes (medians of 5, ms); the charts are built as the page
    is rendered, so they count with the template."""
    from airflow.utils.session import create_session

    from airflow_provider_loadtest.plugins import store
    from airflow_provider_loadtest.plugins.app import render_html
    from airflow_provider_loadtest.plugins.history import build
    from airflow_provider_loadtest.plugins.page import task_view

    parts: dict[str, list[float]] = {
        "database and XCom decoding": [],
        "history and table": [],
        "charts and template": [],
    }
    from airflow_provider_loadtest.plugins.decoded import RESULTS

    for _ in range(5):
        RESULTS.clear()  # every part measured cold: the nights decoded
        t0 = time.process_time()
        with create_session() as session:
            rows = store.nights(session, dag_id, TASK_ID, nights)
            total = store.count_nights(session, dag_id, TASK_ID)
        t1 = time.process_time()
        view = task_view(build(dag_id, TASK_ID, rows, total), "")
        t2 = time.process_time()
        render_html("/loadtest/static", 200, title="t", subject=dag_id, single=True, tasks=[view])
        t3 = time.process_time()
        for part, seconds in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            parts[part].append(seconds * 1000)
    return {part: statistics.median(values) for part, values in parts.items()}


def answer_rows(result: dict[str, Any], against: str = BASELINE) -> list[list[str]]:
    """One table row per answer measured: its CPU time, that against the baseline's (``against``), its
    wall time and its size (``plugin_overview.py`` prints its table the same way)."""
    times, cpu, sizes = result["times"], result["cpu"], result["sizes"]
    baseline = statistics.median(cpu[against])
    return [
        [
            name,
            spread(cpu[name]),
            f"{statistics.median(cpu[name]) / baseline:.2f}x",
            spread(values),
            f"{sizes[name] / 1024:.0f} KiB",
        ]
        for name, values in times.items()
    ]


def report(nights: int, result: dict[str, Any]) -> dict[str, Any]:
    """The tables, and the figures for the budget: CPU time per answer (what the API server spends;
    on a shared machine the wall time also holds the waits for a core), and the wall time beside it."""
    times, cpu, sizes = result["times"], result["cpu"], result["sizes"]
    baseline = statistics.median(cpu[BASELINE])
    rows = answer_rows(result)
    print(
        table(
            rows,
            ["request", "CPU ms (median [min-max])", "CPU vs baseline", "wall ms", "answer size"],
        )
    )
    for title, parts in result["breakdown"].items():
        print()
        print(table([[part, f"{ms:.1f}"] for part, ms in parts.items()], [title, "CPU ms"]))

    def median_of(word: str, figures: dict[str, list[float]]) -> float:
        return statistics.median(next(v for k, v in figures.items() if word in k))

    task, task_wall = median_of("task's tab", cpu), median_of("task's tab", times)
    wide, wide_wall = statistics.median(cpu[WIDE]), statistics.median(times[WIDE])
    cold = statistics.median(cpu[WIDE_COLD])
    load = os.getloadavg()[0]
    print(
        f"\nThe task's tab with {nights} nights: {task:.1f} ms of CPU, {task_wall:.1f} ms wall; "
        f"a gate of {WIDE_TRANSACTIONS + 1} series over {WIDE_NIGHTS} nights: {wide:.1f} ms of CPU, "
        f"{wide_wall:.1f} ms wall, {cold:.1f} ms of CPU with none of its nights decoded yet "
        f"(budget < {BUDGET_MS:g} ms): "
        f"{'met' if max(task, wide, cold) < BUDGET_MS else 'NOT met'}; "
        f"{os.cpu_count()} CPU(s), load average {load:.1f} while measured."
    )
    hostile_figures = {
        rows: {"ms": statistics.median(cpu[hostile(rows)]), "bytes": sizes[hostile(rows)]}
        for rows in HOSTILE_ROWS
    }
    return {
        "nights": nights,
        "task_ms": task,
        "task_wall_ms": task_wall,
        "wide_ms": wide,
        "wide_wall_ms": wide_wall,
        "wide_bytes": sizes[WIDE],
        "wide_cold_ms": cold,
        "hostile": hostile_figures,
        "dag_tab_ms": median_of("DAG's tab", cpu),
        "json_ms": median_of("JSON", cpu),
        "baseline_ms": baseline,
        "breakdown_ms": result["breakdown"],
        "budget_ms": BUDGET_MS,
        "load_average": load,
        "broken": broken_bounds(baseline, wide, sizes, hostile_figures, cold),
    }


def broken_bounds(
    baseline_ms: float,
    wide_ms: float,
    sizes: dict[str, int],
    hostile: dict[int, dict[str, float]],
    wide_cold_ms: float,
) -> list[str]:
    """The bounds this run broke among those that do not depend on the machine: every page's size
    (exact), each hostile page's and the wide gate's CPU time (warm and cold) in times the baseline's in
    the same run."""
    from airflow_provider_loadtest.plugins.bounds import PAGE_BYTES

    broken = [
        f"{name}: {size:,} bytes, more than the page's bound of {PAGE_BYTES:,}"
        for name, size in sizes.items()
        if name != BASELINE and size > PAGE_BYTES
    ]
    broken += [
        f"one night of {rows:,} gate rows: {figures['ms'] / baseline_ms:.1f}x the baseline's CPU time "
        f"(bound: {HOSTILE_VS_BASELINE:g}x)"
        for rows, figures in hostile.items()
        if figures["ms"] > HOSTILE_VS_BASELINE * baseline_ms
    ]
    if wide_ms > WIDE_VS_BASELINE * baseline_ms:
        broken.append(
            f"the gate of {WIDE_TRANSACTIONS + 1} series: {wide_ms / baseline_ms:.1f}x the baseline's CPU "
            f"time (bound: {WIDE_VS_BASELINE:g}x)"
        )
    if wide_cold_ms > WIDE_COLD_VS_BASELINE * baseline_ms:
        broken.append(
            f"the gate of {WIDE_TRANSACTIONS + 1} series, none decoded: "
            f"{wide_cold_ms / baseline_ms:.1f}x the baseline's CPU time (bound: {WIDE_COLD_VS_BASELINE:g}x)"
        )
    for line in broken:
        print(f"BOUND BROKEN: {line}")
    return broken


def page_builds(rounds: int) -> dict[str, dict[str, float]]:
    """The page of each gate that stresses the bounds, built in this process from the nights' stored
    JSON text (no database, no HTTP): decoding, history, table, charts and template. It uses only what
    every version of the view has, so the same script measures an earlier commit (copy it into a
    worktree of that commit and run it there with ``--build-only``): the before and after of issue 28."""
    from airflow_provider_loadtest.plugins import app, history, page, rows

    rng = random.Random(7)  # noqa: S311 - seeded figures, not secrets
    gates = nightly_gates(WIDE_NIGHTS, rng)
    start = datetime(2026, 1, 1, 2, tzinfo=UTC)
    cases = {
        f"a gate of {WIDE_TRANSACTIONS + 1} series, {WIDE_NIGHTS} nights": wide_gates(gates),
        **{f"one night of {n:,} gate rows": [hostile_gate(gates[0], n)] for n in HOSTILE_ROWS},
    }
    from_json = getattr(rows.RunResult, "from_json", None)  # the view before issue 28 decoded with json

    def result(text: str) -> Any:
        return from_json(text) if from_json else rows.RunResult.from_xcom(json.loads(text))

    figures: dict[str, dict[str, float]] = {}
    for name, nights_gates in cases.items():
        texts = [
            json.dumps({"bench_result_id": f"br-{i}", "gate": gate}) for i, gate in enumerate(nights_gates)
        ]
        spent = []
        for _ in range(rounds):
            began = time.process_time()
            nights = [
                history.Night(f"r{i}", -1, start + timedelta(days=i), None, "success", result(text))
                for i, text in enumerate(texts)
            ]
            view = page.task_view(history.build("dag", TASK_ID, nights), "")
            html = app.render_html("/s", 200, title="t", subject="dag", single=True, tasks=[view])
            spent.append((time.process_time() - began) * 1000)
        figures[name] = {"cpu_ms": statistics.median(spent), "bytes": len(html.encode())}
        print(
            f"{name}: {figures[name]['cpu_ms']:.0f} ms of CPU, {figures[name]['bytes'] / 2**20:.2f} MiB",
            flush=True,
        )
    return figures


def attack(env: dict[str, str], scratch: Path, small: bool) -> dict[str, Any]:
    """The attack of issue 35 in this home: seeded in one process, measured in a fresh one (whose peak
    memory is then the views' own)."""
    script = [sys.executable, str(ROOT / "benchmarks" / "view_attack.py"), *(["--small"] if small else [])]
    subprocess.run([*script, "--seed"], env=env, check=True, timeout=1800)
    out = scratch / "attack.json"
    subprocess.run([*script, "--measure", str(out)], env=env, check=True, timeout=1800)
    from benchmarks.view_attack import report as attack_report

    figures: dict[str, Any] = json.loads(out.read_text())
    print()
    print("\n".join(attack_report(figures)))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # in the seeded home: measure
    parser.add_argument(
        "--build-only", action="store_true", help="only the pages of the stressing gates, built in-process"
    )
    parser.add_argument("--smoke", action="store_true", help="30 nights, 2 rounds, a small attack (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.nights, args.rounds = 30, 2
    if args.build_only:
        figures = page_builds(args.rounds)
        if args.json:
            args.json.write_text(json.dumps(figures))
        return 0
    if args.child:
        args.child.write_text(json.dumps(measure(args.nights, args.rounds)))
        return 0
    with tempfile.TemporaryDirectory(prefix="loadtest-bench-plugin-") as scratch:
        env = airflow_env(Path(scratch) / "home")
        env.update(
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="viewer:viewer",
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="False",
            AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
        )
        subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
        out = Path(scratch) / "result.json"
        argv = [sys.executable, __file__, "--nights", str(args.nights), "--rounds", str(args.rounds)]
        subprocess.run([*argv, "--child", str(out)], env=env, check=True, timeout=1800)
        figures = report(args.nights, json.loads(out.read_text()))
        figures["attack"] = attack(env, Path(scratch), args.smoke)
    if args.json:
        args.json.write_text(json.dumps(figures))
    return 1 if figures["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
