"""The report example DAG in a real Airflow against the simulator: a PDF a reader opens, and the files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from pypdf import PdfReader

from airflow_provider_loadtest.simulator import SimulatorHandle, run_simulator
from devtools.local_airflow import AirflowHome, connection_env

pytestmark = pytest.mark.integration

DAG_ID = "loadtest_nightly_report"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    return AirflowHome(tmp_path_factory.mktemp("airflow-home"), [ROOT / "example_dags"])


@pytest.fixture
def sim() -> Iterator[SimulatorHandle]:
    with run_simulator(run_seconds=3.0) as handle:
        yield handle


@pytest.mark.parametrize("shape", ["legacy", "envelope"])
def test_report_dag_delivers_a_readable_pdf_and_the_run_files(
    airflow_home: AirflowHome, sim: SimulatorHandle, tmp_path: Path, shape: str
) -> None:
    # Older servers answer an empty body while the PDF renders; 17.1.0+ a status envelope.
    sim.state.settings = sim.state.settings.model_copy(
        update={"task_result_shape": shape, "task_pending_polls": 1}
    )
    env = {**connection_env(sim.url, sim.api_key), "AIRFLOW_VAR_LOADTEST_REPORT_ROOT": str(tmp_path)}
    result = airflow_home.dags_test(DAG_ID, env)
    assert result.succeeded, result.output[-6000:]

    run = result.xcom(DAG_ID, "run_load_test")
    night = Path(run["junit"]["path"]).parent
    assert night.parent == tmp_path  # one folder per night, named after the logical date

    saved = result.xcom(DAG_ID, "save_report_pdf")
    pdf = Path(saved["path"])
    assert pdf == night / "load-test-report.pdf"
    assert pdf.stat().st_size == saved["size"] > 0
    reader = PdfReader(pdf)
    assert len(reader.pages) >= 1
    assert run["report_id"] in "".join(page.extract_text() for page in reader.pages)

    assert ET.parse(night / "junit.xml").getroot().tag == "testsuites"
    files = sorted(p.name for p in (night / "files").iterdir())
    # What the run lists depends on the simulator's version (junit.xml, *.jtl.gz ...): check the rules,
    # not a list. Agent logs skipped, .gz saved decompressed, nothing half-written left over.
    assert files == sorted(f["name"] for f in result.xcom(DAG_ID, "save_run_files"))
    assert "jmeter.log" in files
    assert not [name for name in files if "agent" in name or name.endswith(".gz")]
    assert not [p for p in night.rglob("*") if p.name.endswith(".part")]

    assert len(sim.starts()) == 1
    (print_task,) = [r for r in sim.requests if r.route == "create_task"]
    assert print_task.body == {
        "@type": "PrintReportTask",
        "benchReportId": run["report_id"],
        "config": {"@type": "ExportReportConfig", "pageFormat": "A4", "orientation": "LANDSCAPE"},
    }
    polls = [r for r in sim.requests if r.route == "task_result"]
    assert len(polls) == 2  # one pending answer, then the file name
    assert all(r.authorized for r in sim.requests)
