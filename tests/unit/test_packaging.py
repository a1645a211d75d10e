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
