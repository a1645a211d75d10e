"""The connection form and the report link, proven in a real browser (``make browser``).

Starts Airflow's api-server on 127.0.0.1 in a throwaway home (simple auth manager, everyone admin)
with the simulator beside it, and drives Debian's ``chromium`` headless through Playwright:

1. add a ``loadtest`` connection through the form (our labels, no raw extra JSON needed);
2. press the list's Test button: with the good key the success text; with a wrong key the 401 text,
   and the key nowhere on the page;
3. run an example DAG in that home (``airflow dags test``, with the connection the form stored) and
   open the task's "Load test report" link: it must open the simulator's report page of that run;
4. run the release-gate example over several nights (clean nights, a regression, clean again) and open
   the DAG's "Load tests" tab (the provider's plugin): its charts and table must show those nights
   (values as the task left them in XCom, verdicts), a point's link must open the task instance, the
   report links must answer, the task's own tab must work, in the light and the dark theme, without a
   console error or a Content Security Policy violation.

Screenshots go to ``docs/screenshots/`` (committed: the README and docs/ show them; every run rewrites
them). Exit code 0: all checks passed; 1: a check failed; 77: skipped because no
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
from urllib.parse import quote

from devtools.local_airflow import AIRFLOW, AirflowHome

if TYPE_CHECKING:
    from playwright.sync_api import FrameLocator, Locator, Page, Route, ViewportSize

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
SKIPPED = 77
CONN_ID = "loadtest_default"
DAG_ID = "loadtest_nightly"
TASK_ID = "run_load_test"
GATE_DAG_ID = "loadtest_release_gate"
P95 = "RESPONSE_TIME_PERCENTILE_95"
#: The release gate's nights: (logical date, scenario, expected verdict). ``slower-scenario``'s first
#: run is 67 % slower than ``demo-scenario``: over the 10 % regression bound, under the budget.
GATE_NIGHTS = (
    ("2026-03-01", "demo-scenario", "pass"),
    ("2026-03-02", "demo-scenario", "pass"),
    ("2026-03-03", "slower-scenario", "fail"),
    ("2026-03-04", "demo-scenario", "pass"),
    ("2026-03-05", "demo-scenario", "pass"),
)
WRONG_KEY = "wrong-key-0f3c9a7e41"
API_SERVER_START_S = 180.0
VIEW_VIEWPORT: ViewportSize = {"width": 1280, "height": 1180}
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


def run_gate_nights(home: AirflowHome) -> list[dict[str, Any]]:
    """Run the release gate once per night of ``GATE_NIGHTS``; each night's run id and XCom result."""
    nights = []
    for day, scenario, verdict in GATE_NIGHTS:
        say(f"release gate, night {day}: {scenario} (expected: {verdict})")
        result = home.dags_test(
            GATE_DAG_ID, {"AIRFLOW_VAR_LOADTEST_SCENARIO_ID": scenario}, timeout=300, logical_date=day
        )
        if result.succeeded != (verdict == "pass"):
            raise CheckFailed(f"night {day} ended with {result.returncode}:\n{result.output[-3000:]}")
        xcom = result.xcom(GATE_DAG_ID, TASK_ID)
        if not xcom or not xcom.get("gate"):
            raise CheckFailed(f"night {day} left no gate in XCom: {xcom!r}")
        nights.append({"day": day, "verdict": verdict, "run_id": result.summary["run_id"], "xcom": xcom})
    return nights[::-1]  # newest first, as the view lists them


def _watch_console(page: Page, errors: list[str]) -> None:
    """Collect console errors and uncaught exceptions of the page and its frames (the view's iframe)."""
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))


def check_load_tests_view(page: Page, ui: str, nights: list[dict[str, Any]]) -> None:
    """The DAG's "Load tests" tab shows the nights as the gate left them, with links that resolve;
    then the task's own tab. No console error on the way (CSP violations are console errors)."""
    errors: list[str] = []
    _watch_console(page, errors)
    page.set_viewport_size(VIEW_VIEWPORT)  # the charts and the table in one screenshot
    page.goto(f"{ui}/dags/{GATE_DAG_ID}/plugin/load-tests")
    view = page.frame_locator("iframe[title='Load tests']")
    _check_table(page, view, nights)
    failing = _check_charts(view, nights)
    shot(page, "load-tests-dag")
    _check_links(page, ui, nights, failing)
    page.goto(f"{ui}/dags/{GATE_DAG_ID}/tasks/{TASK_ID}/plugin/load-tests-task")
    task_rows = page.frame_locator("iframe[title='Load tests']").locator("table.nights tbody tr")
    task_rows.nth(len(nights) - 1).wait_for(timeout=UI_TIMEOUT_MS)
    shot(page, "load-tests-task")
    plugins = page.request.get(f"{ui}/api/v2/plugins").json()["plugins"]
    views = [v["href"] for p in plugins if p["name"] == "loadtest" for v in p["external_views"]]
    if views != ["/loadtest/dags/{DAG_ID}", "/loadtest/dags/{DAG_ID}/tasks/{TASK_ID}"]:
        raise CheckFailed(f"GET /api/v2/plugins lists the view's tabs as {views}")
    headers = page.request.get(f"{ui}/loadtest/dags/{GATE_DAG_ID}").headers
    if headers.get("cache-control") != "no-store" or "script-src 'self'" not in headers.get(
        "content-security-policy", ""
    ):
        raise CheckFailed(f"the view's answer lacks no-store or its CSP: {headers}")
    if errors:
        raise CheckFailed("console errors on the Load tests tabs:\n" + "\n".join(errors))


def _check_table(page: Page, view: FrameLocator, nights: list[dict[str, Any]]) -> None:
    """One row per night, newest first: its run, verdict, day, p95 and report link as in XCom."""
    rows = view.locator("table.nights tbody tr")
    try:
        rows.nth(len(nights) - 1).wait_for(timeout=UI_TIMEOUT_MS)
    except Exception as exc:
        shot(page, "load-tests-unexpected")
        raise CheckFailed(f"the Load tests tab shows no table of {len(nights)} nights") from exc
    if rows.count() != len(nights):
        raise CheckFailed(f"the table lists {rows.count()} nights, expected {len(nights)}")
    p95_column = [h.get_attribute("title") for h in view.locator("table.nights th").all()].index(P95)
    for i, night in enumerate(nights):
        row = rows.nth(i)
        cells = row.locator("td")
        shown = {
            "run": row.get_attribute("data-run-id"),
            "verdict": row.get_attribute("data-verdict"),
            "day": cells.nth(0).inner_text().strip(),
            "p95": float(cells.nth(p95_column).inner_text().split()[0]),
            "report": row.locator("a[rel~=noopener]").get_attribute("href"),
        }
        p95 = next(r["value"] for r in night["xcom"]["gate"] if r["metric"] == P95)
        if abs(shown["p95"] - p95) <= abs(p95) * 1e-3:  # the table shows 4 significant digits
            shown["p95"] = p95
        expected = {
            "run": night["run_id"],
            "verdict": night["verdict"],
            "day": night["day"],
            "p95": p95,
            "report": night["xcom"]["report_url"],
        }
        if shown != expected:
            raise CheckFailed(f"night {night['day']}: the table shows {shown}, expected {expected}")


def _check_charts(view: FrameLocator, nights: list[dict[str, Any]]) -> Locator:
    """A chart per gated metric; the p95 chart marks every night, the failing one as a regression,
    with its budget line and regression limit. Returns the failing night's point."""
    charts = view.locator("figure.chart")
    metrics = [charts.nth(i).get_attribute("data-metric") for i in range(charts.count())]
    gated = [r["metric"] for r in nights[0]["xcom"]["gate"]]
    if sorted(m for m in metrics if m) != sorted(gated):
        raise CheckFailed(f"charts for {metrics}, expected one per gated metric {gated}")
    p95_chart = view.locator(f"figure.chart[data-metric={P95}]")
    marks = p95_chart.locator("a.mark")
    failing = p95_chart.locator("a.mark.regression")
    if marks.count() != len(nights) or failing.count() != 1:
        raise CheckFailed(f"the {P95} chart marks {marks.count()} nights ({failing.count()} failing)")
    if p95_chart.locator("path.budget").count() != 1 or p95_chart.locator("path.limit").count() != 1:
        raise CheckFailed(f"the {P95} chart draws no budget line or no regression limit")
    return failing.first


def _check_links(page: Page, ui: str, nights: list[dict[str, Any]], failing: Locator) -> None:
    """Each report link answers with its report, and clicking one opens it in a new tab; the failing
    point opens its task instance in Airflow's window (not inside the iframe: the UI's sandbox allows
    neither, the view's script follows the link from Airflow's document), and that task failed."""
    for night in nights:
        answer = page.request.get(night["xcom"]["report_url"])
        if not answer.ok or night["xcom"]["report_id"] not in answer.text():
            raise CheckFailed(f"the report link of {night['day']} answered {answer.status}")
    report_link = page.frame_locator("iframe[title='Load tests']").locator("table.nights a[rel~=noopener]")
    with page.context.expect_page(timeout=UI_TIMEOUT_MS) as opened:
        report_link.first.click()
    report = opened.value
    report.wait_for_load_state(timeout=UI_TIMEOUT_MS)
    if report.url != nights[0]["xcom"]["report_url"]:
        raise CheckFailed(f"the newest night's report link opened {report.url}")
    report.close()
    bad = quote(next(n for n in nights if n["verdict"] == "fail")["run_id"], safe="")
    href = failing.get_attribute("href") or ""
    expected_href = f"/dags/{GATE_DAG_ID}/runs/{bad}/tasks/{TASK_ID}"
    if href != expected_href:
        raise CheckFailed(f"the failing point links to {href!r}, expected {expected_href!r}")
    failing.click()
    page.wait_for_url(f"{ui}{expected_href}**", timeout=UI_TIMEOUT_MS)
    api = page.request.get(f"{ui}/api/v2/dags/{GATE_DAG_ID}/dagRuns/{bad}/taskInstances/{TASK_ID}")
    if not api.ok or api.json().get("state") != "failed":
        raise CheckFailed(f"the task instance the point links to answered {api.status}: {api.text()[:300]}")
    say(f"the failing night's point opened {page.url}")


def check_dark_theme(browser: Any, ui: str, nights: int) -> None:
    """In Airflow's dark theme the view follows (its html gets data-theme=dark), without errors."""
    context = browser.new_context(viewport=VIEW_VIEWPORT, color_scheme="dark")
    try:
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        errors: list[str] = []
        _watch_console(page, errors)
        page.goto(f"{ui}/dags/{GATE_DAG_ID}/plugin/load-tests")
        frame = page.frame_locator("iframe[title='Load tests']")
        frame.locator("table.nights tbody tr").nth(nights - 1).wait_for()
        frame.locator("html[data-theme=dark]").wait_for(state="attached")
        shot(page, "load-tests-dag-dark")
        if errors:
            raise CheckFailed("console errors on the Load tests tab (dark):\n" + "\n".join(errors))
    finally:
        context.close()


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

                nights = run_gate_nights(home)
                check_load_tests_view(page, ui, nights)
                check_dark_theme(browser, ui, len(nights))
                say(f"the Load tests tab showed the {len(nights)} nights of {GATE_DAG_ID}")
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
