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

Route names: ``run_scenario``, ``list_templates``, ``member_of``, ``get_bench_result``, ``get_progress``,
``global_metrics``, ``stop_run``, ``threshold_alarms``, ``junit_report``, ``create_task``, ``task_result``,
``list_logs``, ``download_log``.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

FaultKind = Literal["rate_limit", "error", "delay", "drop", "accept_then_drop"]
FAULT_KINDS: tuple[str, ...] = ("rate_limit", "error", "delay", "drop", "accept_then_drop")


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
