"""The nights' results the API server decoded already, kept across requests.

A night's ``return_value`` never changes once written (a retry writes a new XCom row, with a new
``timestamp``), and decoding it is most of a page's time when a gate is wide: a year of a gate of 201
series is 32 MB of JSON, about 0.1 s for ``msgspec`` and 0.4 s for ``json``, on every view. So each
API server process keeps the results it decoded, keyed by their XCom row and its timestamp, the least
recently used first out, bounded by the bytes they hold (``CACHED_BYTES``, an estimate: ``size_of``).

Concurrent misses of the same results are decoded once (single flight): the first request to miss a
key decodes it, the others wait for it and take what it kept (20 viewers opening a cold page decode it
once, not 20 times side by side).

Only results are kept: a night without one (its task still running) is read again each time. What a
user may read is decided per request, before anything is looked up here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

from airflow_provider_loadtest.plugins.bounds import DECODED_CHARS
from airflow_provider_loadtest.plugins.rows import ROWS_KEPT, RunResult

#: Bytes of results kept per process (an estimate, ``size_of``): a year of a gate of 201 series is
#: about 50 MB, so it fits with room for the others.
CACHED_BYTES = 96 * 2**20
#: Estimated bytes of a result itself, of one of its gate rows as decoded (a ``WireRow``: about 630
#: bytes measured with tracemalloc for the gate's rows, texts of typical names included), and of a
#: row made for a page (a ``Row``: about 300, at most ``rows.ROWS_KEPT`` kept per result).
RESULT_BYTES, ENTRY_BYTES, ROW_BYTES = 2048, 640, 320
#: Texts of one gate row beyond a typical row's names (metric, transaction, reason, note, budget,
#: status): each at most ``bounds.DECODED_CHARS``, in up to 4 bytes a character.
_TEXTS_PER_ROW = 6


def size_of(result: RunResult) -> int:
    """The bytes ``result`` holds, estimated without walking it (a year of a wide gate is 73,000 rows):
    a fixed part per result and per row, and the texts beyond a typical row's. Those are bounded by the
    JSON text the result was decoded from (``text_chars``: a decoded text is never longer than its JSON,
    and a 25 MB note is clipped on decode) and by the clipping itself (``DECODED_CHARS`` per text)."""
    entries = len(result.entries)
    texts = min(result.text_chars, (entries + 1) * _TEXTS_PER_ROW * DECODED_CHARS * 4)
    return RESULT_BYTES + ENTRY_BYTES * entries + ROW_BYTES * min(entries, ROWS_KEPT) + texts


class DecodedResults:
    """Results by key, least recently used out first once they hold more than ``limit`` bytes
    (``size_of``), each decoded once however many requests miss it at the same time."""

    def __init__(self, limit: int = CACHED_BYTES) -> None:
        self.limit = limit
        self._found: OrderedDict[Hashable, tuple[RunResult, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Keys some request is decoding now, and the event set when it is done.
        self._decoding: dict[Hashable, threading.Event] = {}

    def _take(self, keys: Iterable[Hashable], found: dict[Hashable, RunResult]) -> None:
        """Into ``found``, the results of ``keys`` kept (the lock held)."""
        for key in keys:
            kept = self._found.get(key)
            if kept is not None:
                self._found.move_to_end(key)
                found[key] = kept[0]

    def get_many(
        self, keys: Iterable[Hashable], decode: Callable[[list[Hashable]], dict[Hashable, RunResult]]
    ) -> dict[Hashable, RunResult]:
        """The results of ``keys``: those kept, those another request is decoding (waited for), and those
        ``decode`` reads (one call, for all the others), which are then kept."""
        wanted = list(dict.fromkeys(keys))
        found: dict[Hashable, RunResult] = {}
        with self._lock:
            self._take(wanted, found)
            waits = {k: self._decoding[k] for k in wanted if k not in found and k in self._decoding}
            mine = [k for k in wanted if k not in found and k not in waits]
            done = threading.Event()
            for key in mine:
                self._decoding[key] = done
        try:
            read = decode(mine) if mine else {}  # outside the lock: other requests go on meanwhile
            found.update(read)
            self._keep(read)
        finally:
            with self._lock:
                for key in mine:
                    self._decoding.pop(key, None)
            done.set()
        for event in set(waits.values()):
            event.wait()
        with self._lock:
            self._take(waits, found)
        late = [k for k in waits if k not in found]  # the other decode failed, or its result went out
        if late:
            found.update(decode(late))
        return found

    def _keep(self, read: dict[Hashable, RunResult]) -> None:
        with self._lock:
            for key, result in read.items():
                if key not in self._found:
                    size = size_of(result)
                    self._found[key] = (result, size)
                    self._bytes += size
            while self._bytes > self.limit and self._found:
                _, (_, dropped) = self._found.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._found.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._found)

    @property
    def bytes(self) -> int:
        """The estimated bytes kept (``size_of``), at most ``limit``."""
        return self._bytes


RESULTS = DecodedResults()
