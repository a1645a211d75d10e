"""docs/troubleshooting.md stays in step with the messages the package raises.

Every ``raise SomeError("...")`` (and ``request.error(status, "...")``) in the package, outside the
simulator, contributes its leading literal text (up to the first placeholder); each must appear in the
page, so a new message cannot ship without an entry. In reverse, every message the page quotes as a
heading must still be raised somewhere, so the page does not keep entries for messages that are gone.
Whitespace and case are ignored, so reflowing a message does not break the test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_provider_loadtest"
PAGE = ROOT / "docs" / "troubleshooting.md"
#: Shorter literal heads ("{parameter} must ...") say too little to look up; the page covers them by
#: their shape instead.
MIN_PREFIX = 12
#: Programming errors of ours, not something a user acts on.
INTERNAL = (
    "use AsyncLoadTestClient as an async context manager",
    "kind has no string default",
    "unexpected Airflow version",
    "a JTL file can only be restarted from its start",
    "response times merge with response times only",
)


def _head(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        head = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                break
            head += part.value
        return head
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _head(node.left)
    return None


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def raised_messages() -> dict[str, str]:
    """Leading literal text of each message -> where it is raised."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "simulator" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            call: ast.Call | None = None
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                call, arg = node.exc, node.exc.args[0]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "error"
                and len(node.args) == 2
            ):
                call, arg = node, node.args[1]
            if call is None:
                continue
            head = (_head(arg) or "").strip()
            if len(head) >= MIN_PREFIX and not any(head.startswith(i) for i in INTERNAL):
                found[head] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_every_raised_message_is_in_the_troubleshooting_page() -> None:
    page = _norm(PAGE.read_text())
    missing = {head: where for head, where in raised_messages().items() if _norm(head) not in page}
    assert not missing, "add these messages to docs/troubleshooting.md:\n" + "\n".join(
        f"  {where}: {head!r}" for head, where in sorted(missing.items(), key=lambda kv: kv[1])
    )


def test_every_message_the_page_quotes_is_still_raised() -> None:
    quoted = re.findall(r"^#{3} `([^`]+)`", PAGE.read_text(), flags=re.M)
    assert len(quoted) >= 10
    raised = [_norm(head) for head in raised_messages()]
    sources = _norm(" ".join(p.read_text() for p in PACKAGE.rglob("*.py") if "simulator" not in p.parts))
    stale = [q for q in quoted if not any(_norm(q).startswith(r) or r.startswith(_norm(q)) for r in raised)]
    stale = [q for q in stale if _norm(q.split("…")[0]) not in sources]
    assert not stale, f"docs/troubleshooting.md quotes messages the package no longer raises: {stale}"
