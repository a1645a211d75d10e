"""The triggerer's lean HTTP/1.1 transport against real sockets on 127.0.0.1, answer by answer.

Each server here answers with scripted raw bytes, so every framing the service (or a proxy in front of
it) may use is exercised as it arrives on the wire: ``Content-Length``, chunked, close-delimited,
HTTP/1.0, informational answers, gzip; and every way an answer can go wrong: cut short, garbage,
headers without end, a connection closed while idle, a try cancelled mid-answer. TLS and proxies
(absolute-form for http, a CONNECT tunnel for https) run through real handshakes.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_loadtest.hooks.http11 import LeanAsyncTransport

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
JSON = b'{"state": "RUNNING"}'


def ok(body: bytes = JSON, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 200 OK", b"Content-Type: application/json", b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class Server:
    """Serves scripted answers in order; records connections and the requests' heads and bodies."""

    def __init__(self, answers: list[bytes | Answer], tls: ssl.SSLContext | None = None) -> None:
        self.answers = list(answers)
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0

    async def _request(self, reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.requests.append(head + body)
        return head

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers and await self._request(reader) is not None:
                answer = self.answers.pop(0)
                if isinstance(answer, bytes):
                    writer.write(answer)
                    await writer.drain()
                else:
                    await answer(reader, writer)
                if writer.is_closing():
                    return
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Server]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await asyncio.wait_for(server.wait_closed(), 5)


def close_after(data: bytes) -> Answer:
    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        writer.close()

    return answer


def hold(data: bytes) -> Answer:
    """Send ``data``, then nothing more for a long while (the client's deadline ends it)."""

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        await asyncio.sleep(30)

    return answer


def transport(**kwargs: Any) -> LeanAsyncTransport:
    return LeanAsyncTransport(ssl_context=ssl.create_default_context(), **kwargs)


async def get(pool: LeanAsyncTransport, url: str, **kwargs: Any) -> tuple[int, bytes]:
    """One request straight through the transport (as ``hooks.transport.Channel`` sends them)."""
    request = httpx.Request(kwargs.pop("method", "GET"), url, **kwargs)
    answer = await pool.handle_async_request(request)
    try:
        return answer.status_code, b"".join([chunk async for chunk in answer.aiter_bytes()])
    finally:
        await answer.aclose()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 20))


# --- framing --------------------------------------------------------------------------------------


def test_keep_alive_answers_share_one_connection() -> None:
    async def scenario() -> None:
        async with Server([ok(), ok(b'{"n": 2}')]).running() as server:
            pool = transport()
            url = f"http://127.0.0.1:{server.port}/runtime/bench-results/br-1"
            assert await get(pool, url) == (200, JSON)
            assert await get(pool, url) == (200, b'{"n": 2}')
            assert server.connections == 1
            await pool.aclose()

    run(scenario)


def test_a_chunked_answer_with_extensions_and_trailers() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5;ext=1\r\n{"sta\r\nF\r\nte": "RUNNING"}\r\n0\r\nX-Trailer: yes\r\n\r\n'
    )

    async def scenario() -> None:
        async with Server([chunked, ok()]).running() as server:
            pool = transport()
            url = f"http://127.0.0.1:{server.port}/x"
            assert await get(pool, url) == (200, JSON)
            assert await get(pool, url) == (200, JSON)
            assert server.connections == 1  # the chunked answer ended cleanly: the connection is reused

    run(scenario)


def test_an_answer_ending_with_the_connection_and_http10() -> None:
    async def scenario() -> None:
        async with (
            Server([close_after(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + JSON)]).running() as first,
            Server([close_after(b"HTTP/1.0 200 OK\r\n\r\n" + JSON)]).running() as second,
        ):
            pool = transport()
            assert await get(pool, f"http://127.0.0.1:{first.port}/x") == (200, JSON)
            assert await get(pool, f"http://127.0.0.1:{second.port}/x") == (200, JSON)
            assert pool._idle.get(("http", "127.0.0.1", first.port)) == []  # nothing kept to reuse

    run(scenario)


def test_informational_answers_are_skipped() -> None:
    async def scenario() -> None:
        async with Server([b"HTTP/1.1 100 Continue\r\n\r\n" + ok()]).running() as server:
            assert await get(transport(), f"http://127.0.0.1:{server.port}/x") == (200, JSON)

    run(scenario)


def test_a_gzip_answer_is_decoded() -> None:
    packed = gzip.compress(JSON)

    async def scenario() -> None:
        async with Server([ok(packed, b"Content-Encoding: gzip")]).running() as server:
            assert await get(transport(), f"http://127.0.0.1:{server.port}/x") == (200, JSON)

    run(scenario)


def test_a_post_sends_its_json_body() -> None:
    async def scenario() -> None:
        async with Server([ok(b"[]")]).running() as server:
            status, _ = await get(
                transport(),
                f"http://127.0.0.1:{server.port}/analysis/threshold-alarms?x=1",
                method="POST",
                json={"name": ""},
            )
            assert status == 200
            (sent,) = server.requests
            assert sent.startswith(b"POST /analysis/threshold-alarms?x=1 HTTP/1.1\r\n")
            assert b"\r\nContent-Length: 11\r\n" in sent and sent.endswith(b'{"name":""}')

    run(scenario)


# --- what goes wrong --------------------------------------------------------------------------------


def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    async def scenario() -> None:
        async with Server([close_after(ok()), ok()]).running() as server:  # ok(), then it hangs up
            pool = transport()
            url = f"http://127.0.0.1:{server.port}/x"
            assert await get(pool, url) == (200, JSON)
            for _ in range(100):  # bounded: the hang-up reaches the client's loop
                if not pool._idle.get(("http", "127.0.0.1", server.port)) or all(
                    c.closed for c in pool._idle[("http", "127.0.0.1", server.port)]
                ):
                    break
                await asyncio.sleep(0.01)
            assert await get(pool, url) == (200, JSON)  # a new connection, no error
            assert server.connections == 2

    run(scenario)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (close_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + JSON), httpx.ReadError),
        (close_after(b"HTTP/1.1 200 OK\r\nContent-Le"), httpx.ReadError),
        (close_after(b""), httpx.ReadError),
        (b"<html>not http</html>\r\n\r\n", httpx.RemoteProtocolError),
        (b"HTTP/1.1 2000 OK\r\n\r\n", httpx.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", httpx.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", httpx.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\nbroken header line\r\n\r\n", httpx.RemoteProtocolError),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", httpx.RemoteProtocolError),
        (hold(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000), httpx.RemoteProtocolError),
    ],
    ids=[
        "body-cut-short",
        "head-cut-short",
        "closed-without-answer",
        "not-http",
        "bad-status",
        "bad-length",
        "two-lengths",
        "bad-header",
        "bad-chunk-size",
        "endless-headers",
    ],
)
def test_a_broken_answer_raises_httpx_errors_and_the_connection_is_dropped(
    answer: bytes | Answer, error: type[Exception]
) -> None:
    async def scenario() -> None:
        async with Server([answer, ok()]).running() as server:
            pool = transport()
            url = f"http://127.0.0.1:{server.port}/x"
            with pytest.raises(error):
                await get(pool, url)
            assert not pool._busy
            assert all(c.closed for idle in pool._idle.values() for c in idle)

    run(scenario)


def test_a_try_cancelled_mid_answer_closes_its_connection() -> None:
    async def scenario() -> None:
        async with Server(
            [hold(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{"), ok()]
        ).running() as server:
            pool = transport()
            url = f"http://127.0.0.1:{server.port}/x"
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await get(pool, url)
            assert not pool._busy and not any(pool._idle.values())
            assert await get(pool, url) == (200, JSON)  # a fresh connection
            assert server.connections == 2

    run(scenario)


def test_an_answer_read_in_part_is_not_pooled() -> None:
    async def scenario() -> None:
        async with Server([ok(b"x" * 100_000), ok()]).running() as server:
            pool = transport()
            answer = await pool.handle_async_request(
                httpx.Request("GET", f"http://127.0.0.1:{server.port}/x")
            )
            async for _chunk in answer.aiter_raw():
                break
            await answer.aclose()
            assert not any(pool._idle.values())

    run(scenario)


def test_no_server_is_a_connect_error() -> None:
    async def scenario() -> None:
        async with Server([]).running() as server:
            port = server.port
        with pytest.raises(httpx.ConnectError):
            await get(transport(), f"http://127.0.0.1:{port}/x")

    run(scenario)


# --- TLS and proxies ------------------------------------------------------------------------------


def _certificate(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A self-signed certificate for 127.0.0.1: the server's context and a client context trusting it."""

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
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def test_https_with_a_trusted_certificate_and_a_refused_one(tmp_path: Path) -> None:
    server_tls, client_tls = _certificate(tmp_path)

    async def scenario() -> None:
        async with Server([ok(), ok()], tls=server_tls).running() as server:
            url = f"https://127.0.0.1:{server.port}/x"
            pool = LeanAsyncTransport(ssl_context=client_tls)
            assert await get(pool, url) == (200, JSON)
            assert await get(pool, url) == (200, JSON)
            assert server.connections == 1
            with pytest.raises(httpx.ConnectError) as refused:  # the system's CAs do not know this one
                await get(transport(), url)
            assert isinstance(refused.value.__cause__, ssl.SSLError)

    run(scenario)


class Proxy:
    """A forward proxy: absolute-form requests answered itself; CONNECT tunnels piped to the origin."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.heads.append(head)
            if not head.startswith(b"CONNECT "):
                writer.write(ok())
                await writer.drain()
                return
            host, port = head.split(b" ")[1].decode().rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
                dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Proxy]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await asyncio.wait_for(server.wait_closed(), 5)


def test_http_through_a_proxy_goes_in_absolute_form_with_its_credentials() -> None:
    async def scenario() -> None:
        async with Proxy().running() as proxy:
            pool = transport(proxy=f"http://user:secret@127.0.0.1:{proxy.port}")
            assert await get(pool, "http://service.invalid:8090/runtime/bench-results/br-1") == (200, JSON)
            (head,) = proxy.heads
            assert head.startswith(b"GET http://service.invalid:8090/runtime/bench-results/br-1 HTTP/1.1\r\n")
            assert b"\r\nProxy-Authorization: Basic dXNlcjpzZWNyZXQ=\r\n" in head

    run(scenario)


def test_https_through_a_proxy_goes_through_a_connect_tunnel(tmp_path: Path) -> None:
    server_tls, client_tls = _certificate(tmp_path)

    async def scenario() -> None:
        async with Server([ok()], tls=server_tls).running() as origin, Proxy().running() as proxy:
            pool = LeanAsyncTransport(ssl_context=client_tls, proxy=f"http://127.0.0.1:{proxy.port}")
            assert await get(pool, f"https://127.0.0.1:{origin.port}/x") == (200, JSON)
            (head,) = proxy.heads
            assert head.startswith(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.1\r\n".encode())
            (sent,) = origin.requests  # the request itself went through the tunnel, encrypted
            assert sent.startswith(b"GET /x HTTP/1.1\r\n")

    run(scenario)


# --- the polls' path: hooks.transport.Channel straight to the transport ----------------------------


def _channel(port: int) -> Any:
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings
    from airflow_provider_loadtest.hooks.transport import Channel

    settings = ConnectionSettings(base_url=f"http://127.0.0.1:{port}", api_key="k-123", ui_url="x")
    return Channel(transport(), settings)


async def _read(answer: Any) -> bytes:
    try:
        return b"".join([chunk async for chunk in answer.aiter_bytes()])
    finally:
        await answer.aclose()


def test_a_channel_sends_its_headers_and_reads_answers_without_httpx_objects() -> None:
    async def scenario() -> None:
        async with Server([ok(JSON, b"Retry-After: 3"), ok(b"[]")]).running() as server:
            channel = _channel(server.port)
            url = httpx.URL(f"http://127.0.0.1:{server.port}/runtime/bench-results/br-1")
            answer = await channel.send("GET", url, accept="application/json")
            assert not isinstance(answer, httpx.Response)
            assert (answer.status_code, answer.headers.get("retry-after")) == (200, "3")
            assert answer.headers.get("Content-Type") == "application/json"
            assert await _read(answer) == JSON
            alarms = httpx.URL(f"http://127.0.0.1:{server.port}/analysis/threshold-alarms")
            answer = await channel.send("POST", alarms, accept="*/*", params={"a": "b c"}, json={"name": "é"})
            assert await _read(answer) == b"[]"
            first, second = server.requests
            assert first.startswith(b"GET /runtime/bench-results/br-1 HTTP/1.1\r\n")
            assert (
                b"\r\nAuthorization: Bearer k-123\r\n" in first and b"\r\nAccept: application/json" in first
            )
            assert second.startswith(b"POST /analysis/threshold-alarms?a=b+c HTTP/1.1\r\n")
            assert b"\r\nAccept: */*\r\n" in second
            assert b"\r\nContent-Type: application/json\r\n" in second
            assert second.endswith(b"\r\n\r\n" + '{"name":"é"}'.encode())
            assert server.connections == 1

    run(scenario)


@pytest.mark.parametrize(
    ("coding", "packed"),
    [("gzip", gzip.compress(JSON)), ("deflate", zlib.compress(JSON))],
)
def test_a_channel_undoes_the_answers_content_coding(coding: str, packed: bytes) -> None:
    async def scenario() -> None:
        async with Server([ok(packed, b"Content-Encoding: " + coding.encode())]).running() as server:
            answer = await _channel(server.port).send(
                "GET", httpx.URL(f"http://127.0.0.1:{server.port}/x"), accept="application/json"
            )
            assert await _read(answer) == JSON

    run(scenario)


def test_a_corrupt_coding_is_an_httpx_error() -> None:
    async def scenario() -> None:
        async with Server([ok(b"not gzip at all", b"Content-Encoding: gzip")]).running() as server:
            answer = await _channel(server.port).send(
                "GET", httpx.URL(f"http://127.0.0.1:{server.port}/x"), accept="application/json"
            )
            with pytest.raises(httpx.DecodingError, match="gzip content does not decompress"):
                await _read(answer)

    run(scenario)
