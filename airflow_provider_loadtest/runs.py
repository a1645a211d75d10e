"""What the package knows about a started run, in the JSON-safe form tasks hand to each other.

Shared by the operator (which returns it as XCom) and anything downstream that reads that XCom.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings
    from airflow_provider_loadtest.models import BenchReport


@dataclass(frozen=True)
class StartedRun:
    """The ids of a load test the service accepted, and where a person can look at it."""

    scenario_id: str
    report_id: str
    bench_result_id: str
    project_id: str | None
    template_id: str | None
    workspace_id: str | None
    test_name: str | None
    report_url: str | None

    @classmethod
    def from_report(
        cls,
        report: BenchReport,
        *,
        scenario_id: str,
        template_id: str | None,
        workspace_id: str | None,
        test_name: str | None,
        settings: ConnectionSettings,
    ) -> StartedRun:
        """Read the start call's answer; the run's id is the report's first bench result id."""
        if not report.id or not report.bench_result_id:
            raise ValueError(
                "the service accepted the run but its answer has no report id or bench result id: "
                f"report id {report.id!r}, bench result ids {report.bench_result_ids!r}"
            )
        url = None
        if workspace_id and report.project_id:
            url = settings.report_url(workspace_id, report.project_id, report.id)
        return cls(
            scenario_id=scenario_id,
            report_id=report.id,
            bench_result_id=report.bench_result_id,
            project_id=report.project_id,
            template_id=template_id,
            workspace_id=workspace_id,
            test_name=test_name if test_name else report.name,
            report_url=url,
        )

    def to_xcom(self) -> dict[str, Any]:
        """A plain dict: XCom stores JSON, and downstream templates read keys like ``report_id``."""
        return asdict(self)
