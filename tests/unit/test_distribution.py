"""What a user of any supported Airflow gets: the form, the declared modules, a cheap pytest plugin, a
wheel of what they import, and a test run that leaves nothing behind. Runs on the newest and the floor
Airflow (``make test`` runs the unit suite on both)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.compat import AIRFLOW_V_3_2_PLUS
from airflow_provider_loadtest.get_provider_info import get_provider_info

ROOT = Path(__file__).resolve().parents[2]
CONN_FIELDS = get_provider_info()["connection-types"][0]["conn-fields"]


def test_every_class_and_module_named_in_provider_info_imports() -> None:
    info = get_provider_info()
    modules = [
        m
        for section in ("hooks", "operators", "sensors", "triggers")
        for e in info[section]
        for m in e["python-modules"]
    ]
    assert "airflow_provider_loadtest.triggers.run" in modules
    for module in modules:
        import_module(module)
    for dotted in [*(c["hook-class-name"] for c in info["connection-types"]), *info["extra-links"]]:
        module, _, name = dotted.rpartition(".")
        assert hasattr(import_module(module), name), dotted


def test_the_ui_api_serves_the_form_with_every_field_described() -> None:
    """What Airflow's UI draws: on 3.2+ from provider info, on 3.1 from the hook's WTForms fields."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    (meta,) = [m for m in HookMetaService.hook_meta_data() if m.connection_type == "loadtest"]
    extra = {name: dict(value) for name, value in (meta.extra_fields or {}).items()}
    assert set(extra) == set(CONN_FIELDS) >= {"verify_ssl", "ca_bundle", "ui_url"}
    for name, field in extra.items():
        assert field["description"] == CONN_FIELDS[name]["description"], name
        assert field["schema"]["title"] == CONN_FIELDS[name]["label"], name
    assert "boolean" in extra["verify_ssl"]["schema"]["type"]
    assert "string" in extra["ca_bundle"]["schema"]["type"]
    assert meta.standard_fields is not None
    assert meta.standard_fields.password is not None and meta.standard_fields.password.title == "API key"
    assert meta.standard_fields.host is not None and meta.standard_fields.host.title == "API base URL"


@pytest.mark.skipif(AIRFLOW_V_3_2_PLUS, reason="3.2+ reads the form from provider info, not the hook")
def test_floor_form_comes_from_the_hook() -> None:
    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

    widgets = LoadTestHook.get_connection_form_widgets()
    assert set(widgets) == set(CONN_FIELDS)
    assert LoadTestHook.get_ui_field_behaviour()["relabeling"]["password"] == "API key"


def test_hook_module_imports_no_form_library() -> None:
    """The providers manager imports the hook for the form on 3.1: wtforms loads only when it asks."""
    code = "import sys, airflow_provider_loadtest.hooks.loadtest\nprint('wtforms' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_pytest_plugin_imports_only_pytest() -> None:
    """The ``pytest11`` plugin loads into every pytest run of every user: it must not load the simulator."""
    code = (
        "import sys, pytest\nbefore = set(sys.modules)\n"
        "import airflow_provider_loadtest.simulator.pytest_plugin\n"
        "print(','.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1].split(",") == [
        "airflow_provider_loadtest",
        "airflow_provider_loadtest.simulator",
        "airflow_provider_loadtest.simulator.pytest_plugin",
    ]
    from airflow_provider_loadtest.simulator import run_simulator  # still there, loaded on first use

    assert callable(run_simulator)


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_wheel_ships_only_what_users_import() -> None:
    project = _pyproject()
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["airflow_provider_loadtest"]
    assert project["project"]["license-files"] == ["LICENSE", "NOTICE"]
    assert (ROOT / "LICENSE").read_text().startswith(" " * 30 + "Apache License\n")
    # Nothing in the package reaches for repository tooling that the wheel does not carry.
    for path in (ROOT / "airflow_provider_loadtest").rglob("*.py"):
        text = path.read_text()
        for outside in ("devtools", "example_dags", "tests.", "benchmarks"):
            assert f"from {outside}" not in text and f"import {outside}" not in text, (path, outside)


def test_no_published_dev_extra() -> None:
    project = _pyproject()
    assert "optional-dependencies" not in project["project"]
    dev = project["dependency-groups"]["dev"]
    assert {"ruff", "mypy", "pytest"} <= {d.split(">")[0].split("=")[0] for d in dev}
    urls = project["project"]["urls"]
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)


def test_a_test_run_leaves_nothing_in_the_temp_dir(tmp_path: Path) -> None:
    """The suite's throwaway AIRFLOW_HOME (tests/conftest.py) is removed when the run ends."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'bt'}",
            "tests/unit/test_validation.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert sorted(os.listdir(tmpdir)) == []


def test_every_module_in_the_wheel_imports() -> None:
    """The wheel is this package alone: each of its modules imports with only the declared dependencies."""
    import pkgutil

    import airflow_provider_loadtest

    names = [
        m.name
        for m in pkgutil.walk_packages(airflow_provider_loadtest.__path__, "airflow_provider_loadtest.")
        if not m.name.endswith("__main__")
    ]
    assert "airflow_provider_loadtest.simulator.pytest_plugin" in names
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    subprocess.run([sys.executable, "-c", code, *names], check=True, capture_output=True, text=True)


def test_what_moved_after_3_1_is_imported_through_compat() -> None:
    """``conf`` and the task exceptions are not in ``airflow.sdk`` on 3.1: only compat.py imports them."""
    import ast

    moved = {"conf", "AirflowFailException", "AirflowSkipException", "AirflowTaskTimeout", "TaskDeferred"}
    offenders = []
    for path in (ROOT / "airflow_provider_loadtest").rglob("*.py"):
        if path.name == "compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("airflow.sdk"):
                offenders += [(path.name, a.name) for a in node.names if a.name in moved]
    assert offenders == []
