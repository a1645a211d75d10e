"""Test-wide setup: an isolated, throwaway Airflow home, set before anything imports Airflow."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

_HOME = tempfile.mkdtemp(prefix="loadtest-tests-airflow-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)  # nothing of ours is left in the temp dir
os.environ["AIRFLOW_HOME"] = _HOME
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")

API_KEY = "test-key-5b8e0c1f"
BASE_URL = "https://loadtest.example.test"


def connection_json(host: str = BASE_URL, password: str = API_KEY, **extra: object) -> str:
    """An ``AIRFLOW_CONN_*`` value for a ``loadtest`` connection."""
    return json.dumps({"conn_type": "loadtest", "host": host, "password": password, "extra": extra})


@pytest.fixture(autouse=True)
def _async_connection_lookup_outside_a_triggerer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow before 3.3 looks connections up asynchronously only through a triggerer's supervisor,
    which unit tests do not have: there, triggers under test read the connection synchronously (3.3+
    runs the real async lookup, and the end-to-end tests a real triggerer)."""
    from airflow_provider_loadtest.compat import AIRFLOW_V_3_3_PLUS

    if AIRFLOW_V_3_3_PLUS:
        return
    from airflow.sdk import BaseHook

    from airflow_provider_loadtest.hooks import async_client
    from airflow_provider_loadtest.hooks.settings import settings_from_connection

    async def sync_lookup(conn_id: str) -> object:
        return settings_from_connection(BaseHook.get_connection(conn_id))

    monkeypatch.setattr(async_client, "settings_for", sync_lookup)


@pytest.fixture
def loadtest_conn(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The default connection, pointing at a fake host that requests-mock answers."""
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", connection_json())
    yield "loadtest_default"
