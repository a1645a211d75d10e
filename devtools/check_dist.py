"""What ``make dist`` built is what users should get: ``python devtools/check_dist.py DIST_DIR``.

``twine check --strict`` reads the metadata (``make dist`` runs it first); this checks the contents, with
the standard library only (it runs before any environment exists): one wheel and one sdist of the same
version; the wheel holds every file of the package the repository tracks (the view's templates and
static files, the simulator's seed, ``py.typed``) and nothing else of the repository (no ``tests/``,
``devtools/``, ``benchmarks/``, ``example_dags/``); its metadata declares the Python and Airflow floors
of ``pyproject.toml`` and the provider's entry points. Prints one line per distribution; exits 1 with
every problem found.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "airflow_provider_loadtest"
#: Repository folders that must never reach a user's environment.
REPOSITORY_ONLY = ("tests/", "devtools/", "benchmarks/", "example_dags/", "docs/")
#: Entry points Airflow and pytest find the provider by.
ENTRY_POINT_GROUPS = ("[apache_airflow_provider]", "[airflow.plugins]", "[pytest11]")


def tracked_package_files(root: Path = ROOT) -> set[str]:
    """The package's files as git tracks them (what a wheel built from a clean checkout holds)."""
    listed = subprocess.run(
        ["git", "ls-files", PACKAGE],  # noqa: S607 - git from PATH, as make finds it
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return {name for name in listed if (root / name).is_file()}


def wheel_problems(wheel: Path, expected: set[str], project: dict[str, object]) -> list[str]:
    """What is wrong with ``wheel`` against the tracked package files and ``pyproject``'s project."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(info).decode())
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    problems = [
        f"the wheel holds repository tooling: {n}" for n in sorted(names) if n.startswith(REPOSITORY_ONLY)
    ]
    shipped = {n for n in names if not n.startswith(f"{PACKAGE}-") and ".dist-info/" not in n}
    problems += [f"the wheel lacks {n}" for n in sorted(expected - shipped)]
    problems += [f"the wheel holds {n}, which git does not track" for n in sorted(shipped - expected)]
    if metadata["Requires-Python"] != project["requires-python"]:
        problems.append(
            f"Requires-Python is {metadata['Requires-Python']!r}, not {project['requires-python']!r}"
        )
    declared = [str(d).replace(" ", "") for d in project["dependencies"]]  # type: ignore[attr-defined]
    required = [r.replace(" ", "") for r in metadata.get_all("Requires-Dist") or []]
    problems += [f"Requires-Dist lacks {d}" for d in declared if d not in required]
    problems += [f"no {group} entry point" for group in ENTRY_POINT_GROUPS if group not in entry_points]
    return problems


def sdist_problems(sdist: Path, expected: set[str]) -> list[str]:
    """The sdist rebuilds the same wheel: it holds the package, pyproject.toml and the README."""
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = expected | {"pyproject.toml", "README.md", "LICENSE", "NOTICE"}
    return [f"the sdist lacks {n}" for n in sorted(needed - names)]


def main(argv: list[str]) -> int:
    dist = Path(argv[0]) if argv else ROOT / "dist"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"[dist] expected one wheel and one sdist in {dist}, found {wheels + sdists}", file=sys.stderr)
        return 1
    expected = tracked_package_files()
    problems = wheel_problems(wheels[0], expected, project) + sdist_problems(sdists[0], expected)
    if wheels[0].name.split("-")[1] != sdists[0].name.removesuffix(".tar.gz").rsplit("-", 1)[1]:
        problems.append(f"{wheels[0].name} and {sdists[0].name} are not one version")
    for problem in problems:
        print(f"[dist] {problem}", file=sys.stderr)
    for built in (*wheels, *sdists):
        print(f"[dist] {built.name}: {built.stat().st_size // 1024} KB")
    if not problems:
        print(f"[dist] the wheel holds the {len(expected)} files of {PACKAGE} and no repository tooling")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
