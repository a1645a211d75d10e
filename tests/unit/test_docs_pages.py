"""The hand-written pages (README.md, docs/*.md) and the example DAGs' comments say what the code does.

- every message a page quotes in a code span is one the package can print;
- every parameter a page names (``name=value`` spans, keyword arguments in its Python examples) exists,
  and every default it states is the signature's;
- the Python examples compile, and call the package's classes only with arguments they take;
- the retry comments in the example DAGs (and the pages' examples) state the rule: a retry re-attaches
  to a run still going, keeps a FINISHED run's verdict, and starts a run that ended ERROR/ABORTED again
  only with ``restart_failed_runs=True``.

The docs group (griffe) lists the public modules, so these run with the newest Airflow's environment
only (``make unit-floor`` skips them: the code they compare with is the same).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

pytest.importorskip("griffe")

from tests.unit.docs_checks import (
    PAGES,
    ROOT,
    airflow_base_parameters,
    callable_parameters,
    code_blocks,
    code_spans,
    init_parameters,
    is_known_message,
    norm,
    parameter_defaults,
    public_classes,
    quoted_messages,
    same_default,
    signature_spans,
    stated_defaults,
)

EXAMPLE_DAGS = sorted((ROOT / "example_dags").glob("*.py"))


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_quoted_message_is_one_the_package_prints(page: Path) -> None:
    unknown = [quote for quote in quoted_messages(page.read_text()) if not is_known_message(quote)]
    assert not unknown, (
        f"{_page_id(page)} quotes messages the package does not print (write a variable part as '…'):\n"
        + "\n".join(f"  {quote!r}" for quote in unknown)
    )


def test_the_message_check_can_fail() -> None:
    """The wording the issue found wrong is refused, the real one accepted (with values or holes)."""
    assert not is_known_message("Run … ended in ERROR/ABORTED (state …)")
    assert not is_known_message("Run br-6 ended in ERROR/ABORTED (state ERROR)")
    assert is_known_message("Run br-6 failed in the service (state ERROR)")
    assert is_known_message("Run … was aborted from outside (state …)")
    assert not is_known_message("Run br-6 was aborted in the service (state ABORTED)")


#: Repository files a page may name: ``example_dags/x.py``, ``devtools/browser_check.py``, ...
_REPO_PATH = re.compile(
    r"(?<![\w/.])((?:example_dags|devtools|tests|benchmarks|airflow_provider_loadtest|docs)/[\w./-]+\.(?:py|md|png))"
)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_file_a_page_names_exists(page: Path) -> None:
    """No "once merged": a page names only files the repository has."""
    missing = sorted({path for path in _REPO_PATH.findall(page.read_text()) if not (ROOT / path).exists()})
    assert not missing, f"{_page_id(page)} names files that do not exist: {missing}"


def _git_tracked(path: Path) -> bool | None:
    try:
        done = subprocess.run(
            ["git", "ls-files", "--error-unmatch", str(path.relative_to(ROOT))],  # noqa: S607
            cwd=ROOT,
            capture_output=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode == 0


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_image_a_page_shows_is_committed(page: Path) -> None:
    """A screenshot that exists only after ``make browser`` is a broken image for every other reader."""
    if _git_tracked(page) is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text())
    untracked = [image for image in images if not _git_tracked((page.parent / image).resolve())]
    assert not untracked, (
        f"{_page_id(page)} shows images that are not committed (make browser takes them): {untracked}"
    )


def _named_parameters(text: str) -> list[str]:
    """``name=value`` in inline spans: the parameter names a page mentions with a value."""
    names = []
    for span in code_spans(text):
        for name in re.findall(r"(?<![\w.\[\"'])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)=(?!=)", span):
            names.append(name)
    return names


#: ``name=value`` spans that are not a class's parameter: Airflow's and requests' own settings.
NOT_PARAMETERS = frozenset(
    {"include_prior_dates", "trust_env", "conn_id", "conn_type", "conn_host", "conn_password"}
)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_named_parameter_exists(page: Path) -> None:
    known = set(parameter_defaults()) | airflow_base_parameters() | NOT_PARAMETERS
    unknown = sorted({name for name in _named_parameters(page.read_text()) if name not in known})
    assert not unknown, f"{_page_id(page)} names parameters no public class takes: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_stated_default_is_the_signatures(page: Path) -> None:
    defaults = parameter_defaults()
    wrong = []
    for name, stated in stated_defaults(page.read_text()):
        if name not in defaults:
            continue
        verdicts = [same_default(stated, actual) for actual in defaults[name]]
        if None in verdicts or any(verdicts):
            continue
        wrong.append(f"{name}: the page says {stated!r}, the code {defaults[name]!r}")
    assert not wrong, f"{_page_id(page)} states defaults the code does not have:\n  " + "\n  ".join(wrong)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_signatures_written_in_a_page_are_the_codes(page: Path) -> None:
    wrong = []
    for name, parameter, stated in signature_spans(page.read_text()):
        candidates = callable_parameters(name)
        if not candidates:
            wrong.append(f"{name}(...): no public class or method of that name")
            continue
        if not any(parameter in params and params[parameter].default == stated for params in candidates):
            wrong.append(f"{name}({parameter}={stated!r}): the code says otherwise")
    assert not wrong, f"{_page_id(page)}:\n  " + "\n  ".join(wrong)


def test_the_default_check_can_fail() -> None:
    text = "| Parameter | Default |\n| --- | --- |\n| `restart_failed_runs` | `True` |\n"
    assert list(stated_defaults(text)) == [("restart_failed_runs", "`True`")]
    assert same_default("`True`", False) is False
    assert same_default("10 minutes", parameter_defaults()["pdf_timeout"][0]) is True
    assert list(stated_defaults("`decompress` (default `False`) keeps")) == [("decompress", "`False`")]
    row = "| Parameter | Meaning |\n| --- | --- |\n| `restart_failed_runs` | retry (default `True`) |\n"
    assert list(stated_defaults(row)) == [("restart_failed_runs", "`True`")]
    assert list(signature_spans("`stop_run(bench_result_id, wait=None)`")) == [("stop_run", "wait", None)]


def _examples() -> list[tuple[str, int, str]]:
    return [
        (_page_id(page), index, block)
        for page in PAGES
        for index, block in enumerate(code_blocks(page.read_text()))
    ]


@pytest.mark.parametrize(("page", "index", "block"), _examples(), ids=lambda v: str(v)[:40])
def test_python_examples_call_the_classes_with_their_parameters(page: str, index: int, block: str) -> None:
    tree = ast.parse(block, f"{page} example {index}")
    classes = public_classes()
    base = airflow_base_parameters()
    wrong = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes):
            continue
        cls = classes[node.func.id]
        takes = set(init_parameters(cls)) | base
        for keyword in node.keywords:
            if keyword.arg is not None and keyword.arg not in takes:
                wrong.append(f"{node.func.id}({keyword.arg}=...)")
    assert not wrong, f"{page}, example {index}: {wrong}"


# --- the retry rule in comments -------------------------------------------------------------------------

#: A comment about retrying a load test must say re-attach, and may speak of ERROR/ABORTED runs only
#: to say they are not started again unless restart_failed_runs=True.
_RESTARTS_FAILED = re.compile(r"(error|aborted)[^.;]*?\b(is|are) (started|run) (again|anew)")
_NOT_RESTARTED = "not started again unless restart_failed_runs=true"


def _comments_near_retries(source: str, name: str) -> list[tuple[str, bool]]:
    """For each call with ``retries=`` to RunScenarioOperator: its comments, and whether it sets
    ``restart_failed_runs=True``."""
    tree = ast.parse(source, name)
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id != "RunScenarioOperator":
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        if "retries" not in keywords:
            continue
        restarts = isinstance(keywords.get("restart_failed_runs"), ast.Constant) and bool(
            keywords["restart_failed_runs"].value  # type: ignore[attr-defined]
        )
        lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        found.append((norm(" ".join(comments[line] for line in lines if line in comments)), restarts))
    return found


def _retry_sources() -> list[tuple[str, str]]:
    sources = [(str(path.relative_to(ROOT)), path.read_text()) for path in EXAMPLE_DAGS]
    for page in PAGES:
        for index, block in enumerate(code_blocks(page.read_text())):
            sources.append((f"{_page_id(page)} example {index}", block))
    return sources


def check_retry_comment(comment: str, restarts: bool) -> str | None:
    """What is wrong with a retry comment, or ``None``."""
    if "re-attach" not in comment:
        return "does not say that a retry re-attaches to the run"
    if not restarts and _RESTARTS_FAILED.search(comment) and _NOT_RESTARTED not in comment:
        return "says a run that ended ERROR/ABORTED is started again (only with restart_failed_runs=True)"
    if not restarts and ("error" in comment or "aborted" in comment) and _NOT_RESTARTED not in comment:
        return f"speaks of ERROR/ABORTED runs without saying they are {_NOT_RESTARTED!r}"
    return None


@pytest.mark.parametrize(("name", "source"), _retry_sources(), ids=lambda v: str(v)[:50])
def test_retry_comments_state_the_rule(name: str, source: str) -> None:
    problems = [
        f"{problem}: {comment!r}"
        for comment, restarts in _comments_near_retries(source, name)
        if (problem := check_retry_comment(comment, restarts))
    ]
    assert not problems, f"{name}: " + "\n".join(problems)


def test_the_retry_rule_check_can_fail() -> None:
    old = (
        "safe to retry: a retry re-attaches to the run the failed try started (or keeps its verdict "
        "if it finished) instead of starting a second, billed load test; only a run that ended in "
        "error or aborted is started again."
    )
    assert check_retry_comment(old, restarts=False) is not None
    assert check_retry_comment(old, restarts=True) is None
    assert check_retry_comment("a retry never starts a second load test", restarts=False) is not None
    assert check_retry_comment("a retry re-attaches to the run, it never starts a second one", False) is None


_MIN_HISTORY_SAID = re.compile(r"(?:[Uu]ntil (?:there are|the task has)|fewer than) (\d+) nights")


def _min_history_statements(text: str) -> list[int]:
    return [int(n) for n in _MIN_HISTORY_SAID.findall(text)]


@pytest.mark.parametrize("path", [*PAGES, *EXAMPLE_DAGS], ids=_page_id)
def test_the_nights_the_history_gate_needs_are_the_defaults(path: Path) -> None:
    """Three places said 8 nights after the default became 4 (``HistorySettings.min_history``)."""
    from airflow_provider_loadtest.decisions.history import HistorySettings

    said = _min_history_statements(path.read_text())
    assert all(n == HistorySettings().min_history for n in said), (_page_id(path), said)


def test_the_nights_check_can_fail() -> None:
    assert _min_history_statements("Until there are 8 nights the log says so") == [8]
    assert _min_history_statements("too short, fewer than 8 nights as after") == [8]
