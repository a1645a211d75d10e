"""The nights' results the API server decoded already, kept across requests.

A night's ``return_value`` never changes once written (a retry writes a new XCom row, with a new
``timestamp``), and decoding it is most of a page's time when a gate is wide: a year of a gate of 201
series is 32 MB of JSON, about 0.15 s for ``msgspec`` and 0.4 s for ``json``, on every view. So each
API server process keeps the results it decoded, keyed by their XCom row and its timestamp, the least
recently used first out, bounded by the gate rows they hold (``CACHED_ROWS``: about 0.7 KB each).

Only results are kept: a night without one (its task still running) is read again each time. What a
user may read is decided per request, before anything is looked up here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

from airflow_provider_loadtest.plugins.rows import RunResult

#: Gate rows kept per process (a year of a gate of 201 series is 73,000; about 50 MB).
CACHED_ROWS = 80_000


class DecodedResults:
    """Results by key, least recently used out first once they hold more than ``limit`` rows."""

    def __init__(self, limit: int = CACHED_ROWS) -> None:
        self.limit = limit
        self._found: OrderedDict[Hashable, RunResult] = OrderedDict()
        self._rows = 0
        self._lock = threading.Lock()

    @staticmethod
    def _size(result: RunResult) -> int:
        return len(result.entries) + 1

    def get_many(
        self, keys: Iterable[Hashable], decode: Callable[[list[Hashable]], dict[Hashable, RunResult]]
    ) -> dict[Hashable, RunResult]:
        """The results of ``keys``: those kept, and those ``decode`` reads (one call, for all the
        missing ones), which are then kept."""
        wanted = list(keys)
        found: dict[Hashable, RunResult] = {}
        with self._lock:
            for key in wanted:
                result = self._found.get(key)
                if result is not None:
                    self._found.move_to_end(key)
                    found[key] = result
        missing = [key for key in wanted if key not in found]
        if missing:
            read = decode(missing)  # outside the lock: other requests go on meanwhile
            found.update(read)
            with self._lock:
                for key, result in read.items():
                    if key not in self._found:
                        self._found[key] = result
                        self._rows += self._size(result)
                while self._rows > self.limit and self._found:
                    _, dropped = self._found.popitem(last=False)
                    self._rows -= self._size(dropped)
        return found

    def clear(self) -> None:
        with self._lock:
            self._found.clear()
            self._rows = 0

    def __len__(self) -> int:
        return len(self._found)

    @property
    def rows(self) -> int:
        return self._rows


RESULTS = DecodedResults()
