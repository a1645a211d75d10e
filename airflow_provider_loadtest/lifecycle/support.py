"""What the run lifecycle's parts share: bounded calls from a signal handler, Airflow's view of the task
instance, relaying a sans-I/O generator, reading the DAG run's conf and the history settings.

Imported at DAG-parse time (through the operator and sensor modules): nothing heavy at module level.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_provider_loadtest.decisions.stops import PendingStop, StopCause

R = TypeVar("R")

#: How long ``on_kill`` may spend asking Airflow why the task is being ended, and then stopping the run:
#: Airflow's task supervisor escalates to SIGKILL 5 s after its SIGTERM.
KILL_QUERY_S = 1.5
KILL_STOP_S = 3.0


@dataclass(frozen=True)
class Kill:
    """What ``on_kill`` found: the decision to end the run (``cause``), or ``None`` for "the watcher is
    going away, the run is not to be stopped"."""

    cause: StopCause | None
    at: float
    detail: str


def describe_error(exc: BaseException) -> str:
    """An exception in words for a log line or a message: its type and its text, or its ``repr`` when
    the text is empty (``TimeoutError()`` says ``TimeoutError: `` otherwise, which tells nobody anything)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text.strip() else f"{type(exc).__name__} ({exc!r})"


class WorkerLeaving(BaseException):
    """Raised by ``on_kill`` into the wait it interrupts, so the wait ends now. A ``BaseException``, like
    the ``KeyboardInterrupt`` it stands for: no ``except Exception`` on the way (an HTTP client's retry,
    a generator's error handling) may swallow it; ``_watch_here`` turns it into the task's failure."""


def in_thread(fn: Callable[[], Any], seconds: float) -> tuple[bool, Any]:
    """Run ``fn`` in a daemon thread, waiting at most ``seconds``: ``(True, result)`` or ``(False, why)``.

    ``on_kill`` runs in a signal handler on the task's main thread, which may have been interrupted while
    holding the lock of Airflow's channel to its supervisor (or of the HTTP pool): calling them from that
    thread could deadlock, so the calls go through a thread of their own, bounded.
    """
    box: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            box.append((True, fn()))
        except Exception as exc:
            box.append((False, describe_error(exc)))

    thread = threading.Thread(target=target, name="loadtest-on-kill", daemon=True)
    thread.start()
    thread.join(seconds)
    return box[0] if box else (False, f"no answer within {seconds:g} s")


def task_instance_state(ti: Any) -> tuple[bool, Any]:
    """The task instance's state as the API server sees it now: ``(readable, state)``.

    Through the Task SDK's supervisor channel (``RuntimeTaskInstance.get_task_states``), which works on a
    worker and, from a thread, in the triggerer.
    """
    try:
        from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

        map_index = getattr(ti, "map_index", -1)
        map_index = map_index if isinstance(map_index, int) else -1
        states = RuntimeTaskInstance.get_task_states(
            dag_id=ti.dag_id,
            task_ids=[ti.task_id],
            run_ids=[ti.run_id],
            map_index=map_index if map_index >= 0 else None,
        )
        key = ti.task_id if map_index < 0 else f"{ti.task_id}_{map_index}"
        by_task = states.get(ti.run_id)
        if not isinstance(by_task, dict) or key not in by_task:
            return False, "the task instance was not found"
        return True, by_task[key]
    except Exception as exc:
        return False, describe_error(exc)


def write_pending_stop(pending: PendingStop) -> None:
    """Leave ``pending`` where the next watcher of its run finds it (``decisions.stops.PendingStop``): an
    Airflow Variable, through the Task SDK (a worker, or a thread of the triggerer). Raises on failure."""
    import json

    from airflow.sdk import Variable

    from airflow_provider_loadtest.decisions.stops import pending_stop_key

    Variable.set(
        pending_stop_key(pending.bench_result_id),
        json.dumps(pending.to_store()),
        description="A stop of this load test run that nobody could confirm (airflow-provider-loadtest): "
        "the next try of its task reads and removes it",
    )


def read_pending_stop(bench_result_id: str) -> PendingStop | None:
    """The pending stop left for ``bench_result_id``, or ``None`` (none, or it cannot be read)."""
    from airflow.sdk import Variable

    from airflow_provider_loadtest.decisions.stops import PendingStop, pending_stop_key

    return PendingStop.from_store(Variable.get(pending_stop_key(bench_result_id), default=None))


def clear_pending_stop(bench_result_id: str) -> None:
    """Remove the pending stop of ``bench_result_id`` once it was acted on."""
    from airflow.sdk import Variable

    from airflow_provider_loadtest.decisions.stops import pending_stop_key

    Variable.delete(pending_stop_key(bench_result_id))


@contextmanager
def refusing_what_cannot_succeed() -> Iterator[None]:
    """Fail without retries on what a retry would meet again: a refused key, an unknown scenario or
    template, an id or setting that fails validation once rendered."""
    from airflow_provider_loadtest.api.errors import (
        AmbiguousTemplateError,
        LoadTestApiError,
        TemplateNotFoundError,
    )
    from airflow_provider_loadtest.compat import AirflowFailException

    try:
        yield
    except LoadTestApiError as exc:
        if exc.never_succeeds:
            raise AirflowFailException(f"{exc} (not retried: a retry would get the same answer)") from exc
        raise
    except (ValueError, TemplateNotFoundError, AmbiguousTemplateError) as exc:
        raise AirflowFailException(f"{exc} (not retried: a retry would meet the same problem)") from exc


_NOTHING: Any = object()


def relay(
    steps: Generator[Any, Any, R],
    *,
    on_action: Callable[[Any], None] | None = None,
    first_answer: Any = _NOTHING,
) -> Generator[Any, Any, R]:
    """Pass a sans-I/O generator's actions through to a driver, answers and errors back, unchanged but
    for: ``on_action`` sees each action first; ``first_answer`` answers its first request (a state read
    a moment ago) without sending it."""
    from airflow_provider_loadtest.api.errors import LoadTestApiError

    send: Any = None
    error: LoadTestApiError | None = None
    if first_answer is not _NOTHING:
        try:
            steps.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        send = first_answer
    while True:
        try:
            action = steps.throw(error) if error is not None else steps.send(send)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        send, error = None, None
        if on_action is not None:
            on_action(action)
        try:
            send = yield action
        except LoadTestApiError as exc:
            error = exc


def context_get(context: Any, key: str) -> Any:
    return context.get(key) if hasattr(context, "get") else None


def dag_run_conf(context: Any) -> Mapping[str, Any]:
    """The DAG run's conf as far as the gate reads it (``loadtest_accept_change``).

    Airflow 3.1 to 3.3 give a task both ``dag_run.conf`` (what the person triggered the run with) and
    ``params`` (the DAG's params, overridden by the conf unless ``[core] dag_run_conf_overrides_params``
    is off). The conf is read first; the params serve when the conf does not name the key, so a DAG
    may declare ``loadtest_accept_change`` as a ``Param`` (a checkbox in the trigger form).
    """
    from airflow_provider_loadtest.decisions.gate.history import ACCEPT_CHANGE

    conf = getattr(context_get(context, "dag_run"), "conf", None)
    conf = conf if isinstance(conf, Mapping) else {}
    if ACCEPT_CHANGE in conf:
        return conf
    params = context_get(context, "params")
    if isinstance(params, Mapping) and ACCEPT_CHANGE in params:
        return {ACCEPT_CHANGE: params[ACCEPT_CHANGE]}
    return conf


#: Why a templated mapping arrives as text, and the two ways out.
RENDERED_AS_TEXT_HINT = (
    ": a template renders as text unless the DAG sets render_template_as_native_obj=True; set it, or "
    "write the mapping in Python with a template in each value ({'window': '{{ var.value.window }}'})"
)


def history_settings_of(value: object, baseline: object, *, literal_only: bool = False) -> dict[str, Any]:
    """``history_settings`` as keyword arguments of ``HistorySettings.parse``, checked; ``ValueError``
    names what is wrong.

    Rendered templates are strings: a number in one (``"20"``) is read as the number. ``literal_only``
    (at DAG-parse time) skips what is still a template; with a templated entry only the names are
    checked then, the values once rendered.
    """
    from airflow_provider_loadtest.api.validation import is_templated
    from airflow_provider_loadtest.decisions.gate.history import HISTORY, HistorySettings

    if not value or (literal_only and is_templated(value)):
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            f"history_settings must be a mapping of setting name to value, got {type(value).__name__}"
            + (RENDERED_AS_TEXT_HINT if isinstance(value, str) else "")
        )
    if baseline != HISTORY and not (literal_only and is_templated(baseline)):
        raise ValueError(f"history_settings apply to baseline='history', not baseline={baseline!r}")
    names = [name for name in value if not (literal_only and is_templated(name))]
    unknown = [name for name in names if name not in HistorySettings.__dataclass_fields__]
    if unknown:
        HistorySettings.parse(**{str(name): None for name in unknown})  # the error names them
    settings = {
        name: _number_of(setting)
        for name, setting in value.items()
        if not (literal_only and (is_templated(name) or is_templated(setting)))
    }
    if len(settings) == len(value):  # a setting still templated is checked with the others once rendered
        HistorySettings.parse(**settings)
    return settings


def _number_of(value: object) -> object:
    """A rendered template's number (``"20"``, ``"2.5"``) as the number; anything else as it is."""
    if not isinstance(value, str):
        return value
    for kind in (int, float):
        try:
            return kind(value.strip())
        except ValueError:
            continue
    return value
