"""The simulator's harsher faults: unreadable success, 503 with Retry-After, trickling and hanging answers.

Each is checked from a raw socket or ``requests`` the way a client meets it, and for the kinds that
process the request, that the start really created its run (the service acted although the client
cannot know it).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import requests

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from airflow_provider_loadtest.simulator.faults import GARBAGE_BODY, FaultSpec
from airflow_provider_loadtest.simulator.recorder import RecordedRequest

pytestmark = pytest.mark.integration

TIMEOUT = 5  # seconds, for every HTTP call
START = "/runtime/scenarios/run/demo-scenario"


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[SimulatorHandle]:
    with run_simulator(run_seconds=60) as sim:
        yield sim


@pytest.fixture
def sim(shared_sim: SimulatorHandle) -> SimulatorHandle:
    shared_sim.reset()
    return shared_sim


def _fault(sim: SimulatorHandle, **values: object) -> None:
    sim.state.add_fault(FaultSpec.model_validate(values))


def _start(sim: SimulatorHandle, timeout: float = TIMEOUT) -> requests.Response:
    return requests.post(sim.url + START, headers=sim.headers(), timeout=timeout)


def test_garbage_answers_200_unreadable_after_creating_the_run(sim: SimulatorHandle) -> None:
    _fault(sim, kind="garbage", route="run_scenario", count=1)
    answer = _start(sim)
    assert answer.status_code == 200
    assert answer.content == GARBAGE_BODY
    with pytest.raises(ValueError):
        answer.json()
    assert len(sim.runs()) == 1
    assert [(r.fault, r.status) for r in sim.starts()] == [("garbage", 200)]
    assert _start(sim).json()["benchResultIds"]  # count=1: the next start is answered normally


def test_unavailable_is_503_with_retry_after(sim: SimulatorHandle) -> None:
    _fault(sim, kind="unavailable", route="member_of", count=1, retryAfter=30)
    answer = requests.get(sim.url + "/workspaces/member-of", headers=sim.headers(), timeout=TIMEOUT)
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "30"
    assert [r.fault for r in sim.requests] == ["unavailable"]


def test_error_500_is_allowed(sim: SimulatorHandle) -> None:
    _fault(sim, kind="error", status=500, route="get_bench_result", count=1)
    run_id = _start(sim).json()["benchResultIds"][0]
    answer = requests.get(
        sim.url + f"/runtime/bench-results/{run_id}", headers=sim.headers(), timeout=TIMEOUT
    )
    assert answer.status_code == 500
    assert "Retry-After" not in answer.headers


def _raw_get(sim: SimulatorHandle, path: str, read_timeout: float) -> socket.socket:
    host, port = sim.url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    conn.settimeout(read_timeout)
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {sim.api_key}\r\n\r\n"
    conn.sendall(request.encode())
    return conn


def test_trickle_sends_one_byte_per_interval_so_a_per_read_timeout_never_fires(sim: SimulatorHandle) -> None:
    _fault(sim, kind="trickle", route="member_of", count=1, intervalSeconds=0.2, limitSeconds=30)
    conn = _raw_get(sim, "/workspaces/member-of", read_timeout=2)
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(4096)
        headers, _, body = head.partition(b"\r\n\r\n")
        assert headers.startswith(b"HTTP/1.1 200")
        reads = [body] if body else []
        for _ in range(5):  # each read, bounded by the 2 s read timeout, gets exactly one byte
            reads.append(conn.recv(4096))
        assert all(len(chunk) == 1 for chunk in reads[-5:])


def test_trickle_on_start_creates_the_run_and_a_timeout_sees_nothing(sim: SimulatorHandle) -> None:
    _fault(sim, kind="trickle", route="run_scenario", count=1, intervalSeconds=0.5, limitSeconds=5)
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        # requests' read timeout is per read: it never fires, the server's own bound ends the answer
        requests.post(sim.url + START, headers=sim.headers(), timeout=(TIMEOUT, 2), stream=False)
    assert len(sim.runs()) == 1


def test_trickle_is_bounded_server_side(sim: SimulatorHandle) -> None:
    _fault(sim, kind="trickle", route="member_of", count=1, intervalSeconds=0.3, limitSeconds=1)
    conn = _raw_get(sim, "/workspaces/member-of", read_timeout=TIMEOUT)
    received = b""
    with conn:
        for _ in range(100):
            chunk = conn.recv(4096)
            if not chunk:
                break
            received += chunk
    _, _, body = received.partition(b"\r\n\r\n")
    assert 0 < len(body) <= 5  # cut after about 1 s: a few bytes, never the whole answer


def test_hang_never_answers_and_creates_no_run(sim: SimulatorHandle) -> None:
    _fault(sim, kind="hang", route="run_scenario", count=1, limitSeconds=30)
    with pytest.raises(requests.exceptions.ReadTimeout):
        _start(sim, timeout=1)
    assert sim.runs() == []


def test_hang_is_bounded_server_side(sim: SimulatorHandle) -> None:
    _fault(sim, kind="hang", route="member_of", count=1, limitSeconds=0.5)
    conn = _raw_get(sim, "/workspaces/member-of", read_timeout=TIMEOUT)
    with conn:
        assert conn.recv(4096) == b""  # closed by the server, without a byte
    deadline = time.monotonic() + TIMEOUT
    while not _member_of(sim) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [(r.fault, r.status) for r in _member_of(sim)] == [("hang", None)]


def _member_of(sim: SimulatorHandle) -> list[RecordedRequest]:
    return [r for r in sim.requests if r.route == "member_of"]


def test_new_kinds_come_through_the_admin_route(sim: SimulatorHandle) -> None:
    rules = [
        {"kind": "trickle", "route": "get_progress", "intervalSeconds": 2, "limitSeconds": 20},
        {"kind": "hang", "route": "stop_run", "limitSeconds": 10},
        {"kind": "garbage", "route": "run_scenario", "probability": 0.5},
        {"kind": "unavailable", "route": "threshold_alarms", "retryAfter": 30},
    ]
    answer = requests.post(sim.url + "/_simulator/faults", json=rules, timeout=TIMEOUT)
    assert answer.status_code == 200, answer.text
    assert [r.kind for r in sim.state.faults.rules] == ["trickle", "hang", "garbage", "unavailable"]
    refused = requests.post(
        sim.url + "/_simulator/faults", json={"kind": "hang", "limitSeconds": 100000}, timeout=TIMEOUT
    )
    assert refused.status_code == 400  # a hang is always bounded
