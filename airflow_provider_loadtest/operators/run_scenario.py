"""``RunScenarioOperator``: start a load test of a scenario, optionally with a report template.

Imported by every DAG file that uses it, so at module level it imports only Airflow's base classes and
the package's cheap modules; the HTTP client and the models load when the task runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_loadtest.api.validation import is_templated, validate_path_id
from airflow_provider_loadtest.links.report import LoadTestReportLink

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
    from airflow_provider_loadtest.runs import StartedRun

DEFAULT_CONN_ID = "loadtest_default"


def check_literal_ids(**values: Any) -> None:
    """Refuse bad ids at DAG-parse time when they are plain strings (templates are checked later)."""
    for parameter, value in values.items():
        if isinstance(value, str) and not is_templated(value):
            validate_path_id(parameter, value)


class RunScenarioOperator(BaseOperator):
    """Start a load test of ``scenario_id`` and return its ids and report link as XCom.

    :param scenario_id: the scenario to run (last segment of its URL in the web UI).
    :param template_id: report template to use for the run.
    :param template_name: choose the template by name instead, from ``workspace_id``'s templates (exact
        match first, then ignoring case; no match or several matches fail the task before anything
        starts).
    :param workspace_id: the workspace of the scenario; needed with ``template_name``, and to build the
        report link (the service's answer does not name the workspace).
    :param test_name: a name for this run in the service (e.g. ``"nightly {{ ds }}"``).
    :param properties: key/value properties passed to the run (newer servers).
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    Returns a dict with ``report_id``, ``bench_result_id``, ``project_id``, ``template_id``,
    ``workspace_id``, ``scenario_id``, ``test_name`` and ``report_url``.
    """

    template_fields: Sequence[str] = (
        "scenario_id",
        "template_id",
        "template_name",
        "workspace_id",
        "test_name",
        "properties",
    )
    template_fields_renderers = {"properties": "json"}
    operator_extra_links = (LoadTestReportLink(),)
    ui_color = "#f4d35e"

    def __init__(
        self,
        *,
        scenario_id: str,
        template_id: str | None = None,
        template_name: str | None = None,
        workspace_id: str | None = None,
        test_name: str | None = None,
        properties: Mapping[str, str] | None = None,
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if template_id is not None and template_name is not None:
            raise ValueError("give template_id or template_name, not both")
        if template_name is not None and workspace_id is None:
            raise ValueError("template_name needs workspace_id: templates are listed per workspace")
        check_literal_ids(scenario_id=scenario_id, template_id=template_id, workspace_id=workspace_id)
        self.scenario_id = scenario_id
        self.template_id = template_id
        self.template_name = template_name
        self.workspace_id = workspace_id
        self.test_name = test_name
        self.properties = properties
        self.loadtest_conn_id = loadtest_conn_id

    @cached_property
    def hook(self) -> LoadTestHook:
        """The hook, created on first use (never at DAG-parse time)."""
        from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

        return LoadTestHook(loadtest_conn_id=self.loadtest_conn_id)

    def execute(self, context: Context) -> dict[str, Any]:
        run = self.start_run(context)
        return run.to_xcom()

    def start_run(self, context: Context) -> StartedRun:
        """Check the rendered arguments, resolve the template, start the run and publish its link."""
        from airflow_provider_loadtest.runs import StartedRun

        scenario_id = validate_path_id("scenario_id", self.scenario_id)
        workspace_id = (
            validate_path_id("workspace_id", self.workspace_id) if self.workspace_id is not None else None
        )
        properties = self._checked_properties()
        template_id = self._resolve_template_id(workspace_id)

        report = self.hook.run_scenario(
            scenario_id, template_id=template_id, name=self.test_name or None, properties=properties
        )
        run = StartedRun.from_report(
            report,
            scenario_id=scenario_id,
            template_id=template_id,
            workspace_id=workspace_id,
            test_name=self.test_name,
            settings=self.hook.settings,
        )
        self.log.info(
            "Started a load test of scenario %r: run %s, report %s%s",
            scenario_id,
            run.bench_result_id,
            run.report_id,
            f" with template {template_id!r}" if template_id else " with the scenario's default report",
        )
        if run.report_url:
            self.log.info("Report: %s", run.report_url)
        else:
            self.log.info("No report link: set workspace_id on the task to get one (the service does not name it)")
        LoadTestReportLink.publish(context, run.report_url)
        return run

    def _resolve_template_id(self, workspace_id: str | None) -> str | None:
        if self.template_name is None:
            if self.template_id in (None, ""):
                return None
            return validate_path_id("template_id", self.template_id)
        from airflow_provider_loadtest.templates import require_template

        assert workspace_id is not None  # enforced in __init__
        template = require_template(
            self.hook.list_templates(workspace_id), workspace_id=workspace_id, name=self.template_name
        )
        self.log.info("Using report template %r (id %s) of workspace %r", template.name, template.id, workspace_id)
        return validate_path_id("template_id", template.id)

    def _checked_properties(self) -> dict[str, str] | None:
        if not self.properties:
            return None
        if not isinstance(self.properties, Mapping):
            raise ValueError(f"properties must be a mapping of names to values, got {type(self.properties).__name__}")
        return {str(key): str(value) for key, value in self.properties.items()}
