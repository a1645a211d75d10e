"""An adversarial review of issue 35's view (the overview, the bounded tab, the two-night comparison),
against a real SQLite database with Airflow's own tables: each test here is one attack, written as the
promise it breaks. Those marked ``xfail(strict=True)`` are breaks found and not fixed yet (the reason
says what breaks and the suggested fix); they turn into failures the day the code keeps the promise, so
the mark must go then.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from airflow_provider_loadtest.plugins import app as view_app
from airflow_provider_loadtest.plugins import overview as ov
from airflow_provider_loadtest.plugins import store
from airflow_provider_loadtest.plugins.bounds import RUN_ID_CHARS
from airflow_provider_loadtest.plugins.decoded import CACHED_BYTES, RESULTS, size_of
from airflow_provider_loadtest.plugins.history import build
from airflow_provider_loadtest.plugins.page import task_view
from tests.unit import view_db

DAG = "review_dag"
P95 = "RESPONSE_TIME_PERCENTILE_95"
START = datetime(2026, 5, 1, 2, tzinfo=UTC)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = view_db.engine_at(tmp_path / "airflow.db")
    RESULTS.clear()
    yield made
    RESULTS.clear()
    made.dispose()


def gate_value(status: str = "pass", rows: int = 1, value: float = 400.0) -> dict[str, Any]:
    passed = status not in ("regression", "budget", "not_measured")
    gate = [
        {"metric": P95, "value": value, "passed": passed, "status": status}
        | {"transaction": f"T{i}" if i else ""}
        for i in range(rows)
    ]
    return {"bench_result_id": "br", "state": "FINISHED", "gate": gate}


def deployment(
    engine: Engine,
    nights: dict[tuple[str, int, int], dict[str, Any] | None],
    *,
    run_id: Any = lambda night: f"scheduled__{night:04d}",
) -> None:
    """One DAG (``DAG``, known to Airflow: a row in ``dag``) whose nights are ``nights``: (task, night,
    map index) -> its ``return_value`` (None: only the run record, the task still running)."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    with Session(engine) as session, session.begin():
        session.execute(DagBundleModel.__table__.insert(), [{"name": "tests"}])
        dag = {"dag_id": DAG, "bundle_name": "tests", "max_active_tasks": 16, "owners": "airflow"}
        dag.update(max_consecutive_failed_dag_runs=0, has_task_concurrency_limits=False)
        session.execute(DagModel.__table__.insert(), [dag])
        days = sorted({night for _, night, _ in nights})
        runs = [
            {
                "dag_id": DAG,
                "run_id": run_id(night),
                "logical_date": START + timedelta(days=night),
                "run_after": START + timedelta(days=night),
                "run_type": "scheduled",
                "state": "success",
            }
            for night in days
        ]
        session.execute(DagRun.__table__.insert(), runs)
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id).where(DagRun.dag_id == DAG)).all())
        tis, xcoms = [], []
        for (task, night, index), value in nights.items():
            rid = run_id(night)
            state = "running" if value is None else "success"
            tis.append(
                {"dag_id": DAG, "task_id": task, "run_id": rid, "map_index": index, "state": state}
                | {"try_number": 1, "pool": "default_pool", "pool_slots": 1}
            )
            row = {"dag_run_id": ids[rid], "task_id": task, "map_index": index, "dag_id": DAG, "run_id": rid}
            row["timestamp"] = START
            record = {"bench_result_id": "br", "scenario_id": "s"}
            xcoms.append(row | {"key": "loadtest_run", "value": record})
            if value is not None:
                xcoms.append(row | {"key": "return_value", "value": value})
        session.execute(TaskInstance.__table__.insert(), tis)
        session.execute(XComModel.__table__.insert(), xcoms)


def overview_of(engine: Engine) -> ov.Overview:
    with view_db.session_on(engine) as session:
        found = ov.gated_nights(session, {DAG})
        return ov.build(
            found,
            ov.dag_facts(session, {DAG}),
            lambda keys: ov.results(session, keys),
            base="/af",
            root="/af/loadtest/",
        )


def tab_of(engine: Engine, task: str, nights: int = 90) -> Any:
    """The DAG tab's view of ``task`` as ``app.task_views`` makes it (its reads, its history, its view)."""
    with view_db.session_on(engine) as session:
        read = store.nights(session, DAG, task, nights)
        total = store.count_nights(session, DAG, task)
    return task_view(build(DAG, task, read, total), "/af")


# --- correctness: the overview says what the tab says -----------------------------------------------------


@pytest.mark.parametrize("failing_index", [0, 2])
def test_a_mapped_nights_verdict_is_the_same_on_the_overview_and_the_tab(
    engine: Engine, failing_index: int
) -> None:
    nights: dict[tuple[str, int, int], dict[str, Any] | None] = {
        ("mapped", night, index): gate_value() for night in range(3) for index in range(3)
    }
    nights[("mapped", 2, failing_index)] = gate_value("regression")
    deployment(engine, nights)
    line = overview_of(engine).lines[0]
    tab = tab_of(engine, "mapped")
    assert (line.verdict, tab.latest_verdict) == ("fail", "fail")


def test_a_result_rewritten_in_the_same_try_shows_on_the_overview_as_on_the_tab(engine: Engine) -> None:
    from airflow.models.xcom import XComModel

    deployment(engine, {("gated", night, -1): gate_value() for night in range(3)})
    assert overview_of(engine).lines[0].verdict == "pass"
    assert tab_of(engine, "gated").latest_verdict == "pass"
    with Session(engine) as session, session.begin():  # as XComModel.set does it: a new row, a new timestamp
        newest = session.scalar(select(func_max_run()))
        session.execute(
            XComModel.__table__.update()
            .where(XComModel.dag_run_id == newest, XComModel.key == "return_value")
            .values(value=gate_value("regression"), timestamp=START + timedelta(days=30))
        )
    assert tab_of(engine, "gated").latest_verdict == "fail"  # the tab sees the new value
    assert overview_of(engine).lines[0].verdict == "fail"


def func_max_run() -> Any:
    from airflow.models.dagrun import DagRun
    from sqlalchemy import func

    return func.max(DagRun.id)


# --- bounds: what one view holds ------------------------------------------------------------------------


def test_the_overview_reads_run_ids_clipped_as_the_tab_does(engine: Engine) -> None:
    deployment(
        engine,
        {("gated", night, -1): gate_value() for night in range(3)},
        run_id=lambda night: f"{night:04d}" + "r" * 100_000,
    )
    with view_db.session_on(engine) as session:
        found = ov.gated_nights(session, {DAG})
        read = store.nights(session, DAG, "gated", 3)
    assert max(len(n.run_id) for n in read) <= RUN_ID_CHARS
    assert found and max(len(f.run_id) for f in found) <= RUN_ID_CHARS + 1


class Live:
    """How many of the results a decode made are alive at once, at most (finalizers count them out)."""

    def __init__(self) -> None:
        self.now = self.most = 0

    def track(self, decoded: dict[Any, Any]) -> dict[Any, Any]:
        for result in decoded.values():
            self.now += 1
            weakref.finalize(result, self._gone)
        self.most = max(self.most, self.now)
        return decoded

    def _gone(self) -> None:
        self.now -= 1


def test_the_overview_holds_at_once_no_more_results_than_its_page_and_the_cache(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = ov.PAGE_LINES * 3
    deployment(engine, {(f"gated_{t:04d}", 0, -1): gate_value(rows=2) for t in range(tasks)})
    live, real = Live(), ov._decode
    monkeypatch.setattr(ov, "_decode", lambda session, keys: live.track(real(session, keys)))
    monkeypatch.setattr(RESULTS, "limit", 20 * size_of(view_db_result(rows=2)))
    page = overview_of(engine)
    assert len(page.lines) == ov.PAGE_LINES and page.total == tasks
    # the page's lines (one night each here) and what the cache may keep, with room to spare
    assert live.most <= ov.PAGE_LINES + 20 + 10


def view_db_result(rows: int) -> Any:
    from airflow_provider_loadtest.plugins.rows import RunResult

    return RunResult.from_json(json.dumps(gate_value(rows=rows)))


@pytest.mark.xfail(
    strict=True,
    reason="review: a task's tab reads all its ?nights= nights (up to 2,000) in one go and holds every "
    "decoded row of each (up to 1,000): 2,000 nights of 1,000 rows are 2 million rows, about 1.3 GB by "
    "decoded.size_of, per view (x 2 slots), beyond the cache's 96 MB bound on the results kept. Fix: keep "
    "per night only the rows a page shows (the drawn series, the columns, the failing rows, ROWS_KEPT) "
    "once the night is read, or bound ?nights= by rows (nights x rows per night).",
)
def test_a_tabs_read_holds_no_more_than_the_caches_bytes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    nights = 160
    deployment(engine, {("wide", night, -1): gate_value(rows=1000) for night in range(nights)})
    monkeypatch.setattr(view_app, "reading", lambda: view_db.session_on(engine))
    read = view_app._read_nights(DAG, "wide", 2000)
    assert len(read) == nights
    assert sum(size_of(n.result) for n in read) <= CACHED_BYTES


# --- what held: hostile XCom against every answer ----------------------------------------------------------

XSS = '</script><script>alert(1)</script>"><img src=x onerror=alert(1)>'
HOSTILE_ROWS: list[Any] = [
    {"metric": XSS, "transaction": XSS, "value": 1.0, "status": "regression", "passed": False, "note": XSS},
    {"metric": P95, "value": "468", "noise": "5", "history_n": -3, "status": "pass"},
    {"metric": P95, "transaction": "T", "value": 1e308, "noise": 1e-308, "centre": -1e308, "status": "weird"},
    {"metric": "ERROR_RATE_PERCENT", "value": -1e308, "band_low": 1e308, "band_high": -1e308},
    {"metric": P95, "transaction": "deep", "value": [[[[1]]]], "status": ["x"], "passed": "yes"},
    ["not", "a", "row"],
    {"metric": "", "value": 1},
    {"metric": "x" * 1_000_000, "transaction": "y" * 600, "value": 2.0, "budget": "z" * 100_000},
]
HOSTILE_VALUES: list[str] = [
    json.dumps({"gate": HOSTILE_ROWS, "report_url": "javascript:alert(1)", "bench_result_id": XSS}),
    '{"gate": [{"metric": "P", "value": NaN, "noise": Infinity, "centre": -Infinity}], "state": NaN}',
    '{"gate": [{"metric": "P", "value": 1e400, "noise": -1e400, "history_n": 1e400}]}',
    '{"gate": [{"metric": "P", "value": ' + "9" * 5000 + "}]}",
    json.dumps({"gate": {"metric": "P"}, "report_url": "https://x/\"'><script>", "night_effect": [1]}),
    json.dumps({"gate": [], "night_effect": {"shift_sd": "1", "status": ["regression"], "series": -1}}),
    json.dumps({"gate": [], "night_effect": {"shift_sd": 1e308, "status": "regression", "series": 10**30}}),
    json.dumps(json.dumps({"gate": view_db.gate(2)})),  # a JSON string holding the JSON
    "[" * 5000 + "]" * 5000,
    '{"gate": ' + "[" * 1000 + "]" * 1000 + "}",
    "not json at all",
    "null",
    "12",
    json.dumps({"gate": [{"metric": P95, "value": 1.0, "note": "n" * 3_000_000}] * 3}),
    json.dumps({"gate": [{"metric": f"M{i}", "value": i, "status": "regression"} for i in range(3000)]}),
]


def hostile_deployment(engine: Engine) -> None:
    """``DAG``'s task "hostile": one night per hostile value (written as its text, as a direct database
    write stores it), a night whose DAG run has no logical date, and odd map indexes."""
    from airflow.models.dag import DagModel, DagTag
    from airflow.models.dagrun import DagRun

    nights: dict[tuple[str, int, int], dict[str, Any] | None] = {
        ("hostile", night, -1): gate_value() for night in range(len(HOSTILE_VALUES))
    }
    nights[("hostile", 40, -5)] = gate_value("regression")
    nights[("hostile", 40, 10**7)] = gate_value("suspected")
    nights[("hostile", 41, -1)] = None  # still running
    xss_gate = [
        {"metric": XSS, "value": 1.0, "status": "regression", "passed": False, "transaction": t}
        for t in ("", XSS)
    ]
    for night in (37, 38, 39):  # names on the overview's line: its scenario, failing series, trend's title
        nights[("xss_task", night, -1)] = {"scenario_id": XSS, "gate": xss_gate}
    deployment(engine, nights, run_id=lambda night: f"{XSS}__{night:04d}")
    with Session(engine) as session, session.begin():
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id)).all())
        for night, text in enumerate(HOSTILE_VALUES):
            session.connection().exec_driver_sql(
                "UPDATE xcom SET value = ? WHERE dag_run_id = ? AND key = 'return_value'",
                (text, ids[f"{XSS}__{night:04d}"]),
            )
        session.connection().exec_driver_sql(
            "UPDATE dag_run SET logical_date = NULL WHERE id = ?", (ids[f"{XSS}__0040"],)
        )
        # the DAG's tags and owners, as only a direct write stores them: 10,000 tags, 1 MB of owners
        tags = [XSS, "x" * 1_000_000, *(f"tag{i}" for i in range(10_000))]
        session.execute(DagTag.__table__.insert(), [{"dag_id": DAG, "name": tag} for tag in tags])
        owners = ",".join([XSS, *(f"owner{i}" for i in range(100_000))])
        session.execute(DagModel.__table__.update().where(DagModel.dag_id == DAG).values(owners=owners))


@pytest.fixture
def client(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The view's app reading ``engine``, every access allowed (the checks are attacked elsewhere)."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends
    from fastapi.testclient import TestClient

    from airflow_provider_loadtest.plugins import overview_page

    class Everyone:
        def get_authorized_dag_ids(self, *, user: Any, method: str = "GET", session: Any = None) -> set[str]:
            return {DAG}

        def is_authorized_dag(self, **_: Any) -> bool:
            return True

    monkeypatch.setattr(view_app, "_access_dependencies", lambda: [Depends(lambda: None)])
    monkeypatch.setattr(view_app, "reading", lambda: view_db.session_on(engine))
    monkeypatch.setattr(overview_page, "auth_manager", Everyone)
    app = view_app.create_app()
    app.dependency_overrides[get_user] = object
    with TestClient(app, raise_server_exceptions=False) as opened:
        yield opened


def test_hostile_values_give_bounded_escaped_pages_and_json_never_a_500(client: Any, engine: Engine) -> None:
    from airflow_provider_loadtest.plugins.bounds import PAGE_BYTES
    from airflow_provider_loadtest.plugins.compare import night_key

    hostile_deployment(engine)
    with view_db.session_on(engine) as session:
        keys = [night_key(n) for n in store.nights(session, DAG, "hostile", 100)]
    task = f"/dags/{DAG}/tasks/hostile"
    paths = ["/", f"/dags/{DAG}", task, f"{task}?nights=2000", f"{task}?transaction=T"]
    paths += ["/?tag=tag9999", "/?owner=owner99999", f"/?tag={quote(XSS)}&owner={quote(XSS)}"]
    paths += [f"{task}?compare={a}&with={b}" for a in keys[:6] for b in keys[-6:]]
    paths += [f"{task}?compare=2026-05-01.{'0' * 10}", f"{task}?with=%3Cscript%3E"]
    for path in paths:
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert len(answer.content) < PAGE_BYTES + 64 * 1024, path
        for raw in ("<script>alert", "<img src=x", "javascript:alert", "'><script>"):
            assert raw not in answer.text, (path, raw)
    offset, seen = 0, 0
    while True:
        answer = client.get(f"/api/dags/{DAG}/tasks/hostile?nights=7&offset={offset}")
        assert answer.status_code == 200, offset
        body = answer.json()
        seen += len(body["nights"])
        if not body["next"]:
            break
        offset = int(body["next"].rsplit("=", 1)[1])
    assert seen == body["total"] == len(keys)


# --- PostgreSQL: the overview reads values as the driver decodes them ------------------------------------


class Recorded:
    """A session that records the statements it is given and finds nothing."""

    def __init__(self) -> None:
        self.statements: list[Any] = []

    def execute(self, statement: Any) -> list[Any]:
        self.statements.append(statement)
        return []


def test_the_overview_reads_values_as_text_on_postgresql_as_the_tab_does() -> None:
    from sqlalchemy.dialects import postgresql

    recorded = Recorded()
    ov._decode(recorded, [(1, "task", -1, ("try", 1))])  # type: ignore[arg-type]
    tab = str(store.results_query(DAG, "task", [1]).compile(dialect=postgresql.dialect()))
    assert "CAST(xcom.value AS TEXT)" in tab  # the tab's own read, for contrast
    (statement,) = recorded.statements
    assert "CAST(xcom.value AS TEXT)" in str(statement.compile(dialect=postgresql.dialect()))


# --- the comparison's picks --------------------------------------------------------------------------------


@pytest.mark.parametrize("map_index", [10**7, 2**31 - 1, -5])
def test_every_nights_own_compare_link_picks_that_night(map_index: int) -> None:
    """Before: a map index of 7 digits made a key the pick refused ("not a night's key"), and a negative
    one other than -1 (a direct database write) the very key of the unmapped night of the same run."""
    from airflow_provider_loadtest.plugins import compare as cmp
    from airflow_provider_loadtest.plugins.history import Night
    from airflow_provider_loadtest.plugins.rows import RunResult

    def night(day: int, index: int, value: float) -> Night:
        at = START + timedelta(days=day)
        result = RunResult.from_json(json.dumps(gate_value(value=value)))
        return Night("scheduled__same", index, at, at, "success", result)

    odd, plain, older = night(2, map_index, 500.0), night(2, -1, 450.0), night(1, -1, 400.0)
    history = build(DAG, "mapped", [odd, plain, older])
    assert len({cmp.night_key(n) for n in history.nights}) == 3
    for picked in (odd, plain):
        key = cmp.night_key(picked)
        assert len(key) <= cmp.KEY_CHARS
        compared = cmp.compare(history, key, cmp.night_key(older))
        assert not compared.message and compared.night is picked, compared.message


# --- access through Airflow's own checks (not replaced) ----------------------------------------------------


class NoXCom:
    """An auth manager that lets the user read ``DAG`` and its task instances, never its XCom."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def get_authorized_dag_ids(self, *, user: Any, method: str = "GET", session: Any = None) -> set[str]:
        return {DAG}

    def is_authorized_dag(
        self, *, method: str, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity

        self.asked.append(access_entity)
        return access_entity is not DagAccessEntity.XCOM


def test_a_user_refused_xcom_learns_nothing_from_any_answer(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's own dependency (``requires_access_dag``) asked through the view's routes, with an auth
    manager that allows the DAG and its task instances but not its XCom: 403 everywhere, no trace."""
    from airflow.api_fastapi.core_api import security
    from airflow.api_fastapi.core_api.security import get_user
    from airflow.models.dag import DagModel
    from fastapi.testclient import TestClient

    from airflow_provider_loadtest.plugins import overview_page

    deployment(engine, {("vault_task", night, -1): gate_value("regression") for night in range(3)})
    manager = NoXCom()
    monkeypatch.setattr(security, "get_auth_manager", lambda: manager)
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, session=None: None))
    monkeypatch.setattr(overview_page, "auth_manager", lambda: manager)
    monkeypatch.setattr(view_app, "reading", lambda: view_db.session_on(engine))
    app = view_app.create_app()
    app.dependency_overrides[get_user] = object
    with TestClient(app) as http:
        for path in (
            f"/dags/{DAG}",
            f"/dags/{DAG}/tasks/vault_task",
            f"/api/dags/{DAG}/tasks/vault_task?nights=1",
        ):
            answer = http.get(path)
            assert answer.status_code == 403, path
            assert "vault_task" not in answer.text and "regression" not in answer.text, path
        overview = http.get("/")
        assert overview.status_code == 200
        assert DAG not in overview.text and "vault_task" not in overview.text, overview.text
        asked, unknown = http.get("/?owner=airflow").text, http.get("/?owner=nobody").text
        assert asked.replace("airflow", "?") == unknown.replace("nobody", "?")
    assert manager.asked  # the checks were Airflow's, asked of this manager


# --- the overview's cost: runs without a logical date ------------------------------------------------------


class Counting:
    """A session that counts the rows its statements return."""

    def __init__(self, session: Session) -> None:
        self.session, self.rows = session, 0

    def execute(self, statement: Any) -> list[Any]:
        found = list(self.session.execute(statement))
        self.rows += len(found)
        return found


def test_the_overview_reads_a_bounded_number_of_runs_of_a_dag_triggered_without_logical_dates(
    engine: Engine,
) -> None:
    nights = 200
    deployment(engine, {("gated", night, -1): gate_value() for night in range(nights)})
    with Session(engine) as session, session.begin():
        session.connection().exec_driver_sql("UPDATE dag_run SET logical_date = NULL")  # asset-triggered
    with view_db.session_on(engine) as session:
        counting = Counting(session)
        newest = ov.newest_runs(counting, {DAG}, ov.SCANNED_RUNS)  # type: ignore[arg-type]
    assert len(newest) == ov.SCANNED_RUNS
    assert counting.rows <= 2 * ov.SCANNED_RUNS + 1


# --- what held: slots under exceptions and early hang-ups --------------------------------------------------


def test_a_slot_comes_back_when_a_piece_raises_or_the_viewer_leaves_at_any_point() -> None:
    from airflow_provider_loadtest.plugins import bounds, slots

    few = slots.Slots(size=1, wait=0.05)

    def parts(fail_at: int) -> Iterator[bytes]:
        for i in range(5):
            if i == fail_at:
                raise RuntimeError("a hostile value")
            yield b"x"

    for fail_at in range(6):
        pieces = few.pieces(parts(fail_at), bounds.PageBudget().stop)
        with pytest.raises(RuntimeError) if fail_at < 5 else nullcontext():
            list(pieces)
        assert few.acquire(), fail_at
        few.release()
    for leave_at in range(5):  # the viewer hangs up after leave_at pieces: the generator is closed
        pieces = few.pieces(parts(99), bounds.PageBudget().stop)
        for _ in range(leave_at):
            next(pieces)
        pieces.close()
        assert few.acquire(), leave_at
        few.release()


# --- the JSON answer's byte bound -------------------------------------------------------------------


def test_one_json_answer_stays_within_its_bytes_whatever_one_night_holds(client: Any, engine: Engine) -> None:
    from airflow_provider_loadtest.plugins.bounds import DECODED_CHARS, JSON_BYTES

    text = "\u0001" * DECODED_CHARS
    rows = [
        {"metric": f"M{i}{text}", "transaction": text, "reason": text, "note": text, "budget": text}
        | {"value": 1.0, "status": "regression", "passed": False}
        for i in range(1000)
    ]
    deployment(engine, {("wide", night, -1): {"gate": rows, "bench_result_id": text} for night in range(2)})
    answer = client.get(f"/api/dags/{DAG}/tasks/wide?nights=1")
    assert answer.status_code == 200
    assert len(answer.content) <= JSON_BYTES + 64 * 1024


# --- access on Airflow 3.1 with teams -----------------------------------------------------------------


class TeamManager:
    """A team-aware auth manager: the user is on team B; a DAG of no team is everyone's."""

    def is_authorized_dag(
        self, *, method: str, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        return details.team_name in (None, "team_b")


def test_on_airflow_3_1_the_overview_asks_with_the_dags_team_as_the_tab_does(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.dag import DagModel

    deployment(engine, {("gated", 0, -1): gate_value()})
    monkeypatch.delattr(DagModel, "get_dag_id_to_team_name_mapping", raising=False)  # as on 3.1.0
    monkeypatch.setattr(DagModel, "get_team_name", staticmethod(lambda dag_id, session=None: "team_a"))
    manager = TeamManager()
    with view_db.session_on(engine) as session:
        assert not manager.is_authorized_dag(method="GET", user=None, details=team_details("team_a"))
        assert ov.may_read_load_tests(manager, object(), {DAG}, session) == set()


def team_details(team: str | None) -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    return DagDetails(id=DAG, team_name=team)


def test_the_overview_leaves_out_task_ids_airflow_cannot_have_as_the_tab_does(
    client: Any, engine: Engine
) -> None:
    from airflow_provider_loadtest.plugins.bounds import PAGE_BYTES

    deployment(engine, {(f"{t}" + "é" * 1_000_000, 0, -1): gate_value("regression") for t in range(3)})
    with view_db.session_on(engine) as session:
        assert store.gated_tasks(session, DAG) == {}  # the tab shows none of them
    answer = client.get("/")
    assert answer.status_code == 200
    assert len(answer.content) <= PAGE_BYTES


def test_a_page_of_wide_characters_stays_within_its_bytes(client: Any, engine: Engine) -> None:
    """Before: the page's budget counted characters, not bytes: 2,000 nights whose failing rows name
    4-byte characters were a 20.9 MB page (6.46 million characters) against ``PAGE_BYTES`` (6 MiB)."""
    from airflow_provider_loadtest.plugins.bounds import PAGE_BYTES

    wide = "😀" * 1000
    rows = [
        {"metric": f"M{i}{wide}", "transaction": wide, "reason": wide}
        | {"value": 1.0, "status": "regression", "passed": False}
        for i in range(9)
    ]
    deployment(engine, {("wide", night, -1): {"gate": rows} for night in range(800)})
    answer = client.get(f"/dags/{DAG}/tasks/wide?nights=2000")
    assert answer.status_code == 200 and "size limit" in answer.text
    # the budget is asked before each part (a chart, a table row): one part may pass it (here a chart of
    # 800 nights with their names, about 0.5 MB)
    assert len(answer.content) <= PAGE_BYTES + 2**20


# --- what held: the overview's night is the tab's, dated or not, two a day, retried ----------------------


@pytest.mark.parametrize("newest", ["running", "regression", "pass"])
def test_the_overviews_newest_night_is_the_tabs_without_logical_dates_two_a_day_and_retried(
    engine: Engine, newest: str
) -> None:
    from airflow.models.dagrun import DagRun

    nights: dict[tuple[str, int, int], dict[str, Any] | None] = {
        ("gated", night, -1): gate_value() for night in range(6)
    }
    nights[("gated", 6, -1)] = gate_value("regression")  # undated, earlier that day
    nights[("gated", 7, -1)] = None if newest == "running" else gate_value(newest)  # that day, later
    deployment(engine, nights)
    with Session(engine) as session, session.begin():
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id)).all())
        day = START + timedelta(days=6)
        session.execute(
            DagRun.__table__.update()
            .where(DagRun.id == ids["scheduled__0006"])
            .values(logical_date=None, run_after=day + timedelta(hours=1))
        )
        session.execute(
            DagRun.__table__.update()
            .where(DagRun.id == ids["scheduled__0007"])
            .values(logical_date=day + timedelta(hours=5), run_after=day + timedelta(hours=5))
        )
        session.connection().exec_driver_sql("UPDATE task_instance SET try_number = 2")  # retried
    line = overview_of(engine).lines[0]
    tab = tab_of(engine, "gated")
    assert (
        line.verdict
        == tab.latest_verdict
        == ("running" if newest == "running" else newest.replace("regression", "fail"))
    )
    assert line.day == tab.rows[0].night.day == "2026-05-07"
    assert line.nights == 8 and tab.shown == 8
    assert [n.night.run_id for n in tab.rows[:2]] == ["scheduled__0007", "scheduled__0006"]


# --- the comparison's defaults on a mapped task ----------------------------------------------------------


@pytest.mark.parametrize("history_n", [None, 20])
def test_a_mapped_tasks_default_reference_is_an_earlier_night_of_the_same_map_index(
    history_n: int | None,
) -> None:
    """Before: the default set the newest night of map index 2 beside map index 1 of the same DAG run (on
    a task mapped over scenarios: another scenario), and "the centre of 20 nights" was 10 instances back."""
    from airflow_provider_loadtest.plugins import compare as cmp
    from airflow_provider_loadtest.plugins.history import Night
    from airflow_provider_loadtest.plugins.rows import RunResult

    def night(day: int, index: int) -> Night:
        at = START + timedelta(days=day)
        value = gate_value(value=100.0 * (index + 1) + day)
        for row in value["gate"]:
            row.update({} if history_n is None else {"history_n": history_n})
        return Night(
            f"scheduled__{day:04d}", index, at, at, "success", RunResult.from_json(json.dumps(value))
        )

    history = build(DAG, "mapped", [night(day, index) for day in range(30) for index in range(3)])
    compared = cmp.compare(history)
    assert compared.night is not None and compared.reference is not None, compared.message
    assert compared.reference.map_index == compared.night.map_index
    back = (compared.night.at - compared.reference.at).days
    assert back == (1 if history_n is None else history_n // 2)
    # the noise is the spread of its own scenario's nights (1 a night: about 11), not of all three (148)
    (line,) = compared.lines
    assert line.source == "spread" and float(line.noise) < 20, line.noise
