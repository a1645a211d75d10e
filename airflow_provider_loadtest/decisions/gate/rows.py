"""A gate's rows: one per judged series (a metric, for the run or one transaction), its status, and
the numbers' text. No dependencies: the rows, read back from XCom or an asset event's ``extra`` by
``GateRow.from_xcom``, need nothing of the judgement (the "Load tests" view reads them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [  # noqa: RUF022 - grouped by meaning, not sorted
    "PASS",
    "NOISE",
    "SUSPECTED",
    "REGRESSION",
    "BUDGET",
    "NOT_MEASURED",
    "STATUSES",
    "Unreadable",
    "GateRow",
    "change_pct",
    "format_number",
]
# A row's ``status``.
PASS = "pass"  # noqa: S105 - passed, nothing compared against noise (budgets only, too little history, accepted)
NOISE = "noise"  # passed: within the noise, or a change smaller than max_regression_pct
SUSPECTED = "suspected"  # passed, but beyond the noise on one night: kept out of the history meanwhile
REGRESSION = "regression"  # failed: worse than the bound and than the noise explains
BUDGET = "budget"  # failed its budget
NOT_MEASURED = "not_measured"  # failed: a value the gate needs could not be read
STATUSES = (PASS, NOISE, SUSPECTED, REGRESSION, BUDGET, NOT_MEASURED)


@dataclass(frozen=True)
class Unreadable:
    """An input the gate needed and could not read, and why: the metric fails as not measured."""

    reason: str


@dataclass(frozen=True)
class GateRow:
    """One metric's verdict; fields are None where they do not apply.

    ``status`` says why: ``pass`` (nothing compared against noise), ``noise`` (within the noise, or a
    change smaller than ``max_regression_pct``), ``suspected`` (beyond the noise on one night: passes,
    kept out of the history), ``regression``, ``budget``, ``not_measured`` (an input could not be read:
    fails). ``baseline`` is what tonight was compared against (the baseline run's value, the history's
    centre, or on a short history the median of the nights so far); ``centre`` (the mean of the
    history's nights within its robust fence), ``noise`` (one standard deviation, in the metric's
    units), ``band_low``/``band_high`` (what one night's noise explains) and ``history_n`` (the nights
    in the history) come from ``baseline="history"``; so do ``own_sd`` and ``night_sd`` (what the
    series moved beyond its noise, and what every series moved together).
    """

    metric: str
    value: float | None
    passed: bool
    budget: str | None = None
    baseline: float | None = None
    change_pct: float | None = None
    max_regression_pct: float | None = None
    reason: str | None = None
    status: str = PASS
    centre: float | None = None
    noise: float | None = None
    band_low: float | None = None
    band_high: float | None = None
    history_n: int | None = None
    note: str | None = None
    #: The JTL label a per-transaction row is about (None: the run as a whole).
    transaction: str | None = None
    #: How far tonight's value moved beyond what its own noise explains, in its noise standard
    #: deviations (worse: positive): beyond the night's shared movement when the gate judged many
    #: series together (``family.py``). The verdict table ranks the rows by it.
    own_sd: float | None = None
    #: The night's shared movement of every series of the gate, in their noise standard deviations
    #: (the same on every row of a night; None when the gate had too few series to measure it).
    night_sd: float | None = None

    def to_xcom(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_xcom(cls, data: Mapping[str, Any]) -> GateRow:
        """A row as ``to_xcom`` wrote it, by this or an older version (no ``status`` then: derived from
        ``passed`` and ``reason``); fields it does not know are ignored, so newer writers still read."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if known.get("status") not in STATUSES:
            reason = str(known.get("reason") or "")
            known["status"] = (
                PASS
                if known.get("passed")
                else NOT_MEASURED
                if reason.startswith("no value")
                else REGRESSION
                if "worse than" in reason
                else BUDGET
                if reason.startswith("budget")
                else REGRESSION
            )
        return cls(**{"value": None, "passed": False, **known})


def change_pct(value: float, baseline: float) -> float | None:
    """Signed change from the baseline in percent (None from a zero baseline to a non-zero value)."""
    if baseline == 0:
        return 0.0 if value == 0 else None
    return (value - baseline) / abs(baseline) * 100


def format_number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.6g}" if value != int(value) or abs(value) >= 1e15 else str(int(value))
