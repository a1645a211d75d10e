"""The service as the triggerer's client meets it: on aiohttp's own session, answered by a test.

``answer_with(handler)`` makes every aiohttp request of the process (through ``ClientSession``, which
``hooks.transport.Channel`` uses in production) answered by ``handler``, with aioresponses: the package
runs its real channel (its session's headers, its timeouts, its reading of the body in bounded chunks,
its account of aiohttp's errors), only the network is left out. The headers and bytes on the wire are
``tests/unit/test_transport.py``'s, on a loopback server.

A handler takes the request as an ``httpx.Request`` (method, URL, headers the session sent, JSON body)
and returns an ``httpx.Response``, or raises an aiohttp error (``aiohttp.ServerDisconnectedError()``, a
``TimeoutError``) for a failure without an answer: httpx is only the tests' way to write requests and
answers down. ``tests/unit/conftest.py`` stops every mock at the end of its test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
from aioresponses import CallbackResult, aioresponses

Handler = Callable[[httpx.Request], httpx.Response]

_ANY_URL = re.compile(r".*")
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
_started: list[aioresponses] = []


def answer_with(handler: Handler) -> list[httpx.Request]:
    """Answer every aiohttp request with ``handler`` until the test ends; the requests, in order."""
    seen: list[httpx.Request] = []
    mocked = aioresponses()
    mocked.start()
    _started.append(mocked)
    for method in _METHODS:
        mocked.add(_ANY_URL, method=method, callback=partial(_answer, handler, seen, method), repeat=True)
    return seen


def stop_all() -> None:
    """Give aiohttp its network back (called after every unit test)."""
    while _started:
        _started.pop().stop()


def _answer(
    handler: Handler, seen: list[httpx.Request], method: str, url: Any, **kwargs: Any
) -> CallbackResult:
    headers = dict((kwargs.get("headers") or {}).items())
    body = kwargs.get("json")
    if body is not None:
        request = httpx.Request(method, str(url), headers=headers, json=body)
    else:
        request = httpx.Request(method, str(url), headers=headers)
    seen.append(request)
    response = handler(request)
    raw = b"".join(response.stream) if isinstance(response.stream, httpx.SyncByteStream) else response.content
    answer_headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return CallbackResult(
        status=response.status_code,
        body=raw,
        headers=answer_headers,
        content_type=response.headers.get("Content-Type", "application/json"),  # aioresponses needs one
    )
