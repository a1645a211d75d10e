"""The simulator's state: runs and their state machine, reports, print tasks, all driven by a clock.

Nothing here knows HTTP: the app turns :class:`SimulatorError` into status codes and domain objects into
the service's JSON. Everything is deterministic given the seed and the clock.

A run walks CREATED, PENDING, SCALING, PREPARING, INITIALIZING (5 % of its duration each), then RUNNING
(the remaining 75 %), and ends FINISHED; a scenario with ``outcome: ERROR`` ends in ERROR where
INITIALIZING would start, one with ``outcome: ABORTED`` half-way through RUNNING; ``stop`` aborts it.
Progress is 0 until RUNNING, then grows linearly to 100; it freezes when the run aborts.
"""

from __future__ import annotations

import gzip
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol
from xml.etree import ElementTree as ET

from airflow_provider_loadtest.models.enums import MetricId
from airflow_provider_loadtest.simulator.faults import FaultInjector, FaultSpec
from airflow_provider_loadtest.simulator.figures import RunFigures
from airflow_provider_loadtest.simulator.recorder import Recorder
from airflow_provider_loadtest.simulator.seed import (
    AlarmSpec,
    ProjectSpec,
    ScenarioSpec,
    Seed,
    SettingsSpec,
    TaskResultShape,
    load_seed,
)

PHASES: tuple[tuple[str, float], ...] = (
    ("CREATED", 0.00),
    ("PENDING", 0.05),
    ("SCALING", 0.10),
    ("PREPARING", 0.15),
    ("INITIALIZING", 0.20),
    ("RUNNING", 0.25),
)
RUNNING_FROM = 0.25
#: How many runs' rendered JTL files are kept (rendering a run's samples takes a fraction of a second).
_JTL_CACHE_RUNS = 4
ERROR_AT = 0.20
ABORT_AT = RUNNING_FROM + (1 - RUNNING_FROM) / 2
TERMINAL_STATES = frozenset({"FINISHED", "ABORTED", "ERROR"})
#: Metric ids of the SummaryReportItem the service puts in a run's own report when no template is chosen.
DEFAULT_SUMMARY_METRICS: tuple[str, ...] = (
    "HITS_TOTAL",
    "HITS_RATE",
    "ERRORS_PERCENT",
    "RESPONSE_TIME_AVG",
    "RESPONSE_TIME_PERCENTILE_95",
)


class SimulatorError(Exception):
    """A refusal the app answers with ``status`` and a short text body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, monotonic."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock tests move by hand: ``clock.advance(3)``."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


@dataclass
class Run:
    id: str
    number: int
    scenario: ScenarioSpec
    report_id: str
    started_at: float
    duration: float
    properties: dict[str, str]
    ordinal: int = 1
    """Which run of its scenario this is (1 for the first since the last reset)."""
    stopped_at: float | None = None
    files: dict[str, bytes] = field(default_factory=dict)

    def fraction(self, now: float) -> float:
        """How far through its duration the run is (0-1), frozen when it stopped or failed."""
        end = now if self.stopped_at is None else min(now, self.stopped_at)
        value = max(0.0, (end - self.started_at) / self.duration)
        if self.scenario.outcome == "ERROR":
            value = min(value, ERROR_AT)
        elif self.scenario.outcome == "ABORTED":
            value = min(value, ABORT_AT)
        return min(value, 1.0)

    def state(self, now: float) -> str:
        elapsed = (now - self.started_at) / self.duration
        natural = self._natural_state(elapsed)
        if self.stopped_at is not None and now >= self.stopped_at:
            stopped_state = self._natural_state((self.stopped_at - self.started_at) / self.duration)
            if stopped_state not in TERMINAL_STATES:
                return "ABORTED"
            return stopped_state
        return natural

    def _natural_state(self, elapsed: float) -> str:
        if self.scenario.outcome == "ERROR" and elapsed >= ERROR_AT:
            return "ERROR"
        if self.scenario.outcome == "ABORTED" and elapsed >= ABORT_AT:
            return "ABORTED"
        if elapsed >= 1.0:
            return "FINISHED"
        current = "CREATED"
        for name, start in PHASES:
            if elapsed >= start:
                current = name
        return current

    def progress(self, now: float) -> float:
        fraction = self.fraction(now)
        if fraction <= RUNNING_FROM:
            return 0.0
        return round(min(100.0, (fraction - RUNNING_FROM) / (1 - RUNNING_FROM) * 100), 1)

    def reached_running(self, now: float) -> bool:
        return self.fraction(now) >= RUNNING_FROM and self.state(now) != "ERROR"

    @property
    def slowdown(self) -> float:
        """How much slower than the scenario's profile this run is (1.0: not at all)."""
        return float((1 + self.scenario.slowdown_per_run) ** (self.ordinal - 1))

    def figures(self, now: float) -> RunFigures:
        return RunFigures.of(
            self.scenario.metrics,
            self.progress(now),
            self.slowdown,
            self.scenario.agents,
            run_index=self.ordinal,
            applied=self.applied_share,
            busy=self.scenario.busy_runs.get(self.ordinal, 0.0),
        )

    @property
    def applied_share(self) -> float:
        """The share of its users this run applies (``ScenarioSpec.applied_users_share`` from its
        ``light_from_run``-th run on)."""
        if self.ordinal >= self.scenario.light_from_run:
            return self.scenario.applied_users_share
        return 1.0


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | int
    unit: str


@dataclass(frozen=True)
class Alarm:
    id: str
    severity: str
    name: str
    message: str


@dataclass
class Report:
    id: str
    project_id: str
    name: str
    description: str
    run_id: str
    configs: list[dict[str, Any]]
    items: list[dict[str, Any]]
    template_id: str | None
    #: Epoch milliseconds, as the service's BenchReport gives it (wall clock, whatever the run's clock).
    created: int = 0


@dataclass
class PrintTask:
    id: str
    report_id: str
    shape: TaskResultShape
    pending_polls: int
    fails: bool
    polls: int = 0
    filename: str | None = None


FAILED_STACK_TRACE = (
    "com.octoperf.report.print.PrintException: Report rendering failed: headless browser timed out\n"
    + "".join(
        f"\tat com.octoperf.report.print.ChromePrinter.render{i}(ChromePrinter.java:{100 + 7 * i})\n"
        for i in range(40)
    )
    + "Caused by: java.util.concurrent.TimeoutException: page did not load within 120000 ms\n"
    + "".join(
        f"\tat java.base/java.util.concurrent.FutureTask.get(FutureTask.java:{200 + i})\n" for i in range(20)
    )
)


class SimulatorState:
    """Everything the simulator knows; thread-safe (requests arrive on the server thread)."""

    def __init__(
        self,
        seed: Seed | dict[str, Any] | str | None = None,
        *,
        clock: Clock | None = None,
        run_seconds: float | None = None,
    ) -> None:
        self.seed = load_seed(seed)
        self.clock: Clock = clock or SystemClock()
        self.run_seconds = run_seconds
        self.settings: SettingsSpec = self.seed.settings.model_copy()
        self.recorder = Recorder()
        self.faults = FaultInjector(list(self.seed.faults), seed=self.settings.fault_seed)
        self._lock = threading.RLock()
        self.runs: dict[str, Run] = {}
        self.reports: dict[str, Report] = {}
        self.tasks: dict[str, PrintTask] = {}
        self._counter = 0
        self._task_counter = 0
        #: Rendered JTL files of the latest runs downloaded, per (run id, figures): generator -> gzip.
        self._jtl_files: dict[tuple[str, str, int, RunFigures], dict[str, bytes]] = {}

    # --- administration ---------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the seed: no runs, reports, tasks or recorded requests; the seed's faults only."""
        with self._lock:
            self.runs.clear()
            self.reports.clear()
            self.tasks.clear()
            self._counter = 0
            self._task_counter = 0
            self._jtl_files.clear()
            self.settings = self.seed.settings.model_copy()
            self.recorder.clear()
            self.faults.clear()
            for rule in self.seed.faults:
                self.faults.add(rule)

    def add_fault(self, rule: FaultSpec) -> FaultSpec:
        return self.faults.add(rule)

    def is_valid_key(self, key: str) -> bool:
        return key in self.seed.api_keys

    def now(self) -> float:
        return self.clock.now()

    # --- lookups ----------------------------------------------------------------------------------

    def run(self, run_id: str) -> Run:
        with self._lock:
            found = self.runs.get(run_id)
        if found is None:
            raise SimulatorError(404, f"Unknown bench result: {run_id}")
        return found

    def scenario_of(self, route: str | None, params: dict[str, str], body: Any) -> str | None:
        """The scenario a request concerns, for faults scoped to a scenario (best effort)."""
        if route in ("run_scenario", "get_scenario"):
            return params.get("scenario_id")
        run_id = params.get("bench_result_id")
        metric: Any = None
        if route == "threshold_alarms" and isinstance(body, dict):
            metric = body.get("metric")
        if route == "metrics_summary" and isinstance(body, dict) and isinstance(body.get("metrics"), list):
            metric = (body["metrics"] or [None])[0]
        if isinstance(metric, dict) and isinstance(metric.get("benchResultId"), str):
            run_id = metric["benchResultId"]
        if route in ("create_task", "get_bench_report"):
            report_id = body.get("benchReportId") if isinstance(body, dict) else params.get("report_id")
            report = self.reports.get(str(report_id))
            run_id = report.run_id if report else None
        if route == "task_result":
            task = self.tasks.get(params.get("task_id", ""))
            report = self.reports.get(task.report_id) if task else None
            run_id = report.run_id if report else None
        with self._lock:
            run = self.runs.get(run_id or "")
        return run.scenario.id if run else None

    def scenario(self, scenario_id: str) -> ScenarioSpec:
        found = self.seed.scenario(scenario_id)
        if found is None:
            raise SimulatorError(404, f"Unknown scenario: {scenario_id}")
        return found

    def project(self, project_id: str) -> ProjectSpec:
        found = self.seed.project(project_id)
        if found is None:
            raise SimulatorError(404, f"Unknown project: {project_id}")
        return found

    def report(self, report_id: str) -> Report:
        with self._lock:
            found = self.reports.get(report_id)
        if found is None:
            raise SimulatorError(404, f"Unknown bench report: {report_id}")
        return found

    def projects_of(self, workspace_id: str) -> list[ProjectSpec]:
        """The design projects of a workspace (``GET /design/projects/by-workspace/{id}/DESIGN``)."""
        self._require_workspace(workspace_id)
        return [p for p in self.seed.projects if p.workspace_id == workspace_id]

    def scenarios_of(self, project_id: str) -> list[ScenarioSpec]:
        """The scenarios of a design project (``GET /runtime/scenarios/by-project/{id}``)."""
        self.project(project_id)
        return [s for s in self.seed.scenarios if s.project_id == project_id]

    def _require_workspace(self, workspace_id: str) -> None:
        if not any(w.id == workspace_id for w in self.seed.workspaces):
            raise SimulatorError(404, f"Unknown workspace: {workspace_id}")

    def templates_of(self, workspace_id: str) -> list[dict[str, Any]]:
        self._require_workspace(workspace_id)
        return [t for t in self.seed.templates if t["workspaceId"] == workspace_id]

    # --- runs -------------------------------------------------------------------------------------

    def duration_of(self, scenario: ScenarioSpec) -> float:
        base = self.run_seconds
        if base is None:
            base = scenario.duration_seconds or self.settings.run_seconds
        return base * scenario.duration_factor

    def start_run(
        self,
        scenario_id: str,
        *,
        template_id: str | None = None,
        name: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> tuple[Run, Report]:
        scenario = self.scenario(scenario_id)
        project = self.project(scenario.project_id)  # the seed checks references
        template: dict[str, Any] | None = None
        if template_id is not None:
            template = self.seed.template(template_id)
            if template is None or template["workspaceId"] != project.workspace_id:
                raise SimulatorError(
                    404, f"Unknown template in workspace {project.workspace_id}: {template_id}"
                )
        with self._lock:
            self._counter += 1
            number = self._counter
            run_id, report_id = f"br-{number}", f"report-{number}"
            run = Run(
                id=run_id,
                number=number,
                scenario=scenario,
                report_id=report_id,
                started_at=self.clock.now(),
                duration=self.duration_of(scenario),
                properties=dict(properties or {}),
                ordinal=1 + sum(1 for r in self.runs.values() if r.scenario.id == scenario.id),
            )
            report = Report(
                id=report_id,
                project_id=project.id,
                name=name or (template["name"] if template else f"{scenario.name} report"),
                description=str(template.get("description", "")) if template else "",
                run_id=run_id,
                configs=_with_run_id(template.get("configs", []) if template else [], run_id),
                items=_with_run_id(template.get("items", []), run_id) if template else _default_items(run_id),
                template_id=template_id,
                created=int(time.time() * 1000),
            )
            self.runs[run_id] = run
            self.reports[report_id] = report
        return run, report

    def stop(self, run_id: str) -> str:
        """Abort an active run; a finished one is left as it is. Returns the state after the call."""
        run = self.run(run_id)
        with self._lock:
            now = self.clock.now()
            if run.state(now) not in TERMINAL_STATES and run.stopped_at is None:
                run.stopped_at = now
            return run.state(now)

    def metrics(self, run_id: str) -> list[Metric]:
        """Live headline metrics: integer counts, a hit rate of hits over elapsed seconds."""
        run = self.run(run_id)
        now = self.clock.now()
        progress = run.progress(now)
        # A small deterministic wobble keeps a running test's average from looking frozen; none once over.
        wobble = 1 + 0.05 * math.sin(progress / 7) if run.state(now) == "RUNNING" and progress else 1.0
        return [Metric(name, value, unit) for name, value, unit in run.figures(now).headline(wobble)]

    def summary_values(self, wanted: list[tuple[str, MetricId]]) -> list[float | int]:
        """Values of metrics (each of a run, by id), aligned; empty while any of those runs is not over,
        or when one ended without any load (values exist once the run is terminal)."""
        runs = [(self.run(run_id), metric_id) for run_id, metric_id in wanted]
        now = self.clock.now()
        if any(run.state(now) not in TERMINAL_STATES or run.progress(now) == 0 for run, _ in runs):
            return []
        return [run.figures(now).summary_value(metric_id) for run, metric_id in runs]

    def alarms(self, run_id: str) -> list[Alarm]:
        run = self.run(run_id)
        now = self.clock.now()
        if not run.reached_running(now):
            return []
        progress = run.progress(now)
        return [_alarm(spec, progress) for spec in run.scenario.alarms]

    def junit_xml(self, run_id: str) -> str:
        run = self.run(run_id)
        alarms = self.alarms(run_id)
        failures = [a for a in alarms if a.severity == "CRITICAL"]
        suite = ET.Element(
            "testsuite",
            name=run.scenario.name,
            tests=str(len(alarms)),
            failures=str(len(failures)),
            errors="0",
            skipped="0",
            time=f"{run.scenario.metrics.simulated_seconds * run.progress(self.clock.now()) / 100:.1f}",
        )
        properties = ET.SubElement(suite, "properties")
        for prop, value in (
            ("benchResultId", run.id),
            ("scenarioId", run.scenario.id),
            ("state", self.state_of(run)),
        ):
            ET.SubElement(properties, "property", name=prop, value=value)
        for alarm in alarms:
            case = ET.SubElement(suite, "testcase", classname=run.scenario.id, name=alarm.name, time="0")
            if alarm.severity == "CRITICAL":
                failure = ET.SubElement(case, "failure", message=alarm.message, type=alarm.severity)
                failure.text = f"{alarm.name}: {alarm.message}"
            elif alarm.severity == "WARNING":
                out = ET.SubElement(case, "system-out")
                out.text = f"WARNING {alarm.name}: {alarm.message}"
        root = ET.Element("testsuites", name=f"Load test {run.id}")
        root.append(suite)
        return ET.tostring(root, encoding="unicode", xml_declaration=True)

    def state_of(self, run: Run) -> str:
        return run.state(self.clock.now())

    # --- logs -------------------------------------------------------------------------------------

    def log_files(self, run_id: str) -> list[str]:
        """The run's files as the service names them: printed PDFs, ``jmeter.log``, and per load
        generator its monitoring-agent log and its gzipped JTL results."""
        run = self.run(run_id)
        return (
            sorted(run.files)
            + ["jmeter.log"]
            + [
                name
                for generator in _generators(run)
                for name in (f"{generator}-agent.log", f"{generator}.jtl.gz")
            ]
        )

    def log_file(self, run_id: str, filename: str) -> bytes:
        """The content of a file of a run."""
        run = self.run(run_id)
        if filename in run.files:
            return run.files[filename]
        if filename == "jmeter.log" or filename in {f"{g}-agent.log" for g in _generators(run)}:
            return self._log_text(run, filename).encode()
        if filename in {f"{g}.jtl.gz" for g in _generators(run)}:
            return self._jtl(run, filename.removesuffix(".jtl.gz"))
        raise SimulatorError(404, f"Unknown file of bench result {run_id}: {filename}")

    def _jtl(self, run: Run, generator: str) -> bytes:
        """One load generator's gzipped JTL: the run's samples so far (``simulator.jtl``), rendered
        once per run and figures for every generator, and kept for the next downloads."""
        from airflow_provider_loadtest.simulator import jtl

        figures = run.figures(self.clock.now())
        key = (run.id, run.scenario.id, run.ordinal, figures)
        with self._lock:
            files = self._jtl_files.get(key)
        if files is None:
            texts = jtl.render(
                figures,
                run_number=run.number,
                generators=_generators(run),
                slowdown=run.slowdown,
                slow_transaction=run.scenario.slow_transaction,
                slow_share=run.scenario.slow_share,
                own=jtl.own_noise(run.scenario.metrics.transaction_noise_pct, run.ordinal),
            )
            files = {name: gzip.compress(text.encode(), mtime=0) for name, text in texts.items()}
            with self._lock:
                self._jtl_files[key] = files
                while len(self._jtl_files) > _JTL_CACHE_RUNS:
                    del self._jtl_files[next(iter(self._jtl_files))]
        return files[generator]

    def _log_text(self, run: Run, filename: str) -> str:
        now = self.clock.now()
        lines = [f"{filename} of {run.id} (scenario {run.scenario.id})"]
        for phase, start in PHASES:
            if run.fraction(now) >= start:
                lines.append(f"+{start * run.duration:7.2f}s INFO state {phase}")
        lines.append(f"current state {run.state(now)}, progress {run.progress(now)} %")
        if filename == "jmeter.log" and run.state(now) in {"ERROR", "ABORTED"}:
            lines += _jmeter_errors(run.state(now))
        return "\n".join(lines) + "\n"

    # --- print tasks ------------------------------------------------------------------------------

    def create_print_task(self, report_id: str) -> PrintTask:
        with self._lock:
            report = self.reports.get(report_id)
            if report is None:
                raise SimulatorError(404, f"Unknown bench report: {report_id}")
            run = self.runs[report.run_id]
            self._task_counter += 1
            task = PrintTask(
                id=f"task-{self._task_counter}",
                report_id=report_id,
                shape=self.settings.task_result_shape,
                pending_polls=self.settings.task_pending_polls,
                fails=self.settings.task_fails or run.scenario.print_fails,
            )
            self.tasks[task.id] = task
            return task

    def poll_task(self, task_id: str) -> tuple[PrintTask, str]:
        """Count a poll; returns the task and its status: PENDING, SUCCESS or FAILED."""
        with self._lock:
            task = self.tasks.get(task_id)
            if task is None:
                raise SimulatorError(404, f"Unknown task: {task_id}")
            task.polls += 1
            if task.polls <= task.pending_polls:
                return task, "PENDING"
            if task.fails:
                return task, "FAILED"
            if task.filename is None:
                report = self.reports[task.report_id]
                run = self.runs[report.run_id]
                task.filename = pdf_name(report.name)
                run.files[task.filename] = self._render_pdf(report, run)
            return task, "SUCCESS"

    def _render_pdf(self, report: Report, run: Run) -> bytes:
        from airflow_provider_loadtest.simulator.pdf import render_pdf

        now = self.clock.now()
        lines = [
            f"Report: {report.name} ({report.id})",
            f"Scenario: {run.scenario.name} ({run.scenario.id})",
            f"Project: {report.project_id}",
            f"Bench result: {run.id}",
            f"State: {run.state(now)}",
            f"Progress: {run.progress(now)} %",
            "",
            "Headline metrics",
        ]
        lines += [f"  {m.name}: {m.value:g} {m.unit}" for m in self.metrics(run.id)]
        lines += ["", "Threshold alarms"]
        alarms = self.alarms(run.id)
        lines += [f"  [{a.severity}] {a.name}: {a.message}" for a in alarms] or ["  none"]
        if report.description:
            lines += ["", report.description]
        return render_pdf(report.name, lines)


def pdf_name(report_name: str) -> str:
    """The printed PDF's file name: the report's name, with characters unsafe in a file name replaced."""
    stem = re.sub(r"[^\w .()-]+", "_", report_name).strip(" .") or "report"
    return f"{stem}.pdf"


def _jmeter_errors(state: str) -> list[str]:
    """What JMeter 5's own log (log4j2's layout) says when a run ends in ERROR or ABORTED: the lines
    ``decisions.samples.jmeter_log`` picks out, one repeated per thread, one with a stack trace."""
    stamp = "2026-01-01 00:00:0{},{}00"
    if state == "ERROR":
        return [
            f"{stamp.format(1, 1)} ERROR o.a.j.s.FileServer: Failed to open users.csv",
            "java.io.FileNotFoundException: users.csv (No such file or directory)",
            "\tat java.base/java.io.FileInputStream.open0(Native Method)",
            *(f"{stamp.format(2, i)} ERROR o.a.j.t.JMeterThread: Test failed!" for i in range(3)),
            f"{stamp.format(3, 0)} ERROR o.a.j.JMeter: Error in NonGUIDriver: no thread could start",
        ]
    return [f"{stamp.format(5, 0)} ERROR o.a.j.e.StandardJMeterEngine: Test stopped: the run was aborted"]


def _generators(run: Run) -> list[str]:
    """Names of the run's load generators (one per agent of the scenario)."""
    return [f"lg-{i}" for i in range(1, run.scenario.agents + 1)]


def _default_items(run_id: str) -> list[dict[str, Any]]:
    """The items of a run's own report without a template: a summary whose metrics the service built."""
    metrics = [
        {
            "@type": "HitMetric",
            "benchResultId": run_id,
            "configs": [],
            "filters": [],
            "id": metric_id,
            "type": "HIT",
        }
        for metric_id in DEFAULT_SUMMARY_METRICS
    ]
    return [{"@type": "SummaryReportItem", "id": "summary", "name": "Summary", "metrics": metrics}]


def _alarm(spec: AlarmSpec, progress: float) -> Alarm:
    severity = spec.severity if progress >= spec.from_progress else "PASSED"
    message = spec.message if severity == spec.severity else f"{spec.name}: within threshold"
    return Alarm(id=spec.id, severity=severity, name=spec.name, message=message)


def _with_run_id(values: list[Any], run_id: str) -> list[Any]:
    """Copy template parts, pointing every ``benchResultId`` at the new run (as the service does)."""

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (run_id if k == "benchResultId" else walk(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return [walk(v) for v in values]
