"""``LoadTestRunTrigger``: waits for a run in the triggerer, freeing the worker slot.

It drives the same ``watch_run`` steps as the sync path with the async client, so a deferred task
logs, gates, times out and stops the run exactly like a task that waits on its worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: Bound for the best-effort stop when a user kills a deferred task (Airflow gives ``on_kill`` 30 s).
STOP_TIMEOUT_S = 12.0
#: When the triggerer stops running a wait, how long ``on_kill`` keeps asking Airflow the task instance's
#: state (a person's mark-failed, or the wait merely moving elsewhere?) before it gives up and leaves the
#: run going, loudly. A busy API server answers in more than 5 s routinely; the trigger is being torn down
#: anyway, and a person's decision must stand however slowly it is told (issue 34). Past Airflow's own
#: ``[triggerer] on_kill_timeout`` (30 s) the work goes on in the triggerer's loop (``_STOPS_IN_FLIGHT``).
STATE_READ_BUDGET_S = 120.0
#: One ask is waited for this long before the log says it is still being asked (the same ask goes on:
#: a new one would only add to the load of a slow server).
STATE_QUERY_TIMEOUT_S = 5.0
#: After an ask that failed, the pause before the next: doubled each time, up to the maximum.
STATE_RETRY_PAUSE_S = 1.0
STATE_RETRY_PAUSE_MAX_S = 16.0
#: Bound for leaving a pending stop (``decisions.stops.PendingStop``) when the state never answered.
PENDING_WRITE_TIMEOUT_S = 30.0
#: The stops ``on_kill`` started, kept referenced until they end (the loop holds tasks only weakly).
_STOPS_IN_FLIGHT: set[asyncio.Task[None]] = set()

R = TypeVar("R")


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
            return self._handback(_described(exc))
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
                    "message": _described(exc),
                    "never_succeeds": exc.never_succeeds,
                }
            )
        except Exception as exc:
            return self._handback(_described(exc))
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
        tells which (``decisions.stops.cause_in_triggerer``), asked patiently (``STATE_READ_BUDGET_S``:
        a busy API server answers slowly, and a person's decision must stand); when it never answers the
        run is left going, said at ERROR and left as a pending stop for the next try. A clear is left to
        the next try, which records why it stops the old run (a trigger cannot write the task's state
        store).

        The work is shielded: Airflow 3.3.2's triggerer cancels a cancelled trigger again at each of its
        syncs (about every second) until its task ends, which would cut the state read and the stop
        short; the shielded task goes on in the triggerer's loop, bounded by its own timeouts.
        """
        task = asyncio.ensure_future(self._stop_if_a_person_ended_it())
        _STOPS_IN_FLIGHT.add(task)
        task.add_done_callback(_STOPS_IN_FLIGHT.discard)
        await asyncio.shield(task)

    async def _stop_if_a_person_ended_it(self) -> None:
        """``on_kill``'s work: read the task instance's state, stop the run if a person ended the task.

        The state is asked again (with a growing pause) when an ask fails, for ``STATE_READ_BUDGET_S``;
        only a state that says the wait moved on (deferred elsewhere, resuming, up for retry, a clear)
        leaves the run going quietly. Never answered: said at ERROR with the run, its report and how to
        stop it, and left as a pending stop for the next try (``decisions.stops.PendingStop``)."""
        from airflow_provider_loadtest.api import endpoints
        from airflow_provider_loadtest.decisions.runs import is_terminal, normal_state
        from airflow_provider_loadtest.decisions.stops import cause_in_triggerer
        from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient, settings_for
        from airflow_provider_loadtest.lifecycle.support import describe_error

        if not self.stops_on_kill:
            self.log.info("No longer watching run %s here; this task never stops it", self.bench_result_id)
            return
        readable, state = await self._task_state()
        if not readable:
            await self._leave_pending(state)
            return
        cause = cause_in_triggerer(state, readable=True)
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
            self.log.error(
                "Could not stop run %s: %s. %s", self.bench_result_id, describe_error(exc), self._stop_hint()
            )
        else:
            self.log.warning("Stopped run %s", self.bench_result_id)

    async def _task_state(self) -> tuple[bool, Any]:
        """The task instance's state as the API server sees it, asked until it answers or
        ``STATE_READ_BUDGET_S`` passed: ``(True, state)`` or ``(False, why not)``."""
        from airflow_provider_loadtest.lifecycle import support
        from airflow_provider_loadtest.lifecycle.support import describe_error

        ti = getattr(self, "task_instance", None)
        if ti is None:
            return False, "no task instance"
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + STATE_READ_BUDGET_S
        pause = STATE_RETRY_PAUSE_S
        asks, said_slow, why = 0, False, "no answer"
        while loop.time() < deadline:
            asks += 1
            ask = _in_daemon_thread(lambda: support.task_instance_state(ti))
            while not ask.done() and loop.time() < deadline:
                await asyncio.wait({ask}, timeout=min(STATE_QUERY_TIMEOUT_S, deadline - loop.time()))
                if not ask.done() and not said_slow:
                    said_slow = True
                    self.log.warning(
                        "The state of this task instance has not answered in %.0f s: still asking (up to "
                        "%.0f s) before deciding whether run %s is to be stopped",
                        loop.time() - began,
                        STATE_READ_BUDGET_S,
                        self.bench_result_id,
                    )
            if not ask.done():
                why = f"no answer to ask {asks} within {STATE_READ_BUDGET_S:.0f} s"
                break
            try:
                readable, state = ask.result()
            except Exception as exc:
                readable, state = False, describe_error(exc)
            if readable:
                if asks > 1 or said_slow:
                    self.log.info(
                        "The task instance's state answered after %.0f s (ask %d): %s",
                        loop.time() - began,
                        asks,
                        state,
                    )
                return True, state
            why = str(state)
            self.log.warning(
                "Could not read the state of this task instance (ask %d): %s; asking again in %.0f s",
                asks,
                why,
                pause,
            )
            await asyncio.sleep(max(0.0, min(pause, deadline - loop.time())))
            pause = min(pause * 2, STATE_RETRY_PAUSE_MAX_S)
        return False, f"{why}; {asks} ask(s) in {loop.time() - began:.0f} s"

    async def _leave_pending(self, why: str) -> None:
        """The state never answered: whether a person ended the task is unknown. Say so at ERROR, and
        leave the stop pending for the next try (``decisions.stops.PendingStop``)."""
        import time

        from airflow_provider_loadtest.decisions.stops import PendingStop, pending_stop_key
        from airflow_provider_loadtest.lifecycle import support
        from airflow_provider_loadtest.lifecycle.support import describe_error

        ti = getattr(self, "task_instance", None)
        number = getattr(ti, "try_number", None)
        pending = PendingStop(
            self.bench_result_id,
            number if isinstance(number, int) else None,
            time.time(),
            why,
            self.run_record.get("report_url") or None,
        )
        self.log.error(
            "No longer watching run %s here, and the task instance's state could not be read (%s): if a "
            "person marked the task failed or successful, the run was NOT stopped. %s",
            self.bench_result_id,
            why,
            self._stop_hint(),
        )
        try:
            await asyncio.wait_for(
                _in_daemon_thread(lambda: support.write_pending_stop(pending)), PENDING_WRITE_TIMEOUT_S
            )
        except Exception as exc:
            self.log.error(
                "Could not leave the pending stop of run %s in Airflow Variable %s: %s",
                self.bench_result_id,
                pending_stop_key(self.bench_result_id),
                describe_error(exc),
            )
        else:
            self.log.warning(
                "Left a pending stop of run %s in Airflow Variable %s: the next try of this task reads it",
                self.bench_result_id,
                pending_stop_key(self.bench_result_id),
            )

    def _stop_hint(self) -> str:
        from airflow_provider_loadtest.decisions.run_record import stop_hint

        report_url = self.run_record.get("report_url") or None
        return stop_hint(self.bench_result_id, report_url, self.loadtest_conn_id)


def _described(exc: BaseException) -> str:
    """``lifecycle.support.describe_error``, imported only when a wait fails (the lifecycle package is
    the worker's; a healthy wait in the triggerer never loads it)."""
    from airflow_provider_loadtest.lifecycle.support import describe_error

    return describe_error(exc)


def _in_daemon_thread(fn: Callable[[], R]) -> asyncio.Future[R]:
    """``fn()`` in a daemon thread, as a future of the running loop. Unlike ``asyncio.to_thread``, an ask
    that never returns (a hung supervisor channel) does not hold up the loop's shutdown."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[R] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value = fn()
        except Exception as exc:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=target, name="loadtest-trigger-on-kill", daemon=True).start()
    return future
