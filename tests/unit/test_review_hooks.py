"""Adversarial review of the sync hook's transport (issue 13): env read once, one reaper, gc pauses."""

from __future__ import annotations

import gc
import os
import signal
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest
import requests

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import RetryPolicy
from airflow_provider_loadtest.hooks.bounded import BoundedAdapter, Watchdog
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook, environment_proxies
from tests.conftest import connection_json
from tests.unit.test_hook_environment import TRICKLE_BYTES, _Proxy

PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUEST_METHOD")
URLS = ("https://api.example.com", "https://api.example.com:8443/api", "http://10.1.2.3:8090")


def _only_these_proxy_settings(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name in PROXY_NAMES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    "env",
    [
        {"HTTPS_PROXY": "http://p:1"},
        {"HTTP_PROXY": "http://p:1"},  # an https base URL takes no http proxy
        {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:1"},
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"},
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"},
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com:8443"},
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": " other , EXAMPLE.COM"},
        {"HTTP_PROXY": "http://p:1", "no_proxy": "10.0.0.0/8"},
        {"ALL_PROXY": "socks5://p:1"},
        {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": "GET"},  # CGI: HTTP_PROXY is a request header
    ],
)
def test_the_proxy_read_once_is_the_one_requests_would_pick(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _only_these_proxy_settings(monkeypatch, env)
    for url in URLS:
        trusting = requests.Session().merge_environment_settings(url, {}, None, None, None)["proxies"]
        assert requests.utils.select_proxy(url, environment_proxies(url)) == requests.utils.select_proxy(
            url, trusting
        ), url


# --- one reaper for many threads -------------------------------------------------------------------


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()


class _Handler(socketserver.StreamRequestHandler):
    """``/fast`` answers at once on a keep-alive connection; ``/slow`` never answers (until released)."""

    server: _Server

    def handle(self) -> None:
        self.connection.settimeout(10)
        for _ in range(1000):  # bounded: requests on one keep-alive connection
            line = self.rfile.readline(65536)
            if not line:
                return
            for _ in range(100):  # the headers
                if self.rfile.readline(65536) in (b"\r\n", b"\n", b""):
                    break
            if b"/slow" in line:
                self.server.release.wait(10)
                return
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            self.wfile.flush()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


def test_many_threads_each_call_is_cut_by_its_own_deadline_only(server: _Server) -> None:
    base = f"http://127.0.0.1:{server.server_address[1]}"
    session = requests.Session()  # shared, as a hook's session is when a task uses threads
    session.trust_env = False
    session.mount("http://", BoundedAdapter(pool_maxsize=16))
    outcomes: dict[str, list[tuple[bool, bool]]] = {"slow": [], "fast": []}
    lock = threading.Lock()

    def call(kind: str, seconds: float) -> None:
        for _ in range(3 if kind == "slow" else 40):
            with Watchdog(seconds) as dog:
                try:
                    ok = session.get(f"{base}/{kind}", timeout=(5, 30)).text == "ok"
                except requests.ConnectionError:
                    ok = False
            with lock:
                outcomes[kind].append((ok, dog.fired))

    threads = [threading.Thread(target=call, args=("slow", 0.05 + 0.02 * i)) for i in range(4)]
    threads += [threading.Thread(target=call, args=("fast", 600.0)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert outcomes["slow"] == [(False, True)] * 12  # each cut by its own deadline
    assert outcomes["fast"] == [(True, False)] * 160  # never cut by another thread's deadline


# --- the collector pause and fork ------------------------------------------------------------------


def _exit_code_of(pid: int) -> int:
    """A forked child's exit code; it is killed (and fails) should it hang for 10 s."""
    killer = threading.Timer(10, os.kill, (pid, signal.SIGKILL))
    killer.start()
    try:
        _, status = os.waitpid(pid, 0)
    finally:
        killer.cancel()
    return os.waitstatus_to_exitcode(status)


def test_a_child_forked_while_another_thread_reads_gets_its_collector_back() -> None:
    # The pause is counted across threads; a child forked while another thread is inside keeps the
    # count (that thread does not exist there): its collector stayed off for the rest of its life.
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    pause = endpoints._COLLECTOR_PAUSE
    inside, leave = threading.Event(), threading.Event()

    def read() -> None:
        with pause:
            inside.set()
            leave.wait(10)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert inside.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: only this thread came along
            code = 1
            try:
                with pause:  # a large answer read in the child
                    pass
                code = 0 if gc.isenabled() else 3
            finally:
                os._exit(code)
    finally:
        leave.set()
        reader.join(timeout=10)
    assert _exit_code_of(pid) == 0, "the child's collector stayed off"
    assert gc.isenabled()


def test_a_child_forked_inside_its_own_pause_ends_it_once() -> None:
    # The forking thread itself was reading: the child goes on to end that pause, which must then
    # turn the collector back on (not count below zero, nor turn it on early).
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    pause = endpoints._COLLECTOR_PAUSE
    pause.__enter__()
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                off_inside = not gc.isenabled()
                pause.__exit__(None, None, None)
                code = 0 if off_inside and gc.isenabled() and pause._depth == 0 else 5
            finally:
                os._exit(code)
    finally:
        pause.__exit__(None, None, None)
    assert _exit_code_of(pid) == 0


# --- a proxy trickling its answer to CONNECT (https base URL through HTTPS_PROXY) ------------------


def test_a_connect_answer_trickled_by_the_proxy_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tunnel's answer is read in ``connect()``, before any ``getresponse``: the watchdog did not
    # know the socket yet, so a proxy trickling it kept the call alive far past its bound.
    proxy = _Proxy()  # answers any request, CONNECT included, with a 200 trickled a byte at a time
    proxy.trickle = True
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        _only_these_proxy_settings(
            monkeypatch, {"HTTPS_PROXY": f"http://127.0.0.1:{proxy.server_address[1]}"}
        )
        monkeypatch.setenv(
            "AIRFLOW_CONN_LOADTEST_DEFAULT",
            connection_json(host="https://service.invalid:8443", read_timeout=2),
        )
        hook = LoadTestHook()
        hook.retry_policy = RetryPolicy(max_attempts=1)
        with pytest.raises(LoadTestApiError, match="whole-request bound"):
            hook.get_bench_result("br-1")
        assert [line.split()[:2] for line in proxy.request_lines] == [["CONNECT", "service.invalid:8443"]]
        for _ in range(100):  # bounded: the proxy notices the hang-up at its next byte, within 0.5 s
            if proxy.trickled and proxy.trickled[0] < TRICKLE_BYTES:
                break
            time.sleep(0.05)
        # The client hung up mid-answer: without the bound it read all of it (8 s, 4x the bound).
        assert proxy.trickled and proxy.trickled[0] < TRICKLE_BYTES
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize(
    "env",
    [
        {"HTTP_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"},  # CIDR
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "api.example.com:8443"},  # host and port
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"},
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"},
        {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"},
        {"HTTPS_PROXY": "http://p:1", "no_proxy": "other"},
        {"HTTP_PROXY": "http://p:1"},
        {"ALL_PROXY": "http://all:1"},
    ],
)
def test_the_triggerer_takes_the_proxy_the_workers_hook_takes(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The triggerer read NO_PROXY with urllib's rules (no CIDR, no host:port entries, a whole-label
    # suffix), the worker's hook with requests': one run's polls went through the proxy, the other's not.
    from airflow_provider_loadtest.hooks.transport import environment_proxy

    _only_these_proxy_settings(monkeypatch, env)
    for url in (*URLS, "https://api.badexample.com"):
        assert environment_proxy(url) == requests.utils.select_proxy(url, environment_proxies(url)), url
