"""``[core] hostname_callable`` of the rig: each component gets the name of the machine it stands for.

In a real deployment each worker and triggerer runs on its own host; here they share one, so each is
started with ``LOADTEST_RIG_HOSTNAME`` (``worker-1``, ``triggerer-2``...). Airflow then records which
worker runs a task instance (``task_instance.hostname``) and which triggerer holds a trigger
(``job.hostname``), which is how the rig finds the victims of an attack.
"""

from __future__ import annotations

import os
import socket


def from_env() -> str:
    return os.environ.get("LOADTEST_RIG_HOSTNAME") or socket.getfqdn()
