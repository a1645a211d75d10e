"""``LoadTestRunTrigger``: waits for a run in the triggerer, freeing the worker slot.

It drives the same ``watch_run`` steps as the sync path with the async client, so a deferred task
logs, gates, times out and stops the run exactly like a task that waits on its worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: Bound for the best-effort stop when a user kills a deferred task.
STOP_TIMEOUT_S = 30.0


class LoadTestRunTrigger(BaseTrigger):
    """Poll run ``run_record["bench_result_id"]`` until it ends; fire one event with the outcome.

    :param loadtest_conn_id: connection to read (with Airflow's async connection API).
    :param run_record: the ``StartedRun`` dict, handed back to ``execute_complete`` untouched.
    :param options: ``WatchOptions`` as JSON (interval, deadline, gate).
    :param started_at: epoch seconds when the run started, for the duration.
    """

    def __init__(
        self,
        *,
        loadtest_conn_id: str,
        run_record: dict[str, Any],
        options: dict[str, Any],
        started_at: float,
    ) -> None:
        super().__init__()
        self.loadtest_conn_id = loadtest_conn_id
        self.run_record = run_record
        self.options = options
        self.started_at = started_at

    @property
    def bench_result_id(self) -> str:
        return str(self.run_record["bench_result_id"])

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "loadtest_conn_id": self.loadtest_conn_id,
                "run_record": self.run_record,
                "options": self.options,
                "started_at": self.started_at,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_provider_loadtest.decisions.watch import WatchOptions, first_poll_delay, watch_run
        from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient, settings_for

        try:
            settings = await settings_for(self.loadtest_conn_id)
            async with AsyncLoadTestClient(settings) as client:
                options = WatchOptions.from_json(self.options)
                steps = watch_run(
                    self.bench_result_id,
                    options,
                    started_at=self.started_at,
                    # Waits resumed together (a triggerer restart) spread their polls over the interval.
                    first_delay_s=first_poll_delay(self.bench_result_id, options.check_interval_s),
                )
                outcome = await client.drive(steps, self.log)
        except Exception as exc:
            # The event carries the message (never the key: errors are built without it) and the run,
            # so the task fails on the worker with the real reason and says how to stop the run.
            yield TriggerEvent(
                {
                    "status": "error",
                    "run": self.run_record,
                    "message": f"{type(exc).__name__}: {exc}",
                    "never_succeeds": bool(getattr(exc, "never_succeeds", False)),
                }
            )
            return
        yield TriggerEvent({"status": "done", "run": self.run_record, "outcome": outcome.to_json()})

    async def on_kill(self) -> None:
        """A user marked the deferred task failed or cleared it: stop the load test (Airflow 3.3+)."""
        from airflow_provider_loadtest.api import endpoints
        from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient, settings_for

        self.log.warning("The task was stopped by a user: stopping run %s", self.bench_result_id)
        try:
            settings = await settings_for(self.loadtest_conn_id)
            async with AsyncLoadTestClient(settings) as client:
                await asyncio.wait_for(client.call(endpoints.stop_run(self.bench_result_id)), STOP_TIMEOUT_S)
        except Exception as exc:
            self.log.error("Could not stop run %s: %s (stop it in the web UI)", self.bench_result_id, exc)
        else:
            self.log.warning("Stopped run %s", self.bench_result_id)
