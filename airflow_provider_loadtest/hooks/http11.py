"""A lean HTTP/1.1 transport for the triggerer's polls: asyncio protocols, no anyio, no h11.

A deferred wait sends one small GET every few seconds, and a triggerer runs thousands of them in one
event loop, so the CPU of one poll is what bounds how many waits a triggerer can keep on time. httpx's
own transport (httpcore over anyio, h11 for the protocol) spends about three quarters of a poll's CPU
on machinery this traffic does not use: per-read timeouts (the whole try is already bounded by the
caller's deadline), socket-readability checks of every pooled connection, HTTP/2 and event hooks. This
transport speaks the subset of HTTP/1.1 the service's answers use, straight on ``asyncio.Protocol``:

* keep-alive connections, one request at a time each, reused while the server keeps them open;
* answers framed by ``Content-Length``, ``Transfer-Encoding: chunked`` or the connection's end;
* TLS through asyncio (the caller's ``ssl.SSLContext``), proxies from the caller (absolute-form
  requests for ``http://``, a ``CONNECT`` tunnel for ``https://``);
* failures raised as httpx's exceptions, so callers tell "never connected" from "sent, no answer" as
  they do with httpx's transport: ``ConnectError`` / ``ConnectTimeout`` before a byte was sent,
  ``ReadError`` / ``RemoteProtocolError`` after.

It is an ``httpx.AsyncBaseTransport``: requests and answers stay ``httpx`` objects (content decoding
of gzip answers included), and tests plug ``httpx.MockTransport`` in its place.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

#: The status line and headers of an answer may not exceed this (a server sending headers without
#: end would otherwise grow the buffer until the whole-try deadline).
MAX_HEAD_BYTES = 64 * 2**10
#: Reading pauses while this much of an answer waits unread (the caller bounds the answer's size).
_HIGH_WATER = 2 * 2**20
_CRLF = b"\r\n"


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: bytes in from asyncio, answers out to ``_Exchange``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False
        self.error: Exception | None = None
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # noqa: S101 - a stream connection
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.error = exc
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- reading ------------------------------------------------------------------------------

    async def more(self) -> None:
        """Wait for more bytes; ``ReadError`` when the server closed the connection first."""
        if self.closed:
            raise httpx.ReadError(f"the server closed the connection ({self.error or 'end of stream'})")
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter

    def take(self, size: int) -> bytes:
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def reusable(self, now: float, expiry: float) -> bool:
        """Still open, quiet since its last answer (no stray bytes), and not idle for too long."""
        return not self.closed and not self.buffer and now - self.idle_since < expiry

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class LeanAsyncTransport(httpx.AsyncBaseTransport):
    """Keep-alive HTTP/1.1 to the origins it is asked for, through an optional proxy.

    :param ssl_context: the TLS context for ``https://`` origins (and for nothing else).
    :param proxy: ``http://[user:password@]host:port`` of an HTTP proxy, or ``None``.
    :param max_idle: idle connections kept per origin; the rest are closed.
    :param keepalive_expiry: seconds an idle connection is kept.
    :param connect_timeout: seconds to open a connection (and its TLS and proxy tunnel).
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        proxy: str | None = None,
        max_idle: int = 16,
        keepalive_expiry: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self._ssl = ssl_context
        self._proxy = httpx.URL(proxy) if proxy else None
        self._max_idle = max_idle
        self._expiry = keepalive_expiry
        self._connect_timeout = connect_timeout
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._busy: set[_Connection] = set()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """httpx's transport API: any ``httpx.Request``, an ``httpx.Response`` streaming its body."""
        url = request.url
        head = [name + b": " + value for name, value in request.headers.raw]
        exchange, status, headers = await self._exchange(request.method, url, head, request.content)
        return httpx.Response(status, headers=headers, stream=exchange, request=request)

    async def send(self, method: str, url: httpx.URL, headers: list[bytes], body: bytes = b"") -> Answer:
        """The polls' path: ``headers`` are ready ``Name: value`` lines (``Host`` and the body's
        ``Content-Length`` included); the answer comes without ``httpx.Request``/``Response`` objects,
        whose construction was a tenth of a poll's CPU."""
        exchange, status, raw = await self._exchange(method, url, headers, body)
        return Answer(status, raw, exchange)

    async def _exchange(
        self, method: str, url: httpx.URL, headers: list[bytes], body: bytes
    ) -> tuple[_Exchange, int, list[tuple[bytes, bytes]]]:
        if self._closed:
            raise RuntimeError("the transport is closed")
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        connection = self._idle_connection(origin) or await self._open(origin)
        self._busy.add(connection)
        exchange = _Exchange(self, connection, origin, method)
        try:
            assert connection.transport is not None  # noqa: S101 - set once connected
            connection.transport.write(self._request_bytes(method, url, origin, headers, body))
            status, answer_headers = await exchange.read_head()
        except BaseException:
            exchange.discard()
            raise
        return exchange, status, answer_headers

    def _request_bytes(
        self, method: str, url: httpx.URL, origin: tuple[str, str, int], headers: list[bytes], body: bytes
    ) -> bytes:
        # Through a proxy, plain http goes in absolute form; https goes through the tunnel as usual.
        proxied = self._proxy is not None and origin[0] == "http"
        target = str(url).encode("ascii") if proxied else url.raw_path
        lines = [method.encode("ascii") + b" " + target + b" HTTP/1.1", *headers]
        if proxied and self._proxy_authorization:
            lines.append(b"Proxy-Authorization: " + self._proxy_authorization)
        return _CRLF.join(lines) + _CRLF + _CRLF + body

    @property
    def _proxy_authorization(self) -> bytes | None:
        if self._proxy is None or not self._proxy.username:
            return None
        pair = f"{self._proxy.username}:{self._proxy.password}".encode()
        return b"Basic " + base64.b64encode(pair)

    def _idle_connection(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now, self._expiry):
                return connection
            connection.close()
        return None

    async def _open(self, origin: tuple[str, str, int]) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._ssl if scheme == "https" else None
        try:
            async with asyncio.timeout(self._connect_timeout):
                if self._proxy is None:
                    _, connection = await loop.create_connection(
                        _Connection, host, port, ssl=tls, server_hostname=host if tls else None
                    )
                else:
                    connection = await self._via_proxy(loop, host, port, tls)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {host}:{port} in time") from None
        except (OSError, ssl.SSLError) as exc:  # refused, unresolvable, TLS handshake failed
            raise httpx.ConnectError(f"could not connect to {host}:{port}: {exc}") from exc
        return connection

    async def _via_proxy(
        self, loop: asyncio.AbstractEventLoop, host: str, port: int, tls: ssl.SSLContext | None
    ) -> _Connection:
        proxy = self._proxy
        assert proxy is not None  # noqa: S101 - only called with a proxy
        proxy_port = proxy.port or (443 if proxy.scheme == "https" else 80)
        _, connection = await loop.create_connection(_Connection, proxy.host, proxy_port)
        if tls is None:
            return connection  # plain http: absolute-form requests through the proxy
        # https: a CONNECT tunnel, then TLS with the origin inside it.
        head = [f"CONNECT {host}:{port} HTTP/1.1".encode(), f"Host: {host}:{port}".encode()]
        if self._proxy_authorization:
            head.append(b"Proxy-Authorization: " + self._proxy_authorization)
        assert connection.transport is not None  # noqa: S101 - connected
        connection.transport.write(_CRLF.join(head) + _CRLF + _CRLF)
        exchange = _Exchange(self, connection, ("http", host, port), "CONNECT")
        try:
            status, _ = await exchange.read_head()
        except httpx.HTTPError as exc:
            connection.close()
            raise OSError(f"the proxy's CONNECT failed: {exc}") from exc
        if not 200 <= status < 300:
            connection.close()
            raise OSError(f"the proxy refused the tunnel to {host}:{port} (HTTP {status})")
        tunnel = connection.transport
        secured = await loop.start_tls(tunnel, connection, tls, server_hostname=host)
        if secured is None:
            raise OSError("the TLS tunnel through the proxy closed at once")
        connection.transport = secured
        return connection

    def _done(self, connection: _Connection, origin: tuple[str, str, int], *, keep: bool) -> None:
        self._busy.discard(connection)
        idle = self._idle.setdefault(origin, [])
        if keep and not self._closed and not connection.closed and len(idle) < self._max_idle:
            connection.idle_since = time.monotonic()
            idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
        for connection in self._busy:
            connection.close()
        self._busy.clear()


class Answer:
    """An answer on the polls' path: status, headers looked up case-insensitively, and the body.

    ``aiter_bytes`` undoes a ``gzip`` or ``deflate`` content coding, as ``httpx.Response`` does;
    ``aclose`` gives the connection back to the pool when the body was read whole.
    """

    __slots__ = ("_exchange", "headers", "status_code")

    def __init__(self, status: int, raw: list[tuple[bytes, bytes]], exchange: _Exchange) -> None:
        self.status_code = status
        self.headers = _Headers(
            (name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in raw
        )
        self._exchange = exchange

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        coding = (self.headers.get("content-encoding") or "").strip().lower()
        if coding not in ("gzip", "deflate"):
            async for chunk in self._exchange:
                yield chunk
            return
        # gzip, or deflate as a zlib stream (what servers send; wbits 32+ accepts both headers).
        inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32)
        try:
            async for chunk in self._exchange:
                if data := inflater.decompress(chunk):
                    yield data
            if tail := inflater.flush():
                yield tail
        except zlib.error as exc:
            raise httpx.DecodingError(f"the answer's {coding} content does not decompress: {exc}") from None

    async def aclose(self) -> None:
        await self._exchange.aclose()


class _Headers(dict[str, str]):
    """Answer headers by lower-case name (a repeated header keeps its last value)."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


class _Exchange(httpx.AsyncByteStream):
    """One request's answer: its head, then its body as a stream; the connection goes back to the pool
    only once the body was read whole and the server did not ask to close."""

    def __init__(
        self, pool: LeanAsyncTransport, connection: _Connection, origin: tuple[str, str, int], method: str
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._origin = origin
        self._method = method
        self._framing: tuple[str, int] = ("close", 0)
        self._keep_alive = False
        self._complete = False
        self._released = False

    async def read_head(self) -> tuple[int, list[tuple[bytes, bytes]]]:
        """The status and headers of the final answer (informational 1xx answers are skipped)."""
        connection = self._connection
        while True:
            end = connection.buffer.find(b"\r\n\r\n")
            while end < 0:
                if len(connection.buffer) > MAX_HEAD_BYTES:
                    raise httpx.RemoteProtocolError("the answer's headers exceed 64 KiB")
                await connection.more()
                end = connection.buffer.find(b"\r\n\r\n")
            head = connection.take(end + 4)[:-4]
            status, version, headers = _parse_head(head)
            if 100 <= status < 200 and status != 101:
                continue
            self._decide_framing(status, version, headers)
            return status, headers

    def _decide_framing(self, status: int, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        values: dict[bytes, bytes] = {}
        for name, value in headers:
            key = name.lower()
            values[key] = values[key] + b"," + value if key in values else value
        connection_tokens = {t.strip().lower() for t in values.get(b"connection", b"").split(b",")}
        self._keep_alive = (
            b"close" not in connection_tokens
            if version == b"HTTP/1.1"
            else b"keep-alive" in connection_tokens
        )
        if self._method in ("HEAD", "CONNECT") or status in (204, 304):
            self._framing = ("length", 0)
        elif b"chunked" in values.get(b"transfer-encoding", b"").lower():
            self._framing = ("chunked", 0)
        elif b"content-length" in values:
            try:
                lengths = {int(v) for v in values[b"content-length"].split(b",")}
            except ValueError:
                raise httpx.RemoteProtocolError("the answer's Content-Length is not a number") from None
            if len(lengths) != 1 or min(lengths) < 0:
                raise httpx.RemoteProtocolError("the answer's Content-Length is not one number")
            self._framing = ("length", lengths.pop())
        else:
            self._framing = ("close", 0)
            self._keep_alive = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        kind, length = self._framing
        if kind == "length":
            body = self._by_length(length)
        elif kind == "chunked":
            body = self._chunked()
        else:
            body = self._until_close()
        async for chunk in body:
            yield chunk
        self._complete = True
        self._release()

    async def _by_length(self, length: int) -> AsyncIterator[bytes]:
        connection = self._connection
        left = length
        while left > 0:
            if not connection.buffer:
                await connection.more()
            chunk = connection.take(left)
            left -= len(chunk)
            yield chunk

    async def _chunked(self) -> AsyncIterator[bytes]:
        while True:
            size = _chunk_size(await self._line())
            if size == 0:
                while await self._line():  # trailers, up to the empty line
                    pass
                return
            async for chunk in self._by_length(size):
                yield chunk
            if await self._line():
                raise httpx.RemoteProtocolError("a chunk of the answer is longer than its size says")

    async def _line(self) -> bytes:
        connection = self._connection
        end = connection.buffer.find(_CRLF)
        while end < 0:
            if len(connection.buffer) > MAX_HEAD_BYTES:
                raise httpx.RemoteProtocolError("a line of the chunked answer exceeds 64 KiB")
            await connection.more()
            end = connection.buffer.find(_CRLF)
        return connection.take(end + 2)[:-2]

    async def _until_close(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            if connection.buffer:
                yield connection.take(len(connection.buffer))
                continue
            if connection.closed:
                return
            try:
                await connection.more()
            except httpx.ReadError:
                return  # the end of the connection is the end of this answer

    def _release(self) -> None:
        if not self._released:
            self._released = True
            keep = self._complete and self._keep_alive
            self._pool._done(self._connection, self._origin, keep=keep)

    def discard(self) -> None:
        """The exchange failed or was abandoned: the connection's state is unknown, close it."""
        self._complete = False
        self._release()

    async def aclose(self) -> None:
        self._release()  # a body not read whole leaves the connection mid-answer: closed, not pooled


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()
    if not size or size.strip(b"0123456789abcdefABCDEF"):
        raise httpx.RemoteProtocolError(f"a chunk size is not hexadecimal: {line[:40]!r}")
    return int(size, 16)


def _parse_head(head: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    lines = head.split(_CRLF)
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or len(parts[1]) != 3:
        raise httpx.RemoteProtocolError(f"not an HTTP/1.1 answer: {lines[0][:60]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise httpx.RemoteProtocolError(f"not an HTTP status: {lines[0][:60]!r}") from None
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"a malformed header line: {line[:60]!r}")
        headers.append((name, value.strip()))
    return status, parts[0], headers
