"""The demo's transaction-gate story, without Airflow: the season ``devtools.demo.transaction_season``
leaves is what the simulator's runs measure, and from it the gate's own code passes
``checkout-scenario``'s busy first night (which judging each series alone would have failed) and fails
its second on Checkout alone, as Checkout's own regression. The example DAG gates what the demo says it
gates, on labels the simulator samples often enough to judge."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.gate import REGRESSION, GateHistory, replay_gate_night
from airflow_provider_loadtest.decisions.gate.family import samples_needed
from airflow_provider_loadtest.decisions.gate.history import HistorySettings
from airflow_provider_loadtest.decisions.jtl import jtl_files, read_jtl
from airflow_provider_loadtest.simulator import jtl as sim_jtl
from airflow_provider_loadtest.simulator.seed import load_seed
from airflow_provider_loadtest.simulator.state import FakeClock, SimulatorState
from devtools import demo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_dags" / "loadtest_transaction_gate.py"
P95 = "RESPONSE_TIME_PERCENTILE_95"


def _operator_keywords() -> dict[str, Any]:
    tree = ast.parse(EXAMPLE.read_text())
    call = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RunScenarioOperator"
    )
    return {k.arg: k.value for k in call.keywords if k.arg}


def test_the_demo_judges_the_season_with_the_examples_bound_and_baseline() -> None:
    keywords = _operator_keywords()
    assert ast.literal_eval(keywords["baseline"]) == "history"
    assert ast.literal_eval(keywords["transaction_max_regression_pct"]) == {"*": demo.TRANSACTION_BOUNDS}


def test_every_label_has_the_samples_its_p95_needs_as_the_example_says() -> None:
    seed = load_seed()
    doc = ast.get_docstring(ast.parse(EXAMPLE.read_text())) or ""
    needed = samples_needed(P95)
    assert needed is not None
    assert f"{needed} samples" in " ".join(doc.split())
    rarest = min(sim_jtl.TRANSACTIONS, key=lambda t: t.share)
    assert f"the rarest label, {rarest.label}, has {100 * rarest.share:g} % of a run" in " ".join(doc.split())
    for scenario_id in ("demo-scenario", demo.TRANSACTION_SCENARIO):
        profile = seed.scenario(scenario_id).metrics  # type: ignore[union-attr]
        hits = round(profile.hits_per_second * profile.simulated_seconds)
        samples = sim_jtl._split(hits, [t.share for t in sim_jtl.TRANSACTIONS])
        checkout = samples[sim_jtl.TRANSACTIONS.index(rarest)]
        assert f"{checkout:,}" in doc and min(samples) == checkout >= needed


def test_the_examples_figures_of_the_history_are_the_defaults() -> None:
    from airflow_provider_loadtest.decisions.gate.family import MIN_TAIL_SAMPLES

    doc = " ".join((ast.get_docstring(ast.parse(EXAMPLE.read_text())) or "").split())
    settings = HistorySettings()
    assert f"fills ({settings.min_history} nights)" in doc
    assert f"at most {100 * settings.false_alarm_budget:g} red clean night in 100" in doc
    assert f"({MIN_TAIL_SAMPLES} beyond the percentile)" in doc
    bound = demo.TRANSACTION_BOUNDS[P95]
    assert f"at most {bound:g} % slower than its usual" in doc


def _night(state: SimulatorState) -> tuple[dict[Any, float | None], dict[Any, int]]:
    """The next run of the demo's scenario, as the operator reads its JTL files."""
    run_id = state.start_run(demo.TRANSACTION_SCENARIO)[0].id
    assert isinstance(state.clock, FakeClock)
    state.clock.advance(1000)
    names = jtl_files(state.log_files(run_id), run_id)
    summary = read_jtl(((name, [state.log_file(run_id, name)]) for name in names), [P95])
    values = {(label, P95): s.metric(P95) for label, s in summary.transactions.items()}
    return values, {(label, P95): s.hits for label, s in summary.transactions.items()}


@pytest.fixture(scope="module")
def season() -> tuple[dict[str, Any], list[dict[Any, float]]]:
    return demo.transaction_season(demo.TRANSACTION_SCENARIO, demo.TRANSACTION_BOUNDS)


def test_the_busy_night_passes_together_and_would_have_failed_alone_then_checkout_fails_alone(
    season: tuple[dict[str, Any], list[dict[Any, float]]],
) -> None:
    history_xcom, values = season
    assert len(values) == demo.TRANSACTION_SEASON_NIGHTS
    history = GateHistory.from_xcom(history_xcom)
    state = SimulatorState(clock=FakeClock(), run_seconds=6.0)
    settings = HistorySettings()
    bound = demo.TRANSACTION_BOUNDS[P95]

    busy, counts = _night(state)
    verdict = replay_gate_night(busy, history, bounds=bound, settings=settings, samples=counts)
    assert verdict.passed and verdict.night is not None and verdict.night.series == 8
    rows = [row.to_xcom() for row in verdict.rows]
    alone = demo.alone_verdicts(values, rows)
    assert len(alone) == 8 and REGRESSION in alone.values()

    assert verdict.history is not None
    slow, counts = _night(state)
    verdict = replay_gate_night(slow, verdict.history, bounds=bound, settings=settings, samples=counts)
    failing = [row for row in verdict.rows if not row.passed]
    assert [(row.transaction, row.status) for row in failing] == [("Checkout", REGRESSION)]
    assert "beyond the night's shared movement" in (failing[0].reason or "")
    assert verdict.night is not None and verdict.night.passed


def test_the_words_docs_gate_quotes_of_the_family_gate_are_the_codes() -> None:
    from airflow_provider_loadtest.decisions.gate import family

    page = " ".join((ROOT / "docs" / "gate.md").read_text().split())
    bullet = page[page.index("**Every series together.**") : page.index('**Baseline** `"previous"`')]
    quoted = [q.rstrip(":") for q in bullet.split('"')[1::2] if q != "history"]
    assert quoted == ["beyond the night's shared movement", "Budget", "Night effect"]
    source = Path(family.__file__).read_text()
    assert all(q in source for q in quoted)
    assert "false_alarm_budget" in bullet and "false_alarm_budget" in source
