"""The ERROR lines of a run's ``jmeter.log``: what JMeter itself said when a run ended in ERROR or
ABORTED (a missing CSV file, a script that threw, a plugin that failed to load).

Both of JMeter's log formats are read: log4j2's (JMeter 3.2 and later, ``2024-05-22 10:27:05,137 ERROR
o.a.j.t.JMeterThread: Test failed!``) and logkit's (JMeter 2.x and 3.0-3.1, ``2026/11/27 03:26:30 ERROR -
jmeter.config.CSVDataSet: ...``). An entry is its first line and the lines that follow it without a
time stamp of their own (a stack trace), of which ``TRACE_LINES`` are kept. The same message repeated
(one per thread, one per iteration) is one entry with a count. Bounded (``LIMIT`` entries of at most
``LINE_CHARS`` characters) and masked (``masking``): a log can be large and can echo secrets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from airflow_provider_loadtest.decisions.samples.masking import brief

__all__ = ["LEVELS", "LIMIT", "LINE_CHARS", "TRACE_LINES", "LogEntry", "LogErrors", "jmeter_log_errors"]

#: Entries kept, in the order they first appear.
LIMIT = 20
#: Characters kept of an entry's message and of each trace line.
LINE_CHARS = 300
#: Lines kept of an entry's stack trace (the exception and where it was thrown).
TRACE_LINES = 3
#: The levels read as errors (logkit wrote ``FATAL_ERROR``).
LEVELS = ("ERROR", "FATAL", "FATAL_ERROR", "FATAL_E")
_DISTINCT = 10_000  # distinct messages remembered while counting repeats

_ENTRY = re.compile(
    r"(?P<time>\d{4}[-/]\d{2}[-/]\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d+)?)\s+"
    r"(?:\[[^\]]*\]\s+)?"  # a thread name in brackets (some log4j2 patterns)
    r"(?P<level>[A-Z_]+)\b\s*(?:-\s+)?(?P<message>.*)"
)


@dataclass(frozen=True)
class LogEntry:
    """An ERROR entry: when it first appeared, its message (logger included), the first lines of its
    stack trace, and how many times the same message was logged."""

    time: str
    level: str
    message: str
    trace: tuple[str, ...] = ()
    count: int = 1

    def describe(self) -> str:
        repeated = f" (x{self.count})" if self.count > 1 else ""
        trace = "".join(f"\n    {line}" for line in self.trace)
        return f"{self.time} {self.level} {self.message}{repeated}{trace}"

    def to_xcom(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "level": self.level,
            "message": self.message,
            "trace": list(self.trace),
            "count": self.count,
        }


@dataclass(frozen=True)
class LogErrors:
    """A log's ERROR entries: at most ``LIMIT`` (``left_out`` more distinct ones were not kept), and
    ``total`` ERROR lines in all (repeats included)."""

    entries: tuple[LogEntry, ...] = ()
    total: int = 0
    left_out: int = 0

    def describe(self) -> list[str]:
        """Lines for a log or an exception."""
        if not self.total:
            return ["The JMeter log holds no ERROR line."]
        head = f"The JMeter log holds {self.total} ERROR line(s)"
        more = f"; {self.left_out} other message(s) not shown" if self.left_out else ""
        return [f"{head}{more}:", *(entry.describe() for entry in self.entries)]

    def to_xcom(self) -> dict[str, Any]:
        return {
            "entries": [entry.to_xcom() for entry in self.entries],
            "total": self.total,
            "left_out": self.left_out,
        }


def jmeter_log_errors(
    text: str | Iterable[str],
    *,
    limit: int = LIMIT,
    line_chars: int = LINE_CHARS,
    trace_lines: int = TRACE_LINES,
) -> LogErrors:
    """The ERROR entries of a ``jmeter.log`` (its text, or its lines as they are read)."""
    lines = text.splitlines() if isinstance(text, str) else text
    entries: dict[str, list[Any]] = {}  # message -> [time, level, trace, count], in first-seen order
    total = 0
    left: set[str] = set()  # distinct messages past the limit (counted up to _DISTINCT)
    current: list[Any] | None = None  # the entry whose trace lines follow
    for line in lines:
        found = _ENTRY.match(line)
        if found is None:
            if current is not None and len(current[2]) < trace_lines and line.strip():
                current[2].append(brief(line, line_chars))
            continue
        current = None
        level = found.group("level")
        if level not in LEVELS:
            continue
        total += 1
        message = brief(found.group("message"), line_chars)
        known = entries.get(message)
        if known is not None:
            known[3] += 1
        elif len(entries) < limit:
            current = entries[message] = [found.group("time"), level, [], 1]
        elif len(left) < _DISTINCT:
            left.add(message)
    return LogErrors(
        entries=tuple(
            LogEntry(time, level, message, tuple(trace), count)
            for message, (time, level, trace, count) in entries.items()
        ),
        total=total,
        left_out=len(left),
    )
