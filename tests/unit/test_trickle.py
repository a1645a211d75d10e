"""A real server on 127.0.0.1 that answers one byte a second, headers included: each read is quick,
so per-read timeouts never fire; only a total bound per call ends the wait. Both clients, both phases
(headers, body), and the watch deadline stopping the run while a read trickles.

The server gives up after ``TRICKLE_FOR_S`` and then sends the rest of a valid answer, so code without
a total bound gets an answer (and fails these tests) instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import logging
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import RetryPolicy
from airflow_provider_loadtest.decisions.watch import RunOutcome, WatchOptions, watch_run
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.hooks.settings import ConnectionSettings
from tests.conftest import API_KEY, connection_json

TRICKLE_FOR_S = 15
BODY = b'{"id": "br-1", "state": "RUNNING"}'
ONE_TRY = RetryPolicy(max_attempts=1)


class _Trickler(socketserver.BaseRequestHandler):
    """Stops answer at once; every other call trickles its answer (headers first, or body)."""

    server: _Server

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        if b"/stop/" in head.split(b"\r\n", 1)[0]:
            self.server.stops += 1
            self.request.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
            + BODY
        )
        slow_from = 0 if self.server.phase == "headers" else answer.index(b"\r\n\r\n") + 4
        self.request.sendall(answer[:slow_from])
        try:
            for i in range(TRICKLE_FOR_S):
                self.request.sendall(answer[slow_from + i : slow_from + i + 1])
                time.sleep(1)
            self.request.sendall(answer[slow_from + TRICKLE_FOR_S :])
            self.server.completed += 1  # the client waited for the whole trickle: what must not happen
        except OSError:
            return  # the client cut the connection: what the tests expect


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    phase = "body"
    stops = 0
    completed = 0
    phases: ClassVar[tuple[str, str]] = ("headers", "body")


@pytest.fixture(params=_Server.phases)
def server(request: pytest.FixtureRequest) -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Trickler)
    srv.phase = request.param
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def _base(srv: _Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.fixture
def hook(server: _Server, monkeypatch: pytest.MonkeyPatch) -> LoadTestHook:
    """A hook whose tries may last 2 s in total (the read timeout bounds the whole try): longer than the
    1 s between two bytes, so per-read timeouts alone would wait for ever."""
    conn = connection_json(host=_base(server), connect_timeout=1, read_timeout=2)
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_TRICKLE", conn)
    return LoadTestHook(loadtest_conn_id="loadtest_trickle")


def _settings(srv: _Server) -> ConnectionSettings:
    base = _base(srv)
    return ConnectionSettings(
        base_url=base, api_key=API_KEY, ui_url=base + "/ui", connect_timeout_s=1, read_timeout_s=2
    )


def test_sync_call_has_a_total_time_bound(hook: LoadTestHook, server: _Server) -> None:
    hook.retry_policy = ONE_TRY  # type: ignore[misc]
    with pytest.raises(LoadTestApiError, match=r"no complete answer within 2\.0 s") as raised:
        hook.get_bench_result("br-1")
    assert raised.value.outcome_unknown
    assert server.completed == 0  # cut while the server was still trickling, not after it gave up


def test_async_call_has_a_total_time_bound(server: _Server) -> None:
    async def go() -> Any:
        async with AsyncLoadTestClient(_settings(server), retry_policy=ONE_TRY) as client:
            return await client.call(endpoints.get_bench_result("br-1"))

    with pytest.raises(LoadTestApiError, match=r"no complete answer within 2\.0 s") as raised:
        asyncio.run(go())
    assert raised.value.outcome_unknown
    assert server.completed == 0


def _watch(deadline_in_s: float) -> Any:
    now = time.time()
    options = WatchOptions(check_interval_s=1, deadline=now + deadline_in_s)
    return watch_run("br-1", options, started_at=now)


def _stopped_at_the_deadline(outcome: RunOutcome, server: _Server) -> None:
    assert outcome.reason == "timeout" and not outcome.succeeded
    assert outcome.stopped and server.stops == 1
    assert server.completed == 0


def test_sync_watch_deadline_stops_the_run_during_a_trickling_read(
    hook: LoadTestHook, server: _Server
) -> None:
    outcome = hook.drive(_watch(1.5), logging.getLogger("test"))
    _stopped_at_the_deadline(outcome, server)


def test_async_watch_deadline_stops_the_run_during_a_trickling_read(server: _Server) -> None:
    async def go() -> RunOutcome:
        async with AsyncLoadTestClient(_settings(server)) as client:
            return await client.drive(_watch(1.5), logging.getLogger("test"))

    _stopped_at_the_deadline(asyncio.run(go()), server)
