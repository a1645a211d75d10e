"""``make test`` runs the real-browser check (devtools/browser_check.py) as a subprocess.

Skipped only when no chromium exists and none can be installed (exit code 77), or when
``LOADTEST_NO_SYSTEM_INSTALLS=1`` forbids installing it: the reason says so. Under ``CI=true`` that skip
is a failure (``tests.system_installs``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.browser_check import CHROMIUM, P95, SKIPPED
from tests.system_installs import NO_SYSTEM_INSTALLS, skip_or_fail, system_installs_refused

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_connection_form_report_link_and_load_tests_view_in_a_real_browser(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists() and system_installs_refused():
        skip_or_fail(
            f"browser check skipped: chromium is missing and {NO_SYSTEM_INSTALLS}=1 forbids installing it"
        )
    done = subprocess.run(
        [sys.executable, "-m", "devtools.browser_check"],
        cwd=ROOT,
        env={**os.environ, "LOADTEST_SCREENSHOTS": str(tmp_path)},  # never the committed ones
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    if done.returncode == SKIPPED:
        skip_or_fail(
            "browser check skipped: chromium is missing and cannot be installed here\n" + output[-800:]
        )
    assert done.returncode == 0, output[-6000:]
    assert "Connected to http://127.0.0.1:" in output
    assert "HTTP 401" in output
    assert {p.name for p in tmp_path.glob("*.png")} >= {
        "connection-form.png",
        "load-tests-task.png",
        "load-tests-overview.png",
        "load-tests-compare.png",
    }
    assert "the 'Load test report' link opened http://127.0.0.1:" in output
    assert "the failing night's point opened http://127.0.0.1:" in output
    assert "the overview listed loadtest_release_gate (pass) and its link opened http://127.0.0.1:" in output
    assert f"the comparison set 2026-03-06 beside 2026-03-01: {P95}" in output
    assert (
        "the Load tests tab showed the 6 nights of loadtest_release_gate "
        "(noise, noise, suspected, regression, pass, pass)" in output
    )
