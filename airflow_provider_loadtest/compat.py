"""What moved between the Airflow releases this package supports (3.1 up to the newest 3.x), in one place.

Airflow 3.2 moved the task-facing names into the Task SDK: ``airflow.sdk.conf`` and
``airflow.sdk.exceptions.AirflowFailException`` (and friends). On 3.1 they only exist in core
(``airflow.configuration``, ``airflow.exceptions``), and the 3.1 task runner catches exactly those
classes, so the fallback is the class Airflow itself handles, not a copy. On 3.2+ the core names still
import but warn.

Everything else the package uses (``BaseOperator``, ``BaseHook``, ``BaseOperatorLink``,
``PokeReturnValue``, ``ObjectStoragePath``, ``airflow.sdk.exceptions.AirflowException``,
``airflow.sdk.log.mask_secret``) has the same address on every supported release: import it from there.

Cheap on purpose: operator modules import it at DAG-parse time. On 3.1 ``airflow.configuration`` and
``airflow.exceptions`` are already loaded by ``import airflow``; on 3.2+ both names come from modules that
``airflow.sdk`` loads anyway.
"""

from __future__ import annotations

import re

import airflow


def _major_minor(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"unexpected Airflow version {version!r}")
    return int(match[1]), int(match[2])


try:
    from airflow.sdk import conf
except ImportError:  # Airflow < 3.2
    from airflow.configuration import conf  # type: ignore[assignment]

try:
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        AirflowTaskTimeout,
        TaskDeferralTimeout,
        TaskDeferred,
    )
except ImportError:  # Airflow < 3.2
    from airflow.exceptions import (  # type: ignore[attr-defined,no-redef]
        AirflowException,
        AirflowFailException,
        AirflowRescheduleException,
        AirflowSensorTimeout,
        AirflowSkipException,
        AirflowTaskTimeout,
        TaskDeferralTimeout,
        TaskDeferred,
    )

#: The running Airflow's (major, minor), for the few places that behave differently (tests mostly).
AIRFLOW_VERSION: tuple[int, int] = _major_minor(airflow.__version__)
AIRFLOW_V_3_2_PLUS = AIRFLOW_VERSION >= (3, 2)
AIRFLOW_V_3_3_PLUS = AIRFLOW_VERSION >= (3, 3)

__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowRescheduleException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "AirflowTaskTimeout",
    "TaskDeferralTimeout",
    "TaskDeferred",
    "conf",
]
