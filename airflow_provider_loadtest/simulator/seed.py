"""The simulator's world, read from a JSON seed file.

The seed names everything a run needs: API keys, workspaces, projects, report templates, scenarios (how
long a run lasts, how it ends, which threshold alarms it raises, the figures it reports) and faults to
inject from the start. Keys are camelCase like the service's JSON; snake_case is accepted too.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from airflow_provider_loadtest.simulator.faults import FaultSpec

Severity = Literal["PASSED", "WARNING", "CRITICAL"]
Outcome = Literal["FINISHED", "ERROR", "ABORTED"]
TaskResultShape = Literal["legacy", "envelope"]


class SeedModel(BaseModel):
    """Base of the seed's parts: camelCase in JSON, snake_case in Python, unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class AlarmSpec(SeedModel):
    """A threshold alarm a scenario's runs raise once they are RUNNING."""

    id: str
    name: str
    severity: Severity
    message: str = ""
    from_progress: float = Field(default=0.0, ge=0, le=100)
    """Progress (0-100) from which the alarm shows ``severity``; before it, it shows PASSED."""


class MetricProfile(SeedModel):
    """The figures a run reports; totals grow with progress."""

    hits_per_second: float = Field(default=120.0, ge=0)
    error_rate: float = Field(default=0.004, ge=0, le=1)
    avg_response_time_ms: float = Field(default=240.0, ge=0)
    response_kb: float = Field(default=32.0, ge=0)
    simulated_seconds: float = Field(default=600.0, gt=0)
    """How many seconds of load a whole run stands for (runs are compressed in time)."""
    users: int = Field(default=50, ge=0)
    """Concurrent virtual users (the USERLOAD metric)."""
    noise_pct: float = Field(default=0.0, ge=0, le=30)
    """Run-to-run noise of the response times: their standard deviation from run to run, in percent of
    the profile (0: every run alike). Deterministic per run of the scenario (the n-th run since the last
    reset always measures the same), so a gate's history of nights has noise to judge against. Every
    transaction shares it: the night's environment."""
    transaction_noise_pct: float = Field(default=0.0, ge=0, le=30)
    """Each transaction's own run-to-run noise besides ``noise_pct`` (its standard deviation, in percent
    of the transaction's mean; deterministic per run and transaction): transactions of one run move
    together, and each a little on its own."""


class ScenarioSpec(SeedModel):
    id: str
    project_id: str
    name: str
    description: str = ""
    duration_seconds: float | None = Field(default=None, gt=0)
    """Run duration; ``None`` uses ``settings.runSeconds`` (or the global override)."""
    duration_factor: float = Field(default=1.0, gt=0)
    """Multiplies the duration, also when it is overridden globally (a slow scenario stays slow)."""
    outcome: Outcome = "FINISHED"
    """FINISHED; ERROR right after PREPARING; ABORTED half-way through RUNNING."""
    alarms: list[AlarmSpec] = Field(default_factory=list)
    metrics: MetricProfile = Field(default_factory=MetricProfile)
    agents: int = Field(default=1, ge=1, le=50)
    print_fails: bool = False
    """Print tasks of this scenario's reports end in failure."""
    slowdown_per_run: float = Field(default=0.0, ge=0, le=10)
    """Each run of this scenario is this much slower than the one before (0.2: response times +20 %),
    counted since the last reset: a regression to show a baseline comparison failing."""
    slow_transaction: str | None = None
    """The transaction (JTL label, ``simulator.jtl.TRANSACTIONS``) that carries most of the slowdown:
    its budget fails while the run's own figures still look fine."""
    slow_share: float = Field(default=0.7, ge=0, le=1)
    """The share of the run's slowdown its ``slow_transaction`` carries (1: all of it, the other
    transactions as fast as before: one transaction's regression alone)."""
    busy_runs: dict[int, float] = Field(default_factory=dict)
    """Runs (numbered since the last reset) on a busy night: every transaction that much slower together
    (0.12: 12 %), the environment's noise rather than the build's."""
    applied_users_share: float = Field(default=1.0, gt=0, le=1)
    """The share of its users a run applies from run ``light_from_run`` on (0.2: 100 of 500 users, as when
    load generators fail to start): fewer hits, and a lightly loaded system answers faster."""
    light_from_run: int = Field(default=1, ge=1)
    """The first run of this scenario (since the last reset) that applies ``applied_users_share`` of its
    users; the runs before it apply them all (the nights a history learns the usual load from)."""


class WorkspaceSpec(SeedModel):
    id: str
    name: str
    description: str = ""


class ProjectSpec(SeedModel):
    id: str
    workspace_id: str
    name: str


class SettingsSpec(SeedModel):
    run_seconds: float = Field(default=6.0, gt=0)
    task_result_shape: TaskResultShape = "legacy"
    """How a print task's result is polled: ``legacy`` (empty body while pending, then
    ``{"@type": "PrintReportTaskResult", "filename": ...}``) or ``envelope`` (``{taskId, status, message}``,
    no file name: the PDF is found in the run's file list)."""
    task_pending_polls: int = Field(default=2, ge=0)
    """How many polls of a print task answer "pending" before it is done."""
    task_fails: bool = False
    progress_scale: Literal["percent", "fraction"] = "percent"
    """How progress is answered: a decimal 0-100 (the service), or a decimal 0-1 (one document says so)."""
    fault_seed: int = 0
    """Seed of the random generator behind probabilistic faults."""


class Seed(SeedModel):
    api_keys: list[str] = Field(min_length=1)
    settings: SettingsSpec = Field(default_factory=SettingsSpec)
    workspaces: list[WorkspaceSpec] = Field(default_factory=list)
    projects: list[ProjectSpec] = Field(default_factory=list)
    templates: list[dict[str, Any]] = Field(default_factory=list)
    """Report definitions exactly as the service answers them (camelCase, ``@type`` discriminators)."""
    scenarios: list[ScenarioSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_references(self) -> Seed:
        workspace_ids = _unique("workspace", [w.id for w in self.workspaces])
        project_ids = _unique("project", [p.id for p in self.projects])
        _unique("scenario", [s.id for s in self.scenarios])
        template_ids = [str(t.get("id", "")) for t in self.templates]
        _unique("template", template_ids)
        for project in self.projects:
            if project.workspace_id not in workspace_ids:
                raise ValueError(f"project {project.id} names unknown workspace {project.workspace_id}")
        for scenario in self.scenarios:
            if scenario.project_id not in project_ids:
                raise ValueError(f"scenario {scenario.id} names unknown project {scenario.project_id}")
        for template in self.templates:
            for field in ("id", "workspaceId", "name"):
                if not isinstance(template.get(field), str) or not template[field]:
                    raise ValueError(f"template {template.get('id')!r} needs a string {field!r}")
            if template["workspaceId"] not in workspace_ids:
                raise ValueError(
                    f"template {template['id']} names unknown workspace {template['workspaceId']}"
                )
            _check_template_model(template)
        return self

    def template(self, template_id: str) -> dict[str, Any] | None:
        return next((t for t in self.templates if t["id"] == template_id), None)

    def scenario(self, scenario_id: str) -> ScenarioSpec | None:
        return next((s for s in self.scenarios if s.id == scenario_id), None)

    def project(self, project_id: str) -> ProjectSpec | None:
        return next((p for p in self.projects if p.id == project_id), None)


def _unique(kind: str, ids: list[str]) -> set[str]:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise ValueError(f"duplicate {kind} id {item!r}")
        seen.add(item)
    return seen


def _check_template_model(template: dict[str, Any]) -> None:
    """Templates must parse as the client's report definition: the simulator never serves what the
    client could not read."""
    from airflow_provider_loadtest.models import ReportDefinition

    ReportDefinition.from_api(template)


def load_seed(source: str | Path | dict[str, Any] | Seed | None = None) -> Seed:
    """Read a seed: ``None`` for the default one shipped with the package, a path, a dict or a Seed."""
    if isinstance(source, Seed):
        return source.model_copy(deep=True)
    if source is None:
        text = resources.files(__package__).joinpath("default_seed.json").read_text(encoding="utf-8")
        data: Any = json.loads(text)
    elif isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read seed file {path}: {exc}") from exc
    try:
        return Seed.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"invalid simulator seed: {exc}") from exc
