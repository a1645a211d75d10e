"""The deferrable TemplateSensor and DownloadReportOperator in a real Airflow against the simulator.

One ``airflow dags test`` covers both paths: the sensor finds nothing on its worker, defers, and its
trigger finds the template once it appears; the print task is awaited in the triggerer and the worker
downloads the PDF.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from devtools.local_airflow import AirflowHome, connection_env

pytestmark = pytest.mark.integration

DAG_ID = "loadtest_e2e_deferred_waits"
ROOT = Path(__file__).resolve().parents[2]
LATE = "Late template"


@pytest.fixture
def sim() -> Iterator[SimulatorHandle]:
    with run_simulator(run_seconds=2.0) as handle:
        yield handle


def _add_template_after_first_look(sim: SimulatorHandle, stop: threading.Event) -> None:
    """Once the sensor has listed the templates (and not found it), the template appears."""
    deadline = time.monotonic() + 120
    while not stop.is_set() and time.monotonic() < deadline:
        if any(r.route == "list_templates" for r in sim.requests):
            base = next(t for t in sim.state.seed.templates if t["workspaceId"] == "demo-workspace")
            sim.state.seed.templates.append({**base, "id": "late-template", "name": LATE})
            return
        stop.wait(0.05)


def test_sensor_and_pdf_wait_in_the_triggerer(tmp_path: Path, sim: SimulatorHandle) -> None:
    home = AirflowHome(tmp_path / "home", [ROOT / "tests" / "integration" / "dags"])
    pdf = tmp_path / "report.pdf"
    stop = threading.Event()
    watcher = threading.Thread(target=_add_template_after_first_look, args=(sim, stop), daemon=True)
    watcher.start()
    try:
        env = {
            **connection_env(sim.url, sim.api_key),
            "LOADTEST_E2E_TEMPLATE": LATE,
            "LOADTEST_E2E_PDF": str(pdf),
        }
        result = home.dags_test(DAG_ID, env)
    finally:
        stop.set()
        watcher.join(timeout=5)
    assert result.succeeded, result.output[-6000:]
    assert result.xcom(DAG_ID, "wait_for_template") == "late-template"
    assert len([r for r in sim.requests if r.route == "list_templates"]) >= 2  # worker, then trigger
    (start,) = sim.starts()
    assert start.query["templateId"] == "late-template"  # the run used what the trigger found
    assert pdf.read_bytes().startswith(b"%PDF-")
    assert result.xcom(DAG_ID, "save_report_pdf")["size"] == pdf.stat().st_size
    assert "Deferring: the triggerer checks every" in result.output
    assert "Deferring: the triggerer waits for the PDF" in result.output
