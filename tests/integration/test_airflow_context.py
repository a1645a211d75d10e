"""The unit tests' and the chaos runner's fake context (``tests.airflow_context``) against a real one.

A tiny DAG (``context_dag/``) runs under ``airflow dags test`` and returns the names of what its task
received; every name the helper gives (context keys, ``dag_run`` and ``ti`` attributes, the store's
methods) must be one a real task gets, with the values a first try of an uncleared DAG run has. A fake
that invents a name, or drops one the package reads, fails here (about 20 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools.local_airflow import AirflowHome
from tests.airflow_context import (
    CONTEXT_KEYS,
    DAG_RUN_FIELDS,
    STORE_METHODS,
    TI_FIELDS,
    TaskStateStore,
    dag_run,
    mock_ti,
    task_context,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = AirflowHome(tmp_path_factory.mktemp("context") / "home", [Path(__file__).with_name("context_dag")])
    result = home.dags_test("loadtest_context_keys", {})
    assert result.succeeded, result.output[-4000:]
    dumped: dict[str, Any] = result.summary["tasks"]["dump"]["xcom"]["return_value"]
    return dumped


def test_the_fake_contexts_keys_are_airflows(real: dict[str, Any]) -> None:
    built = task_context(mock_ti(), TaskStateStore())
    assert set(built) == set(CONTEXT_KEYS)
    assert set(built) <= set(real["keys"]), sorted(set(built) - set(real["keys"]))
    assert real["task_instance_is_ti"] and real["run_id_is_dag_runs"]


def test_the_fake_dag_run_ti_and_store_name_only_what_airflow_gives(real: dict[str, Any]) -> None:
    assert set(DAG_RUN_FIELDS) <= set(real["dag_run"]), sorted(set(DAG_RUN_FIELDS) - set(real["dag_run"]))
    assert set(vars(dag_run())) == set(DAG_RUN_FIELDS)
    assert set(TI_FIELDS) | {"xcom_push", "xcom_pull"} <= set(real["ti"])
    assert real["store"] is not None, "Airflow 3.3 gives every task its state store"
    assert set(STORE_METHODS) <= set(real["store"])
    assert all(callable(getattr(TaskStateStore, name)) for name in STORE_METHODS)


def test_a_first_try_of_an_uncleared_run_looks_as_the_fake_says(real: dict[str, Any]) -> None:
    fake_run, fake_ti = dag_run(), mock_ti(max_tries=2)
    assert (real["clear_number"], real["conf"]) == (fake_run.clear_number, fake_run.conf) == (0, {})
    assert (real["try_number"], real["max_tries"]) == (fake_ti.try_number, fake_ti.max_tries) == (1, 2)
