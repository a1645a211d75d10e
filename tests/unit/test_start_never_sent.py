"""A start that cannot have reached the service is not "may be billing" (issue 34).

A TLS handshake that failed, a refused connection or a host name that does not resolve mean the start
request was never sent: the task fails saying nothing was started and what to fix, and a retry may start
the run. A TLS error, a reset or a read timeout while the answer was awaited may follow a sent request:
those stay "outcome unknown" (start-once, issue 10).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import requests_mock as rm
import urllib3

from airflow_provider_loadtest.compat import AirflowException, AirflowFailException
from airflow_provider_loadtest.hooks.loadtest import connection_never_opened, handshake_failed
from airflow_provider_loadtest.operators.run_scenario import RUN_RECORD_KEY
from tests.conftest import connection_json
from tests.unit.test_hook import RUN_URL
from tests.unit.test_run_lifecycle import FakeStateStore, _context, _op


@pytest.fixture
def plain_http_port() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback port where a plain-http server answers (a TLS ClientHello gets an HTTP 400); the
    first bytes of each connection it accepted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen: list[bytes] = []
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    seen.append(conn.recv(4096))
                    conn.sendall(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        done.set()
        thread.join(5)
        server.close()


def _refusing_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    sock.close()  # nothing listens there now: a connect is refused
    return port


def test_https_to_a_plain_http_service_started_nothing_and_says_the_fix(
    monkeypatch: pytest.MonkeyPatch, clock: list[float], plain_http_port: tuple[int, list[bytes]]
) -> None:
    """The production report: a connection host without ``/http`` aimed https at the simulator, and the
    task said the service "may have started (and be billing) a load test"."""
    port, seen = plain_http_port
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=f"127.0.0.1:{port}"))
    store = FakeStateStore()
    with pytest.raises(AirflowException) as caught:
        _op().execute(_context(store))  # type: ignore[arg-type]
    message = str(caught.value)
    assert not isinstance(caught.value, AirflowFailException)
    assert "Nothing was started" in message and "never reached the service" in message
    assert "may have started" not in message and "billing" not in message
    assert "TLS handshake failed" in message and "/http" in message  # the fix
    assert RUN_RECORD_KEY not in store.data  # a retry may start
    assert seen and all(not first.startswith(b"POST") for first in seen)  # no request ever went out


def test_a_refused_start_started_nothing(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=f"http://127.0.0.1:{_refusing_port()}")
    )
    store = FakeStateStore()
    with pytest.raises(AirflowException) as caught:
        _op().execute(_context(store))  # type: ignore[arg-type]
    message = str(caught.value)
    assert not isinstance(caught.value, AirflowFailException)
    assert "Nothing was started" in message and "connection refused" in message
    assert "may have started" not in message
    assert RUN_RECORD_KEY not in store.data


def _name_not_resolved() -> requests.ConnectionError:
    """What requests raises for a host that does not resolve (urllib3 raises its error from the
    resolver's ``gaierror``)."""
    gaierror = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    reason = urllib3.exceptions.NameResolutionError("nowhere.invalid", None, gaierror)  # type: ignore[arg-type]
    reason.__cause__ = gaierror
    return requests.ConnectionError(urllib3.exceptions.MaxRetryError(None, "/runtime", reason))  # type: ignore[arg-type]


def test_a_host_that_does_not_resolve_started_nothing(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float]
) -> None:
    requests_mock.post(RUN_URL, exc=_name_not_resolved())
    store = FakeStateStore()
    with pytest.raises(AirflowException) as caught:
        _op().execute(_context(store))  # type: ignore[arg-type]
    message = str(caught.value)
    assert "Nothing was started" in message and "not resolved" in message
    assert RUN_RECORD_KEY not in store.data


@pytest.mark.parametrize(
    "error",
    [
        requests.exceptions.SSLError(ssl.SSLError(1, "[SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC]")),
        requests.ConnectionError(
            urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError())
        ),
        requests.ReadTimeout("read timed out"),
    ],
    ids=["tls-error-reading-the-answer", "reset-after-sending", "read-timeout"],
)
def test_a_failure_after_the_request_may_have_left_stays_uncertain(
    loadtest_conn: str, requests_mock: rm.Mocker, clock: list[float], error: Exception
) -> None:
    """Only errors that prove the request never left count: these may follow a sent (and billed) start."""
    requests_mock.post(RUN_URL, exc=error)
    store = FakeStateStore()
    with pytest.raises(AirflowFailException, match="outcome is unknown"):
        _op().execute(_context(store))  # type: ignore[arg-type]
    assert store.data[RUN_RECORD_KEY]["run"] is None  # the retry refuses to start again


def test_only_a_handshake_tls_error_proves_the_request_never_left(
    plain_http_port: tuple[int, list[bytes]],
) -> None:
    port, _ = plain_http_port
    with pytest.raises(requests.exceptions.SSLError) as caught:
        requests.post(f"https://127.0.0.1:{port}/x", timeout=5)
    assert handshake_failed(caught.value) and connection_never_opened(caught.value)
    late: Any = requests.exceptions.SSLError(ssl.SSLError(1, "bad record mac"))
    assert not handshake_failed(late) and not connection_never_opened(late)
