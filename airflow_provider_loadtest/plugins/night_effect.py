"""The night effect as the view shows it (issue 27): its line in a night's table and its chart.

A gate of 8 series or more measures how far every series moved together tonight, in their noise
standard deviations (worse: positive), and judges that against its own history
(``decisions.gate.family.NightEffect``); a night whose night effect failed is a regression of the whole
run. The chart draws it per night as a series of its own: its value, the usual band (centre +- noise,
once the history knows them), the night's status as the other charts mark it. It is read from XCom by
``rows.night_effect`` (every field checked), and drawn by ``charts.chart`` (bounded, any finite value).
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_loadtest.decisions.gate.family import NightEffect
from airflow_provider_loadtest.plugins.bounds import TEXT_CHARS, clip
from airflow_provider_loadtest.plugins.charts import Chart, chart, number, percent, signed
from airflow_provider_loadtest.plugins.history import Night, Series, SeriesKey
from airflow_provider_loadtest.plugins.rows import Row

#: The chart's title (the key of its series: never one of the service's metric ids).
TITLE = "Night effect (every series together)"
UNIT = "sd"
DIRECTION = "lower is better"


def effect_text(effect: NightEffect) -> str:
    """The night's line, as the gate's log says it (``NightEffect.text``), every number formatted as the
    view formats any finite value and every text from XCom clipped."""
    usual = (
        f" (usually {signed(effect.centre, UNIT)}, noise {number(effect.noise)} {UNIT} over "
        f"{effect.history_n:,} nights)"
        if effect.centre is not None and effect.noise is not None
        else ""
    )
    pct = f", {percent(effect.change_pct)} for the median series" if effect.change_pct is not None else ""
    verdict = "FAIL: regression of the whole run" if not effect.passed else effect.status
    who = f"the {effect.series:,} series" if effect.series else "every series"
    moved = signed(effect.shift_sd, UNIT)
    line = f"Night effect: {who} moved {moved} of their noise together{usual}{pct}: {verdict}"
    for said in (effect.reason, effect.note):
        if said:
            line += f"; {clip(said, TEXT_CHARS)}"
    return line


def _row(effect: NightEffect) -> Row:
    """The night effect as a row of its own series: its status, value and band, its line as the note."""
    return Row(
        metric=TITLE,
        value=effect.shift_sd,
        passed=effect.passed,
        status=effect.status,
        centre=effect.centre,
        noise=effect.noise,
        history_n=effect.history_n,
        note=effect_text(effect),
    )


def effect_series(nights: Sequence[Night]) -> Series | None:
    """The night effect over ``nights`` (newest first, as ``TaskHistory.nights``), oldest first as every
    chart's series; None when no night has one (a gate of fewer than 8 series)."""
    oldest_first = tuple(reversed(nights))
    effects = [n.result.night_effect for n in oldest_first]
    if all(e is None for e in effects):
        return None
    return Series(SeriesKey(TITLE), oldest_first, tuple(None if e is None else _row(e) for e in effects))


def effect_chart(series: Series, base: str, dag_id: str, task_id: str) -> Chart:
    return chart(series, base, dag_id, task_id, unit=UNIT, direction=DIRECTION)
