"""The generated reference (``make docs``) shows every public class, every parameter with its default and
whether it is templated, and what a task pushes to XCom: it is generated from the docstrings, so these
tests hold the docstrings to it.

They read the package as the docs build does (griffe, with ``devtools.docs_reference.AirflowReference``),
so they need the ``docs`` dependency group; ``make unit-floor`` skips them.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

griffe = pytest.importorskip("griffe")

import airflow_provider_loadtest  # noqa: E402 - after the skip
from devtools.docs_reference import (  # noqa: E402
    PACKAGE,
    TEMPLATED_MARK,
    AirflowReference,
    module_page,
    public_classes,
    reference_modules,
    template_fields,
)

#: What Airflow itself calls (not shown on the pages: mkdocs.yml's ``filters``).
AIRFLOW_CALLS = {"execute", "execute_complete", "on_kill", "poke", "run", "serialize", "get_link"}


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    loaded = griffe.load(
        PACKAGE,
        search_paths=[str(importlib.import_module("tests.unit.docs_checks").ROOT)],
        docstring_parser="sphinx",
        extensions=griffe.load_extensions(AirflowReference),
    )
    assert isinstance(loaded, griffe.Module)
    return loaded


def _reference_classes(package: griffe.Module) -> list[griffe.Class]:
    return [
        cls
        for dotted in reference_modules()
        for cls in public_classes(package[dotted.removeprefix(f"{PACKAGE}.")])
    ]


def _airflow_bases() -> tuple[type, ...]:
    from airflow.sdk import BaseHook, BaseOperator, BaseOperatorLink
    from airflow.triggers.base import BaseTrigger

    return (BaseOperator, BaseHook, BaseTrigger, BaseOperatorLink)


def test_every_module_with_an_operator_sensor_hook_trigger_or_link_has_a_page() -> None:
    """A new public module (``sensors/run.py``) gets a page: by the ``sensors.*`` pattern, or a line in
    ``devtools/docs_reference.REFERENCE_MODULES``."""
    listed = set(reference_modules())
    missing = []
    for info in pkgutil.walk_packages(airflow_provider_loadtest.__path__, f"{PACKAGE}."):
        if ".simulator" in info.name or info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == info.name
                and not name.startswith("_")
                and issubclass(value, _airflow_bases())
                and info.name not in listed
                and name != "LoadTestHookMixin"
            ):
                missing.append(f"{info.name}.{name}")
    assert not missing, f"add their modules to devtools/docs_reference.REFERENCE_MODULES: {missing}"


def test_the_reference_lists_the_known_classes(package: griffe.Module) -> None:
    names = {cls.name for cls in _reference_classes(package)}
    expected = {"RunScenarioOperator", "TemplateSensor", "DownloadReportOperator", "DownloadRunFilesOperator"}
    assert expected | {"LoadTestHook", "LoadTestRunTrigger", "LoadTestApiError"} <= names


def _task_classes(package: griffe.Module) -> list[griffe.Class]:
    return [cls for cls in _reference_classes(package) if "template_fields" in cls.members]


def _documented_parameters(cls: griffe.Class) -> dict[str, griffe.DocstringParameter]:
    assert cls.docstring is not None
    return {
        parameter.name: parameter
        for section in cls.docstring.parsed
        if section.kind is griffe.DocstringSectionKind.parameters
        for parameter in section.value
    }


def test_every_operator_and_sensor_documents_every_parameter(package: griffe.Module) -> None:
    problems = []
    for cls in _task_classes(package):
        signature = [
            p.name for p in cls.parameters if p.name != "self" and p.kind.value != "variadic keyword"
        ]
        documented = _documented_parameters(cls)
        problems += [f"{cls.name}: `:param {name}:` missing" for name in signature if name not in documented]
        problems += [
            f"{cls.name}: `:param {name}:` is no parameter" for name in documented if name not in signature
        ]
    assert not problems, "\n".join(problems)


def test_templated_parameters_are_marked_and_only_those(package: griffe.Module) -> None:
    problems = []
    for cls in _task_classes(package):
        fields = template_fields(cls)
        assert fields, f"{cls.name}: template_fields is not a literal tuple of names"
        for name, parameter in _documented_parameters(cls).items():
            marked = parameter.description.startswith(TEMPLATED_MARK)
            if marked != (name in fields):
                problems.append(f"{cls.name}.{name}: marked {marked}, templated {name in fields}")
        problems += [
            f"{cls.name}: template field {f} is no parameter" for f in fields if f not in cls.parameters
        ]
    assert not problems, "\n".join(problems)


def test_the_pages_show_each_parameters_default(package: griffe.Module) -> None:
    """The table's Default column comes from the signature; constants show their value."""
    run = _documented_parameters(package["operators.run_scenario.RunScenarioOperator"])
    assert str(run["restart_failed_runs"].default) == "False"
    assert str(run["check_interval"].default) == "10.0"
    assert str(run["loadtest_conn_id"].default) == "'loadtest_default'"
    assert "default_deferrable" in str(run["deferrable"].default)
    assert str(run["scenario_id"].default) == "None"  # or scenario_name: one of the two
    sensor = _documented_parameters(package["sensors.template.TemplateSensor"])
    assert str(sensor["workspace_id"].default) in {"None", ""}  # required: no default
    assert package["sensors.template.TemplateSensor"].parameters["workspace_id"].default is None
    pdf = _documented_parameters(package["operators.report.DownloadReportOperator"])
    assert str(pdf["pdf_timeout"].default) == "timedelta(minutes=10)"


def test_every_operator_and_sensor_says_what_it_pushes_to_xcom(package: griffe.Module) -> None:
    """Text after the parameters would be read as the last parameter's: the extension moves it up, and
    the page's prose must name the XCom output."""
    missing = []
    for cls in _task_classes(package):
        assert cls.docstring is not None
        text = " ".join(
            str(section.value)
            for section in cls.docstring.parsed
            if section.kind is griffe.DocstringSectionKind.text
        )
        if "XCom ``return_value``" not in text:
            missing.append(cls.name)
    assert not missing, f"say 'Returns (XCom ``return_value``) ...' in these docstrings: {missing}"


def test_every_public_method_on_a_page_has_a_docstring(package: griffe.Module) -> None:
    """mkdocstrings leaves out members without a docstring: a public method must not vanish silently."""
    missing = []
    for cls in _reference_classes(package):
        for name, member in cls.members.items():
            if name.startswith("_") or name in AIRFLOW_CALLS or member.is_alias:
                continue
            if isinstance(member, griffe.Function) and not member.docstring:
                missing.append(f"{cls.name}.{name}")
    assert not missing, f"document these (or make them private): {missing}"


def test_a_module_page_names_each_class(package: griffe.Module) -> None:
    page = module_page(package["operators.report"])
    assert page.startswith("# `DownloadReportOperator`, `DownloadRunFilesOperator`")
    assert f"::: {PACKAGE}.operators.report.DownloadRunFilesOperator" in page
