"""``LoadTestRunTrigger``: waits for a run in the triggerer, freeing the worker slot.

It drives the same ``watch_run`` steps as the sync path with the async client, so a deferred task
logs, gates, times out and stops the run exactly like a task that waits on its worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: Bound for the best-effort stop when a user kills a deferred task (Airflow gives ``on_kill`` 30 s).
STOP_TIMEOUT_S = 12.0
#: Bound for asking Airflow the task instance's state when the triggerer stops running a wait.
STATE_QUERY_TIMEOUT_S = 5.0
#: The stops ``on_kill`` started, kept referenced until they end (the loop holds tasks only weakly).
_STOPS_IN_FLIGHT: set[asyncio.Task[None]] = set()


class LoadTestRunTrigger(BaseTrigger):
    """Poll run ``run_record["bench_result_id"]`` until it ends; fire one event with the outcome.

    :param loadtest_conn_id: connection to read (with Airflow's async connection API).
    :param run_record: the ``StartedRun`` dict, handed back to ``execute_complete`` untouched.
    :param options: ``WatchOptions`` as JSON (interval, deadline, gate).
    :param started_at: epoch seconds when the run started, for the duration.
    :param stops_on_kill: whether a person ending the task stops the run (``RunScenarioOperator``: yes,
        it started it; ``LoadTestRunSensor``: no). Triggers stored by earlier versions had no such
        field and belong to the operator.
    """

    def __init__(
        self,
        *,
        loadtest_conn_id: str,
        run_record: dict[str, Any],
        options: dict[str, Any],
        started_at: float,
        stops_on_kill: bool = True,
    ) -> None:
        super().__init__()
        self.loadtest_conn_id = loadtest_conn_id
        self.run_record = run_record
        self.options = options
        self.started_at = started_at
        self.stops_on_kill = stops_on_kill

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
                "stops_on_kill": self.stops_on_kill,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_provider_loadtest.triggers.common import settled

        async with settled():  # never an event within seconds of deferring: see EVENT_SETTLE_S
            event = await self._outcome()
        yield event

    async def _outcome(self) -> TriggerEvent:
        """The one event of this wait: the run's outcome, an error of the service, or a handback."""
        try:
            from airflow_provider_loadtest.api.errors import LoadTestApiError
            from airflow_provider_loadtest.decisions.watch import WatchOptions, first_poll_delay, watch_run
            from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient, settings_for

            settings = await settings_for(self.loadtest_conn_id)
            options = WatchOptions.from_json(self.options)
        except Exception as exc:
            # The triggerer cannot watch for a reason of its own (a connection it cannot read, a module
            # it cannot import, settings it cannot read): hand the wait back to a worker rather than
            # leave the run unwatched.
            return self._handback(f"{type(exc).__name__}: {exc}")
        try:
            async with AsyncLoadTestClient(settings) as client:
                steps = watch_run(
                    self.bench_result_id,
                    options,
                    started_at=self.started_at,
                    # Waits resumed together (a triggerer restart) spread their polls over the interval.
                    first_delay_s=first_poll_delay(self.bench_result_id, options.check_interval_s),
                )
                outcome = await client.drive(steps, self.log)
        except LoadTestApiError as exc:
            # The event carries the message (never the key: errors are built without it) and the run,
            # so the task fails on the worker with the real reason and says how to stop the run.
            return TriggerEvent(
                {
                    "status": "error",
                    "run": self.run_record,
                    "message": f"{type(exc).__name__}: {exc}",
                    "never_succeeds": exc.never_succeeds,
                }
            )
        except Exception as exc:
            return self._handback(f"{type(exc).__name__}: {exc}")
        return TriggerEvent({"status": "done", "run": self.run_record, "outcome": outcome.to_json()})

    def _handback(self, why: str) -> TriggerEvent:
        self.log.warning(
            "Cannot watch run %s in the triggerer (%s): handing it back to a worker",
            self.bench_result_id,
            why,
        )
        return TriggerEvent({"status": "handback", "run": self.run_record, "message": why})

    async def on_kill(self) -> None:
        """Airflow 3.3 stopped running this wait here: stop the load test only if a person ended the task.

        Airflow calls this alike when a person marks the deferred task failed or successful, clears it,
        and when the wait merely moved to another triggerer (this one stalled past its health-check
        threshold) or the task resumes on a worker. The task instance's state as the API server sees it
        tells which (``decisions.stops.cause_in_triggerer``); when in doubt the run is left going, for the
        other triggerer or the next try. A clear is left to the next try, which records why it stops the
        old run (a trigger cannot write the task's state store).

        The work is shielded: Airflow 3.3.2's triggerer cancels a cancelled trigger again at each of its
        syncs (about every second) until its task ends, which would cut the state read and the stop
        short; the shielded task goes on in the triggerer's loop, bounded by its own timeouts.
        """
        task = asyncio.ensure_future(self._stop_if_a_person_ended_it())
        _STOPS_IN_FLIGHT.add(task)
        task.add_done_callback(_STOPS_IN_FLIGHT.discard)
        await asyncio.shield(task)

    async def _stop_if_a_person_ended_it(self) -> None:
        """``on_kill``'s work: read the task instance's state, stop the run if a person ended the task."""
        from airflow_provider_loadtest.api import endpoints
        from airflow_provider_loadtest.decisions.runs import is_terminal, normal_state
        from airflow_provider_loadtest.decisions.stops import cause_in_triggerer
        from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient, settings_for
        from airflow_provider_loadtest.lifecycle import support

        if not self.stops_on_kill:
            self.log.info("No longer watching run %s here; this task never stops it", self.bench_result_id)
            return
        ti = getattr(self, "task_instance", None)
        readable, state = False, "no task instance"
        if ti is not None:
            try:
                readable, state = await asyncio.wait_for(
                    asyncio.to_thread(support.task_instance_state, ti), STATE_QUERY_TIMEOUT_S
                )
            except Exception as exc:  # including the wait's timeout
                readable, state = False, f"{type(exc).__name__}: {exc}"
        cause = cause_in_triggerer(state, readable=readable)
        if cause is None:
            self.log.info(
                "No longer watching run %s here (task instance state: %s); it is left going for whoever "
                "watches it next",
                self.bench_result_id,
                state,
            )
            return
        self.log.warning(
            "The task was ended by a person (state %s): stopping run %s", state, self.bench_result_id
        )
        try:
            settings = await settings_for(self.loadtest_conn_id)
            async with AsyncLoadTestClient(settings) as client:
                result = await asyncio.wait_for(
                    client.call(endpoints.get_bench_result(self.bench_result_id)), STOP_TIMEOUT_S
                )
                if is_terminal(normal_state(result.state)):
                    self.log.info("Run %s already ended %s", self.bench_result_id, result.state)
                    return
                await asyncio.wait_for(client.call(endpoints.stop_run(self.bench_result_id)), STOP_TIMEOUT_S)
        except Exception as exc:
            self.log.error("Could not stop run %s: %s (stop it in the web UI)", self.bench_result_id, exc)
        else:
            self.log.warning("Stopped run %s", self.bench_result_id)
