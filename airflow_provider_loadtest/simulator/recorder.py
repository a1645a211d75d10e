"""A record of every API request the simulator received (admin routes excluded).

The API key itself is never stored: only whether the request carried a valid one.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    authorized: bool
    """The Authorization header carried ``Bearer <a valid key>``."""
    body: Any
    """The body parsed as JSON; its text when it is not JSON; ``None`` when empty."""
    time: float
    """Epoch seconds (wall clock) when the request arrived."""
    status: int | None
    """The status answered; ``None`` when the connection was dropped without an answer."""
    route: str | None = None
    path_params: dict[str, str] = field(default_factory=dict)
    fault: str | None = None
    """The kind of fault injected into this request, if any."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Recorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[RecordedRequest] = []

    def add(self, item: RecordedRequest) -> None:
        with self._lock:
            self._items.append(item)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._items)

    def starts(self, scenario_id: str | None = None) -> list[RecordedRequest]:
        """Start requests (``POST /runtime/scenarios/run/...``), all attempts, faulted ones included."""
        return [
            r
            for r in self.requests
            if r.route == "run_scenario"
            and (scenario_id is None or r.path_params.get("scenario_id") == scenario_id)
        ]
