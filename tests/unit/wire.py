"""Servers on 127.0.0.1 that answer with scripted raw bytes, and both clients calling them.

Shared by the tests of what arrives on the wire (``test_wire.py``, ``test_transport.py``): an answer is
exercised as a server or a proxy may really send it, through each client's real HTTP library, so a test
says what the sync hook (requests, urllib3, http.client) and the triggerer's client (aiohttp) do with
the same bytes. Servers are threads (the sync client blocks); every wait here is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.api.endpoints import ApiRequest
from airflow_provider_loadtest.api.retry import RetryPolicy
from airflow_provider_loadtest.hooks import async_client
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.hooks.settings import ConnectionSettings
from tests.conftest import API_KEY

JSON = b'{"id": "br-1", "state": "RUNNING"}'
ONE_TRY = RetryPolicy(max_attempts=1)
CLIENTS = ("sync", "async")
#: A handler writes an answer on the socket itself (to cut it, hold it, trickle it).
Handler = Callable[[socket.socket], None]


def ok(body: bytes = JSON, *extra: bytes, status: bytes = b"200 OK") -> bytes:
    head = [b"HTTP/1.1 " + status, b"Content-Type: application/json", b"Content-Length: %d" % len(body)]
    return b"\r\n".join([*head, *extra]) + b"\r\n\r\n" + body


def _read_request(sock: socket.socket) -> bytes | None:
    """One request's head and body (by its Content-Length), or None when the client went away. What
    is not HTTP (a TLS handshake) gets a 400 and the end of the connection, as a web server answers."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
        if not data[:1].isalpha():
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return None
        if len(data) > 2**20:
            return None
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body


@dataclass
class Server:
    """Serves ``answers`` in order, one per request, keep-alive; records connections and requests."""

    answers: list[bytes | Handler]
    tls: ssl.SSLContext | None = None
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0

    def _serve(self, sock: socket.socket) -> None:
        self.connections += 1
        with contextlib.suppress(OSError), sock:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            sock.settimeout(10)
            while self.answers:
                request = _read_request(sock)
                if request is None:
                    return
                self.requests.append(request)
                answer = self.answers.pop(0)
                if isinstance(answer, bytes):
                    sock.sendall(answer)
                else:
                    answer(sock)
                    return

    @contextlib.contextmanager
    def running(self) -> Iterator[Server]:
        with _listening(self._serve) as port:
            self.port = port
            yield self

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"


@contextlib.contextmanager
def _listening(serve: Callable[[socket.socket], None]) -> Iterator[int]:
    """Accept connections on a free loopback port, each served by ``serve`` in a thread of its own."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=serve, args=(sock,), daemon=True)
            worker.start()
            workers.append(worker)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for worker in workers:
            worker.join(1)  # daemons: one still holding an answer must not hold the test up


def close_after(data: bytes) -> Handler:
    def answer(sock: socket.socket) -> None:
        sock.sendall(data)

    return answer


def hold(data: bytes, seconds: float = 5) -> Handler:
    """Send ``data``, then nothing more for ``seconds`` (the client's deadline ends it first)."""

    def answer(sock: socket.socket) -> None:
        sock.sendall(data)
        threading.Event().wait(seconds)

    return answer


def trickle(data: bytes, rest: bytes, every_s: float = 0.3, for_s: float = 6) -> Handler:
    """Send ``data``, then ``rest`` one byte every ``every_s`` for at most ``for_s`` seconds."""

    def answer(sock: socket.socket) -> None:
        sock.sendall(data)
        for i in range(min(len(rest), int(for_s / every_s))):
            sock.sendall(rest[i : i + 1])
            threading.Event().wait(every_s)

    return answer


@dataclass
class Proxy:
    """A forward proxy: answers absolute-form requests itself (``ok()``), pipes ``CONNECT`` tunnels to
    the origin. ``tls`` makes it an ``https://`` proxy; ``after_connect`` is sent right after its
    ``200`` to a ``CONNECT`` (bytes a hostile proxy injects before the origin's TLS)."""

    tls: ssl.SSLContext | None = None
    after_connect: bytes = b""
    heads: list[bytes] = field(default_factory=list)
    port: int = 0

    def _serve(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError), sock:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_side=True)
            sock.settimeout(10)
            head = _read_request(sock)
            if head is None:
                return
            self.heads.append(head)
            if not head.startswith(b"CONNECT "):
                sock.sendall(ok(b'{"id": "br-1", "state": "FROM-THE-PROXY"}', b"Connection: close"))
                return
            host, port = head.split(b" ")[1].decode().rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as upstream:
                sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" + self.after_connect)
                _pipe_both_ways(sock, upstream)

    @contextlib.contextmanager
    def running(self) -> Iterator[Proxy]:
        with _listening(self._serve) as port:
            self.port = port
            yield self

    def url(self, credentials: str = "") -> str:
        at = f"{credentials}@" if credentials else ""
        return f"{'https' if self.tls else 'http'}://{at}127.0.0.1:{self.port}"


def _pipe_both_ways(a: socket.socket, b: socket.socket) -> None:
    def pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    other = threading.Thread(target=pipe, args=(b, a), daemon=True)
    other.start()
    pipe(a, b)
    other.join(10)


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate for 127.0.0.1: a server's TLS context, and the file a client trusts."""

    server: ssl.SSLContext
    ca_file: str


def certificate(tmp_path: Path) -> Certificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "loadtest-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    return Certificate(server=server, ca_file=str(cert_file))


def settings(base_url: str, **overrides: Any) -> ConnectionSettings:
    values: dict[str, Any] = {"connect_timeout_s": 2.0, "read_timeout_s": 2.0, **overrides}
    return ConnectionSettings(base_url=base_url, api_key=API_KEY, ui_url=base_url + "/ui", **values)


def call(
    client: str, base_url: str, request: ApiRequest[Any], retry: RetryPolicy = ONE_TRY, **kw: Any
) -> Any:
    """``request`` sent by one of the two clients (``"sync"``: the hook, ``"async"``: the triggerer's)."""
    (answer,) = calls(client, base_url, [request], retry=retry, **kw)
    return answer


def calls(
    client: str,
    base_url: str,
    requests: list[ApiRequest[Any]],
    retry: RetryPolicy = ONE_TRY,
    pause_s: float = 0.0,
    **kw: Any,
) -> list[Any]:
    """``requests`` sent one after the other by one hook, or by the waits of one event loop (each its
    own ``AsyncLoadTestClient``, sharing the loop's session), ``pause_s`` apart."""
    connection = settings(base_url, **kw)
    if client == "sync":
        hook = LoadTestHook()
        hook.__dict__["settings"] = connection  # the connection as the hook would have read it
        hook.retry_policy = retry  # type: ignore[misc]
        answers = []
        try:
            for request in requests:
                answers.append(hook.call(request))
                threading.Event().wait(pause_s)
        finally:
            hook.close()
        return answers

    async def go() -> list[Any]:
        answers = []
        async with contextlib.AsyncExitStack() as waits:
            for request in requests:
                wait = AsyncLoadTestClient(connection, retry_policy=retry)
                triggerer = await waits.enter_async_context(wait)
                answers.append(await triggerer.call(request))
                await asyncio.sleep(pause_s)
        return answers

    return asyncio.run(asyncio.wait_for(go(), 30))


@pytest.fixture
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Both clients' pauses between tries, recorded instead of spent."""
    waited: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(hook_module, "_sleep", waited.append)
    monkeypatch.setattr(async_client, "_sleep", no_sleep)
    return waited


@pytest.fixture
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (
        "https_proxy",
        "http_proxy",
        "all_proxy",
        "no_proxy",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    ):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch
