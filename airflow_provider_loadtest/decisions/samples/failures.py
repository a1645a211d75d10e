"""Why samples failed: per label its most frequent failure messages and response codes, and the run's
failed samples by response code, gathered in the same pass that reads the JTL files (``samples.jtl``).

A failed sample's message is its ``failureMessage`` (an assertion's, e.g. "Test failed: text expected to
contain /Welcome/") or, without one, its ``responseMessage`` ("Internal Server Error", "Non HTTP response
message: Read timed out"). Messages are made one line, masked (``masking``) and cut to
``MESSAGE_CHARS`` before they are counted, so that messages differing only past the cut or in a token
count together, and memory is bounded: at most ``MAX_DISTINCT`` distinct messages and codes over the
run, later new ones counted as "other". A Transaction Controller's own rows (``controller``) count for
their label but not in the run's failures by code, where their failed children (or, with "Generate
parent sample", the failure they stand for) would count twice.

The results are plain frozen dataclasses with ``to_xcom()`` (JSON-safe) and ``describe()`` (text for
a log line or an exception).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_loadtest.decisions.samples.masking import brief

__all__ = [
    "MAX_DISTINCT",
    "MESSAGE_CHARS",
    "NO_MESSAGE",
    "OTHER",
    "TOP",
    "Counted",
    "FailureCounts",
    "LabelFailures",
    "RunFailures",
]

#: Messages and codes kept per label, and codes for the run, most frequent first.
TOP = 5
#: A message longer than this is cut (with ``…``): enough for an assertion's or a server's message.
MESSAGE_CHARS = 200
#: Distinct (label, message) and (label, code) pairs counted over a run; later new ones are "other".
MAX_DISTINCT = 10_000
#: The message of a failed sample that has neither a failure message nor a response message.
NO_MESSAGE = "(no message)"
#: The run's codes past ``MAX_DISTINCT`` distinct ones.
OTHER = "(other codes)"


def _shown(text: str) -> str:
    """A message or code as counted and shown: one line, masked, cut."""
    return brief(text, MESSAGE_CHARS) or NO_MESSAGE


@dataclass(frozen=True)
class Counted:
    """A message or a response code, and how many failed samples had it."""

    text: str
    count: int

    def to_xcom(self) -> dict[str, Any]:
        return {"text": self.text, "count": self.count}


def _top(counts: Counter[str], top: int) -> tuple[Counted, ...]:
    """The ``top`` most frequent, ties in text order (the same files give the same answer)."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return tuple(Counted(text, count) for text, count in ordered[:top])


def _describe(items: tuple[Counted, ...], other: int, *, quote: bool) -> str:
    shown = [f"{item.text!r} x{item.count}" if quote else f"{item.text} x{item.count}" for item in items]
    if other:
        shown.append(f"{other} other")
    return ", ".join(shown)


@dataclass(frozen=True)
class LabelFailures:
    """One label's failed samples: how many, its most frequent messages and response codes (at most
    ``TOP`` each; ``other_messages`` and ``other_codes`` failed samples had one not shown)."""

    label: str
    failed: int
    messages: tuple[Counted, ...] = ()
    codes: tuple[Counted, ...] = ()
    other_messages: int = 0
    other_codes: int = 0
    #: The label's rows are a Transaction Controller's own (its message says how many children failed).
    controller: bool = False

    def describe(self) -> str:
        """One line: ``Login: 12 failed; codes 401 x12; messages 'Test failed: ...' x12``."""
        kind = " (Transaction Controller)" if self.controller else ""
        return (
            f"{self.label}{kind}: {self.failed} failed; "
            f"codes {_describe(self.codes, self.other_codes, quote=False)}; "
            f"messages {_describe(self.messages, self.other_messages, quote=True)}"
        )

    def to_xcom(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "failed": self.failed,
            "messages": [item.to_xcom() for item in self.messages],
            "codes": [item.to_xcom() for item in self.codes],
            "other_messages": self.other_messages,
            "other_codes": self.other_codes,
            "controller": self.controller,
        }


@dataclass(frozen=True)
class RunFailures:
    """A run's failed samples: by response code over the run (Transaction Controller rows left out),
    and per label with at least one failure, its ``LabelFailures``."""

    failed: int = 0
    by_code: tuple[Counted, ...] = ()
    other_codes: int = 0
    labels: Mapping[str, LabelFailures] = field(default_factory=dict)

    def for_labels(self, labels: Iterable[str]) -> tuple[LabelFailures, ...]:
        """The failures of these labels (a gate's failing transactions), in their order; a label without
        failed samples is left out."""
        return tuple(self.labels[label] for label in labels if label in self.labels)

    def describe(self, labels: Iterable[str] | None = None) -> list[str]:
        """Lines for a log or an exception: the run's failed samples by code, then one line per label
        (``labels``: only these, e.g. the transactions a gate failed; default every label that failed,
        most failures first)."""
        if not self.failed and not self.labels:
            return ["No sample failed."]
        chosen = (
            self.for_labels(labels)
            if labels is not None
            else sorted(self.labels.values(), key=lambda item: (-item.failed, item.label))
        )
        codes = _describe(self.by_code, self.other_codes, quote=False)
        head = f"{self.failed} sample(s) failed, by response code: {codes}"
        return [head if self.failed else "No sampler's sample failed.", *(item.describe() for item in chosen)]

    def to_xcom(self, labels: Iterable[str] | None = None) -> dict[str, Any]:
        """JSON-safe: ``{"failed", "by_code": [{"text", "count"}], "other_codes", "labels": {label: ...}}``
        (``labels``: only these)."""
        chosen = self.for_labels(labels) if labels is not None else tuple(self.labels.values())
        return {
            "failed": self.failed,
            "by_code": [item.to_xcom() for item in self.by_code],
            "other_codes": self.other_codes,
            "labels": {item.label: item.to_xcom() for item in chosen},
        }


class FailureCounts:
    """Running counts of failed samples while files are read (one per file, merged into the reader's).

    ``MAX_DISTINCT`` bounds the distinct (label, text) pairs this holds, for messages and codes alike.
    """

    __slots__ = (
        "codes",
        "controllers",
        "distinct",
        "messages",
        "other_codes",
        "other_messages",
        "run_codes",
        "shown",
    )

    def __init__(self) -> None:
        self.messages: dict[str, Counter[str]] = {}
        self.codes: dict[str, Counter[str]] = {}
        self.other_messages: Counter[str] = Counter()
        self.other_codes: Counter[str] = Counter()
        self.run_codes: Counter[str] = Counter()
        self.controllers: set[str] = set()
        self.distinct = 0
        self.shown: dict[str, str] = {}  # raw text -> as shown (masking costs: texts repeat per batch)

    def add(self, counts: Mapping[tuple[str, str, str], int], *, controller: bool) -> None:
        """Failed samples counted by (label, response code, raw message); ``controller``: they are a
        Transaction Controller's rows (left out of the run's failures by code)."""
        for (label, raw_code, message), count in counts.items():
            code = self._shown(raw_code)
            self._bump(self.codes, self.other_codes, label, code, count)
            self._bump(self.messages, self.other_messages, label, self._shown(message), count)
            if controller:
                self.controllers.add(label)
            else:
                self._bump_run(code, count)

    def _shown(self, text: str) -> str:
        shown = self.shown.get(text)
        if shown is None:
            if len(self.shown) >= MAX_DISTINCT:
                self.shown.clear()
            shown = self.shown[text] = _shown(text)
        return shown

    def _bump(
        self, table: dict[str, Counter[str]], other: Counter[str], label: str, text: str, count: int
    ) -> None:
        mine = table.setdefault(label, Counter())
        if text in mine:
            mine[text] += count
        elif self.distinct < MAX_DISTINCT:
            self.distinct += 1
            mine[text] = count
        else:
            other[label] += count

    def _bump_run(self, code: str, count: int) -> None:
        key = code if code in self.run_codes or len(self.run_codes) < MAX_DISTINCT else OTHER
        self.run_codes[key] += count

    def merge(self, other: FailureCounts) -> None:
        for table, others, mine in (
            (other.messages, other.other_messages, (self.messages, self.other_messages)),
            (other.codes, other.other_codes, (self.codes, self.other_codes)),
        ):
            for label, counts in table.items():
                for text, count in counts.items():
                    self._bump(*mine, label, text, count)
            mine[1].update(others)
        for code, count in other.run_codes.items():
            self._bump_run(code, count)
        self.controllers |= other.controllers

    def result(self, failed: Mapping[str, int], top: int = TOP) -> RunFailures:
        """The run's failures; ``failed``: each label's failed samples (from its figures)."""
        labels: dict[str, LabelFailures] = {}
        for label in sorted(failed):
            if not failed[label]:
                continue
            messages = _top(self.messages.get(label, Counter()), top)
            codes = _top(self.codes.get(label, Counter()), top)
            labels[label] = LabelFailures(
                label=label,
                failed=failed[label],
                messages=messages,
                codes=codes,
                other_messages=failed[label] - sum(item.count for item in messages),
                other_codes=failed[label] - sum(item.count for item in codes),
                controller=label in self.controllers,
            )
        by_code = _top(self.run_codes, top * 2)
        total = sum(self.run_codes.values())
        return RunFailures(
            failed=total,
            by_code=by_code,
            other_codes=total - sum(item.count for item in by_code),
            labels=labels,
        )
