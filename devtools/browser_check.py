"""The connection form and the report link, proven in a real browser (``make browser``).

Starts Airflow's api-server on 127.0.0.1 in a throwaway home (simple auth manager, everyone admin)
with the simulator beside it, and drives Debian's ``chromium`` headless through Playwright:

1. add a ``loadtest`` connection through the form (our labels, no raw extra JSON needed);
2. press the list's Test button: with the good key the success text; with a wrong key the 401 text,
   and the key nowhere on the page;
3. run an example DAG in that home (``airflow dags test``, with the connection the form stored) and
   open the task's "Load test report" link: it must open the simulator's report page of that run.

Screenshots go to ``docs/screenshots/`` (gitignored: regenerated on every run, referenced by
docs/connection.md). Exit code 0: all checks passed; 1: a check failed; 77: skipped because no
chromium can be installed here (the pytest wrapper reports it as a skip). Every wait is bounded and
every process started here is stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.local_airflow import AIRFLOW, AirflowHome

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
SKIPPED = 77
CONN_ID = "loadtest_default"
DAG_ID = "loadtest_nightly"
TASK_ID = "run_load_test"
WRONG_KEY = "wrong-key-0f3c9a7e41"
API_SERVER_START_S = 180.0
UI_TIMEOUT_MS = 30_000


class CheckFailed(AssertionError):
    """One of the browser check's expectations did not hold."""


def say(message: str) -> None:
    print(f"[browser-check] {message}", flush=True)


def ensure_chromium() -> str | None:
    """Debian's chromium, installed with apt-get when missing (root only); ``None`` if impossible."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        say("chromium is missing and cannot be installed here (needs apt-get as root)")
        return None
    say("installing Debian's chromium (apt-get update && apt-get install -y chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "chromium"]):
        try:
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
        except subprocess.TimeoutExpired:
            say(f"{' '.join(argv)} took more than 900 s")
            return None
        if done.returncode != 0:
            say(f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}")
            return None
    return CHROMIUM if Path(CHROMIUM).exists() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def api_server(home: AirflowHome, log_path: Path) -> Iterator[str]:
    """Airflow's api-server on 127.0.0.1 for the ``with`` block; its whole process group ends after."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = home.env(
        {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
            "AIRFLOW__API__BASE_URL": url,
        }
    )
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its workers share the group: one signal ends them all
        )
        try:
            deadline = time.monotonic() + API_SERVER_START_S
            while True:
                if process.poll() is not None:
                    raise CheckFailed(f"the api-server exited with {process.returncode}; see {log_path}")
                try:
                    with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        raise CheckFailed(
                            f"the api-server did not answer within {API_SERVER_START_S:g} s"
                        ) from None
                    time.sleep(0.5)
            yield url
        finally:
            _stop_group(process)


def _stop_group(process: subprocess.Popen[Any]) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def shot(page: Page, name: str) -> None:
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    say(f"screenshot {path.relative_to(ROOT)}")


def add_connection(page: Page, ui: str, sim_url: str, api_key: str) -> None:
    """Fill Airflow's Add Connection form as a person would, with our labels."""
    page.goto(f"{ui}/connections")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    dialog.locator("input[name=connection_id]").fill(CONN_ID)
    dialog.get_by_role("combobox").fill("Load Testing Service")
    page.keyboard.press("Enter")
    dialog.locator("input[name=host]").wait_for()
    dialog.locator("input[name=host]").fill(sim_url)
    dialog.locator("input[name=password]").fill(api_key)
    dialog.get_by_role("button", name="Extra Fields", exact=True).click()
    dialog.locator("input[name=element_ui_url]").wait_for()
    shot(page, "connection-form")
    dialog.get_by_role("button", name="Save").click()
    page.get_by_role("cell", name=CONN_ID, exact=True).wait_for()
    shot(page, "connection-list")


def set_key(page: Page, api_key: str) -> None:
    """Edit the connection's API key through the form."""
    page.get_by_role("button", name="Edit Connection").first.click()
    dialog = page.get_by_role("dialog")
    dialog.locator("input[name=password]").fill(api_key)
    dialog.get_by_role("button", name="Save").click()
    dialog.wait_for(state="hidden")


def press_test(page: Page, expect: str, screenshot: str) -> str:
    """Press the list's Test button and return the toast's text once it shows ``expect``."""
    page.get_by_role("button", name="Test Connection").first.click()
    toast = page.get_by_text(expect).first
    try:
        toast.wait_for(timeout=UI_TIMEOUT_MS)
    except Exception as exc:
        shot(page, screenshot + "-unexpected")
        raise CheckFailed(
            f"no {expect!r} after pressing Test: {page.locator('body').inner_text()[-400:]}"
        ) from exc
    shot(page, screenshot)
    text = toast.inner_text()
    page.get_by_text(expect).first.wait_for(state="hidden", timeout=UI_TIMEOUT_MS)  # toasts fade
    return text


def send_the_stored_port(page: Page) -> None:
    """Work around apache/airflow#73298 (3.3.2): for a connection without a port the list's Test button
    sends ``"port": 0``, which differs from the stored (empty) port, so the API answers 400 "The host
    or port to test differs from the stored connection" ("Bad Request" in the toast). Upstream's fix
    sends the stored port; we do the same to the request, and change nothing else in it."""

    def stored_port(route: Route) -> None:
        body = json.loads(route.request.post_data or "{}")
        if body.get("port") == 0:
            body["port"] = None
        route.continue_(post_data=json.dumps(body))

    page.route("**/api/v2/connections/test", stored_port)


def shot_bad_request(page: Page) -> None:
    """What a user of Airflow 3.3.2 sees without the workaround (kept for the docs)."""
    press_test(page, "Bad Request", "connection-test-airflow-3.3.2-bug")


def run_dag(home: AirflowHome) -> str:
    """Run the example DAG with the connection the form stored; return the DAG run's id."""
    say(f"running {DAG_ID} with `airflow dags test` (the connection comes from the form)")
    result = home.dags_test(DAG_ID, {}, timeout=300)
    if not result.succeeded:
        raise CheckFailed(f"airflow dags test {DAG_ID} failed:\n{result.output[-3000:]}")
    found = re.search(r"DagRun Finished: dag_id=\S+, logical_date=[^,]*, run_id=([^,\s]+)", result.output)
    if found is None:
        raise CheckFailed("airflow dags test printed no 'DagRun Finished' line with the run id")
    return found.group(1)


def open_report_link(page: Page, ui: str, run_id: str, sim_url: str, report_ids: list[str]) -> str:
    """Open the task's "Load test report" link (the task's Details tab lists extra links); check it
    opens the report of the run the task started, on the simulator; return the opened URL."""
    page.goto(f"{ui}/dags/{DAG_ID}/runs/{run_id}/tasks/{TASK_ID}/details")
    link = page.get_by_role("link", name="Load test report").or_(
        page.get_by_role("button", name="Load test report")
    )
    try:
        link.first.wait_for(timeout=UI_TIMEOUT_MS)
    finally:
        shot(page, "task-report-link")
    with page.context.expect_page(timeout=UI_TIMEOUT_MS) as opened:
        link.first.click()
    report = opened.value
    report.wait_for_load_state(timeout=UI_TIMEOUT_MS)
    expected = [
        f"{sim_url}/ui/workspace/demo-workspace/project/demo-project/analysis/report/{r}" for r in report_ids
    ]
    if report.url not in expected:
        raise CheckFailed(f"the report link opened {report.url}, expected one of {expected}")
    shot(report, "report-page")
    answer = page.request.get(report.url)
    if not answer.ok or not any(r in report.content() for r in report_ids):
        raise CheckFailed(f"the simulator's report page answered {answer.status} without the report id")
    return report.url


def check(browser_path: str) -> None:
    from playwright.sync_api import sync_playwright

    from airflow_provider_loadtest.simulator import run_simulator

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="loadtest-browser-check-"))
    try:
        say("migrating a throwaway Airflow home")
        home = AirflowHome(work / "home", [ROOT / "example_dags"])
        with (
            run_simulator(run_seconds=3.0) as sim,
            api_server(home, work / "api-server.log") as ui,
            sync_playwright() as playwright,
        ):
            say(f"api-server at {ui}, simulator at {sim.url}")
            browser = playwright.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.set_default_timeout(UI_TIMEOUT_MS)
                add_connection(page, ui, sim.url, sim.api_key)
                shot_bad_request(page)
                send_the_stored_port(page)
                ok = press_test(page, "Connected to", "connection-test-ok")
                say(f"Test with the good key: {ok!r}")

                set_key(page, WRONG_KEY)
                refused = press_test(page, "401", "connection-test-wrong-key")
                say(f"Test with a wrong key: {refused!r}")
                if WRONG_KEY in page.content():
                    raise CheckFailed("the wrong API key appears in the page")
                set_key(page, sim.api_key)

                run_id = run_dag(home)
                report_ids = [run.report_id for run in sim.runs()]
                url = open_report_link(page, ui, run_id, sim.url, report_ids)
                say(f"the 'Load test report' link opened {url}")
            finally:
                browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    try:
        import playwright  # noqa: F401
    except ImportError:
        say("the playwright package is missing: run `make venv` (it is in the test dependencies)")
        return 1
    browser_path = ensure_chromium()
    if browser_path is None:
        say("SKIPPED: no chromium on this machine and it cannot be installed")
        return SKIPPED
    try:
        check(browser_path)
    except Exception as exc:  # a Playwright timeout is as much a failure as a wrong text
        say(f"FAILED: {type(exc).__name__}: {exc}")
        return 1
    say("all browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
