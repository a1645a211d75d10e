"""How many of the view's answers are built at once in one API server process.

Building a page reads Airflow's database and decodes XCom: 20 viewers opening a DAG's tab together
must not take Airflow's whole connection pool (5 + 10 by default) nor every core, or Airflow's own API
stalls behind them (issue 35). So at most ``VIEW_SLOTS`` answers are being built at any moment, each
reading with one database connection at a time, in a short session per read: the view never holds
more than ``VIEW_SLOTS`` of Airflow's connections.

A slot is held only while a piece of the answer is built (its reads, its decoding, its rendering),
never while the viewer takes it: a slow or gone viewer holds no slot, and 20 viewers interleave. A
request that finds no slot within ``SLOT_WAIT_S`` is answered 503 with ``Retry-After`` before anything
is read; a page already streaming that waits that long for its next piece ends there, saying it was cut.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fastapi import HTTPException, status

#: Answers built at once per API server process (each with at most one database connection). Building
#: is Python work under one interpreter lock: more than 2 at once gains no throughput, and slows
#: Airflow's own API in the same process (20 viewers measured: ``benchmarks/view_attack.py``).
VIEW_SLOTS = 2
#: Seconds a request waits for a slot before it is answered 503 (or a streaming page is cut).
SLOT_WAIT_S = 3.0
#: What a 503 tells the viewer's browser or client to wait before trying again.
RETRY_AFTER_S = 5

BUSY = "The load tests view is busy building other pages"


class Slots:
    """A bounded number of answers built at once (a semaphore with a bounded wait)."""

    def __init__(self, size: int = VIEW_SLOTS, wait: float = SLOT_WAIT_S) -> None:
        self.size, self.wait = size, wait
        self._free = threading.BoundedSemaphore(size)

    def acquire(self) -> bool:
        """Whether a slot was had within ``wait`` seconds."""
        return self._free.acquire(timeout=self.wait)

    def release(self) -> None:
        self._free.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        """A slot for the block, or a 503 with ``Retry-After`` when none frees up in time."""
        if not self.acquire():
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                f"{BUSY}: try again in a few seconds.",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        try:
            yield
        finally:
            self.release()

    def pieces(self, parts: Iterator[bytes], on_timeout: Callable[[], None]) -> Iterator[bytes]:
        """``parts``, each built holding a slot and handed out without one. When no slot frees up in
        time, ``on_timeout`` is called (the page stops reading and says it was cut) and the rest, which
        then reads nothing, is built without a slot."""
        while True:
            had = self.acquire()
            if not had:
                on_timeout()
            try:
                part = next(parts, None)
            finally:
                if had:
                    self.release()
            if part is None:
                return
            yield part


#: This process's slots (the API server runs the view in each of its worker processes).
SLOTS = Slots()
