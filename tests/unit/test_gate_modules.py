"""``decisions/gate.py`` split in three: the rows and the table (``verdict.py``), the judgement against
the history (``history.py``, loaded only by the gates that use it), and the gate itself. Every name
stays importable from ``gate.py``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from airflow_provider_loadtest.decisions import gate, history, verdict

PUBLIC = [
    "PREVIOUS",
    "HISTORY",
    "BASELINE_XCOM_KEY",
    "DEFAULT_HISTORY",
    "STATUSES",
    "Direction",
    "METRIC_DIRECTIONS",
    "Budget",
    "GateSpec",
    "Unreadable",
    "Baseline",
    "GateRow",
    "Verdict",
    "change_pct",
    "judge_metric",
    "judge",
    "judge_history",
    "replay_history",
    "evaluate",
    "asset_extra",
    "GateHistory",
    "HistorySettings",
    "SeriesHistory",
    "HistoryUnreadable",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_every_name_is_still_importable_from_gate(name: str) -> None:
    exec(f"from airflow_provider_loadtest.decisions.gate import {name}", {})  # noqa: S102


def test_the_names_are_the_same_objects_wherever_imported() -> None:
    assert gate.GateRow is verdict.GateRow and gate.Verdict is verdict.Verdict
    assert gate.HistorySettings is history.HistorySettings and gate.GateHistory is history.GateHistory
    assert history.HistorySettings() == gate.DEFAULT_HISTORY
    assert gate.HISTORY == history.HISTORY  # written out in gate.py so that it need not load history.py
    assert gate.STATUSES == history.STATUSES == verdict.STATUSES
    with pytest.raises(AttributeError):
        _ = gate.no_such_name


def _loaded_after(code: str) -> set[str]:
    script = textwrap.dedent(
        """
        import sys
        from airflow_provider_loadtest.decisions.gate import GateSpec, judge
        {code}
        ours = [m for m in sys.modules if m.startswith("airflow_provider_loadtest") or m == "statistics"]
        print(",".join(ours))
        """
    ).format(code=textwrap.dedent(code))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.strip().split(","))


def test_a_gate_without_history_never_loads_it() -> None:
    loaded = _loaded_after(
        """
        p95 = "RESPONSE_TIME_PERCENTILE_95"
        spec = GateSpec.parse({"ERRORS_PERCENT": "<= 1"}, {p95: 10}, "previous")
        judge(spec, {"ERRORS_PERCENT": 0.5, p95: 500.0}, {p95: 490.0})
        GateSpec.check_literal(None, {"RESPONSE_TIME_PERCENTILE_95": 10}, "previous")
        """
    )
    assert "airflow_provider_loadtest.decisions.gate.verdict" in loaded
    assert "airflow_provider_loadtest.decisions.gate.history" not in loaded
    assert "statistics" not in loaded


def test_a_gate_with_history_loads_it_and_no_statistics_module() -> None:
    loaded = _loaded_after(
        """
        GateSpec.check_literal(None, {"RESPONSE_TIME_PERCENTILE_95": 10}, "history")
        """
    )
    assert "airflow_provider_loadtest.decisions.gate.history" in loaded
    assert "statistics" not in loaded


def test_the_spec_carries_history_settings_only_when_it_uses_them() -> None:
    assert gate.GateSpec.parse(None, {"RESPONSE_TIME_PERCENTILE_95": 10}, "previous").history is None
    spec = gate.GateSpec.parse(None, {"RESPONSE_TIME_PERCENTILE_95": 10}, "history", {"window": 30})
    assert spec.history == history.HistorySettings(window=30)
    with pytest.raises(ValueError, match="unknown history setting"):
        gate.GateSpec.parse(None, None, "previous", {"windows": 30})
