"""The connection form and the report link, proven in a real browser (``make browser``).

Starts Airflow's api-server on 127.0.0.1 in a throwaway home (simple auth manager, everyone admin)
with the simulator beside it, and drives Debian's ``chromium`` headless through Playwright:

1. add a ``loadtest`` connection through the form (our labels, no raw extra JSON needed);
2. press the list's Test button: with the good key the success text; with a wrong key the 401 text,
   and the key nowhere on the page;
3. run an example DAG in that home (``airflow dags test``, with the connection the form stored) and
   open the task's "Load test report" link: it must open the simulator's report page of that run;
4. run the release-gate example (``baseline="history"``) over six nights after a season of history
   (``GATE_NIGHTS``: two nights judged noise against the history, a suspected one, a regression, a night
   whose change a person accepts, and a night judged against the history that restarted from it), and
   open the DAG's "Load tests" tab (the provider's plugin): its charts and table must show those nights
   (values and statuses as the task left them in XCom, verdicts, the history's centre and noise band,
   the accepted change), a point's link must open the task instance, the report links must answer, the
   task's own tab must work, in the light and the dark theme, without a console error or a Content
   Security Policy violation;
5. on the task's tab, set a night beside another (issue 35): by default the newest night beside the
   accepted one; a table's "as reference" link picks the first night instead, and the comparison shows
   p95 on both nights as the gate left it in XCom, the change, and the changes largest beyond the noise
   first (``load-tests-compare.png``);
6. open the plugin's own page in Airflow's navigation (every gate at a glance): the release gate's
   line must carry its last night's verdict and a trend, and its link must open the DAG's tab.

Screenshots go to ``docs/screenshots/`` (committed: the README and docs/ show them; ``make browser``
rewrites them), or to ``$LOADTEST_SCREENSHOTS`` (the test suite's temporary folder). Exit code 0: all
checks passed; 1: a check failed; 77: skipped because no chromium can be installed here (the pytest
wrapper reports it as a skip). Every wait is bounded and every process started here is stopped at the
end.
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from devtools.demo import GATE_BOUNDS, earlier_season
from devtools.local_airflow import AIRFLOW, AirflowHome

if TYPE_CHECKING:
    from playwright.sync_api import FrameLocator, Locator, Page, Route, ViewportSize

ROOT = Path(__file__).resolve().parents[1]
#: Where the screenshots go: the committed ``docs/screenshots/`` for ``make browser``; the test suite
#: points ``LOADTEST_SCREENSHOTS`` at a temporary folder, so a test run never rewrites tracked files.
SCREENSHOTS = Path(os.environ.get("LOADTEST_SCREENSHOTS") or ROOT / "docs" / "screenshots")
CHROMIUM = "/usr/bin/chromium"
SKIPPED = 77
CONN_ID = "loadtest_default"
DAG_ID = "loadtest_nightly"
TASK_ID = "run_load_test"
GATE_DAG_ID = "loadtest_release_gate"
P95 = "RESPONSE_TIME_PERCENTILE_95"
AVG = "RESPONSE_TIME_AVG"


@dataclass(frozen=True)
class GateNight:
    """One night of the release gate in this check, and what the gate and the view must make of it."""

    day: str
    #: The night's average response time before its run's noise, in ms.
    average_ms: float
    #: The status the gate must give the metrics it bounds (p95 and the average).
    status: str
    #: The night's verdict in the view's table.
    verdict: str
    #: Triggered with the DAG-run conf ``{"loadtest_accept_change": true}``.
    accept: bool = False


#: The release candidate of this check's simulator seed (the default seed plus it): one scenario, since
#: the gate remembers per scenario, whose runs are the same load at three levels, with 4 % of run-to-run
#: noise. Against the season's history (its usual speed, ``USUAL_MS``), 4 % of noise puts the one-night
#: noise band at about +-14 % and the suspicion threshold at about +9 %: a night 12 % slower is beyond
#: the 10 % bound and the suspicion but within the noise band, one 30 % slower a regression.
GATE_SCENARIO = "release-candidate"
USUAL_MS, SUSPECT_MS, SLOWER_MS = 300.0, 348.0, 390.0  # average response time
GATE_NOISE_PCT = 4.0
#: The DAG run on which the season of history stands in for the weeks before the first night.
SEASON_DATE = "2026-02-28"
GATE_NIGHTS = (
    GateNight("2026-03-01", USUAL_MS, "noise", "pass"),
    GateNight("2026-03-02", USUAL_MS, "noise", "pass"),
    GateNight("2026-03-03", SUSPECT_MS, "suspected", "suspected"),
    GateNight("2026-03-04", SLOWER_MS, "regression", "fail"),
    GateNight("2026-03-05", SLOWER_MS, "pass", "pass", accept=True),
    # The history restarted from the accepted night: one night of it, judged by the bound alone.
    GateNight("2026-03-06", SLOWER_MS, "pass", "pass"),
)
WRONG_KEY = "wrong-key-0f3c9a7e41"
API_SERVER_START_S = 180.0
VIEW_VIEWPORT: ViewportSize = {"width": 1440, "height": 1320}
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
def api_server(home: AirflowHome, log_path: Path, port: int | None = None) -> Iterator[str]:
    """Airflow's api-server on 127.0.0.1 (``port``, or a free one) for the ``with`` block; its whole
    process group ends after."""
    port = port or free_port()
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
    say(f"screenshot {path}")


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


def gate_seed() -> dict[str, Any]:
    """The simulator's default seed plus ``GATE_SCENARIO`` (in its demo project, where the release gate's
    template is). Its n-th run is slower than its usual speed by ``busyRuns``, chosen so that each night
    measures what a scenario of that night's speed would on its own count of runs (a run's noise is
    drawn by its number): the same figures in every check, the n-th night of each speed as before."""
    from airflow_provider_loadtest.simulator.figures import run_noise
    from airflow_provider_loadtest.simulator.seed import load_seed

    seed = load_seed(None).model_dump(by_alias=True, mode="json")
    busy, counts = {}, dict.fromkeys({n.average_ms for n in GATE_NIGHTS}, 0)
    for number, night in enumerate(GATE_NIGHTS, start=1):
        counts[night.average_ms] += 1
        wanted = night.average_ms * run_noise(GATE_NOISE_PCT, counts[night.average_ms])
        busy[str(number)] = wanted / (USUAL_MS * run_noise(GATE_NOISE_PCT, number)) - 1
    seed["scenarios"].append(
        {
            "id": GATE_SCENARIO,
            "projectId": "demo-project",
            "name": "Release candidate",
            "metrics": {"avgResponseTimeMs": USUAL_MS, "noisePct": GATE_NOISE_PCT},
            "busyRuns": {run: share for run, share in busy.items() if abs(share) > 1e-12},
        }
    )
    return seed


def run_gate_nights(home: AirflowHome) -> list[dict[str, Any]]:
    """Leave a season of history (the demo's: ``earlier_season``, ``leave_xcom``), then run the release
    gate once per night of ``GATE_NIGHTS``, checking the verdict and the statuses the gate gave; each
    night's run id, XCom result and the history it left, newest first (as the view lists them)."""
    from airflow_provider_loadtest.decisions.history import ACCEPT_CHANGE, HISTORY_XCOM_KEY

    say(f"release gate: a season of history on {SEASON_DATE} ({GATE_SCENARIO} at its usual speed)")
    season = earlier_season(GATE_SCENARIO, GATE_BOUNDS, seed=gate_seed())
    left = home.leave_xcom(GATE_DAG_ID, TASK_ID, HISTORY_XCOM_KEY, season, SEASON_DATE)
    if not left.succeeded:
        raise CheckFailed(f"the season of history was not left in XCom:\n{left.output[-3000:]}")
    nights = []
    for night in GATE_NIGHTS:
        say(
            f"release gate, night {night.day}: {GATE_SCENARIO} at {night.average_ms:.0f} ms"
            + (f" with {{{ACCEPT_CHANGE!r}: true}}" if night.accept else "")
            + f" (expected: {night.status}, {night.verdict})"
        )
        result = home.dags_test(
            GATE_DAG_ID,
            {"AIRFLOW_VAR_LOADTEST_RELEASE_GATE_SCENARIO_ID": GATE_SCENARIO},
            timeout=300,
            logical_date=night.day,
            conf={ACCEPT_CHANGE: True} if night.accept else None,
        )
        if result.succeeded != (night.verdict != "fail"):
            raise CheckFailed(f"night {night.day} ended with {result.returncode}:\n{result.output[-3000:]}")
        xcom = result.xcom(GATE_DAG_ID, TASK_ID)
        if not xcom or not xcom.get("gate"):
            raise CheckFailed(f"night {night.day} left no gate in XCom: {xcom!r}")
        judged = {row["status"] for row in xcom["gate"] if row["metric"] in GATE_BOUNDS}
        if judged != {night.status}:
            raise CheckFailed(f"night {night.day}: the gate judged {judged}, expected {night.status}")
        history = result.xcom(GATE_DAG_ID, TASK_ID, HISTORY_XCOM_KEY)
        nights.append(
            {
                "day": night.day,
                "status": night.status,
                "verdict": night.verdict,
                "accept": night.accept,
                "run_id": result.summary["run_id"],
                "xcom": xcom,
                "history": history,
            }
        )
    return nights[::-1]


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
    marks = _check_charts(view, nights)
    shot(page, "load-tests-dag")
    _check_links(page, ui, nights, marks)
    page.goto(f"{ui}/dags/{GATE_DAG_ID}/tasks/{TASK_ID}/plugin/load-tests-task")
    task_rows = page.frame_locator("iframe[title='Load tests']").locator("table.nights tbody tr")
    task_rows.nth(len(nights) - 1).wait_for(timeout=UI_TIMEOUT_MS)
    shot(page, "load-tests-task")
    check_comparison(page, nights)
    plugins = page.request.get(f"{ui}/api/v2/plugins").json()["plugins"]
    views = [v["href"] for p in plugins if p["name"] == "loadtest" for v in p["external_views"]]
    if views != ["/loadtest/dags/{DAG_ID}", "/loadtest/dags/{DAG_ID}/tasks/{TASK_ID}", "/loadtest/"]:
        raise CheckFailed(f"GET /api/v2/plugins lists the view's tabs as {views}")
    headers = page.request.get(f"{ui}/loadtest/dags/{GATE_DAG_ID}").headers
    if headers.get("cache-control") != "no-store" or "script-src 'self'" not in headers.get(
        "content-security-policy", ""
    ):
        raise CheckFailed(f"the view's answer lacks no-store or its CSP: {headers}")
    if errors:
        raise CheckFailed("console errors on the Load tests tabs:\n" + "\n".join(errors))


def check_comparison(page: Page, nights: list[dict[str, Any]]) -> None:
    """The task's tab compares the newest night with the accepted one by default; the oldest night's
    "as reference" link sets it beside the newest instead (the view's frame navigates, no script), and
    the p95 line shows both nights' values as in XCom, the change worse, the lines largest beyond the
    noise first."""
    from airflow_provider_loadtest.plugins.charts import number

    frame = page.frame_locator("iframe[title='Load tests']")
    newest, oldest = nights[0], nights[-1]
    accepted = next(n for n in nights if n["accept"])
    said = frame.locator("section.compare p").first.inner_text()
    if not said.startswith(newest["day"]) or f"beside {accepted['day']}" not in said:
        expected = f"{newest['day']} beside {accepted['day']}"
        raise CheckFailed(f"the default comparison says {said!r}, not {expected}")
    pick = frame.locator(f'table.nights tbody tr[data-run-id="{oldest["run_id"]}"] td.pick a')
    pick.filter(has_text="as reference").click()
    header = frame.locator("section.compare table.compared thead th.num").first
    header.filter(has_text=oldest["day"]).wait_for(timeout=UI_TIMEOUT_MS)
    line = frame.locator(f'section.compare tr[data-metric="{P95}"]:not([data-transaction])')
    cells = [c.inner_text().strip() for c in line.locator("td").all()]
    before, after = number(_row(oldest, P95)["value"]), number(_row(newest, P95)["value"])
    if cells[2:4] != [before, after] or line.get_attribute("data-verdict") != "worse":
        raise CheckFailed(f"the {P95} line reads {cells}, expected {before} beside {after}, worse")
    beyond = [c.inner_text() for c in frame.locator("section.compare td.beyond").all()]
    sizes = [abs(float(b.split()[0])) for b in beyond if b.endswith("sd")]
    if not sizes or sizes != sorted(sizes, reverse=True):
        raise CheckFailed(f"the comparison is not ordered by the change beyond the noise: {beyond}")
    shot(page, "load-tests-compare")
    say(
        f"the comparison set {newest['day']} beside {oldest['day']}: {P95} {before} -> {after} ms "
        f"({cells[7]} beyond the noise, {len(beyond)} series)"
    )


def check_overview(page: Page, ui: str, nights: list[dict[str, Any]]) -> None:
    """The plugin's page in Airflow's navigation (every gate at a glance): the release gate's line with
    its last night's verdict and its trend, and its link opening the DAG's Load tests tab."""
    errors: list[str] = []
    _watch_console(page, errors)
    page.set_viewport_size(VIEW_VIEWPORT)
    page.goto(f"{ui}/plugin/load-tests-overview")
    view = page.frame_locator("iframe[title='Load tests']")
    view.locator("main#loadtest-view").wait_for(timeout=UI_TIMEOUT_MS)
    line = view.locator(f"table.gates tbody tr[data-dag-id='{GATE_DAG_ID}'][data-task-id='{TASK_ID}']")
    try:
        line.wait_for(timeout=UI_TIMEOUT_MS)
    except Exception as exc:
        shown = view.locator("main#loadtest-view").inner_text()[:2000]
        raise CheckFailed(f"the overview shows no line of {GATE_DAG_ID}.{TASK_ID}:\n{shown}") from exc
    verdict = line.get_attribute("data-verdict")
    if verdict != nights[0]["verdict"]:
        raise CheckFailed(
            f"the overview gives {GATE_DAG_ID} the verdict {verdict!r}, not {nights[0]['verdict']!r}"
        )
    if line.locator("svg.spark.headline path.value").count() != 1:
        raise CheckFailed("the overview's line of the release gate draws no trend of its headline metric")
    shot(page, "load-tests-overview")
    line.locator(f"a[href='/dags/{GATE_DAG_ID}/plugin/load-tests']").click()
    page.wait_for_url(f"{ui}/dags/{GATE_DAG_ID}/plugin/load-tests**", timeout=UI_TIMEOUT_MS)
    say(f"the overview listed {GATE_DAG_ID} ({verdict}) and its link opened {page.url}")
    if errors:
        raise CheckFailed("console errors on the Load tests overview:\n" + "\n".join(errors))


def _row(night: dict[str, Any], metric: str, transaction: str | None = None) -> dict[str, Any]:
    """The night's gate row of ``metric`` (of all requests, or of ``transaction``) as in XCom."""
    return next(
        r for r in night["xcom"]["gate"] if r["metric"] == metric and r.get("transaction") == transaction
    )


def _check_table(page: Page, view: FrameLocator, nights: list[dict[str, Any]]) -> None:
    """One row per night, newest first: its run, verdict, day, p95 (value and status), report link and
    accepted change as in XCom."""
    from airflow_provider_loadtest.plugins.charts import number

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
        p95_cell = cells.nth(p95_column)
        shown = {
            "run": row.get_attribute("data-run-id"),
            "verdict": row.get_attribute("data-verdict"),
            "day": cells.nth(0).inner_text().strip(),
            "p95": p95_cell.inner_text().split()[0],
            "p95 status": (p95_cell.get_attribute("class") or "").split()[-1],
            "report": row.locator("a[rel~=noopener]").get_attribute("href"),
            "accepted": row.locator(".badge.accepted").count() == 1,
        }
        p95 = _row(night, P95)
        expected = {
            "run": night["run_id"],
            "verdict": night["verdict"],
            "day": night["day"],
            "p95": number(p95["value"]),  # as the view writes numbers: up to 4 significant digits
            "p95 status": p95["status"],
            "report": night["xcom"]["report_url"],
            "accepted": night["accept"],
        }
        if shown != expected:
            raise CheckFailed(f"night {night['day']}: the table shows {shown}, expected {expected}")


def _check_charts(view: FrameLocator, nights: list[dict[str, Any]]) -> dict[str, Locator]:
    """A chart per gated metric (and per transaction and metric, folded under the transaction, when
    the gate judged transactions). The p95 chart marks every night with its status and its value, the
    budget line, the history's centre and noise band as the gate computed them, the accepted change
    as a rule, and after it the restarted history's centre at the accepted night's value. Returns the
    failing night's point and the accepted change's rule."""
    from airflow_provider_loadtest.plugins.charts import number

    run_charts = view.locator("section.task > div.charts > figure.chart")
    metrics = [run_charts.nth(i).get_attribute("data-metric") for i in range(run_charts.count())]
    gated = [r["metric"] for r in nights[0]["xcom"]["gate"] if r.get("transaction") is None]
    if metrics != gated:
        raise CheckFailed(f"charts for {metrics}, expected one per gated metric {gated}")
    per_transaction = sorted(
        (r["transaction"], r["metric"]) for r in nights[0]["xcom"]["gate"] if r.get("transaction")
    )
    folded = view.locator("details.transaction figure.chart")
    shown = sorted(
        (folded.nth(i).get_attribute("data-transaction"), folded.nth(i).get_attribute("data-metric"))
        for i in range(folded.count())
    )
    if shown != per_transaction:
        raise CheckFailed(f"transaction charts for {shown}, expected {per_transaction}")

    p95_chart = view.locator(f"section.task > div.charts > figure.chart[data-metric={P95}]")
    marks = p95_chart.locator("a.mark")
    oldest_first = nights[::-1]
    if marks.count() != len(nights):
        raise CheckFailed(f"the {P95} chart marks {marks.count()} nights, expected {len(nights)}")
    for i, night in enumerate(oldest_first):
        row = _row(night, P95)
        status = (marks.nth(i).get_attribute("class") or "").split()[-1]
        title = marks.nth(i).locator("title").text_content() or ""
        expected = [f"{night['day']}: {number(row['value'])} ms", row["status"]]
        if row.get("band_low") is not None:
            expected.append(f"noise band {number(row['band_low'])} to {number(row['band_high'])}")
        if status != row["status"] or not all(part in title for part in expected):
            raise CheckFailed(
                f"the {P95} point of {night['day']} is {status!r} {title!r}, expected {expected}"
            )
    for drawn in ("budget", "band", "centre"):
        if not p95_chart.locator(f"path.{drawn}").get_attribute("d"):
            raise CheckFailed(f"the {P95} chart draws no {drawn}")
    accepted = p95_chart.locator("a.accepted")
    accepted_nights = [n for n in oldest_first if n["accept"]]
    if accepted.count() != len(accepted_nights):
        raise CheckFailed(f"the {P95} chart marks {accepted.count()} accepted changes")
    after = oldest_first[oldest_first.index(accepted_nights[0]) + 1]
    restarted = f"vs {number(_row(accepted_nights[0], P95)['value'])}"
    after_title = marks.nth(oldest_first.index(after)).locator("title").text_content() or ""
    if restarted not in after_title:
        raise CheckFailed(f"the night after the accepted change says {after_title!r}, not {restarted!r}")
    return {"failing": p95_chart.locator("a.mark.regression").first, "accepted": accepted.first}


def _check_links(page: Page, ui: str, nights: list[dict[str, Any]], marks: dict[str, Locator]) -> None:
    """Each report link answers with its report, and clicking one opens it in a new tab; the accepted
    change's rule links to that night's task instance (which passed); the failing point opens its task
    instance in Airflow's window (not inside the iframe: the UI's sandbox allows neither, the view's
    script follows the link from Airflow's document), and that task failed."""
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
    for kind, verdict, state in (("accepted", "pass", "success"), ("failing", "fail", "failed")):
        night = next(n for n in nights if (n["accept"] if kind == "accepted" else n["verdict"] == verdict))
        run_id = quote(night["run_id"], safe="")
        href = marks[kind].get_attribute("href") or ""
        expected_href = f"/dags/{GATE_DAG_ID}/runs/{run_id}/tasks/{TASK_ID}"
        if href != expected_href:
            raise CheckFailed(f"the {kind} night's mark links to {href!r}, expected {expected_href!r}")
        api = page.request.get(f"{ui}/api/v2/dags/{GATE_DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK_ID}")
        if not api.ok or api.json().get("state") != state:
            raise CheckFailed(f"the task instance {href} answered {api.status}: {api.text()[:300]}")
    failing = marks["failing"]
    failing.click()
    bad = quote(next(n for n in nights if n["verdict"] == "fail")["run_id"], safe="")
    page.wait_for_url(f"{ui}/dags/{GATE_DAG_ID}/runs/{bad}/tasks/{TASK_ID}**", timeout=UI_TIMEOUT_MS)
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
            run_simulator(gate_seed(), run_seconds=3.0) as sim,
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
                check_overview(page, ui, nights)
                check_dark_theme(browser, ui, len(nights))
                statuses = ", ".join(n["status"] for n in nights[::-1])
                say(f"the Load tests tab showed the {len(nights)} nights of {GATE_DAG_ID} ({statuses})")
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
