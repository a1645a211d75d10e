"""The charts' geometry: one series (a gated metric over the nights) to SVG coordinates and paths.

Drawn on the server as SVG (the template writes the markup): no JavaScript charting library, nothing
to fetch, nothing a strict Content Security Policy has to allow, and every point is a plain link. The
lines: the value per night, the budget (a step line: it may change from one night to the next), the
history's centre and noise band when the gate judged against a history, else the regression limit
against the baseline; failing and suspected nights are marked, accepted changes drawn as rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from markupsafe import Markup, escape

from airflow_provider_loadtest.plugins.bounds import NAME_CHARS, PLOT_RANGE, TEXT_CHARS, clip
from airflow_provider_loadtest.plugins.history import Night, Series, task_instance_url
from airflow_provider_loadtest.plugins.rows import Row

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 72, 14, 12, 34
X_TICKS = 6
Y_TICKS = 5
#: The axis labels' size in the chart's own units (``view.css`` sets it: ``.label``). A chart is drawn
#: at least ``MIN_DRAWN_WIDTH`` pixels wide (the grid's narrowest column), scaled from ``WIDTH``: at 16
#: units a label is 10.5 px there and 12 to 15 px at the usual widths (at 11 it was 7 px: unreadable).
LABEL_SIZE, MIN_DRAWN_WIDTH = 16, 420
#: The width a date ("2026-03-01") takes on the x axis at ``LABEL_SIZE``, with a little room beside it.
DATE_WIDTH = 0.6 * LABEL_SIZE * 10 + 8


@dataclass(frozen=True)
class Tick:
    at: float
    label: str
    #: SVG text-anchor: a date at the plot's very edge is aligned inward, never cut off.
    anchor: str = "middle"


class Mark(NamedTuple):
    """A night on the chart: where, how it went (``status``: a CSS class), its tooltip and link (a
    tuple: a year of six charts makes 2,190 of them)."""

    x: float
    y: float
    status: str
    title: str
    href: str

    @property
    def shape(self) -> str:
        """The mark's outline as SVG path data: a dot (passed), a diamond (suspected), a square
        (failed), a cross (not measured): told apart by shape as well as by colour."""
        x, y = self.x, self.y
        if self.status in ("regression", "budget"):
            return f"M{x - 4:.1f} {y - 4:.1f}h8v8h-8z"
        if self.status == "suspected":
            return f"M{x:.1f} {y - 5.5:.1f}l5.5 5.5l-5.5 5.5l-5.5 -5.5z"
        if self.status == "not_measured":
            return f"M{x - 4:.1f} {y - 4:.1f}l8 8m0 -8l-8 8"
        return f"M{x - 3.5:.1f} {y:.1f}a3.5 3.5 0 1 0 7 0a3.5 3.5 0 1 0 -7 0"


@dataclass(frozen=True)
class Chart:
    """Everything the template needs to draw one series."""

    title: str
    #: The transaction (JTL label) the series is of; None: all requests.
    transaction: str | None
    unit: str
    direction: str
    width: int
    height: int
    plot: tuple[float, float, float, float]  # left, top, right, bottom
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    value_path: str
    band_path: str
    centre_path: str
    budget_path: str
    limit_path: str
    marks: tuple[Mark, ...]
    accepted: tuple[Mark, ...]
    summary: str

    @property
    def marks_markup(self) -> Markup:
        """The marks as SVG, one link per night: written here, not by a loop of the template, which
        spent most of a year's chart on its loop machinery (365 marks per chart). Every value from
        XCom is escaped (the link, the tooltip); the class and the path are the view's own."""
        return Markup(  # noqa: S704 - every value from XCom in it is escaped
            "".join(
                f'<a class="mark {m.status}" href="{escape(m.href)}" target="_top"><title>{escape(m.title)}'
                f'</title><path class="shape" d="{m.shape}"/></a>'
                for m in self.marks
            )
        )


# --- numbers ---------------------------------------------------------------------------------------


def unit_of(metric: str) -> str:
    """The unit the service's metric ids imply (section 2.5 of the spec), for labels."""
    if "APDEX" in metric:
        return ""
    if metric.endswith("PERCENT"):
        return "%"
    if "TIME" in metric or metric.startswith("LATENCY"):
        return "ms"
    if "BYTES" in metric or metric == "RESPONSE_SIZE":
        return "B/s" if metric.endswith("RATE") else "B"
    if metric.endswith("RATE"):
        return "/s"
    return ""


@lru_cache(maxsize=8192)  # a tooltip writes four; a history's baselines and bands repeat night after night
def number(value: float | None) -> str:
    """A value as people read it: up to 4 significant digits, no exponent below 10^9; any float
    (``1.7e308``, ``5e-324``) has a text, and what is not finite reads "out of range"."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "out of range"
    if abs(value) < 1e9 and value == int(value):
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 1e9 else f"{value:.3e}"


def signed(change: float, unit: str) -> str:
    """A signed change (``unit``: "%", "sd"), with an exponent when it is huge (a baseline near zero)."""
    return f"{change:+.1f} {unit}" if abs(change) < 1e6 else f"{change:+.2e} {unit}"


def percent(change: float) -> str:
    return signed(change, "%")


def movement(row: Row) -> str:
    """What the gate judged of a series of many (issue 27, ``decisions/gate/family.py``): how far it
    moved beyond its own noise, and how far every series of the night moved together ("" without)."""
    parts = []
    if row.own_sd is not None:
        parts.append(f"{signed(row.own_sd, 'sd')} beyond its noise")
    if row.night_sd is not None:
        parts.append(f"the night: {signed(row.night_sd, 'sd')} shared by every series")
    return ", ".join(parts)


def in_range(value: float | None) -> bool:
    """Whether a chart can draw ``value`` (``bounds.PLOT_RANGE``)."""
    return value is not None and -PLOT_RANGE <= value <= PLOT_RANGE


def nice_step(span: float, count: int) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about ``count`` intervals."""
    raw = span / max(count, 1) if span > 0 and math.isfinite(span) else 0.0
    if not raw > 0:  # no span, or one too small to divide (a subnormal float)
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next((m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw), raw)


def y_domain(values: Sequence[float]) -> tuple[float, float, float]:
    """(low, high, step): round bounds holding every value, with some room above and below.

    Values beyond ``bounds.PLOT_RANGE`` are left to the caller (drawn at the edge, out of range); a
    spread too small for a float to divide into steps is drawn flat."""
    values = [v for v in values if in_range(v)]
    if not values:
        return 0.0, 1.0, 0.25
    low, high = min(values), max(values)
    if 0 <= low < high - low:  # close to zero compared with the spread: start at zero
        low = 0.0
    if high - low <= max(abs(low), abs(high), 1e-9) * 1e-9:  # flat, for a float's precision
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    step = nice_step(high - low, Y_TICKS)
    first, last = min(values), max(values)
    low = math.floor(low / step) * step
    high = math.ceil(high / step) * step
    low -= step if low > first else 0.0  # a quotient that underflowed (-5e-324 / 2 is -0.0)
    high += step if high < last else 0.0
    if low < 0 <= first:
        low = 0.0
    return low, high, step


# --- geometry ----------------------------------------------------------------------------------------


def _x_positions(nights: Sequence[Night], left: float, right: float) -> list[float]:
    if not nights:
        return []
    first, last = nights[0].stamp, nights[-1].stamp
    if last <= first:
        return [(left + right) / 2] * len(nights)
    scale = (right - left) / (last - first)
    return [left + (n.stamp - first) * scale for n in nights]


def line_path(xs: Sequence[float], ys: Sequence[float | None]) -> str:
    """A polyline through the defined points, broken where a value is missing."""
    parts: list[str] = []
    pen_down = False
    for x, y in zip(xs, ys, strict=True):
        if y is None:
            pen_down = False
            continue
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f} {y:.1f}")
        pen_down = True
    return " ".join(parts)


def _spans(xs: Sequence[float], left: float, right: float) -> list[tuple[float, float]]:
    """Each night's horizontal extent for step lines: halfway to its neighbours (the plot's edges at
    the ends)."""
    spans = []
    for i, x in enumerate(xs):
        start = left if i == 0 else (xs[i - 1] + x) / 2
        end = right if i == len(xs) - 1 else (x + xs[i + 1]) / 2
        spans.append((start, end))
    return spans


def step_path(spans: Sequence[tuple[float, float]], ys: Sequence[float | None]) -> str:
    """A step line: each night's level across its span, joined vertically, broken where missing."""
    parts: list[str] = []
    previous: float | None = None
    for (start, end), y in zip(spans, ys, strict=True):
        if y is None:
            previous = None
            continue
        if previous is None:
            parts.append(f"M{start:.1f} {y:.1f}")
        elif y != previous:
            parts.append(f"V{y:.1f}")
        parts.append(f"H{end:.1f}")
        previous = y
    return " ".join(parts)


def band_path(spans: Sequence[tuple[float, float]], bands: Sequence[tuple[float, float] | None]) -> str:
    """Closed step areas between each night's low and high, one per run of nights that have a band."""
    parts: list[str] = []
    run: list[tuple[tuple[float, float], tuple[float, float]]] = []

    def close() -> None:
        if not run:
            return
        upper = [f"{x:.1f} {high:.1f}" for (start, end), (_, high) in run for x in (start, end)]
        lower = [f"{x:.1f} {low:.1f}" for (start, end), (low, _) in reversed(run) for x in (end, start)]
        parts.append("M" + " L".join(upper + lower) + " Z")
        run.clear()

    for span, band in zip(spans, bands, strict=True):
        if band is None:
            close()
        else:
            run.append((span, band))
    close()
    return " ".join(parts)


# --- one series to one chart ---------------------------------------------------------------------------


def _budget_bound(metric: str, row: Row | None) -> float | None:
    return None if row is None or row.budget is None else _bound(metric, row.budget)


@lru_cache(maxsize=1024)  # a budget is the same text night after night: parsed once
def _bound(metric: str, budget: str) -> float | None:
    from airflow_provider_loadtest.decisions.gate import Budget

    try:
        bound = Budget.parse(metric, budget).bound
    except (ValueError, OverflowError):
        return None
    return bound if math.isfinite(bound) else None


@lru_cache(maxsize=1024)
def _direction(metric: str) -> str:
    from airflow_provider_loadtest.decisions.gate import METRIC_DIRECTIONS, Direction

    direction = METRIC_DIRECTIONS.get(metric)
    if direction is Direction.HIGHER_IS_WORSE:
        return "lower is better"
    if direction is Direction.LOWER_IS_WORSE:
        return "higher is better"
    return ""


def _limit(metric: str, row: Row | None) -> float | None:
    """The regression bound against a single baseline run (``baseline="previous"`` or a pinned run)."""
    if row is None or row.baseline is None or row.max_regression_pct is None or row.band is not None:
        return None
    direction = _direction(metric)
    if direction == "lower is better":
        return row.baseline + abs(row.baseline) * row.max_regression_pct / 100
    if direction == "higher is better":
        return row.baseline - abs(row.baseline) * row.max_regression_pct / 100
    return None  # may overflow to inf with extreme inputs: out of range, drawn at the edge


def _centre(row: Row | None) -> float | None:
    if row is None:
        return None
    return row.centre if row.centre is not None else row.baseline


def _tooltip(day: str, row: Row, unit: str) -> str:
    """A mark's tooltip: the night's value and how the gate judged it (one per night of each chart:
    each part tested once, the numbers' texts cached by ``number``)."""
    value = row.value
    parts = [f"{day}: {number(value)} {unit}" if unit else f"{day}: {number(value)}", row.kind.label]
    if value is not None and not in_range(value):
        parts.append("out of the chart's range")
    if row.change_pct is not None:
        parts.append(f"{percent(row.change_pct)} vs {number(row.baseline)}")
    band = row.band
    if band is not None:
        parts.append(f"noise band {number(band[0])} to {number(band[1])}")
    if row.own_sd is not None or row.night_sd is not None:
        parts.append(movement(row))
    if row.reason:
        parts.append(clip(row.reason, TEXT_CHARS))
    if row.note:  # the gate's own words: suspected, a short history, an accepted change
        parts.append(clip(row.note, TEXT_CHARS))
    return " · ".join(parts)


def _drawable(band: tuple[float, float] | None) -> bool:
    return band is not None and in_range(band[0]) and in_range(band[1])


def chart(
    series: Series,
    base: str,
    dag_id: str,
    task_id: str,
    *,
    unit: str | None = None,
    direction: str | None = None,
) -> Chart:
    """The chart of one series; ``base`` is Airflow's path prefix for the links to task instances.
    ``unit`` and ``direction``: the series' own when it is not one of the service's metrics (the night
    effect), else the metric's."""
    metric = series.key.metric
    unit = unit_of(metric) if unit is None else unit
    left, top, right, bottom = LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM
    rows = series.rows
    values = [row.value if row is not None else None for row in rows]
    budgets = [_budget_bound(metric, row) for row in rows]
    centres = [_centre(row) for row in rows]
    bands = [row.band if row is not None and _drawable(row.band) else None for row in rows]
    limits = [_limit(metric, row) for row in rows]
    seen = [
        v
        for v in [*values, *budgets, *centres, *limits, *(x for b in bands if b for x in b)]
        if v is not None
    ]
    low, high, step = y_domain(seen)
    scale = (bottom - top) / (high - low)

    def y_of(value: float) -> float:
        """The value's height, at the plot's edge when it is out of range."""
        if not -PLOT_RANGE <= value <= PLOT_RANGE:
            return top if value > 0 else bottom
        y = bottom - (value - low) * scale
        return top if y < top else bottom if y > bottom else y

    def ys(levels: Sequence[float | None]) -> list[float | None]:
        """Heights of a line, broken where a level is missing or out of range."""
        return [None if v is None or not -PLOT_RANGE <= v <= PLOT_RANGE else y_of(v) for v in levels]

    xs = _x_positions(series.nights, left, right)
    spans = _spans(xs, left, right)
    marks, accepted = [], []
    for x, night, row in zip(xs, series.nights, rows, strict=True):
        if row is None:
            continue
        href = task_instance_url(base, dag_id, night.run_id, task_id, night.map_index)
        title = _tooltip(night.day, row, unit)
        y = bottom if row.value is None else y_of(row.value)  # out of range: at the edge
        marks.append(Mark(x, y, row.kind.value, title, href))
        if row.accepted:
            accepted.append(Mark(x, top, "accepted", title, href))
    y_ticks = tuple(
        Tick(y_of(low + i * step), number(round(low + i * step, 10)))
        for i in range(round((high - low) / step) + 1)
    )
    failing = sum(1 for row in rows if row is not None and row.kind.failed)
    latest = next((row for row in reversed(rows) if row is not None), None)
    summary = (
        f"{clip(metric, NAME_CHARS)}"
        f"{' of ' + clip(series.key.transaction, NAME_CHARS) if series.key.transaction else ''}: "
        f"{sum(1 for r in rows if r is not None)} nights, {failing} failing"
        + (f", latest {number(latest.value)} {unit} ({latest.kind.label})" if latest else "")
    )
    return Chart(
        title=clip(metric, NAME_CHARS),
        transaction=None if series.key.transaction is None else clip(series.key.transaction, NAME_CHARS),
        unit=unit,
        direction=_direction(metric) if direction is None else direction,
        width=WIDTH,
        height=HEIGHT,
        plot=(left, top, right, bottom),
        x_ticks=_date_ticks(series, xs),
        y_ticks=y_ticks,
        value_path=line_path(xs, ys(values)),
        band_path=band_path(spans, [None if b is None else (y_of(b[0]), y_of(b[1])) for b in bands]),
        centre_path=step_path(spans, ys(centres)),
        budget_path=step_path(spans, ys(budgets)),
        limit_path=step_path(spans, ys(limits)),
        marks=tuple(marks),
        accepted=tuple(accepted),
        summary=summary,
    )


def _date_ticks(series: Series, xs: Sequence[float]) -> tuple[Tick, ...]:
    """Up to ``X_TICKS`` dates, evenly picked among the nights, none overlapping another (each takes
    ``DATE_WIDTH`` around its anchor: the first date starts at the plot's left edge, the last ends at its
    right edge, the others are centred) and never two with the same label; the newest date is kept."""
    count = len(xs)
    if count == 0:
        return ()
    picks = sorted({round(i * (count - 1) / (X_TICKS - 1)) for i in range(X_TICKS)}) if count > 1 else [0]
    left, right = xs[0], xs[-1]

    def anchor(x: float) -> str:
        if left == right:
            return "middle"
        return "start" if x == left else "end" if x == right else "middle"

    def start(tick: Tick) -> float:
        return tick.at - {"start": 0.0, "middle": DATE_WIDTH / 2, "end": DATE_WIDTH}[tick.anchor]

    def clash(before: Tick, after: Tick) -> bool:
        return before.label == after.label or start(before) + DATE_WIDTH > start(after)

    ticks: list[Tick] = []
    for i in picks:
        tick = Tick(xs[i], series.nights[i].day, anchor(xs[i]))
        if i == picks[-1]:  # the newest date wins over those before it
            while ticks and clash(ticks[-1], tick):
                ticks.pop()
            ticks.append(tick)
        elif not ticks or not clash(ticks[-1], tick):
            ticks.append(tick)
    return tuple(ticks)


def charts(series: Sequence[Series], base: str, dag_id: str, task_id: str) -> list[Chart]:
    return [chart(s, base, dag_id, task_id) for s in series]
