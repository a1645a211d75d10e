"""A wall-clock bound on a whole ``requests`` call, not only on each read.

``requests`` only has per-read timeouts: a server (or a proxy) sending one byte a second keeps each
read short and the call alive for ever, through the headers as well as the body. ``Watchdog`` arms a
timer for the call's budget; the session's connections report themselves to the running watchdog
when they send a request, and when the timer fires it shuts their sockets down, so the blocked read
returns at once and ``requests`` raises. The caller then asks ``Watchdog.fired`` to tell this apart
from a real connection failure.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Any

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
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        _running.watchdog = self
        self._timer.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._timer.cancel()
        _running.watchdog = None

    def track(self, sock: socket.socket) -> None:
        """Called with a connection's socket when its answer is about to be read."""
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to cut
        sock.shutdown(socket.SHUT_RDWR)


def _track(connection: HTTPConnection) -> None:
    # The socket, not the connection: ``http.client`` drops ``connection.sock`` once an answer
    # with ``Connection: close`` has its headers, while the body is still read from that socket.
    watchdog: Watchdog | None = getattr(_running, "watchdog", None)
    sock = getattr(connection, "sock", None)
    if watchdog is not None and sock is not None:
        watchdog.track(sock)


class _WatchedHTTPConnection(HTTPConnection):
    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # as urllib3 does
        _track(self)
        return super().getresponse()


class _WatchedHTTPSConnection(HTTPSConnection):
    def getresponse(self) -> HTTPResponse:  # type: ignore[override]  # as urllib3 does
        _track(self)
        return super().getresponse()


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def _watch_pools(manager: PoolManager) -> None:
    manager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class BoundedAdapter(HTTPAdapter):
    """The session's adapter: its connections (direct or through a proxy) obey ``Watchdog``."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        _watch_pools(self.poolmanager)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> PoolManager:
        manager: PoolManager = super().proxy_manager_for(proxy, **proxy_kwargs)
        _watch_pools(manager)
        return manager
