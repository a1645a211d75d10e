"""The verdict in short Markdown (``return_value["summary"]``), for people who read it where they chat.

Airflow's notifiers (Slack, Microsoft Teams, SMTP, a user's own ``BaseNotifier``) render a Jinja
template; one line sends this summary:
``{{ ti.xcom_pull(task_ids="load_test")["summary"] }}`` (docs/recipes.md). So the text is plain
Markdown that reads well where Markdown is not rendered: a first line with the result, the run and the
report link, then bullets (no tables: Slack does not render them) for the rows that failed and why, the
night effect when it failed, and the first lines of why the run or the gate failed. Bounded: at most
``MAX_ROWS`` rows and ``MAX_WHY`` lines, each cut to ``LINE_CHARS``, so a gate of 200 failing series
still fits a chat message. Text from the run (transaction labels, failure messages, log lines) is made
one line and shown as inline code: a label cannot turn into a link, a mention or emphasis.
Sans-I/O, no dependencies beyond the gate's rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.decisions.gate.rows import format_number

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate.verdict import Verdict

__all__ = ["LINE_CHARS", "MAX_ROWS", "MAX_WHY", "summary_markdown"]

#: Failing rows listed (the most moved first); the others are counted.
MAX_ROWS = 10
#: Lines of the explanation listed.
MAX_WHY = 6
#: Characters of one bullet.
LINE_CHARS = 300
_SPACES = re.compile(r"\s+")


def _line(value: object, chars: int = LINE_CHARS) -> str:
    """One line, cut to ``chars``."""
    one = _SPACES.sub(" ", str(value)).strip()
    return one if len(one) <= chars else one[: chars - 1] + "…"


def _quoted(value: object, chars: int = LINE_CHARS) -> str:
    """Text from the run (a label, a failure message, a log line) as an inline code span: shown as
    written, never read as a link, a mention or emphasis (its backticks become quotes)."""
    return "`" + _line(value, chars).replace("`", "'") + "`"


def _series(row: Any) -> str:
    name = f"**{row.metric}**"
    return name if row.transaction is None else f"{name} of {_quoted(row.transaction, 120)}"


def summary_markdown(
    result: Mapping[str, Any],
    verdict: Verdict | None,
    *,
    passed: bool,
    why: Sequence[str] = (),
    run_message: str | None = None,
) -> str:
    """The verdict as short Markdown: ``result`` is the task's return value (run id, state, report
    link, scenario), ``verdict`` the gate's (None without a gate), ``why`` the explanation's lines,
    ``run_message`` why the run itself failed (its state), when it did."""
    run = _quoted(result.get("bench_result_id") or "?", 80)
    state = _line(result.get("state") or "?", 20).replace("`", "'")
    name = result.get("test_name") or result.get("scenario_id")
    about = f" ({_quoted(name, 80)})" if name else ""
    url = result.get("report_url")
    link = f" · [report]({url})" if isinstance(url, str) and url.startswith(("http://", "https://")) else ""
    gate_failed = verdict is not None and not verdict.passed
    if passed:
        what = "passed"
    elif gate_failed and state == "FINISHED":
        what = "failed its quality gate"
    else:
        what = f"failed: the run ended {state}"
    lines = [f"**Load test {what}**: run {run}{about}, {state}{link}"]
    if run_message and not passed and not gate_failed:
        lines.append(f"- {_line(run_message)}")
    if verdict is not None:
        failing = [row for row in verdict.ranked() if not row.passed]
        for row in failing[:MAX_ROWS]:
            against = f" (usual {format_number(round(row.baseline, 3))})" if row.baseline is not None else ""
            lines.append(
                f"- {_series(row)} {format_number(row.value)}{against}: {_line(row.reason or row.status)}"
            )
        if len(failing) > MAX_ROWS:
            lines.append(f"- and {len(failing) - MAX_ROWS} more failing row(s): see the task log")
        if verdict.night is not None and not verdict.night.passed:
            lines.append(
                f"- **every series together** (the night effect) {verdict.night.shift_sd:+.1f} sd: "
                f"{_line(verdict.night.reason or 'failed')}"
            )
        if passed:
            judged = len(verdict.rows)
            lines.append(f"- {judged} gated series, none failed")
    if why and not passed:
        lines.append("")
        lines.append("Why:")
        lines += [f"- {_quoted(line)}" for line in why[:MAX_WHY]]
        if len(why) > MAX_WHY:
            lines.append(f"- … {len(why) - MAX_WHY} more line(s) in the task log")
    return "\n".join(lines)
