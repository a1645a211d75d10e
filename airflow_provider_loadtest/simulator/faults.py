"""Fault injection: what can go wrong between a client and the service, on demand.

A :class:`FaultSpec` says *what* happens (``kind``), *where* (a route name, a path prefix, a method, a
scenario; every given criterion must match) and *how often* (``count``: the next N matching calls;
``probability``: a share drawn from a seeded generator, so runs are reproducible; neither: every call).

Kinds:

``rate_limit``        429 with ``Retry-After`` (``retry_after`` seconds)
``error``             ``status`` (502, 503 or 504; default 503) with a short text body
``delay``             answer normally after ``delay_seconds``
``drop``              close the connection without answering (the request is not processed)
``accept_then_drop``  process the request (a start creates its run), then close without answering
``unavailable``       503 with ``Retry-After`` (``retry_after`` seconds), as a gateway in maintenance sends
``garbage``           process the request (a start creates its run), then answer 200 with a body that is not
                      JSON (an unreadable success: the service acted, the client cannot know the result)
``trickle``           process the request, then send the answer one byte every ``interval_seconds`` (a slow
                      proxy: each read gets a byte, so a per-read timeout never fires); bounded server-side:
                      the connection is closed after ``limit_seconds``
``hang``              never answer: hold the connection for ``limit_seconds`` (bounded server-side), then
                      close it (the request is not processed)

Route names: ``run_scenario``, ``list_templates``, ``member_of``, ``get_bench_result``, ``get_progress``,
``global_metrics``, ``stop_run``, ``threshold_alarms``, ``junit_report``, ``create_task``, ``task_result``,
``list_logs``, ``download_log``.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

if TYPE_CHECKING:
    from starlette.types import Message, Send

FaultKind = Literal[
    "rate_limit", "error", "delay", "drop", "accept_then_drop", "unavailable", "garbage", "trickle", "hang"
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
#: Kinds after which the service has acted on the request although the client gets no usable answer.
PROCESSING_KINDS: frozenset[str] = frozenset({"accept_then_drop", "garbage", "trickle"})
#: The unreadable body a ``garbage`` fault answers with (valid UTF-8, not JSON: a truncated proxy page).
GARBAGE_BODY = b"<html><body>upstream sent an invalid resp"


class FaultSpec(BaseModel):
    """One fault rule (camelCase in JSON, snake_case in Python)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    kind: FaultKind
    route: str | None = None
    path_prefix: str | None = None
    method: str | None = None
    scenario_id: str | None = None
    status: int | None = None
    retry_after: int = Field(default=1, ge=0)
    delay_seconds: float = Field(default=1.0, ge=0, le=120)
    interval_seconds: float = Field(default=1.0, gt=0, le=60)
    """``trickle``: seconds between two bytes of the answer."""
    limit_seconds: float = Field(default=30.0, gt=0, le=600)
    """``trickle`` and ``hang``: the server closes the connection after this long (never an endless test)."""
    probability: float | None = Field(default=None, ge=0, le=1)
    count: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> FaultSpec:
        if self.kind == "error":
            if self.status is None:
                self.status = 503
            if not 500 <= self.status <= 599:
                raise ValueError("an 'error' fault needs a 5xx status")
        elif self.kind == "rate_limit":
            self.status = 429
        elif self.kind == "unavailable":
            self.status = 503
        elif self.kind == "garbage":
            self.status = 200
        if self.probability is not None and self.count is not None:
            raise ValueError("give either probability or count, not both")
        return self


@dataclass(frozen=True)
class RequestTarget:
    """What a fault rule is matched against."""

    method: str
    path: str
    route: str | None
    scenario_id: str | None


class FaultInjector:
    """The active fault rules; thread-safe (the server thread draws, tests configure)."""

    def __init__(self, rules: list[FaultSpec] | None = None, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._seed = seed
        self._rng = random.Random(seed)  # noqa: S311 - seeded fault injection, reproducible, not crypto
        self._rules: list[tuple[FaultSpec, list[int | None]]] = []
        for rule in rules or []:
            self.add(rule)

    def add(self, rule: FaultSpec) -> FaultSpec:
        with self._lock:
            self._rules.append((rule, [rule.count]))
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._rng = random.Random(self._seed)  # noqa: S311 - seeded fault injection, not crypto

    @property
    def rules(self) -> list[FaultSpec]:
        with self._lock:
            return [rule for rule, _ in self._rules]

    def draw(self, target: RequestTarget) -> FaultSpec | None:
        """The fault to apply to this request, if any (consumes one of a counted rule's calls)."""
        with self._lock:
            for rule, remaining in self._rules:
                if not _matches(rule, target):
                    continue
                if remaining[0] is not None:
                    if remaining[0] <= 0:
                        continue
                    remaining[0] -= 1
                    return rule
                if rule.probability is None or self._rng.random() < rule.probability:
                    return rule
            return None


def _matches(rule: FaultSpec, target: RequestTarget) -> bool:
    if rule.route is not None and rule.route != target.route:
        return False
    if rule.path_prefix is not None and not target.path.startswith(rule.path_prefix):
        return False
    if rule.method is not None and rule.method.upper() != target.method.upper():
        return False
    return rule.scenario_id is None or rule.scenario_id == target.scenario_id


# --- applying a fault to an ASGI answer -------------------------------------------------------------


def _disconnected(send: Send) -> bool:
    """Whether uvicorn saw the client hang up (best effort: only uvicorn's ``send`` knows)."""
    cycle = getattr(send, "__self__", None)
    return bool(getattr(cycle, "disconnected", False))


async def hold(fault: FaultSpec, send: Send) -> None:
    """``hang``: keep the connection open without a byte, up to ``limit_seconds`` or the client leaving."""
    loop = asyncio.get_running_loop()
    end = loop.time() + fault.limit_seconds
    while loop.time() < end and not _disconnected(send):
        await asyncio.sleep(min(0.1, max(0.0, end - loop.time())))


def rewriting_send(fault: FaultSpec, send: Send, on_status: Callable[[int], None]) -> Send:
    """A ``send`` that turns the app's real answer into a ``garbage`` or ``trickle`` one.

    The app processes the request as usual (a start creates its run); only what reaches the client
    changes. The answer's body is collected first, then written as the fault says.
    """
    start: list[Message] = []
    chunks: list[bytes] = []

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            start.append(message)
            on_status(fault.status if fault.kind == "garbage" and fault.status else int(message["status"]))
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(bytes(message.get("body", b"")))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        if fault.kind == "garbage":
            await _send_whole(
                send, GARBAGE_BODY, status=fault.status or 200, content_type=b"application/json"
            )
            return
        head = start[0] if start else {"type": "http.response.start", "status": 200, "headers": []}
        await send(head)
        await _trickle(fault, send, body)

    return wrapped


async def _send_whole(send: Send, body: bytes, *, status: int, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _trickle(fault: FaultSpec, send: Send, body: bytes) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + fault.limit_seconds
    for index in range(len(body)):
        if _disconnected(send):
            return
        last = index == len(body) - 1
        await send({"type": "http.response.body", "body": body[index : index + 1], "more_body": not last})
        if last:
            return
        if loop.time() + fault.interval_seconds > end:
            break
        await asyncio.sleep(fault.interval_seconds)
    hang_up(send)


def hang_up(send: Send) -> bool:
    """Close the client's connection now; False when ``send`` is not uvicorn's (nothing to close).

    uvicorn's ``send`` is a bound method of its request cycle, which holds the socket's transport:
    closing it (and marking the cycle disconnected, so uvicorn does not try to answer 500) is the one
    way to make an ASGI app hang up.
    """
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None or not hasattr(transport, "close"):
        return False
    transport.close()
    if cycle is not None and hasattr(cycle, "disconnected"):
        cycle.disconnected = True
    return True
