"""What a run is and what its states and alarms mean: decisions shared by the operator and trigger.

No I/O and no heavy imports: the operator module imports this at DAG-parse time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings
    from airflow_provider_loadtest.models import BenchReport


FINISHED = "FINISHED"
TERMINAL_STATES = frozenset({"FINISHED", "ABORTED", "ERROR"})
FAILED_STATES = frozenset({"ABORTED", "ERROR"})
SEVERITY_RANK = {"PASSED": 0, "WARNING": 1, "CRITICAL": 2}
GATE_SEVERITIES = ("WARNING", "CRITICAL")


def normal_state(value: object) -> str:
    """A run state as compared everywhere: upper case (the service's ``error`` is ``ERROR``)."""
    return str(value or "UNKNOWN").strip().upper() or "UNKNOWN"


def is_terminal(state: str) -> bool:
    """Only FINISHED, ABORTED and ERROR (any case) end a run; an unknown state is still going."""
    return normal_state(state) in TERMINAL_STATES


def check_gate_severity(value: str | None) -> str | None:
    """Validate ``fail_on_alarm_severity`` (None, WARNING or CRITICAL, any case)."""
    if value is None:
        return None
    upper = str(value).upper()
    if upper not in GATE_SEVERITIES:
        raise ValueError(f"fail_on_alarm_severity must be None, 'WARNING' or 'CRITICAL', got {value!r}")
    return upper


def _severity(alarm: dict[str, Any]) -> str:
    return str(alarm.get("severity") or "").strip().upper()


def unknown_severity_alarms(alarms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Alarms whose severity is missing or not one the package knows (any case)."""
    return [a for a in alarms if _severity(a) not in SEVERITY_RANK]


def breaking_alarms(alarms: list[dict[str, Any]], gate: str | None) -> list[dict[str, Any]]:
    """The alarms at or above the gate's severity, compared in any case.

    Fails closed: an alarm of unknown severity breaks an active gate (a gate that passes what it
    cannot read would hide exactly the failures it exists for).
    """
    if gate is None:
        return []
    bar = SEVERITY_RANK[gate]
    return [a for a in alarms if SEVERITY_RANK.get(_severity(a), bar) >= bar]


def describe_alarms(alarms: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{a.get('severity')}: {a.get('name') or a.get('id')}"
        + (f" ({a['message']})" if a.get("message") else "")
        for a in alarms
    )


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
    started_at: float  # epoch seconds, when the service accepted the start
    #: The metrics of the run's own report that the quality gate reuses, by metric id (see gate.py).
    summary_metrics: dict[str, dict[str, Any]] | None = None
    #: When the service created the run's report, epoch seconds (its answer's ``created``; None when
    #: it gave none): the gate orders its nights by the service's own time (``decisions.gate.nights``).
    created_at: float | None = None

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
        started_at: float,
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
            started_at=started_at,
            created_at=report.created / 1000 if report.created and report.created > 0 else None,
        )

    def to_xcom(self) -> dict[str, Any]:
        """A plain dict: XCom stores JSON, and downstream templates read keys like ``report_id``."""
        record = asdict(self)
        for optional in ("summary_metrics", "created_at"):  # only some runs carry them
            if record[optional] is None:
                del record[optional]
        return record

    @classmethod
    def from_xcom(cls, data: dict[str, Any]) -> StartedRun:
        """Read back a record written by ``to_xcom`` (ignoring keys added by later versions)."""
        fields: dict[str, Any] = {name: data.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)
