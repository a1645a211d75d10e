"""The package registers and loads like any Airflow provider, and stays cheap to import."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from importlib.resources import files
from pathlib import Path

import jsonschema

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.get_provider_info import get_provider_info

ROOT = Path(__file__).resolve().parents[2]


def test_provider_info_validates_against_airflows_schema() -> None:
    schema = json.loads(files("airflow").joinpath("provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_entry_point_is_registered() -> None:
    (found,) = [
        ep
        for ep in entry_points(group="apache_airflow_provider")
        if ep.value.startswith("airflow_provider_loadtest")
    ]
    assert found.load()()["package-name"] == "airflow-provider-loadtest"
    assert get_provider_info()["versions"] == [__version__]


def test_typed_marker_ships() -> None:
    assert (ROOT / "airflow_provider_loadtest" / "py.typed").exists()


def test_dag_parse_imports_no_http_client_or_models() -> None:
    """What a DAG file pays for our operators: only our own small modules, no requests, no models."""
    code = (
        "import sys\n"
        "from airflow.sdk import BaseOperator, BaseSensorOperator, BaseOperatorLink, PokeReturnValue\n"
        "before = set(sys.modules)\n"
        "import airflow_provider_loadtest.operators.run_scenario\n"
        "import airflow_provider_loadtest.sensors.template\n"
        "import airflow_provider_loadtest.sensors.run\n"
        "import airflow_provider_loadtest.operators.report\n"
        "print('MODULES:' + ','.join(sorted(set(sys.modules) - before)))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    out = run.stdout
    (line,) = [x for x in out.splitlines() if x.startswith("MODULES:")]
    added = line.removeprefix("MODULES:").split(",")
    foreign = [m for m in added if not m.startswith("airflow_provider_loadtest")]
    assert foreign == []
    assert not {
        m
        for m in added
        if m.startswith(("airflow_provider_loadtest.models", "airflow_provider_loadtest.hooks"))
        or m == "airflow_provider_loadtest.hooks.artifacts"
    }


def test_the_dist_check_refuses_a_wheel_with_tooling_or_without_a_package_file(tmp_path: Path) -> None:
    """``make dist``'s content check (devtools/check_dist.py) on wheels built by hand: a wheel is what
    users get, so repository tooling in it, or a tracked package file missing from it, fails ``make dist``."""
    import tomllib
    import zipfile

    from devtools.check_dist import tracked_package_files, wheel_problems

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = tracked_package_files()
    assert "airflow_provider_loadtest/py.typed" in expected

    def wheel(name: str, files: set[str]) -> Path:
        path = tmp_path / name
        info = "airflow_provider_loadtest-0.1.0.dist-info"
        requires = "".join(f"Requires-Dist: {d}\n" for d in project["dependencies"])
        with zipfile.ZipFile(path, "w") as archive:
            for file in files:
                archive.writestr(file, "")
            archive.writestr(f"{info}/METADATA", f"Requires-Python: {project['requires-python']}\n{requires}")
            archive.writestr(
                f"{info}/entry_points.txt", "[apache_airflow_provider]\n[airflow.plugins]\n[pytest11]\n"
            )
        return path

    assert wheel_problems(wheel("good.whl", expected), expected, project) == []
    with_tests = wheel("tests.whl", expected | {"tests/unit/test_packaging.py"})
    assert wheel_problems(with_tests, expected, project) == [
        "the wheel holds repository tooling: tests/unit/test_packaging.py",
        "the wheel holds tests/unit/test_packaging.py, which git does not track",
    ]
    short = wheel("short.whl", expected - {"airflow_provider_loadtest/py.typed"})
    assert wheel_problems(short, expected, project) == ["the wheel lacks airflow_provider_loadtest/py.typed"]
