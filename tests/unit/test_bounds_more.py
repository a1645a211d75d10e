"""Issue 10, on top of ``test_bounds.py``: a key that cannot go into a header is never retried, a huge
``run=`` text is a clear error, downloads have their own bound and can stream to disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.compat import AirflowFailException
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.hooks.settings import settings_from_connection
from airflow_provider_loadtest.operators.report import run_ids
from tests.conftest import BASE_URL

FILE_URL = f"{BASE_URL}/analysis/logs/br-1?filename=big.log"


class _Conn:
    host = BASE_URL
    port = None
    schema = None
    extra_dejson: dict[str, Any] = {}

    def __init__(self, password: str) -> None:
        self.password = password


@pytest.mark.parametrize("key", ["abc\ndef-secret", "abc\x85def-secret", "abc€def-secret", " secret-key"])
def test_a_key_that_cannot_be_a_header_fails_without_airflow_retries(key: str) -> None:
    """``AirflowFailException``: Airflow does not retry it (a bad key cannot get better)."""
    with pytest.raises(AirflowFailException) as raised:
        settings_from_connection(_Conn(key))
    assert isinstance(raised.value, ValueError)  # still a bad setting for callers catching ValueError
    assert "secret" not in str(raised.value)


def test_a_huge_run_text_is_a_clear_value_error() -> None:
    """``ast.literal_eval`` of 200,000 ``[`` raised ``MemoryError``: the length is checked first."""
    with pytest.raises(ValueError, match="run is 200000 characters long"):
        run_ids("[" * 200_000, report_id=None, bench_result_id=None, need_report=False)


@pytest.fixture
def hook(loadtest_conn: str, monkeypatch: pytest.MonkeyPatch) -> LoadTestHook:
    monkeypatch.setattr(hook_module, "_sleep", lambda seconds: None)
    return LoadTestHook(loadtest_conn_id=loadtest_conn)


def test_a_run_file_streams_to_disk_and_a_retry_rewrites_it(
    hook: LoadTestHook, requests_mock: rm.Mocker, tmp_path: Path
) -> None:
    requests_mock.get(FILE_URL, [{"status_code": 503, "text": "busy"}, {"content": b"line\n" * 1000}])
    target = tmp_path / "big.log"
    assert hook.save_run_file("br-1", "big.log", target) == 5000
    assert target.read_bytes() == b"line\n" * 1000


def test_a_download_over_its_bound_fails_naming_the_call(
    hook: LoadTestHook, requests_mock: rm.Mocker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(endpoints, "MAX_DOWNLOAD_BYTES", 100)
    requests_mock.get(FILE_URL, content=b"x" * 1000)
    with pytest.raises(LoadTestApiError, match=r"Download file 'big.log' of run 'br-1'.*larger than 100"):
        hook.save_run_file("br-1", "big.log", tmp_path / "big.log")
    with pytest.raises(LoadTestApiError, match=r"larger than 100"):
        hook.download_run_file("br-1", "big.log")
