"""The hook reads the environment once per session (``trust_env=False``), and still obeys it.

``requests`` scans the environment for proxies on every call; the hook resolves proxies, ``NO_PROXY``
and the CA bundle once, for the connection's host. These tests pin down that nothing users set in the
environment is lost by that: a real proxy on 127.0.0.1 must see the calls, ``NO_PROXY`` must bypass
it, ``REQUESTS_CA_BUNDLE`` must reach ``verify``, and a ``.netrc`` must not replace the key.
"""

from __future__ import annotations

import json
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests_mock

from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import RetryPolicy
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from tests.conftest import API_KEY, connection_json

ANSWER = json.dumps({"id": "br-1", "state": "RUNNING"}).encode()
TRICKLE_BYTES = 16  # 8 s of headers; the connection's bound is 2 s
ORIGIN = "http://service.invalid:8090"  # never resolved: only the proxy is ever connected to


class _Proxy(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.request_lines: list[str] = []
        self.authorizations: list[str] = []
        self.trickle = False  # send the answer one byte every 0.5 s (for at most TRICKLE_BYTES bytes)
        self.trickled: list[int] = []  # per trickled answer: the bytes sent before the client hung up


class _ProxyHandler(socketserver.StreamRequestHandler):
    """An HTTP forward proxy that answers every request itself (absolute-form request lines)."""

    server: _Proxy

    def handle(self) -> None:
        self.connection.settimeout(5)
        line = self.rfile.readline(65536).decode("latin-1").strip()
        for _ in range(100):  # bounded: a request has a few headers
            header = self.rfile.readline(65536).decode("latin-1").strip()
            if not header:
                break
            name, _, value = header.partition(":")
            if name.lower() == "authorization":
                self.server.authorizations.append(value.strip())
        self.server.request_lines.append(line)
        answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(ANSWER)}\r\n\r\n".encode()
            + ANSWER
        )
        if self.server.trickle:  # each byte quick, the whole slow: only a whole-request bound ends it
            self.server.trickled.append(0)
            for i in range(TRICKLE_BYTES):
                try:
                    self.wfile.write(answer[i : i + 1])
                    self.wfile.flush()
                except OSError:  # the client hung up: what the test wants
                    return
                self.server.trickled[-1] += 1
                time.sleep(0.5)
        self.wfile.write(answer[TRICKLE_BYTES if self.server.trickle else 0 :])


@pytest.fixture
def proxy() -> Iterator[_Proxy]:
    server = _Proxy()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    proxies = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
    for name in (*proxies, "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_the_session_does_not_scan_the_environment_per_call(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=ORIGIN))
    assert LoadTestHook().session.trust_env is False


def test_a_proxy_from_the_environment_carries_the_calls(clean_env: pytest.MonkeyPatch, proxy: _Proxy) -> None:
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=ORIGIN))
    clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    hook = LoadTestHook()

    assert hook.get_bench_result("br-1").state == "RUNNING"
    assert hook.get_bench_result("br-1").state == "RUNNING"  # and on every call, not just the first

    assert proxy.request_lines == [f"GET {ORIGIN}/runtime/bench-results/br-1 HTTP/1.1"] * 2
    assert proxy.authorizations == [f"Bearer {API_KEY}"] * 2


def test_headers_trickled_through_the_proxy_are_bounded_too(
    clean_env: pytest.MonkeyPatch, proxy: _Proxy
) -> None:
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=ORIGIN, read_timeout=2))
    clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    proxy.trickle = True
    hook = LoadTestHook()
    hook.retry_policy = RetryPolicy(max_attempts=1)
    with pytest.raises(LoadTestApiError, match="whole-request bound"):
        hook.get_bench_result("br-1")
    for _ in range(100):  # bounded: the proxy notices the hang-up at its next byte, within 0.5 s
        if len(proxy.request_lines) == 1 and proxy.trickled and proxy.trickled[0] < TRICKLE_BYTES:
            break
        time.sleep(0.05)
    # The client hung up mid-headers: without the bound it would have read all of them (8 s).
    assert proxy.trickled and proxy.trickled[0] < TRICKLE_BYTES


def test_no_proxy_for_the_services_host_bypasses_the_proxy(
    clean_env: pytest.MonkeyPatch, proxy: _Proxy
) -> None:
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(host=ORIGIN))
    clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    clean_env.setenv("NO_PROXY", "service.invalid")

    assert LoadTestHook().session.proxies == {}


def test_requests_ca_bundle_reaches_verification(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not read by this test")
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json())
    clean_env.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    assert LoadTestHook().session.verify == str(bundle)


def test_the_connections_ca_bundle_wins_over_the_environment(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(ca_bundle="/etc/ssl/ours.pem"))
    clean_env.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "theirs.pem"))
    assert LoadTestHook().session.verify == "/etc/ssl/ours.pem"


def test_verification_switched_off_stays_off(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json(verify_ssl=False))
    clean_env.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "theirs.pem"))
    assert LoadTestHook().session.verify is False


def test_a_netrc_entry_never_replaces_the_key(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine loadtest.example.test login someone password not-the-key\n")
    netrc.chmod(0o600)
    clean_env.setenv("NETRC", str(netrc))
    clean_env.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json())
    with requests_mock.Mocker() as mock:
        mock.get("https://loadtest.example.test/runtime/bench-results/br-1", json={"state": "RUNNING"})
        LoadTestHook().get_bench_result("br-1")
    assert mock.last_request.headers["Authorization"] == f"Bearer {API_KEY}"
