"""``TemplateTrigger``: the deferred ``TemplateSensor``'s wait, in the triggerer.

It drives ``decisions.template_wait.wait_for_template`` (the same ``choose_template`` as ``poke``)
with the async client, and fires one event: the template's id, its absence at the deadline, or an error.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class TemplateTrigger(BaseTrigger):
    """Poll the report templates of ``workspace_id`` until one matches ``template_name``/``template_id``.

    :param loadtest_conn_id: connection to read (with Airflow's async connection API).
    :param workspace_id: the workspace whose templates to list (already rendered and checked).
    :param template_name: the name to match (exactly, then ignoring case), or ``None``.
    :param template_id: the id to wait for, or ``None``.
    :param poke_interval: seconds between two lists.
    :param deadline: epoch seconds after which the wait gives up (the sensor's ``timeout``).
    """

    def __init__(
        self,
        *,
        loadtest_conn_id: str,
        workspace_id: str,
        template_name: str | None,
        template_id: str | None,
        poke_interval: float,
        deadline: float,
    ) -> None:
        super().__init__()
        self.loadtest_conn_id = loadtest_conn_id
        self.workspace_id = workspace_id
        self.template_name = template_name
        self.template_id = template_id
        self.poke_interval = poke_interval
        self.deadline = deadline

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "loadtest_conn_id": self.loadtest_conn_id,
                "workspace_id": self.workspace_id,
                "template_name": self.template_name,
                "template_id": self.template_id,
                "poke_interval": self.poke_interval,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_provider_loadtest.decisions.template_wait import wait_for_template
        from airflow_provider_loadtest.triggers.common import drive_to_event

        event = await drive_to_event(
            self.loadtest_conn_id,
            lambda _key: wait_for_template(
                self.workspace_id,
                name=self.template_name,
                template_id=self.template_id,
                interval_s=self.poke_interval,
                deadline=self.deadline,
            ),
            self.log,
        )
        if event["status"] == "done":
            template = event.pop("value")
            event.update(template_id=template.id, template_name=template.name)
        yield TriggerEvent(event)
