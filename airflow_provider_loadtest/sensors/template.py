"""``TemplateSensor``: wait until a workspace has a given report template, and hand on its id.

Useful when templates are created by people or by another pipeline: the load test starts only once the
report it should produce can exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_provider_loadtest.compat import conf
from airflow_provider_loadtest.operators.common import DEFAULT_CONN_ID, LoadTestHookMixin, check_literal_ids

if TYPE_CHECKING:
    from airflow.sdk import Context


class TemplateSensor(LoadTestHookMixin, BaseSensorOperator):
    """Wait for a report template in ``workspace_id``, by name or id; push its id as the return value.

    A downstream ``RunScenarioOperator(template_id="{{ ti.xcom_pull('wait_for_template') }}")`` (or
    ``template_id=sensor.output``) then runs with it. Names match exactly first, then ignoring case;
    several templates with the same name fail the sensor rather than pick one.

    Returns (XCom ``return_value``) the template's id, a string. Takes every ``BaseSensorOperator``
    argument too: ``poke_interval`` (default 60 s; also the triggerer's interval), ``timeout`` (default
    7 days; a deferred wait then ends with ``AirflowSensorTimeout``, or a skip with ``soft_fail``),
    ``mode`` (ignored when deferrable). A refused key, an unknown workspace or an ambiguous name fail
    the task at once (no retries, deferred or not); a service outage fails with retries.

    :param workspace_id: the workspace whose templates to watch.
    :param template_name: the template's name (give this or ``template_id``).
    :param template_id: the template's id, to wait until it exists.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.
    :param deferrable: after a first check on the worker, wait in the triggerer (polling every
        ``poke_interval`` seconds until ``timeout``) instead of holding a worker slot or rescheduling.
        Defaults to ``[operators] default_deferrable``.
    """

    template_fields: Sequence[str] = ("workspace_id", "template_name", "template_id")
    ui_color = "#c9e4ca"

    def __init__(
        self,
        *,
        workspace_id: str,
        template_name: str | None = None,
        template_id: str | None = None,
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if (template_name is None) == (template_id is None):
            raise ValueError("give exactly one of template_name and template_id")
        check_literal_ids(workspace_id=workspace_id, template_id=template_id)
        self.workspace_id = workspace_id
        self.template_name = template_name
        self.template_id = template_id
        self.loadtest_conn_id = loadtest_conn_id
        self.deferrable = deferrable

    def execute(self, context: Context) -> Any:
        """Poke once here; if the template is not there yet and ``deferrable``, wait in the triggerer."""
        if not self.deferrable:
            return self._poke_until_timeout(context)
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        import time

        from airflow_provider_loadtest.api.validation import validate_path_id
        from airflow_provider_loadtest.triggers.template import TemplateTrigger

        self.log.info(
            "Deferring: the triggerer checks every %s s, freeing this worker slot", self.poke_interval
        )
        self.defer(
            trigger=TemplateTrigger(
                loadtest_conn_id=self.loadtest_conn_id,
                workspace_id=validate_path_id("workspace_id", self.workspace_id),
                template_name=self.template_name,
                template_id=validate_path_id("template_id", self.template_id) if self.template_id else None,
                poke_interval=float(self.poke_interval),
                deadline=time.time() + float(self.timeout),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """Resume after the trigger fired: the template's id, or the sensor's timeout, or the error."""
        from airflow_provider_loadtest.triggers.common import raise_for_event

        if event.get("status") == "done":
            self.log.info(
                "Found report template %r (id %s)", event.get("template_name"), event["template_id"]
            )
            return str(event["template_id"])
        if event.get("error") == "TemplateWaitTimeout":
            from airflow_provider_loadtest.compat import AirflowSkipException

            if self.soft_fail:
                raise AirflowSkipException(str(event.get("message")))
            raise _sensor_timeout()(str(event.get("message")))
        raise_for_event(event, "Waiting for the report template")

    def _poke_until_timeout(self, context: Context) -> Any:
        """Airflow's poke loop (``poke`` and reschedule modes), its timeout said as the deferred wait's
        is: Airflow's own message ("Sensor has timed out; run duration ...") names neither the template
        nor what the workspace has, so it ends with the last look's ``describe_missing``."""
        from airflow_provider_loadtest.compat import AirflowSkipException

        self._missing: str | None = None
        try:
            return super().execute(context)
        except _sensor_timeout() as timed_out:
            if self._missing is None:
                raise
            raise _sensor_timeout()(
                f"gave up waiting for the report template ({timed_out}): {self._missing}"
            ) from timed_out
        except AirflowSkipException as skipped:  # soft_fail: the timeout as a skip, said the same way
            if self._missing is None or not str(skipped).startswith("Sensor has timed out"):
                raise
            raise AirflowSkipException(
                f"gave up waiting for the report template ({skipped}): {self._missing}"
            ) from skipped

    def poke(self, context: Context) -> PokeReturnValue:
        """One look at the workspace's templates. What no look can change (a refused key, an unknown
        workspace, a bad id, an ambiguous name) fails the task at once, as in every task of the package."""
        from airflow_provider_loadtest.lifecycle.support import refusing_what_cannot_succeed

        with refusing_what_cannot_succeed():
            return self._look()

    def _look(self) -> PokeReturnValue:
        from airflow_provider_loadtest.api.validation import validate_path_id
        from airflow_provider_loadtest.decisions.templates import choose_template, describe_missing

        workspace_id = validate_path_id("workspace_id", self.workspace_id)
        template_id = validate_path_id("template_id", self.template_id) if self.template_id else None
        from airflow_provider_loadtest.api import endpoints

        # Ids and names only: all the choice reads (full templates cost thousands of objects each).
        templates = self.hook.call(endpoints.list_template_refs(workspace_id))
        found = choose_template(
            templates, workspace_id=workspace_id, name=self.template_name, template_id=template_id
        )
        if found is None:
            self._missing = describe_missing(
                templates, workspace_id=workspace_id, name=self.template_name, template_id=template_id
            )
            self.log.info("Not yet: %s", self._missing)
            return PokeReturnValue(is_done=False)
        self.log.info("Found report template %r (id %s) in workspace %r", found.name, found.id, workspace_id)
        return PokeReturnValue(is_done=True, xcom_value=found.id)


def _sensor_timeout() -> type[Exception]:
    """Airflow's ``AirflowSensorTimeout`` (in the Task SDK from Airflow 3.2, in ``airflow.exceptions``
    before), imported when a wait ends rather than when a DAG file is parsed."""
    try:
        from airflow.sdk.exceptions import AirflowSensorTimeout
    except ImportError:  # Airflow < 3.2
        from airflow.exceptions import AirflowSensorTimeout  # type: ignore[no-redef]
    return AirflowSensorTimeout
