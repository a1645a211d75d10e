"""The README's figures, names and quoted lines are the code's: a newcomer pastes them as they are.

(``test_docs_pages.py`` checks every page's quoted messages, parameters, defaults, examples and the files
they name; ``tests/integration/test_readme_quickstart.py`` runs the quickstart as pasted.)
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(title: str) -> str:
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_it_reads_in_five_minutes() -> None:
    """The issue: 41 KB of dense prose. About 8 KB, and none of the team's own words."""
    assert len(README.encode()) < 10_000, len(README.encode())
    internal = re.findall(r"\bthe rig\b|\bseason\b|\bissue \d+|\bhelper\b|\bthe lead\b", README, flags=re.I)
    assert not internal, internal


#: The gate's own words, explained in docs/gate.md: a newcomer meets them there, not on the first page.
GATE_VOCABULARY = (
    "night effect",
    "own noise",
    "suspected",
    "false-alarm budget",
    "gated metric",
    "production-like slice",
    "mutants",
    "own regression",
)


def test_it_speaks_without_the_gates_vocabulary() -> None:
    found = [word for word in GATE_VOCABULARY if word in README.lower()]
    assert not found, f"explain these in docs/gate.md and link there: {found}"
    assert "(docs/gate.md)" in README


def test_python_is_stated_once() -> None:
    """One place says which Python: two drifted apart before ("3.11+" and "3.11")."""
    assert len(re.findall(r"\bPython 3\.\d+", README)) == 1, re.findall(r"Python 3\.\d+\+?", README)


def test_the_versions_it_requires_are_the_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = re.search(r"apache-airflow>=([\d.]+)", " ".join(project["dependencies"]))
    assert floor is not None
    assert f"Airflow {floor.group(1)} or newer" in README
    assert f"FLOOR_AIRFLOW := {floor.group(1)}" in (ROOT / "Makefile").read_text()
    python = re.search(r">=\s*3\.(\d+)", project["requires-python"])
    assert python is not None and f"Python 3.{python.group(1)}+" in README


def test_the_quickstart_connection_line_is_the_one_the_simulator_prints() -> None:
    from airflow_provider_loadtest.simulator.__main__ import connection_uri
    from airflow_provider_loadtest.simulator.seed import load_seed

    quickstart = section("Quickstart")
    port = re.search(r"python -m airflow_provider_loadtest\.simulator --port (\d+)", quickstart)
    assert port is not None
    uri = connection_uri(f"http://127.0.0.1:{port.group(1)}", load_seed().api_keys[0])
    line = f"export AIRFLOW_CONN_LOADTEST_DEFAULT='{uri}'"
    assert line in quickstart


def test_what_the_quickstart_says_the_example_does_is_its_defaults() -> None:
    dag = (ROOT / "example_dags" / "loadtest_nightly.py").read_text()
    quickstart = section("Quickstart")
    template = re.search(r'report template "([^"]+)"', quickstart)
    scenario = re.search(r"starts the scenario `([^`]+)`", quickstart)
    assert template is not None and scenario is not None
    assert f"'loadtest_template_name', '{template.group(1)}'" in dag
    assert f"'loadtest_nightly_scenario_id', '{scenario.group(1)}'" in dag
    variables = re.search(r"Set the Variables the example reads \(([^)]*)\)", quickstart, flags=re.S)
    assert variables is not None
    for name in re.findall(r"`(\w+)`", variables.group(1)):
        assert f"var.value.get('{name}'" in dag, name


def test_the_views_url_is_the_plugins_and_the_demo_uis() -> None:
    from airflow_provider_loadtest.plugins import URL_PREFIX
    from devtools import demo
    from devtools.demo import DEMO_HOME, GATE_DAG_ID, UI_PORT

    assert f"`./{DEMO_HOME}/`" in README  # where make demo keeps the Airflow that make demo-ui serves
    assert f"`{URL_PREFIX}/dags/{{dag_id}}`" in README
    assert f"http://127.0.0.1:{UI_PORT}{URL_PREFIX}/`" in README  # the overview, served by make demo-ui
    assert f"http://127.0.0.1:{UI_PORT}{URL_PREFIX}/" in demo.how_to_see_the_view(ROOT, [GATE_DAG_ID])
    app = (ROOT / "airflow_provider_loadtest" / "plugins" / "app.py").read_text()
    assert '@app.get("/dags/{dag_id}"' in app and '@app.get("/", ' in app


def test_the_commands_it_names_exist_and_ci_runs_make_test() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"`make ([\w-]+)`", README):
        assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("make test")


def test_the_system_install_opt_out_exists() -> None:
    """The README tells root users how to keep ``make test`` from installing system packages."""
    name = "LOADTEST_NO_SYSTEM_INSTALLS"
    assert f"{name}=1 make test" in README
    sources = [ROOT / "Makefile", *(ROOT / "tests").rglob("*.py"), *(ROOT / "devtools").glob("*.py")]
    users = [p for p in sources if p.name != Path(__file__).name and name in p.read_text()]
    assert users, f"nothing reads {name}"


def _demo_seconds() -> float | None:
    page = (ROOT / "docs" / "performance.md").read_text()
    found = re.search(r"`make demo` wall time\s*\|\s*([\d.]+) s", page)
    return float(found.group(1)) if found else None


def test_the_demos_time_is_the_measured_one() -> None:
    seconds = _demo_seconds()
    if seconds is None:
        pytest.skip("docs/performance.md has no measured make demo wall time")
    said = re.search(r"\| `make demo` \|[^|]*\| about (\d+) minutes? \|", README)
    assert said is not None
    assert abs(int(said.group(1)) * 60 - seconds) <= 60, (said.group(0), seconds)


def test_the_simulators_output_quoted_in_the_docs_is_what_it_prints() -> None:
    from airflow_provider_loadtest.simulator.__main__ import banner
    from airflow_provider_loadtest.simulator.seed import load_seed

    page = (ROOT / "docs" / "simulator.md").read_text()
    quoted = re.search(r"^```\n(LOADTEST_SIMULATOR_URL=.*?)^```", page, flags=re.S | re.M)
    assert quoted is not None
    lines = quoted.group(1).strip().splitlines()
    url = lines[0].partition("=")[2]
    assert lines == banner(url, load_seed().api_keys[0])


def test_the_simulators_scenarios_are_listed_by_id_and_name() -> None:
    """A user trying ``scenario_name`` had to ask the API for a name: the table gives both, as seeded."""
    from airflow_provider_loadtest.simulator.seed import load_seed

    page = (ROOT / "docs" / "simulator.md").read_text()
    listed = dict(re.findall(r"^\| `([\w-]+)` \| ([^|]+?) \|", page, flags=re.M))
    seeded = {scenario.id: scenario.name for scenario in load_seed().scenarios}
    assert listed == seeded
