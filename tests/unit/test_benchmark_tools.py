"""The benchmarks' own logic, without running a benchmark: the control DAG rewrite, the demo's wait
analysis and reading figures back for docs/performance.md (tests/integration runs them for real)."""

from __future__ import annotations

import ast

import pytest

from benchmarks.common import control_dag_source
from benchmarks.demo_split import waits
from benchmarks.run_all import client_cpu_rows, markdown_tables

DAG_SOURCE = """
from airflow.sdk import DAG
from airflow_provider_loadtest.operators.report import DownloadReportOperator
from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

with DAG(dag_id="d", schedule=None):
    run = RunScenarioOperator(task_id="run", scenario_id="s", retries=2, outlets=[])
    pdf = DownloadReportOperator(task_id="pdf", run=run.output, destination="/x")
    RunScenarioOperator(task_id="other", scenario_id="s")
"""


def test_the_control_has_empty_operators_with_the_same_ids_base_arguments_and_edges() -> None:
    control = control_dag_source(DAG_SOURCE)
    tree = ast.parse(control)
    assert "airflow_provider_loadtest" not in control
    assert "from airflow.providers.standard.operators.empty import EmptyOperator" in control
    calls = {
        next(k.value.value for k in node.keywords if k.arg == "task_id"): sorted(
            str(k.arg) for k in node.keywords
        )
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "EmptyOperator"
    }
    assert calls == {"run": ["outlets", "retries", "task_id"], "pdf": ["task_id"], "other": ["task_id"]}
    assert "run >> pdf" in control  # the edge the dropped ``run=run.output`` made


def test_a_file_without_our_operators_has_no_control() -> None:
    with pytest.raises(ValueError, match="no airflow_provider_loadtest import"):
        control_dag_source("from airflow.sdk import DAG\n")


PACE = {
    "check_interval_s": 10.0,
    "pdf_poll_interval_s": 5.0,
    "pdf_pending_polls": 2.0,
    "duration_s:demo-scenario": 6.0,
}


def _request(route: str, at: float, **params: str) -> dict[str, object]:
    return {"route": route, "time": 1000.0 + at, "path_params": params}


def test_the_demo_waits_are_read_from_the_simulator_log() -> None:
    log = [
        _request("run_scenario", 0.0, scenario_id="demo-scenario"),
        _request("get_bench_result", 0.2, bench_result_id="br-1"),
        _request("get_bench_result", 3.0, bench_result_id="br-0"),  # another run's (a baseline read)
        _request("get_bench_result", 10.2, bench_result_id="br-1"),  # the first check past its 6 s end
        _request("get_bench_result", 10.5, bench_result_id="br-1"),
        _request("create_task", 12.0),
        _request("task_result", 12.1),
        _request("task_result", 17.1),
        _request("task_result", 22.2),  # the third poll: done after two pending ones
        _request("task_result", 30.0),  # a later, unrelated poll
    ]
    found = waits(list(reversed(log)), PACE)  # the order of the log does not matter
    assert found == pytest.approx(
        {"runs": 10.2, "run floor": 6.0, "run predicted": 10.0, "pdf": 10.2, "pdf predicted": 10.0}
    )


CLIENT_CPU_OUTPUT = """CPU per call in this process, microseconds, median [min-max] of 2 rounds:
| call             | variant                            | CPU us/call | vs bare session |
|------------------|------------------------------------|-------------|-----------------|
| get_bench_result | bare requests.Session + json.loads | 640         | 1.00x           |
| get_bench_result | ours: LoadTestHook                 | 700         | 1.09x           |
| list_templates   | bare requests.Session + json.loads | 751         | 1.00x           |
| list_templates   | ours: LoadTestHook                 | 900         | 1.20x           |
"""


def test_the_budget_row_takes_the_worst_call() -> None:
    assert len(markdown_tables(CLIENT_CPU_OUTPUT)) == 1
    ((_, ours, peers, budget, met),) = client_cpu_rows(CLIENT_CPU_OUTPUT)
    assert ours == "get_bench_result 1.09x, list_templates 1.20x"
    assert (peers, budget, met) == ("HttpHook not installed", "<= 1.1x", "**no**")


@pytest.mark.parametrize(("shape", "cv"), [("gaussian", 0.05), ("lognormal", 0.2), ("heavy", 0.05)])
def test_the_ceilings_closed_forms_describe_the_noise_the_benchmark_draws(shape: str, cv: float) -> None:
    """The known ceiling is only worth its row if its survival function is the benchmark's own noise."""
    import random

    from benchmarks.gate_ceiling import survival
    from benchmarks.gate_quality import noise

    draws, _ = noise(shape, cv, random.Random(1), 40_000)
    tail = survival(shape, cv)
    for x in (-1.0, 0.0, 1.0, 2.0):
        drawn = sum(d > x for d in draws) / len(draws)
        assert drawn == pytest.approx(tail(x), abs=0.01), x


def test_the_known_ceiling_of_gaussian_noise_is_the_textbook_figure() -> None:
    """4 sd less the 10 % quantile (1.2816) is the threshold; the Gaussian tail beyond it is 0.328 %."""
    from benchmarks.gate_ceiling import known_ceiling

    threshold, false_alarms = known_ceiling("gaussian", 0.05)
    assert threshold == pytest.approx(4 - 1.28155, abs=1e-4)
    assert false_alarms == pytest.approx(0.3279, abs=1e-3)


def test_the_floor_row_names_only_the_floors_above_the_target_beyond_their_interval() -> None:
    from benchmarks.run_all import gate_bound_rows

    def point(lower: float, ci: float) -> dict[str, float]:
        return {"lower": lower, "lower_ci": ci}

    result = [
        {"noise": "gaussian", "shape_known": point(0.55, 0.1), "unknown": None},
        {"noise": "lognormal 20 %", "shape_known": point(1.4, 0.2), "unknown": point(1.5, 0.2)},
        {"noise": "heavy", "shape_known": point(0.9, 0.2), "unknown": point(1.05, 0.2)},
    ]
    ((_, ours, peers, budget, met),) = gate_bound_rows(result)
    assert ours == (
        "out of reach for any rule: lognormal 20 % (shape known): 1.40 ± 0.20; "
        "lognormal 20 % (shape not known): 1.50 ± 0.20"
    )
    assert (peers, budget, met) == (
        "Gaussian noise: 0.55 ± 0.10",
        "<= 1 (the first target)",
        "above 1: out of reach",
    )
