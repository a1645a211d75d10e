"""``[core] hostname_callable`` of the rig: each component gets the name of the machine it stands for.

In a real deployment each worker and triggerer runs on its own host; here they share one, so each is
started with ``LOADTEST_RIG_HOSTNAME`` (``worker-1``, ``triggerer-2``...). Airflow then records which
worker runs a task instance (``task_instance.hostname``) and which triggerer holds a trigger
(``job.hostname``), which is how the rig finds the victims of an attack.

A slow control plane (issue 34): a component started with ``LOADTEST_RIG_SLOW_STATE_S="6,20"`` answers
every task-instance state read (what a trigger's ``on_kill`` asks) after a random 6-20 s, as Airflow's
API server under load did in production. The triggerer of Airflow 3.3 serves its triggers' requests
through an in-process execution API, not over HTTP, so no proxy can sit in front of it: the delay is put
into its Task SDK client here, the first time Airflow asks this callable for the host's name (as the
triggerer's job starts, in the process that serves those requests). The process's log says each hold.
"""

from __future__ import annotations

import os
import random
import socket
import sys
import time
from typing import Any

SLOW_STATE_ENV = "LOADTEST_RIG_SLOW_STATE_S"
HOLD_LINE = "rig: holding a task-instance state read"
_slowed: list[bool] = []  # once per process


def from_env() -> str:
    _slow_state_reads()
    return os.environ.get("LOADTEST_RIG_HOSTNAME") or socket.getfqdn()


def _slow_state_reads() -> None:
    spec = os.environ.get(SLOW_STATE_ENV)
    if not spec or _slowed:
        return
    _slowed.append(True)
    low, high = (float(part) for part in spec.split(","))
    from airflow.sdk.api.client import TaskInstanceOperations

    rng = random.Random(os.getpid())
    original = TaskInstanceOperations.get_task_states

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        delay = rng.uniform(low, high)
        print(f"{HOLD_LINE} {delay:.1f} s (a slow API server)", file=sys.stderr, flush=True)
        time.sleep(delay)
        return original(self, *args, **kwargs)

    TaskInstanceOperations.get_task_states = slow  # type: ignore[method-assign]
