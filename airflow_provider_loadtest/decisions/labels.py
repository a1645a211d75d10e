"""Checking the transaction labels a task gates against those the history of its last nights knows, before
the (billed) run starts.

A label in ``transaction_budgets`` that no sample has fails its row as not measured, but only once the run
ended: a typo costs a whole load test. The history of ``baseline="history"`` (derived from the nights'
records, ``decisions.gate.nights``) holds one series per gated (label, metric) of the last nights, so it
knows labels the service really samples. A key that is not among them and is close to one of them (the same
ignoring case, or a near miss) is taken for a typo and refused before the start. A key far from all of
them may be a transaction gated for the first time: it is said in the log, and judged once the run ended.
Without a history nothing can be known before the run: that is said too.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

#: How similar (``difflib`` ratio) a key must be to a known label to be taken for a typo of it.
NEAR_MISS = 0.8
#: How many known labels a message names.
NAMED = 10
_PATTERN_CHARACTERS = frozenset("*?[")


@dataclass(frozen=True)
class LabelCheck:
    """What the check found: ``refusals`` (typos: the task must fail before the start) and ``notes``
    (keys it cannot vouch for, for the log)."""

    refusals: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _closest(key: str, known: Iterable[str]) -> str | None:
    for label in sorted(known):
        if label.casefold() == key.casefold():
            return label
    found = difflib.get_close_matches(key, sorted(known), n=1, cutoff=NEAR_MISS)
    return found[0] if found else None


def check_labels(keys: dict[str, Iterable[str]], known: frozenset[str]) -> LabelCheck:
    """``keys``: per parameter (``transaction_budgets``, ``transaction_max_regression_pct``) the labels or
    patterns it names; ``known``: the labels the history holds series of (empty: nothing is known)."""
    if not known:
        return LabelCheck()
    named = ", ".join(repr(label) for label in sorted(known)[:NAMED])
    more = f" and {len(known) - NAMED} more" if len(known) > NAMED else ""
    refusals: list[str] = []
    notes: list[str] = []
    for parameter, names in keys.items():
        for key in dict.fromkeys(names):
            if key in known:
                continue
            if not _PATTERN_CHARACTERS.isdisjoint(key):
                notes.append(f"{parameter}: the pattern {key!r} matches no label the history knows")
                continue
            closest = _closest(key, known)
            if closest is not None:
                refusals.append(
                    f"{parameter} names {key!r}, a label the last nights' runs did not have: did you mean "
                    f"{closest!r}? (labels are case-sensitive; the history knows {named}{more})"
                )
            else:
                notes.append(
                    f"{parameter}: {key!r} is not among the labels the history knows ({named}{more}): "
                    "a transaction gated for the first time is judged once the run ended"
                )
    return LabelCheck(tuple(refusals), tuple(notes))
