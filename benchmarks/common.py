"""What every benchmark here shares: simulators in their own processes, medians with their spread.

Each figure in ``benchmarks/`` is a ratio or a delta against a baseline measured in the same run,
variants interleaved so that drift (other processes, CPU frequency) hits all of them alike.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The simulator's default API key (seed ``default_seed.json``).
SIM_KEY_ENV = "LOADTEST_SIMULATOR_API_KEY"
SIM_URL_ENV = "LOADTEST_SIMULATOR_URL"


@dataclass(frozen=True)
class Simulator:
    url: str
    api_key: str
    process: subprocess.Popen[str]


@contextlib.contextmanager
def simulators(count: int = 1, run_seconds: float = 3600.0) -> Iterator[list[Simulator]]:
    """``count`` simulator processes on 127.0.0.1 (each on a free port), stopped on exit."""
    started: list[Simulator] = []
    try:
        for _ in range(count):
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "airflow_provider_loadtest.simulator",
                    "--run-seconds",
                    str(run_seconds),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert process.stdout is not None
            found: dict[str, str] = {}
            for _line in range(20):  # bounded: the two lines come first
                line = process.stdout.readline()
                if not line:
                    break
                key, _, value = line.strip().partition("=")
                found[key] = value
                if SIM_URL_ENV in found and SIM_KEY_ENV in found:
                    break
            if SIM_URL_ENV not in found:
                process.kill()
                raise RuntimeError("the simulator did not start")
            started.append(Simulator(found[SIM_URL_ENV], found[SIM_KEY_ENV], process))
        yield started
    finally:
        for sim in started:
            sim.process.send_signal(signal.SIGTERM)
        for sim in started:
            try:
                sim.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                sim.process.kill()


def airflow_env(home: Path) -> dict[str, str]:
    """This environment with a throwaway AIRFLOW_HOME (no example DAGs) that writes bytecode (this
    machine sets PYTHONDONTWRITEBYTECODE; a deployment has its .pyc files)."""
    env = dict(os.environ, AIRFLOW_HOME=str(home), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def connection_env(sim: Simulator) -> dict[str, str]:
    """Environment giving Airflow a ``loadtest_default`` connection to ``sim`` (no database needed)."""
    connection = {"conn_type": "loadtest", "host": sim.url, "password": sim.api_key}
    return {"AIRFLOW_CONN_LOADTEST_DEFAULT": json.dumps(connection)}


def spread(values: Sequence[float]) -> str:
    """``median [min-max]`` of ``values``."""
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(pct / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def rss_kib() -> int:
    """This process's resident memory, KiB (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_sockets() -> int:
    """How many sockets this process holds open (Linux)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                count += 1
    return count


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A Markdown table (the same text goes to the terminal and to docs/performance.md)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    return "\n".join([line, rule, *body])


# --- control DAGs: the same DAG with EmptyOperators, so Airflow's own cost can be told from ours -------

#: The package whose operators a control DAG replaces.
PROVIDER_PACKAGE = "airflow_provider_loadtest"
EMPTY_IMPORT = "from airflow.providers.standard.operators.empty import EmptyOperator"


def _base_operator_params() -> frozenset[str]:
    """The keyword arguments ``BaseOperator`` itself takes (retries, outlets...): a control task keeps
    these and drops the provider's own (scenario id, budgets...)."""
    import inspect

    from airflow.sdk import BaseOperator

    params = inspect.signature(BaseOperator.__init__).parameters
    return frozenset(name for name in params if name not in {"self", "kwargs"})


class _ToEmpty(ast.NodeTransformer):
    """Rewrites each call of a provider operator into ``EmptyOperator(...)`` with the same task id and
    BaseOperator arguments; an upstream task reached through a dropped argument (``other.output``)
    becomes an explicit ``other >> task``, so the control keeps the DAG's shape."""

    def __init__(self, base_params: frozenset[str]) -> None:
        self.base_params = base_params
        self.names: set[str] = set()
        self.replaced_import = False

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST | None:
        if not (node.module or "").startswith(PROVIDER_PACKAGE):
            return node
        self.names.update(alias.asname or alias.name for alias in node.names)
        if self.replaced_import:
            return None
        self.replaced_import = True
        return ast.parse(EMPTY_IMPORT).body[0]

    def _rewrite(self, call: ast.expr) -> list[str] | None:
        """Rewrite ``call`` in place if it builds a provider operator; the upstream names it read."""
        if not (
            isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in self.names
        ):
            return None
        kept = [k for k in call.keywords if k.arg in self.base_params]
        upstream = [
            sub.value.id
            for k in call.keywords
            if k not in kept
            for sub in ast.walk(k.value)
            if isinstance(sub, ast.Attribute) and sub.attr == "output" and isinstance(sub.value, ast.Name)
        ]
        call.func, call.args, call.keywords = ast.Name("EmptyOperator", ast.Load()), [], kept
        return upstream

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.stmt]:
        upstream = self._rewrite(node.value)
        if not upstream:
            return node
        (target,) = node.targets
        assert isinstance(target, ast.Name), "a provider task assigned to something else than a name"
        edges = [ast.parse(f"{name} >> {target.id}").body[0] for name in dict.fromkeys(upstream)]
        return [node, *edges]

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        upstream = self._rewrite(node.value)
        assert not upstream, "a provider task reading another task's output must be assigned to a name"
        return node


def control_dag_source(source: str) -> str:
    """The DAG file ``source`` with every provider operator replaced by an ``EmptyOperator`` of the same
    task id, BaseOperator arguments and dependencies (checked with ``dag_shapes``)."""
    transformer = _ToEmpty(_base_operator_params())
    tree = ast.fix_missing_locations(transformer.visit(ast.parse(source)))
    if not transformer.names:
        raise ValueError(f"no {PROVIDER_PACKAGE} import to replace")
    return ast.unparse(tree) + "\n"


def write_control_dags(sources: Sequence[Path], folder: Path) -> list[Path]:
    """Each DAG file of ``sources`` as its control (same file name) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sources:
        target = folder / source.name
        target.write_text(control_dag_source(source.read_text()))
        written.append(target)
    return written


_SHAPE_PROBE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
shapes = {}
for path in sys.argv[1:]:
    bag = DagBag(dag_folder=path)
    if bag.import_errors:
        raise SystemExit(f"{path}: {bag.import_errors}")
    shapes[path] = {
        dag_id: {t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}
        for dag_id, dag in bag.dags.items()
    }
print(json.dumps(shapes))
"""


def dag_shapes(paths: Sequence[Path], env: dict[str, str]) -> dict[str, Any]:
    """For each DAG file (loaded by Airflow's DagBag in one fresh interpreter): dag id -> task id ->
    downstream task ids. Fails on an import error. Also compiles the files' bytecode."""
    out = subprocess.run(
        [sys.executable, "-c", _SHAPE_PROBE, *map(str, paths)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    shapes: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return shapes


def check_same_shape(ours: Sequence[Path], controls: Sequence[Path], env: dict[str, str]) -> None:
    """Fail unless each control DAG file has the same DAGs, tasks and edges as ours."""
    shapes = dag_shapes([*ours, *controls], env)
    for mine, control in zip(ours, controls, strict=True):
        if shapes[str(mine)] != shapes[str(control)]:
            raise RuntimeError(
                f"the control {control} does not have the shape of {mine}: "
                f"{shapes[str(control)]} != {shapes[str(mine)]}"
            )
