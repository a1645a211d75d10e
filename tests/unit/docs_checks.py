"""What the tests of the hand-written documentation read: the pages, and the package's words and signatures.

The pages (README.md and docs/*.md) are prose; the package is the truth. This module turns both into
comparable data: the messages the package can print (each string literal and f-string of its source,
placeholders as wildcards), the parameters its public classes take with their defaults, and the
pages' quoted messages, parameter mentions, stated defaults and Python examples.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_provider_loadtest"
#: Every hand-written page: the README and docs/*.md (the reference is generated, not written).
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
WILDCARD = "\x00"
#: Where a quoted message's variable parts may be: "…", "...", {name}, <name>.
_QUOTE_HOLES = re.compile(r"…|\.\.\.|\{[^{}]*\}|<[A-Za-z_ ]+>")
#: Spans that are commands or code, not messages.
_COMMAND = re.compile(
    r"^(airflow|make|pip|uv|python|export|from|import|git|curl|cd|\.venv|\.tools|loadtest://|https?://|"
    r"pytest|apt-get|POST|GET)\b"
)


def norm(text: str) -> str:
    return " ".join(text.split()).casefold()


# --- the package's messages ------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """One text the package can produce: literal parts and holes (placeholders)."""

    parts: tuple[str, ...]  # WILDCARD marks a hole
    where: str

    @property
    def skeleton(self) -> str:
        return norm("".join(self.parts)).replace(WILDCARD, "…")

    @property
    def literal(self) -> str:
        return "".join(part for part in self.parts if part != WILDCARD)

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(".+?".join(re.escape(piece) for piece in norm("".join(self.parts)).split(WILDCARD)))


def _string_choices(function: ast.AST) -> dict[str, list[str]]:
    """Local names bound only to string constants (``why = "a" if x else "b"``): their possible values."""
    choices: dict[str, list[str]] = {}
    spoiled: set[str] = set()
    for node in ast.walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = node.value
        values = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
        if all(isinstance(v, ast.Constant) and isinstance(v.value, str) for v in values):
            choices.setdefault(target.id, []).extend(v.value for v in values)  # type: ignore[union-attr]
        else:
            spoiled.add(target.id)
    return {name: values for name, values in choices.items() if name not in spoiled}


def _parts(node: ast.expr, choices: dict[str, list[str]]) -> list[list[str]]:
    """Every way ``node`` renders, as parts (a hole where the value is unknown)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [[node.value]]
    if isinstance(node, ast.JoinedStr):
        renderings: list[list[str]] = [[]]
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                options = [[value.value]]
            elif (
                isinstance(value, ast.FormattedValue)
                and isinstance(value.value, ast.Name)
                and value.value.id in choices
            ):
                options = [[choice] for choice in choices[value.value.id]]
            else:
                options = [[WILDCARD]]
            renderings = [done + option for done in renderings for option in options][:16]
        return renderings
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        lefts, rights = _parts(node.left, choices), _parts(node.right, choices)
        return [left + right for left in lefts for right in rights][:16]
    return [[WILDCARD]]


@cache
def package_messages() -> tuple[Message, ...]:
    """Every string literal and f-string of the package's source outside the simulator."""
    found: list[Message] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "simulator" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))]
        for scope in scopes:
            choices = _string_choices(scope)
            for node in ast.walk(scope):
                if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp):
                    for parts in _parts(node, choices):
                        if any(part != WILDCARD and part.strip() for part in parts):
                            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                            found.append(Message(tuple(parts), where))
    return tuple(found)


def is_known_message(quote: str) -> bool:
    """Whether the package can print ``quote``: the whole message with its values filled in, or a part
    of one with its variable parts written as holes (``…``, ``{name}``, ``<name>``)."""
    text = norm(quote)
    holes = _QUOTE_HOLES.split(text)
    fragment = re.compile(".*?".join(re.escape(piece) for piece in holes), re.S)
    messages = package_messages()
    if any(fragment.search(message.skeleton) for message in messages):
        return True
    # A whole message with its values: its literal words must be most of the quote, so that
    # f"run {anything}" does not stand for every quote starting with "run".
    return any(
        message.pattern.fullmatch(text) and 2 * len(message.literal) >= len(text) for message in messages
    )


# --- the pages --------------------------------------------------------------------------------------


def page_text(path: Path) -> str:
    return path.read_text()


def prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def code_blocks(text: str, language: str = "python") -> Iterator[str]:
    yield from re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def code_spans(text: str) -> Iterator[str]:
    """Inline code spans of the prose (a span may wrap lines, never a paragraph)."""
    for span in re.findall(r"(?<!`)`([^`]+?)`(?!`)", prose(text)):
        if "\n\n" not in span:
            yield " ".join(span.split())


def quoted_messages(text: str) -> list[str]:
    """The spans that quote what the package prints (four words or more, not a command or code)."""
    quotes = []
    for span in code_spans(text):
        if len(span.split()) < 4 or _COMMAND.match(span) or span[0] in "[{(.\"'":
            continue
        if "->" in span or " = " in span or re.match(r"^\w+\(", span):
            continue
        quotes.append(span)
    return quotes


# --- the package's parameters -------------------------------------------------------------------------


@cache
def public_classes() -> dict[str, type]:
    """The classes the generated reference documents, by name (imported: their real signatures)."""
    from devtools.docs_reference import reference_modules

    classes: dict[str, type] = {}
    for dotted in reference_modules(ROOT):
        module = importlib.import_module(dotted)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == dotted and not name.startswith("_"):
                classes[name] = value
    return classes


@cache
def airflow_base_parameters() -> frozenset[str]:
    """What every operator and sensor also takes: BaseOperator's and BaseSensorOperator's arguments."""
    from airflow.sdk import BaseOperator, BaseSensorOperator

    names: set[str] = set()
    for base in (BaseOperator, BaseSensorOperator):
        names.update(inspect.signature(base.__init__).parameters)
    return frozenset(names - {"self", "kwargs", "args"})


def init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    parameters = dict(inspect.signature(cls.__init__).parameters)  # type: ignore[misc]
    return {
        name: parameter
        for name, parameter in parameters.items()
        if name != "self" and parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
    }


@cache
def parameter_defaults() -> dict[str, list[Any]]:
    """Each parameter name of the public classes' constructors and public methods -> its defaults."""
    defaults: dict[str, list[Any]] = {}
    for cls in public_classes().values():
        callables = [cls.__init__] + [
            member for name, member in vars(cls).items() if callable(member) and not name.startswith("_")
        ]
        for function in callables:
            try:
                signature = inspect.signature(function)
            except (TypeError, ValueError):
                continue
            for name, parameter in signature.parameters.items():
                if name in {"self", "cls", "kwargs", "args", "context"}:
                    continue
                defaults.setdefault(name, []).append(parameter.default)
    return defaults


def same_default(stated: str, actual: Any) -> bool | None:
    """Whether a default a page states (``True``, ``10``, ``"x"``, ``10 minutes``) is ``actual``;
    ``None`` when the statement is prose this cannot read."""
    text = stated.strip().strip("`").strip()
    if actual is inspect.Parameter.empty:
        return text.lower() in {"required", "-"}
    minutes = re.fullmatch(r"(\d+(?:\.\d+)?) ?(minutes?|min|s|seconds?)", text)
    if minutes:
        seconds = float(minutes.group(1)) * (60 if minutes.group(2).startswith("min") else 1)
        value = actual.total_seconds() if isinstance(actual, timedelta) else actual
        return isinstance(value, int | float) and not isinstance(value, bool) and float(value) == seconds
    try:
        literal = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    if isinstance(actual, timedelta):
        actual = actual.total_seconds()
    if isinstance(literal, bool) or isinstance(actual, bool) or literal is None or actual is None:
        return literal is actual
    return bool(literal == actual)


def stated_defaults(text: str) -> Iterator[tuple[str, str]]:
    """(parameter, stated default) pairs: table rows under a "Default" column, and prose such as
    "`check_interval` (default 10 s)" or "`decompress` ... default `True`"."""
    lines = prose(text).splitlines()
    header: list[str] | None = None
    for line in lines:
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = [cell.casefold() for cell in cells]
            continue
        if not (cells and re.fullmatch(r"`\w+`", cells[0])):
            continue
        if "default" in header and header.index("default") < len(cells):
            yield cells[0].strip("`"), cells[header.index("default")]
            continue
        for stated in re.findall(_STATED, line):  # "(default `False`)" in a row's text
            yield cells[0].strip("`"), stated
    yield from re.findall(r"`(\w+)`[^`\n|;]{0,30}?" + _STATED, prose(text))


#: "default `X`", "default: 10 s", "defaults to 10 minutes".
_STATED = r"\(?\bdefaults? (?:to |is |:)?\s*(`[^`]+`|[\w.]+(?: (?:minutes?|s|seconds?)\b)?)"


def signature_spans(text: str) -> Iterator[tuple[str, str, Any]]:
    """(callable, parameter, default) from spans written as a signature, such as
    ``DownloadRunFilesOperator(destination, run=None, decompress=True)`` (a bare name among the
    arguments tells a signature from a call)."""
    for span in code_spans(text):
        head = span.split(" -> ")[0]
        try:
            node = ast.parse(head, mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name is None or not any(isinstance(arg, ast.Name | ast.Starred) for arg in node.args):
            continue
        for keyword in node.keywords:
            if keyword.arg is None:
                continue
            try:
                yield name, keyword.arg, ast.literal_eval(keyword.value)
            except ValueError:
                continue


def callable_parameters(name: str) -> list[dict[str, inspect.Parameter]]:
    """The parameters of every public class called ``name`` and every public method called ``name``."""
    found = []
    for cls_name, cls in public_classes().items():
        function = cls.__init__ if cls_name == name else vars(cls).get(name)
        if function is None or not callable(function):
            continue
        try:
            found.append(dict(inspect.signature(function).parameters))
        except (TypeError, ValueError):
            continue
    return found
