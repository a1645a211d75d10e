"""A wall-clock bound on a whole ``requests`` call, not only on each read; strict answers.

``requests`` only has per-read timeouts: a server (or a proxy) sending one byte a second keeps each
read short and the call alive for ever, through the headers as well as the body. ``Watchdog`` arms a
deadline for the call's budget; the session's connections report themselves to the running watchdog
when they send a request, and when the deadline passes their sockets are shut down, so the blocked
read returns at once and ``requests`` raises. The caller then asks ``Watchdog.fired`` to tell this
apart from a real connection failure.

The same connections read answers with :class:`StrictAnswer`: ``http.client`` with its numbers
checked (no ``+200`` status, no ``0_5`` length, no ``0x2`` chunk size) and its framing too (no transfer
coding it does not implement, no ``Transfer-Encoding`` beside a ``Content-Length``).

One reaper thread per process watches every deadline (a heap; woken only when a new deadline comes
before the one it sleeps towards): a ``threading.Timer`` per call started a thread per request, about
a third of a small call's CPU.
"""

from __future__ import annotations

import contextlib
import email.errors
import heapq
import http.client
import itertools
import math
import os
import re
import socket
import threading
import time
from types import TracebackType
from typing import Any, NoReturn

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import PoolManager
from urllib3.response import HTTPResponse

_running = threading.local()


class Watchdog:
    """``with Watchdog(seconds) as dog:`` cut every answer read inside once ``seconds`` passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.deadline = 0.0
        self._done = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []

    def __enter__(self) -> Watchdog:
        _running.watchdog = self
        self.deadline = time.monotonic() + self.seconds
        _reaper.arm(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:  # once this returns, the reaper can no longer cut this call's sockets
            self._done = True
        _running.watchdog = None

    @property
    def done(self) -> bool:
        """Whether the call left the watchdog (its deadline no longer matters)."""
        return self._done

    def track(self, sock: socket.socket) -> None:
        """Called with a connection's socket when its answer is about to be read."""
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def fire(self) -> None:
        """The deadline passed: cut the call's sockets, unless the call already left."""
        with self._lock:
            if self._done:
                return
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


class _Reaper:
    """The one thread that fires every watchdog whose deadline passed (started on first use)."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int, Watchdog]] = []
        self._order = itertools.count()  # ties on the deadline never compare two watchdogs
        self._thread: threading.Thread | None = None
        self._until = math.inf  # the deadline the thread sleeps towards

    def arm(self, dog: Watchdog) -> None:
        with self._wake:
            while self._heap and self._heap[0][2].done:  # finished calls leave from the top
                heapq.heappop(self._heap)
            heapq.heappush(self._heap, (dog.deadline, next(self._order), dog))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="loadtest-watchdog", daemon=True)
                self._thread.start()
            elif dog.deadline < self._until:  # the thread would wake too late: wake it now
                self._wake.notify()

    def pending(self) -> int:
        """Deadlines still in the heap, finished or not (for tests: the heap must not grow for ever)."""
        with self._wake:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._wake:
                due: list[Watchdog] = []
                while not due:
                    now = time.monotonic()
                    while self._heap and (self._heap[0][2].done or self._heap[0][0] <= now):
                        dog = heapq.heappop(self._heap)[2]
                        if not dog.done:
                            due.append(dog)
                    if not due:
                        # A call that ends first leaves its entry behind: the thread wakes then and
                        # goes back to sleep towards the next deadline, without a notify per call.
                        self._until = self._heap[0][0] if self._heap else math.inf
                        self._wake.wait(self._until - now if self._heap else None)
            for dog in due:
                dog.fire()


_reaper = _Reaper()


def _after_fork_in_child() -> None:
    # A forked worker (Airflow's task runner forks) has no reaper thread: start afresh on first use.
    global _reaper  # noqa: PLW0603 - the process-wide reaper is what is being replaced
    _reaper = _Reaper()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to cut
        sock.shutdown(socket.SHUT_RDWR)


def _track(sock: socket.socket | None) -> None:
    # The socket, not the connection: ``http.client`` drops ``connection.sock`` once an answer
    # with ``Connection: close`` has its headers, while the body is still read from that socket.
    watchdog: Watchdog | None = getattr(_running, "watchdog", None)
    if watchdog is not None and sock is not None:
        watchdog.track(sock)


class _LineSeen:
    """An answer's ``fp`` for one ``readline``: keeps the line ``http.client`` reads, to check it."""

    def __init__(self, fp: Any) -> None:
        self.fp = fp
        self.line = b""

    def readline(self, limit: int = -1) -> bytes:
        self.line = self.fp.readline(limit)
        return self.line

    def __getattr__(self, name: str) -> Any:  # close() and the rest: the file's own
        return getattr(self.fp, name)


_MULTIPART_DEFECTS = (
    email.errors.StartBoundaryNotFoundDefect,
    email.errors.MultipartInvariantViolationDefect,
)
#: A status line, a chunk size line and a Content-Length as RFC 9112 writes them: digits, nothing else.
_STATUS_LINE = re.compile(rb"HTTP/[0-9]\.[0-9] [0-9]{3}(?: [^\r\n]*)?\r?\n")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]+[ \t]*(?:;[^\r\n]*)?\r?\n")
_LENGTH = re.compile(r"[ \t]*[0-9]+[ \t]*")
#: The only transfer coding ``http.client`` implements (it reads an answer with any other by its
#: ``Content-Length`` or to the connection's end, as if the coding were not there).
_CHUNKED = ["chunked"]


class MalformedAnswer(http.client.HTTPException):
    """An answer ``StrictAnswer`` refused: framed, or headed, unlike HTTP/1.1 allows. Its text says how,
    quoting at most 60 characters of what the server sent."""


class StrictAnswer(http.client.HTTPResponse):
    """``http.client``'s answer, refusing the numbers it would otherwise read with ``int()``: a status
    ``+200``, ``2_00`` or ``0200``, a ``Content-Length`` ``+5`` or ``0_5`` (urllib3 reads those too, and
    ignores one it cannot read), a chunk size ``+2`` or ``0x2``. Such an answer comes from a server or a
    proxy that frames it unlike the rest of the chain would: it is refused, not guessed at. The parsing
    stays http.client's; only the line it read is checked (aiohttp's parser refuses all of these)."""

    def _read_status(self) -> tuple[str, int, str]:
        answer: tuple[str, int, str] = self._checked(super()._read_status, _STATUS_LINE)  # type: ignore[misc]
        return answer

    def _read_next_chunk_size(self) -> int:
        size: int = self._checked(super()._read_next_chunk_size, _CHUNK_SIZE)  # type: ignore[misc]
        return size

    def begin(self) -> None:
        super().begin()
        # A header line without a colon ends http.client's headers there (the rest, a Content-Length
        # maybe, goes unread); urllib3 only logs it. The same multipart defects are ignored as there.
        defects = [d for d in self.msg.defects if not isinstance(d, _MULTIPART_DEFECTS)]
        if defects:
            self._refuse(f"the answer's headers are malformed ({defects[0]!r:.60})")
        lengths = [v for value in self.msg.get_all("Content-Length") or [] for v in value.split(",")]
        if lengths and (not all(_LENGTH.fullmatch(v) for v in lengths) or len({int(v) for v in lengths}) > 1):
            self._refuse(f"the answer's Content-Length is not one number: {lengths!r:.60}")
        codings = self.msg.get_all("Transfer-Encoding")
        if codings is not None:
            # RFC 9112 6.1: a client that does not implement a coding must not read the body as if it
            # were not there; 6.3: a Transfer-Encoding beside a Content-Length "ought to be handled as an
            # error" (aiohttp, the triggerer's client, refuses both: the two clients agree).
            named = [c.strip().lower() for value in codings for c in value.split(",") if c.strip()]
            if named != _CHUNKED:
                self._refuse(
                    f"the answer's Transfer-Encoding is {', '.join(codings)!r:.60}, a coding this "
                    "client does not implement (only chunked)"
                )
            if lengths:
                self._refuse("the answer has both a Transfer-Encoding and a Content-Length")

    def _refuse(self, why: str) -> NoReturn:
        self._close_conn()  # type: ignore[attr-defined]  # http.client's own
        raise MalformedAnswer(why)

    def _checked(self, read: Any, pattern: re.Pattern[bytes]) -> Any:
        fp, seen = self.fp, _LineSeen(self.fp)
        self.fp = seen  # type: ignore[assignment]
        try:
            value = read()
        finally:
            if self.fp is seen:  # type: ignore[comparison-overlap]  # else http.client closed it: leave it so
                self.fp = fp
        if not pattern.fullmatch(seen.line):
            self._close_conn()  # type: ignore[attr-defined]  # http.client's own
            if pattern is _STATUS_LINE:
                raise http.client.BadStatusLine(seen.line.decode("latin-1")[:60])
            raise ValueError(f"not a chunk size: {seen.line[:40]!r}")  # http.client's own error here
        return value


class _WatchedHTTPConnection(HTTPConnection):
    """A connection whose sockets the running watchdog can cut (its HTTPS twin below inherits this),
    and whose answers are read strictly (``StrictAnswer``), a proxy's answer to ``CONNECT`` included."""

    response_class = StrictAnswer

    def _new_conn(self) -> socket.socket:
        # Tracked from the start too: a proxy's answer to CONNECT is read before any ``getresponse``
        # (not the TLS handshake: wrapping detaches this socket object, so the cut cannot reach it).
        sock = super()._new_conn()
        _track(sock)
        return sock

    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # as urllib3 does
        _track(getattr(self, "sock", None))
        return super().getresponse()


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    pass


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def _watch_pools(manager: PoolManager) -> None:
    manager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class BoundedAdapter(HTTPAdapter):
    """The session's adapter: its connections (direct or through a proxy) obey ``Watchdog``, and a
    connection speaking TLS is always verified."""

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # requests turns verification off on the pool of every http:// URL: behind an https:// proxy
        # that pool is the proxy's, spoken to over TLS, and the proxy's certificate went unchecked.
        if getattr(conn, "scheme", None) == "https" and not url.lower().startswith("https:"):
            url = "https:" + url.partition(":")[2]
        super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        _watch_pools(self.poolmanager)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        _watch_pools(manager)
        return manager
