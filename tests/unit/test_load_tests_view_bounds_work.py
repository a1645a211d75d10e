"""The "Load tests" view bounded in work, bytes and memory, whatever XCom holds and however many look
(issue 35). Each test here attacks one bound and fails without it:

- the queries read only what a page shows (Airflow's XCom indexes and primary keys, not every
  ``return_value`` of the deployment), and a DAG's tab reads each task only when the page reaches it;
- texts are clipped when decoded, run ids when read, the decoded results are bounded in bytes;
- concurrent misses decode once;
- a value nested 1,000 levels deep is an unreadable night, not a 500;
- a view holds one database connection at a time, and few views are built at once (503 past a wait);
- the JSON answer is paged, bounded in rows and bytes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import Depends
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from airflow_provider_loadtest.plugins import app as view_app
from airflow_provider_loadtest.plugins import bounds, slots, store
from airflow_provider_loadtest.plugins.decoded import RESULTS, DecodedResults, size_of
from airflow_provider_loadtest.plugins.rows import RunResult
from tests.unit import view_db

DAG = "loadtest_many"
TASK = view_db.TASK


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = view_db.engine_at(tmp_path / "airflow.db")
    RESULTS.clear()
    yield made
    RESULTS.clear()
    made.dispose()


@pytest.fixture
def viewer(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The view's app reading ``engine`` (access allowed: the real checks are tested elsewhere)."""
    monkeypatch.setattr(view_app, "_access_dependencies", lambda: [Depends(lambda: None)])
    monkeypatch.setattr(view_app, "reading", lambda: view_db.session_on(engine))
    monkeypatch.setattr(store, "dag_exists", lambda session, dag_id: True)
    with TestClient(view_app.create_app()) as client:
        yield client


def deep(levels: int = 1000) -> str:
    return "[" * levels + "]" * levels


# --- queries that read only what is shown ---------------------------------------------------------------


def plan(engine: Engine, query: Any) -> list[str]:
    compiled = query.compile(engine, compile_kwargs={"literal_binds": True})
    with engine.connect() as connection:
        return [row[-1] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}")]


def test_each_query_reads_xcom_by_its_task_index_or_primary_key_never_by_key_alone(engine: Engine) -> None:
    """Before: a task's results were asked by ``dag_run_id IN (...)``, and SQLite read them through
    ``idx_xcom_key``: every ``return_value`` of the deployment, for each task (400 tasks x 10 nights:
    24 s)."""
    queries = {
        "tasks": store.tasks_query(DAG),
        "nights": store.nights_query(DAG, TASK, 90),
        "results": store.results_query(DAG, TASK, [1, 2, 3]),
    }
    for name, query in queries.items():
        steps = plan(engine, query)
        on_xcom = [s for s in steps if " xcom" in s]
        assert on_xcom, (name, steps)
        for step in on_xcom:
            assert "idx_xcom_key" not in step and not step.startswith("SCAN"), (name, steps)
            assert "idx_xcom_task_instance (dag_id=?" in step or "sqlite_autoindex_xcom_1" in step, (
                name,
                step,
            )
    assert "idx_xcom_task_instance (dag_id=? AND task_id=?" in plan(engine, queries["results"])[0]


def test_values_are_read_as_text_and_run_ids_clipped_by_the_database() -> None:
    """On PostgreSQL the driver would decode JSONB itself (no depth limit): the view reads the text."""
    from sqlalchemy.dialects import postgresql

    sql = str(store.results_query(DAG, TASK, [1]).compile(dialect=postgresql.dialect()))
    assert "CAST(xcom.value AS TEXT)" in sql
    nights_sql = str(store.nights_query(DAG, TASK, 90).compile(dialect=postgresql.dialect()))
    assert "substr(xcom_1.run_id, " in nights_sql


def test_a_dag_tab_reads_each_task_only_when_the_page_reaches_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 gated tasks: nothing heavy before the first byte, and the page's byte budget stops the reads
    (before: every task read, decoded and built before the first byte: 32-37 s of CPU)."""
    tasks = [f"task_{i:03d}" for i in range(300)]
    view_db.seed(engine, DAG, tasks, 3, value=lambda task, night: view_db.result(night, rows=40))
    monkeypatch.setattr(view_app, "reading", lambda: view_db.session_on(engine))
    read: list[str] = []
    real = store.nights

    def counted(session: Session, dag_id: str, task_id: str, limit: int, offset: int = 0) -> Any:
        read.append(task_id)
        return real(session, dag_id, task_id, limit, offset)

    monkeypatch.setattr(store, "nights", counted)
    with Session(engine) as session:
        totals = store.gated_tasks(session, DAG)
    assert len(totals) == 300 and set(totals.values()) == {3}
    budget = bounds.PageBudget(limit=400_000)
    views = view_app.task_views(DAG, totals, 90, "", budget)
    parts = view_app._chunks(
        view_app.render_parts("/s", 200, budget, title="t", subject=DAG, single=False, tasks=views)
    )
    assert read == []  # nothing read before the page is pulled
    held = view_db.Checkouts(engine)
    first = next(parts)
    at_first = len(read)
    assert held.most == 1 and held.now == 0  # no connection held while the viewer takes a piece
    html = first.decode() + b"".join(parts).decode()
    assert budget.cut and "This page reached its size limit" in html
    assert 1 <= at_first < len(read) < 60, (at_first, len(read))  # read as the page went, then stopped
    assert html.count('<section class="task"') == len(read)


# --- bytes: texts clipped when decoded, the kept results bounded in bytes ---------------------------------


def test_a_25_mb_note_is_clipped_when_decoded_and_counted_small_in_the_cache() -> None:
    huge = "x" * 25_000_000
    text = json.dumps(
        {
            "bench_result_id": huge,
            "report_url": "https://saas.example/" + huge,
            "gate": view_db.gate(3, note=huge, reason=huge, transaction=huge),
            "night_effect": {"shift_sd": 1.0, "reason": huge, "note": huge},
        }
    )
    read = RunResult.from_json(text)
    assert read.has_result and len(read.entries) == 3
    assert len(read.by_series) == 1  # the three rows are one series once their names are clipped
    texts = [read.bench_result_id, read.entries[0].note, read.entries[0].reason, read.entries[0].transaction]
    assert read.night_effect is not None
    texts += [read.night_effect.reason, read.night_effect.note]
    for kept in texts:
        assert kept is not None and len(kept) == bounds.DECODED_CHARS and kept.endswith("…")
    assert read.report_url is None  # a link longer than any report's is not one
    assert size_of(read) < 200_000  # against 25 MB a text before


def test_the_kept_results_are_bounded_in_bytes_whatever_their_notes() -> None:
    """20 nights of a 25 MB note each (before: the process went from 228 to 732 MB, for good)."""
    kept = DecodedResults(limit=2**20)
    note = "n" * 2_000_000
    for night in range(20):
        text = json.dumps({"gate": view_db.gate(3, note=note)})
        got = kept.get_many(
            [night], lambda missing, text=text: {k: RunResult.from_json(text) for k in missing}
        )
        assert {len(e.note) for e in got[night].entries} == {bounds.DECODED_CHARS}  # what is kept is small
    assert kept.bytes <= 2**20 and len(kept) >= 10  # each small once clipped: most kept


def test_the_estimate_is_near_what_a_result_holds() -> None:
    """``size_of`` against tracemalloc for a night of a wide gate: neither far under nor far over."""
    import tracemalloc

    text = json.dumps(
        {"gate": [{**r, "transaction": f"Transaction {i:03d}"} for i, r in enumerate(view_db.gate(201))]}
    )
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        results = [RunResult.from_json(text) for _ in range(20)]
        held = (tracemalloc.get_traced_memory()[0] - before) / 20
    finally:
        tracemalloc.stop()
    assert 0.5 * held <= size_of(results[0]) <= 4 * held, (size_of(results[0]), held)


def test_large_values_are_fetched_a_few_at_a_time_each_decoded_before_the_next(engine: Engine) -> None:
    """12 nights of a 5 MB value: never all in memory at once (before: every value of the page fetched,
    then decoded; 20 nights of 75 MB values took the process to 2 GB)."""
    import tracemalloc

    note = "n" * 5_000_000
    view_db.seed(engine, DAG, [TASK], 12, value=lambda task, night: view_db.result(night, rows=1, note=note))
    with Session(engine) as session:
        tracemalloc.start()
        try:
            nights = store.nights(session, DAG, TASK, 12)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert len(nights) == 12 and all(len(n.result.entries[0].note) == bounds.DECODED_CHARS for n in nights)
    assert peak < (store.VALUES_AT_ONCE + 6) * 5_000_000, peak / 1e6  # all 12 values: 65 MB


def test_rows_made_for_pages_are_kept_only_a_few_per_result() -> None:
    from airflow_provider_loadtest.plugins.rows import ROWS_KEPT

    read = RunResult.from_json(json.dumps({"gate": view_db.gate(500)}))
    for i in range(500):
        read.row(i)
    assert len(read._rows) == ROWS_KEPT


def test_long_run_ids_are_read_clipped_and_their_links_escaped(engine: Engine) -> None:
    """365 nights of 100 KB run ids (before: a 36.6 MB page against the 6 MB bound)."""
    view_db.seed(engine, DAG, [TASK], 30, run_id=lambda night: f"{night:04d}-" + 'r<&"' * 25_000)
    with Session(engine) as session:
        nights = store.nights(session, DAG, TASK, 30)
    assert len(nights) == 30 and {len(n.run_id) for n in nights} == {bounds.RUN_ID_CHARS}
    assert all(n.run_id.endswith("…") for n in nights)
    from airflow_provider_loadtest.plugins.history import build
    from airflow_provider_loadtest.plugins.page import task_view

    html = view_app.render_html(
        "/s", 200, title="t", subject=DAG, single=True, tasks=[task_view(build(DAG, TASK, nights), "")]
    )
    assert len(html) < 400_000 and 'r<&"' not in html and "r&lt;&amp;&#34;" in html
    assert "/runs/0029-r%3C%26%22" in html  # the link escaped as any


# --- one decode for concurrent misses -----------------------------------------------------------------


def test_concurrent_misses_of_the_same_results_decode_once() -> None:
    """20 viewers open a cold page together (before: 20 decodes side by side, peak 5.7 GB)."""
    kept, calls = DecodedResults(), []
    text = json.dumps({"gate": view_db.gate(20)})

    def decode(missing: list[Any]) -> dict[Any, RunResult]:
        calls.append(sorted(missing))
        time.sleep(0.3)  # a wide year's decode
        return {key: RunResult.from_json(text) for key in missing}

    found: list[dict[Any, RunResult]] = []
    threads = [
        threading.Thread(target=lambda: found.append(kept.get_many([1, 2, 3], decode))) for _ in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert calls == [[1, 2, 3]]
    assert len(found) == 20 and all(f[1] is found[0][1] for f in found)


def test_a_failed_decode_lets_the_waiters_decode_for_themselves() -> None:
    kept, calls = DecodedResults(), []
    started = threading.Event()

    def failing(missing: list[Any]) -> dict[Any, RunResult]:
        calls.append("failing")
        started.set()
        time.sleep(0.2)
        raise OSError("the database went away")

    def working(missing: list[Any]) -> dict[Any, RunResult]:
        calls.append("working")
        return {key: RunResult.from_xcom({"gate": []}) for key in missing}

    failures: list[BaseException] = []

    def fail() -> None:
        try:
            kept.get_many([1], failing)
        except OSError as exc:
            failures.append(exc)

    first = threading.Thread(target=fail)
    first.start()
    started.wait(5)
    assert set(kept.get_many([1], working)) == {1}
    first.join(5)
    assert calls == ["failing", "working"] and len(failures) == 1


# --- a value nested 1,000 levels deep --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        deep(),
        '{"gate": ' + deep() + "}",
        '{"gate": [], "night_effect": ' + deep() + "}",
        '{"gate": [{"metric": "M", "note": ' + deep() + "}]}",
        json.dumps('{"gate": ' + deep() + "}"),  # a JSON string holding it
    ],
)
def test_a_value_nested_1000_deep_is_an_unreadable_night_not_an_error(text: str) -> None:
    read = RunResult.from_json(text, {"bench_result_id": "br-9"})
    assert read.bench_result_id == "br-9" and read.entries == ()


def test_a_night_nested_1000_deep_in_the_database_shows_as_no_verdict(
    engine: Engine, viewer: TestClient
) -> None:
    view_db.seed(
        engine, DAG, [TASK], 3, value=lambda task, night: deep() if night == 1 else view_db.result(night)
    )
    for path in (f"/dags/{DAG}", f"/dags/{DAG}/tasks/{TASK}"):
        page = viewer.get(path)
        assert page.status_code == 200 and page.text.rstrip().endswith("</html>")
        assert 'data-run-id="scheduled__0001" data-verdict="no verdict"' in page.text
    data = viewer.get(f"/api/dags/{DAG}/tasks/{TASK}").json()
    assert [n["verdict"] for n in data["nights"]] == ["pass", "no verdict", "pass"]


# --- connections held, views built at once -----------------------------------------------------------------


def test_a_view_holds_one_connection_at_a_time_and_none_once_sent(engine: Engine, viewer: TestClient) -> None:
    """Before: the request's session was used for every read (on Airflow 3.1 it is closed only once the
    answer is sent: a connection held for the whole stream)."""
    view_db.seed(engine, DAG, [f"task_{i}" for i in range(12)], 5)
    held = view_db.Checkouts(engine)
    assert viewer.get(f"/dags/{DAG}").text.count('<section class="task"') == 12
    assert held.most == 1 and held.now == 0
    assert viewer.get(f"/api/dags/{DAG}/tasks/task_3").status_code == 200
    assert held.most == 1 and held.now == 0


def test_twenty_simultaneous_views_hold_at_most_the_slots_connections(
    engine: Engine, viewer: TestClient
) -> None:
    view_db.seed(engine, DAG, [f"task_{i}" for i in range(8)], 20, value=lambda t, n: view_db.result(n, 60))
    held = view_db.Checkouts(engine)
    codes: list[int] = []

    def view() -> None:
        RESULTS.clear()  # every view cold
        codes.append(viewer.get(f"/dags/{DAG}").status_code)

    threads = [threading.Thread(target=view) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(codes) == 20 and set(codes) <= {200, 503}
    assert 1 <= held.most <= slots.VIEW_SLOTS and held.now == 0


def test_a_view_that_finds_no_slot_in_time_is_503_with_retry_after(
    viewer: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    view_db.seed(engine, DAG, [TASK], 2)
    few = slots.Slots(size=1, wait=0.05)
    monkeypatch.setattr(view_app, "SLOTS", few)
    assert few.acquire()  # another view is being built
    try:
        for path in (f"/dags/{DAG}", f"/dags/{DAG}/tasks/{TASK}", f"/api/dags/{DAG}/tasks/{TASK}"):
            answer = viewer.get(path)
            assert answer.status_code == 503, path
            assert answer.headers["retry-after"] == str(slots.RETRY_AFTER_S)
            assert answer.headers["cache-control"] == "no-store"
            assert slots.BUSY in answer.text
    finally:
        few.release()
    assert viewer.get(f"/dags/{DAG}").status_code == 200


def test_a_streaming_page_that_waits_too_long_for_a_slot_ends_cut_and_reads_no_further() -> None:
    few = slots.Slots(size=1, wait=0.05)
    budget = bounds.PageBudget()
    built: list[int] = []

    def parts() -> Iterator[bytes]:
        for i in range(10):
            if budget.full:
                yield b"</html>"
                return
            built.append(i)
            yield b"part"

    pieces = few.pieces(parts(), budget.stop)
    assert next(pieces) == b"part"
    assert few.acquire()  # taken by another view meanwhile
    try:
        rest = list(pieces)
    finally:
        few.release()
    assert rest == [b"</html>"] and built == [0] and budget.cut


def test_slots_are_not_held_while_the_viewer_takes_a_piece() -> None:
    few = slots.Slots(size=1, wait=0.05)
    pieces = few.pieces(iter([b"a", b"b"]), bounds.PageBudget().stop)
    assert next(pieces) == b"a"
    assert few.acquire()  # free while the piece is with the viewer (who may never come back)
    few.release()


# --- the JSON answer, paged -----------------------------------------------------------------------------


def test_the_json_answer_is_paged_in_bytes_and_its_next_links_cover_every_night_once(
    engine: Engine, viewer: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: no bound (a 25 MB note a night: 524 MB in 3.5 s)."""
    view_db.seed(engine, DAG, [TASK], 40, value=lambda task, night: view_db.result(night, rows=30))
    monkeypatch.setattr(view_app, "JSON_BYTES", 20_000)
    seen: list[str] = []
    path: str | None = f"/api/dags/{DAG}/tasks/{TASK}?nights=1000"
    pages = 0
    while path:
        answer = viewer.get(path)
        assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
        data = answer.json()
        assert len(answer.content) < 20_000 + 12_000  # the bound, and at most one night past it
        assert data["total"] == 40 and data["offset"] == len(seen)
        seen += [n["run_id"] for n in data["nights"]]
        path, pages = data["next"], pages + 1
    assert pages > 3 and seen == [f"scheduled__{n:04d}" for n in range(39, -1, -1)]


def test_the_json_answer_reads_no_further_than_it_answers(
    engine: Engine, viewer: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    view_db.seed(engine, DAG, [TASK], 200)
    monkeypatch.setattr(view_app, "JSON_BYTES", 5_000)
    asked: list[tuple[int, int]] = []
    real = store.nights

    def counted(session: Session, dag_id: str, task_id: str, limit: int, offset: int = 0) -> Any:
        asked.append((limit, offset))
        return real(session, dag_id, task_id, limit, offset)

    monkeypatch.setattr(store, "nights", counted)
    data = viewer.get(f"/api/dags/{DAG}/tasks/{TASK}?nights=200&offset=10").json()
    assert asked == [(view_app.JSON_BATCH, 10)] and 0 < len(data["nights"]) < view_app.JSON_BATCH
    assert data["next"].endswith(f"?nights=200&offset={10 + len(data['nights'])}")
