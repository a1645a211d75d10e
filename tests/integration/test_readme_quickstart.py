"""The README's quickstart works as pasted: its first block (the simulator) in one shell, its second block
(the connection line, the example DAG, ``airflow db migrate``, ``airflow dags test``) in another, in a fresh
HOME, exactly as written but for the port (a free one instead of 8090, in both blocks alike)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PORT = "8090"
BASH = shutil.which("bash") or "/bin/bash"


def quickstart_blocks() -> tuple[str, str]:
    """The two ``bash`` blocks of the README's "Quickstart" section."""
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)
    assert len(blocks) == 2, blocks
    return blocks[0].strip(), blocks[1]


def _free_port() -> str:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


@pytest.mark.timeout(600)
def test_the_quickstart_works_as_pasted(tmp_path: Path) -> None:
    # python and airflow of this environment, as after `pip install`, in the clone as the README says
    run_quickstart(Path(sys.executable).parent, ROOT, tmp_path)


#: ``make wheel-floor`` sets it: a fresh venv holding the built wheel and the oldest supported Airflow.
WHEEL_VENV = os.environ.get("LOADTEST_WHEEL_VENV")


@pytest.mark.timeout(600)
@pytest.mark.skipif(not WHEEL_VENV, reason="run by make wheel-floor (LOADTEST_WHEEL_VENV: the wheel's venv)")
def test_the_quickstart_works_from_the_built_wheel(tmp_path: Path) -> None:
    """What a user of the published package gets: the wheel, not the tree, with the oldest Airflow we
    declare. From a folder holding only the example DAGs, so the source tree cannot shadow the wheel."""
    assert WHEEL_VENV is not None
    venv = Path(WHEEL_VENV).resolve()
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(ROOT / "example_dags", elsewhere / "example_dags")
    probe = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import airflow, airflow_provider_loadtest as p; print(p.__file__); print(airflow.__version__)",
        ],
        cwd=elsewhere,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
    )
    imported, airflow_version = probe.stdout.split()[-2:]
    assert Path(imported).resolve().is_relative_to(venv), imported
    floor = re.search(r"FLOOR_AIRFLOW := ([\d.]+)", (ROOT / "Makefile").read_text())
    assert floor is not None and airflow_version == floor.group(1)
    run_quickstart(venv / "bin", elsewhere, tmp_path / "home")


def run_quickstart(bin_dir: Path, cwd: Path, home: Path) -> None:
    """The README's two blocks with ``bin_dir``'s python and airflow, in ``cwd``, in a fresh ``home``."""
    simulator_command, airflow_script = quickstart_blocks()
    assert simulator_command.startswith("python -m airflow_provider_loadtest.simulator")
    port = _free_port()
    home.mkdir(exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AIRFLOW", "LOADTEST_")) and key != "PYTHONPATH"
    }
    env.update(HOME=str(home), PATH=f"{bin_dir}:{env.get('PATH', '')}")
    simulator = subprocess.Popen(
        [BASH, "-c", simulator_command.replace(PORT, port)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda: (
                lines.extend(simulator.stdout.readline() for _ in range(4)) if simulator.stdout else None
            ),
            daemon=True,
        )
        reader.start()
        reader.join(60)
        printed = [line.strip() for line in lines]
        # The line the simulator prints is the line the README pastes.
        pasted = next(line for line in airflow_script.splitlines() if line.startswith("export AIRFLOW_CONN_"))
        assert pasted.replace(PORT, port) in printed, printed
        done = subprocess.run(
            [BASH, "-e", "-c", airflow_script.replace(PORT, port)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=540,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-6000:]
        assert re.search(r"state=success|DagRun Finished.*success|Marking run .* successful", output), output[
            -6000:
        ]
        assert (home / "airflow" / "dags" / "loadtest_nightly.py").exists()
    finally:
        import signal

        os.killpg(simulator.pid, signal.SIGTERM)
        simulator.wait(20)
        if simulator.stdout:
            simulator.stdout.close()
