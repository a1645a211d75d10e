"""The reference part of the documentation, generated from the code at every ``make docs``.

Two pieces, both read the package statically (griffe parses the source; nothing is imported, so the
build needs no Airflow configuration and shows defaults as written, e.g. ``conf.getboolean(...)``):

- :func:`on_files`, an MkDocs hook (``hooks:`` in mkdocs.yml): one page per public module, written into
  the build as ``reference/<module>.md`` (never into docs/), plus ``reference/index.md`` listing them.
  The modules are :data:`REFERENCE_MODULES`, the one list to change: ``"sensors.*"`` takes every
  module of ``sensors/`` (a new ``sensors/run.py`` gets its page without anyone touching this file).
- :class:`AirflowReference`, a griffe extension (``extensions:`` of mkdocstrings' python handler):
  marks each parameter named in the class's ``template_fields`` as templated, and shows a default that
  is a module constant (``DEFAULT_CONN_ID``) by its value.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import griffe

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

PACKAGE = "airflow_provider_loadtest"
ROOT = Path(__file__).resolve().parents[1]

#: The public modules, relative to the package; ``pkg.*`` is every module of that subpackage except
#: those in :data:`NOT_PUBLIC`. Each gets a page showing its public classes.
REFERENCE_MODULES = (
    "operators.*",
    "sensors.*",
    "hooks.loadtest",
    "hooks.async_client",
    "triggers.*",
    "links.report",
    "api.errors",
)
#: Shared plumbing inside the public subpackages (the mixin giving tasks their hook, trigger helpers).
NOT_PUBLIC = ("common",)
#: How a templated parameter's description starts on the page.
TEMPLATED_MARK = "*(templated)*"


def reference_modules(root: Path = ROOT) -> list[str]:
    """The dotted names of the modules that get a reference page, in :data:`REFERENCE_MODULES` order."""
    modules: list[str] = []
    for pattern in REFERENCE_MODULES:
        package, _, leaf = pattern.rpartition(".")
        folder = root / PACKAGE / package.replace(".", "/")
        for path in sorted(folder.glob("*.py")):
            name = path.stem
            if name == "__init__" or name in NOT_PUBLIC or not fnmatch.fnmatch(name, leaf):
                continue
            dotted = f"{PACKAGE}.{package}.{name}"
            if dotted not in modules:
                modules.append(dotted)
    return modules


def public_classes(module: griffe.Module) -> list[griffe.Class]:
    """The documented classes a module defines itself (not those it imports), in source order."""
    classes = [
        member
        for name, member in module.members.items()
        if isinstance(member, griffe.Class) and not name.startswith("_") and member.docstring
    ]
    return sorted(classes, key=lambda cls: cls.lineno or 0)


def load_package(root: Path = ROOT) -> griffe.Module:
    """The package as griffe reads it, with the sphinx docstring parser the docs use."""
    loaded = griffe.load(
        PACKAGE, search_paths=[str(root)], docstring_parser="sphinx", extensions=griffe.load_extensions()
    )
    assert isinstance(loaded, griffe.Module)
    return loaded


def module_page(module: griffe.Module) -> str:
    """The Markdown of one module's page: its docstring, then each public class."""
    classes = public_classes(module)
    title = ", ".join(f"`{cls.name}`" for cls in classes) or f"`{module.path}`"
    lines = [f"# {title}", "", f"`{module.path}`", "", f"::: {module.path}", "    options:"]
    lines += ["      members: false", "      show_root_heading: false"]
    lines += ["      show_root_toc_entry: false", ""]
    for cls in classes:
        lines += [f"::: {cls.path}", ""]
    return "\n".join(lines)


def index_page(modules: list[griffe.Module]) -> str:
    """The reference's first page: one line per module page, naming its classes."""
    lines = [
        "# Reference",
        "",
        "Generated from the package's docstrings and signatures at every `make docs`: one page per public",
        f"module. A parameter marked {TEMPLATED_MARK} is rendered with Jinja when the task runs "
        "(it is in the class's `template_fields`); the others are read as given.",
        "Operators and sensors also take every argument of Airflow's `BaseOperator` (`retries`,",
        "`execution_timeout`, ...); what a task returns is pushed to XCom as `return_value`.",
        "",
    ]
    for module in modules:
        names = ", ".join(f"`{cls.name}`" for cls in public_classes(module)) or "(functions)"
        lines.append(f"- [{names}]({page_name(module.path)}): `{module.path}`")
    return "\n".join([*lines, ""])


def page_name(dotted: str) -> str:
    """A module's page, relative to reference/: ``operators.run_scenario.md``."""
    return dotted.removeprefix(f"{PACKAGE}.") + ".md"


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    """MkDocs hook: add the generated reference pages to the build (docs/ itself stays untouched)."""
    from mkdocs.structure.files import File

    package = load_package()
    modules = [package[dotted.removeprefix(f"{PACKAGE}.")] for dotted in reference_modules()]
    files.append(File.generated(config, "reference/index.md", content=index_page(modules)))
    for module in modules:
        page = File.generated(config, f"reference/{page_name(module.path)}", content=module_page(module))
        files.append(page)
    return files


class AirflowReference(griffe.Extension):
    """What Airflow users look for on an operator's page, taken from the code rather than written twice."""

    def on_package(self, *, pkg: griffe.Module, **_: Any) -> None:
        for cls in _classes(pkg):
            _resolve_constant_defaults(cls)
            _prose_before_fields(cls)
            _mark_templated(cls)


def _classes(obj: griffe.Object) -> Iterator[griffe.Class]:
    for member in obj.members.values():
        if isinstance(member, griffe.Class):
            yield member
        if isinstance(member, griffe.Module | griffe.Class):
            yield from _classes(member)


def template_fields(cls: griffe.Class) -> tuple[str, ...]:
    """The class's own ``template_fields``, when it is a literal tuple or list of names."""
    attribute = cls.members.get("template_fields")
    if attribute is None or attribute.is_alias or getattr(attribute, "value", None) is None:
        return ()
    try:
        names = ast.literal_eval(str(attribute.value))  # type: ignore[union-attr]
    except (ValueError, SyntaxError):
        return ()
    return tuple(str(name) for name in names)


def _prose_before_fields(cls: griffe.Class) -> None:
    """Move paragraphs written after or between the ``:param ...:`` fields above them.

    The sphinx parser reads such a paragraph as the end of the field above it; docstrings here often
    say what a task returns after its parameters.
    """
    if cls.docstring is None:
        return
    prose: list[str] = []
    fields: list[str] = []
    in_field = False
    for line in cls.docstring.value.splitlines():
        if line.startswith(":"):
            in_field = True
        elif line.strip() and not line[0].isspace():
            if in_field and prose and prose[-1].strip():
                prose.append("")  # a paragraph that followed a field starts a paragraph of its own
            in_field = False
        elif not line.strip():
            (fields if in_field else prose).append(line)
            continue
        (fields if in_field else prose).append(line)
    if fields:
        cls.docstring.value = "\n".join([*prose, "", *(line for line in fields if line.strip())]).strip()


def _mark_templated(cls: griffe.Class) -> None:
    fields = template_fields(cls)
    if not fields or cls.docstring is None:
        return
    lines = cls.docstring.value.splitlines()
    for index, line in enumerate(lines):
        stripped = line.lstrip()
        for name in fields:
            head = f":param {name}:"
            if stripped.startswith(head) and TEMPLATED_MARK not in stripped:
                indent = line[: len(line) - len(stripped)]
                lines[index] = f"{indent}{head} {TEMPLATED_MARK} {stripped[len(head) :].lstrip()}"
    cls.docstring.value = "\n".join(lines)


def _resolve_constant_defaults(cls: griffe.Class) -> None:
    """``loadtest_conn_id=DEFAULT_CONN_ID`` shows as ``'loadtest_default'`` (the value users type), and
    ``conf.getboolean(...)`` whole."""
    init = cls.members.get("__init__")
    if not isinstance(init, griffe.Function):
        return
    for parameter in init.parameters:
        default = parameter.default
        if isinstance(default, griffe.ExprCall):  # shown whole: the table would keep only its last name
            parameter.default = str(default)
            continue
        if not isinstance(default, griffe.ExprName):
            continue
        try:
            target = cls.package[default.canonical_path.removeprefix(f"{PACKAGE}.")]
            if isinstance(target, griffe.Alias):
                target = target.final_target
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        if isinstance(target, griffe.Attribute) and target.value is not None:
            parameter.default = target.value
