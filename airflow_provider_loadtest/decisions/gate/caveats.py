"""The service's own trust caveats: when a run's figures are not to be taken at face value.

The service's analysis guides say (``shared/spec/beyond-the-spec.md``): an overloaded load generator
under-reports response times; more than about 40 % of ``304 Not Modified`` answers makes throughput and
times an optimistic floor (the server sent no body); its insights need at least 50 virtual users or 20
minutes. What the service exposes to check them, and so what is checked here:

* **304 answers**: the run's JTL files hold every sample's ``responseCode``; the reader counts the 304s
  in the pass that reads them (``samples.jtl``), so the share is known whenever the task reads the JTL
  files (a transaction gate). Above ``NOT_MODIFIED_SHARE`` of the samples, a caveat.
* **An overloaded load generator**: the service shows it in its threshold and monitoring alarms (its
  load generators are monitored); an alarm at WARNING or CRITICAL whose name, message or ids name a
  load generator (``GENERATOR_WORDS``) is a caveat. No REST figure of a generator's CPU is published, so
  an overload the service raised no alarm for cannot be seen here.
* **Too small to mean much**: fewer than ``MIN_USERS`` users *and* shorter than ``MIN_SECONDS``: said,
  never a failure (a smoke test is small on purpose).

Each caveat is said in the log beside the verdict; with ``fail_on_trust_caveats`` the first two fail the
gate as a row of status ``not_measured`` (``HTTP_RESPONSE_CODES`` and ``LOAD_GENERATOR``: the breakdowns
they are about). Sans-I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_loadtest.decisions.gate.rows import NOT_MEASURED, GateRow, format_number

__all__ = [
    "GENERATOR_WORDS",
    "MIN_SECONDS",
    "MIN_USERS",
    "NOT_MODIFIED_SHARE",
    "Caveat",
    "caveat_rows",
    "trust_caveats",
]

#: The share of 304 answers past which the service calls throughput and times an optimistic floor.
NOT_MODIFIED_SHARE = 0.40
#: The service's insights need at least this many virtual users, or ``MIN_SECONDS`` of load.
MIN_USERS = 50
MIN_SECONDS = 20 * 60
#: How an alarm names a load generator (its name, message or ids).
GENERATOR_WORDS = re.compile(r"load[ _-]?generator|\binjector\b|\blg-\d+\b", re.IGNORECASE)
_RAISED = ("WARNING", "CRITICAL")


@dataclass(frozen=True)
class Caveat:
    """A reason not to take the run's figures at face value: ``metric`` (the breakdown it is about),
    ``value`` (a share in percent, or None), the sentence for the log, and whether
    ``fail_on_trust_caveats`` fails the gate on it."""

    metric: str
    value: float | None
    text: str
    may_fail: bool = True


def _alarm_text(alarm: Mapping[str, Any]) -> str:
    return " ".join(str(alarm.get(k) or "") for k in ("name", "message", "id", "counterId", "connectionId"))


def trust_caveats(
    *,
    alarms: Iterable[Mapping[str, Any]] = (),
    samples: int | None = None,
    not_modified: int | None = None,
    userload: float | None = None,
    duration_s: float | None = None,
) -> list[Caveat]:
    """The caveats the run's figures, files and alarms show (see the module's docstring)."""
    found: list[Caveat] = []
    if samples and not_modified is not None and not_modified / samples > NOT_MODIFIED_SHARE:
        share = 100 * not_modified / samples
        found.append(
            Caveat(
                "HTTP_RESPONSE_CODES",
                round(share, 1),
                f"{format_number(round(share, 1))} % of the samples were answered 304 Not Modified (over "
                f"{format_number(NOT_MODIFIED_SHARE * 100)} %): the service warns that throughput and "
                "response times are then an optimistic floor",
            )
        )
    overloaded = [
        alarm
        for alarm in alarms
        if str(alarm.get("severity")) in _RAISED and GENERATOR_WORDS.search(_alarm_text(alarm))
    ]
    if overloaded:
        names = ", ".join(
            f"{alarm.get('name') or alarm.get('id')!s} ({alarm.get('severity')})" for alarm in overloaded[:3]
        )
        found.append(
            Caveat(
                "LOAD_GENERATOR",
                None,
                f"the service's alarm(s) {names} show an overloaded load generator: the service warns "
                "that it under-reports response times",
            )
        )
    if userload is not None and duration_s is not None and userload < MIN_USERS and duration_s < MIN_SECONDS:
        found.append(
            Caveat(
                "USERLOAD",
                userload,
                f"{format_number(userload)} users for {duration_s / 60:.0f} min: the service's insights "
                f"need at least {MIN_USERS} virtual users or {MIN_SECONDS // 60} minutes to mean much",
                may_fail=False,
            )
        )
    return found


def caveat_rows(caveats: Iterable[Caveat], *, fail: bool) -> list[GateRow]:
    """With ``fail`` (``fail_on_trust_caveats``), a failing row per caveat that may fail; else none
    (the caveats are said in the log only)."""
    if not fail:
        return []
    return [
        GateRow(
            metric=caveat.metric,
            value=caveat.value,
            passed=False,
            reason=f"not trusted: {caveat.text}",
            status=NOT_MEASURED,
        )
        for caveat in caveats
        if caveat.may_fail
    ]
