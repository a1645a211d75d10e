"""One run lifecycle for every task that watches a load test: wait, judge, save, verdict, and when to stop.

``RunScenarioOperator`` (which starts the run) and ``LoadTestRunSensor`` (which waits for one started
elsewhere) are two front doors to the same lifecycle; ``RunLifecycle`` holds everything after "we have a
run", in parts of one job each:

- ``waiting``: wait on the worker or deferred to the triggerer, and take back a wait the triggerer cannot
  do;
- ``verdict``: judge the ended run (its state, the alarm gate, metric budgets and regression bounds
  against a pinned run, the previous night or the history), save the files, describe the outlet events;
- ``transactions``: read the run's JTL files once and judge its transactions;
- ``stopping``: stop a run only when someone or something decided it should end (``decisions.stops``);
- ``base``: the shared settings and the hooks a front door overrides; ``support``: small shared helpers.

Imported at DAG-parse time by the operator and sensor modules: everything heavy loads inside methods.
"""

from __future__ import annotations

from airflow_provider_loadtest.lifecycle.stopping import Stopping
from airflow_provider_loadtest.lifecycle.support import (
    WorkerLeaving,
    context_get,
    dag_run_conf,
    history_settings_of,
    refusing_what_cannot_succeed,
    relay,
    task_instance_state,
)
from airflow_provider_loadtest.lifecycle.transactions import TransactionJudging
from airflow_provider_loadtest.lifecycle.verdict import Judging
from airflow_provider_loadtest.lifecycle.waiting import Waiting


class RunLifecycle(Judging, TransactionJudging, Stopping, Waiting):
    """Mixin for a ``BaseOperator`` that watches a run: see the package docstring.

    The front door sets the shared attributes (``_init_watch`` checks and sets them), finds its run,
    calls ``_adopt`` and then ``_wait_for``. It may override ``_record_stop`` (where a stop decision is
    remembered), ``_store_holds`` (whether a retry could find the run), ``_may_stop`` (which decisions
    stop the run) and ``_run_timeout_s`` (the longest wait from the run's start).
    """


__all__ = [
    "RunLifecycle",
    "WorkerLeaving",
    "context_get",
    "dag_run_conf",
    "history_settings_of",
    "refusing_what_cannot_succeed",
    "relay",
    "task_instance_state",
]
