"""Every gate at a glance (``/loadtest/``, issue 35), against a real SQLite database with Airflow's own
tables: the query finds each gated task's newest nights (and nothing else), the lines sort failing
gates first, the filters and pages hold, the texts are clipped, and only the DAGs the user may read
(and whose task instances and XCom they may read) show, without a trace of the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine
from sqlalchemy.orm import Session, sessionmaker

from airflow_provider_loadtest.plugins import overview as ov
from airflow_provider_loadtest.plugins import overview_page
from airflow_provider_loadtest.plugins.decoded import RESULTS

P95 = "RESPONSE_TIME_PERCENTILE_95"
START = datetime(2026, 3, 1, 2, tzinfo=UTC)
#: DAG id -> (tags, owners): the deployment every test here reads.
DAGS = {
    "checkout_release": (("team-checkout",), "alice"),
    "search_release": (("team-search",), "bob"),
    "secret_release": (("team-secret",), "mallory"),
    "plain_dag": ((), "airflow"),
}


def gate(value: float, *, status: str = "pass", metric: str = P95, **extra: Any) -> list[dict[str, Any]]:
    passed = status not in ("regression", "budget", "not_measured")
    return [{"metric": metric, "value": value, "passed": passed, "status": status, **extra}]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from airflow.models import import_all_models
    from airflow.models.base import Base

    import_all_models()
    path: Path = tmp_path_factory.mktemp("overview") / "airflow.db"
    made = create_engine(f"sqlite:///{path}", connect_args={"check_same_thread": False})
    Base.metadata.create_all(made)
    with Session(made) as session:
        seed(session)
        session.commit()
    return made


@pytest.fixture
def session(engine: Any) -> Iterator[Session]:
    RESULTS.clear()
    with sessionmaker(engine)() as opened:
        yield opened
    RESULTS.clear()


def seed(session: Session) -> None:
    """The deployment: each DAG's nights, its gated tasks' run records and results, a task that is not
    gated but returns a value, a night still running, a night whose task failed without failing rows."""
    from airflow.models.dag import DagModel, DagTag
    from airflow.models.dagbundle import DagBundleModel
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    session.execute(DagBundleModel.__table__.insert(), [{"name": "tests"}])
    for dag_id, (tags, owner) in DAGS.items():
        dag = {
            "dag_id": dag_id,
            "bundle_name": "tests",
            "max_active_tasks": 16,
            "owners": f"airflow, {owner}",
        }
        dag.update(max_consecutive_failed_dag_runs=0, has_task_concurrency_limits=False)
        session.execute(DagModel.__table__.insert(), [dag])
        if tags:
            session.execute(DagTag.__table__.insert(), [{"dag_id": dag_id, "name": t} for t in tags])
    # (dag, task) -> each night's gate, oldest first (None: the night is still running)
    nights: dict[tuple[str, str], list[Any]] = {
        ("checkout_release", "cart"): [gate(400 + d) for d in range(19)] + [gate(520, status="regression")],
        ("checkout_release", "pay"): [gate(300 + d) for d in range(19)] + [gate(330, status="suspected")],
        ("search_release", "query"): [gate(200 + d) for d in range(20)],
        ("search_release", "suggest"): [gate(100) for _ in range(19)] + [None],
        ("secret_release", "vault"): [gate(50, status="regression") for _ in range(20)],
    }
    for dag_id in DAGS:
        for day in range(20):
            at = START + timedelta(days=day)
            run = {"dag_id": dag_id, "run_id": f"scheduled__{day:02d}", "logical_date": at, "run_after": at}
            session.execute(DagRun.__table__.insert(), [run | {"run_type": "scheduled", "state": "success"}])
    ids = {(d, r): i for i, d, r in session.execute(select(DagRun.id, DagRun.dag_id, DagRun.run_id))}
    for (dag_id, task_id), gates in nights.items():
        for day, rows in enumerate(gates):
            run_id = f"scheduled__{day:02d}"
            state = "running" if rows is None else "success"
            ti = {"dag_id": dag_id, "task_id": task_id, "run_id": run_id, "map_index": -1, "state": state}
            session.execute(TaskInstance.__table__.insert(), [ti | {"try_number": 1, "pool": "default_pool"}])
            record = {"scenario_id": f"{task_id}-scenario", "bench_result_id": f"br-{dag_id}-{day}"}
            xcom = {"dag_run_id": ids[(dag_id, run_id)], "task_id": task_id, "map_index": -1}
            xcom |= {"dag_id": dag_id, "run_id": run_id}
            values = [("loadtest_run", record)]
            if rows is not None:
                values.append(("return_value", {**record, "state": "FINISHED", "gate": rows}))
            session.execute(
                XComModel.__table__.insert(), [xcom | {"key": key, "value": value} for key, value in values]
            )
    # a task that returns a value every night but never ran a load test
    for day in range(20):
        run_id = f"scheduled__{day:02d}"
        ti = {"dag_id": "plain_dag", "task_id": "extract", "run_id": run_id, "map_index": -1}
        session.execute(TaskInstance.__table__.insert(), [ti | {"state": "success", "pool": "default_pool"}])
        xcom = {"dag_run_id": ids[("plain_dag", run_id)], "task_id": "extract", "map_index": -1}
        xcom |= {"dag_id": "plain_dag", "run_id": run_id, "key": "return_value", "value": {"gate": gate(1)}}
        session.execute(XComModel.__table__.insert(), [xcom])


def overview_of(session: Session, dag_ids: set[str] | None = None, **options: Any) -> ov.Overview:
    found = ov.gated_nights(session, set(DAGS) if dag_ids is None else dag_ids)
    facts = ov.dag_facts(session, {f.dag_id for f in found})
    return ov.build(
        found, facts, lambda keys: ov.results(session, keys), base="/af", root="/af/loadtest/", **options
    )


# --- the query ------------------------------------------------------------------------------------------


def test_the_query_finds_each_gated_tasks_newest_nights_and_nothing_else(session: Session) -> None:
    found = ov.gated_nights(session, set(DAGS), runs=5)
    tasks = {(f.dag_id, f.task_id) for f in found}
    assert tasks == {
        ("checkout_release", "cart"),
        ("checkout_release", "pay"),
        ("search_release", "query"),
        ("search_release", "suggest"),
        ("secret_release", "vault"),
    }  # plain_dag's return values are no load test
    for task in tasks:
        days = sorted(f.run_id for f in found if (f.dag_id, f.task_id) == task)
        assert days == [f"scheduled__{d:02d}" for d in range(15, 20)], task  # the newest 5 runs only
    running = next(f for f in found if f.task_id == "suggest" and f.run_id == "scheduled__19")
    assert (running.stamp, running.ti_state) == (None, "running")
    assert {f.dag_id for f in ov.gated_nights(session, {"checkout_release"})} == {"checkout_release"}
    assert ov.gated_nights(session, set()) == []


def test_the_query_reads_no_value_and_the_results_only_of_the_page(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    real = ov._decode

    def counted(opened: Session, keys: list[Any]) -> Any:
        asked.append(len(keys))
        return real(opened, keys)

    monkeypatch.setattr(ov, "_decode", counted)
    page = overview_of(session, per_page=2)
    # the newest night of the 5 tasks (4 with a result: one is running), then the 2 lines' other nights
    assert asked == [4, 2 * (ov.NIGHTS - 1)]
    assert len(page.lines) == 2 and page.total == 5 and page.pages == 3
    overview_of(session, per_page=2)
    assert asked[2:] == []  # all decoded already: the cache answers


# --- the model ------------------------------------------------------------------------------------------


def test_failing_gates_first_then_suspected_then_by_dag(session: Session) -> None:
    lines = overview_of(session).lines
    assert [(line.dag_id, line.task_id, line.verdict) for line in lines] == [
        ("checkout_release", "cart", "fail"),
        ("secret_release", "vault", "fail"),
        ("checkout_release", "pay", "suspected"),
        ("search_release", "suggest", "running"),
        ("search_release", "query", "pass"),
    ]


def test_a_line_names_its_failing_series_and_draws_its_trend(session: Session) -> None:
    cart = overview_of(session).lines[0]
    assert cart.failing == (P95,)
    assert cart.scenario == "cart-scenario" and cart.day == "2026-03-20" and cart.nights == ov.NIGHTS
    assert cart.headline == f"{P95} 520 ms"
    assert cart.trend is not None and cart.trend.path.count("L") == ov.NIGHTS - 1
    assert len(cart.trend.failing) == 1  # last night's regression marked
    assert cart.effect is None  # a gate of fewer than 8 series has no night effect
    assert cart.dag_href == "/af/dags/checkout_release/plugin/load-tests"
    assert cart.task_href == "/af/dags/checkout_release/tasks/cart/plugin/load-tests-task"


def test_filters_by_tag_and_owner_are_links_that_keep_each_other(session: Session) -> None:
    page = overview_of(session, tag="team-search")
    assert {line.dag_id for line in page.lines} == {"search_release"} and page.gated == 5
    assert [f.label for f in page.tags] == ["team-checkout", "team-search", "team-secret"]
    assert [f.active for f in page.tags] == [False, True, False]
    assert page.tags[0].href == "/af/loadtest/?tag=team-checkout"
    assert {line.dag_id for line in overview_of(session, owner="alice").lines} == {"checkout_release"}
    both = overview_of(session, tag="team-search", owner="bob")
    assert {line.task_id for line in both.lines} == {"query", "suggest"}
    assert both.owners[0].href == "/af/loadtest/?tag=team-search&owner=airflow"
    assert overview_of(session, tag="team-search", owner="alice").lines == ()


def test_pages_hold_a_bounded_number_of_lines_and_link_to_each_other(session: Session) -> None:
    first = overview_of(session, per_page=2)
    assert (first.page, first.first, first.previous_href) == (1, 1, "")
    assert first.next_href == "/af/loadtest/?page=2"
    last = overview_of(session, per_page=2, page=99)  # past the end: the last page
    assert (last.page, len(last.lines), last.next_href) == (3, 1, "")
    assert last.previous_href == "/af/loadtest/?page=2"


def test_texts_are_clipped_and_many_failures_counted() -> None:
    from airflow_provider_loadtest.plugins.bounds import NAME_CHARS
    from airflow_provider_loadtest.plugins.history import Night
    from airflow_provider_loadtest.plugins.rows import RunResult

    rows = [
        {"metric": "M" * 5000, "value": 1.0, "passed": False, "status": "regression", "transaction": f"T{i}"}
        for i in range(40)
    ]
    result = RunResult.from_xcom({"scenario_id": "s" * 5000, "gate": rows})
    night = Night("r", -1, START, START, "failed", result)
    made = ov.line("dag", "task", [night], "")
    assert len(made.failing) == ov.FAILING_NAMED + 1 and made.failing[-1] == "and 37 more"
    assert all(len(name) <= 2 * NAME_CHARS + 3 for name in made.failing)
    assert len(made.scenario) == NAME_CHARS


def test_a_sparkline_of_any_values() -> None:
    assert ov.sparkline([None, None], [False, False], "m", "ms") is None
    flat = ov.sparkline([5.0, 5.0, None, 5.0], [False, True, False, False], "m", "ms")
    assert flat is not None and flat.path.count("M") == 2 and len(flat.failing) == 1
    wild = ov.sparkline([1.7e308, -5e-324, 3.0], [False] * 3, "m", "")
    assert wild is not None and "nan" not in wild.path and "inf" not in wild.path


# --- who sees what --------------------------------------------------------------------------------------


class FakeUser:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name


class PerDagAuthManager:
    """An auth manager with per-DAG permissions: ``lists`` are the DAGs it lists as readable to a user,
    ``entities`` the DAGs whose task instances and XCom it lets them read."""

    def __init__(self, lists: set[str], entities: set[str]) -> None:
        self.lists, self.entities = lists, entities
        self.asked: list[str] = []

    def get_authorized_dag_ids(self, *, user: Any, method: str = "GET", session: Any = None) -> set[str]:
        return set(self.lists)

    def is_authorized_dag(
        self, *, method: str, user: Any, access_entity: Any = None, details: Any = None
    ) -> bool:
        self.asked.append(details.id)
        return method == "GET" and access_entity is not None and details.id in self.entities


@pytest.fixture
def http(session: Session, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    from airflow.api_fastapi.core_api.security import get_user

    from airflow_provider_loadtest.plugins import app as view_app

    state: dict[str, Any] = {"manager": PerDagAuthManager(set(DAGS), set(DAGS))}
    monkeypatch.setattr(overview_page, "auth_manager", lambda: state["manager"])
    monkeypatch.setattr(view_app, "reading", lambda: nullcontext(session))
    app = view_app.create_app()
    app.dependency_overrides[get_user] = lambda: FakeUser("reader")
    with TestClient(app) as client:
        yield client, state


SECRET_TRACES = ("secret_release", "vault", "team-secret", "mallory", "br-secret")


@pytest.mark.parametrize(
    "manager",
    [
        PerDagAuthManager(set(DAGS) - {"secret_release"}, set(DAGS)),  # not among the readable DAGs
        PerDagAuthManager(set(DAGS), set(DAGS) - {"secret_release"}),  # its task instances / XCom refused
    ],
    ids=["dag-refused", "xcom-refused"],
)
def test_the_overview_lists_only_the_dags_the_user_may_read(
    http: tuple[TestClient, dict[str, Any]], manager: PerDagAuthManager
) -> None:
    client, state = http
    state["manager"] = PerDagAuthManager(set(DAGS), set(DAGS))
    everything = client.get("/")
    assert everything.status_code == 200 and "secret_release" in everything.text  # the test can see it
    state["manager"] = manager
    for path in ("/", "/?page=2"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        for trace in SECRET_TRACES:
            assert trace not in answer.text, (path, trace)
    for name, value in (("tag", "team-secret"), ("owner", "mallory")):
        # the refused DAG's tag or owner asked for: the very page a name no DAG has gets
        asked = client.get(f"/?{name}={value}").text
        unknown = client.get(f"/?{name}=no-such-{name}").text
        assert asked.replace(value, "?") == unknown.replace(f"no-such-{name}", "?")
        assert "secret_release" not in asked and "No gate matches these filters" in asked
    shown = client.get("/").text
    assert re.findall(r'data-dag-id="([^"]+)"', shown) == [
        "checkout_release",
        "checkout_release",
        "search_release",
        "search_release",
    ]
    assert "Gates 1 to 4 of 4" in shown
    assert (
        answer.headers["cache-control"] == "no-store"
        and "form-action 'none'" in answer.headers["content-security-policy"]
    )


def test_the_page_without_login_is_401_and_shows_no_gate(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_loadtest.plugins import app as view_app

    monkeypatch.setattr(overview_page, "auth_manager", lambda: PerDagAuthManager(set(DAGS), set(DAGS)))
    monkeypatch.setattr(view_app, "reading", lambda: nullcontext(session))
    app = view_app.create_app()
    with TestClient(app) as client:
        answer = client.get("/")
    assert answer.status_code == 401 and "checkout_release" not in answer.text


def test_the_page_lists_lines_with_links_and_bad_parameters_are_400(
    http: tuple[TestClient, dict[str, Any]],
) -> None:
    client, _ = http
    page = client.get("/?tag=team-checkout").text
    assert 'href="/dags/checkout_release/plugin/load-tests" target="_top"' in page
    assert 'href="/dags/checkout_release/tasks/cart/plugin/load-tests-task" target="_top"' in page
    assert '<svg class="spark headline"' in page and "<form" not in page and "<script>" not in page
    for query in ("page=0", "page=x", f"tag={'t' * 500}", "owner="):
        assert client.get(f"/?{query}").status_code == 400, query
    assert "No gate matches these filters" in client.get("/?tag=nothing-here").text


def test_the_plugin_puts_the_overview_in_airflows_navigation(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_loadtest.plugins import OVERVIEW_ROUTE, _external_views

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example/team-a/")
    (nav,) = [view for view in _external_views() if view["destination"] == "nav"]
    assert nav["href"] == "/team-a/loadtest/" and nav["name"] == "Load tests"
    assert nav["url_route"] == OVERVIEW_ROUTE
    routes = [view["url_route"] for view in _external_views()]
    assert len(set(routes)) == len(routes)  # the UI finds a nav page by its route among every view's


def test_the_docs_state_the_overviews_bounds() -> None:
    text = " ".join((Path(__file__).parents[2] / "docs" / "load_tests_view.md").read_text().split())
    for phrase in (
        f"the page holds {ov.PAGE_LINES} gates",
        f"last {ov.NIGHTS} nights",
        f"the first {ov.FAILING_NAMED} named",
        f"the newest {ov.SCANNED_RUNS} DAG runs of each readable DAG",
        "/plugin/load-tests-overview",
    ):
        assert phrase in text, phrase
