"""What the package's operators and sensors share: the connection, a lazily built hook, id checks.

Imported at DAG-parse time by every task module, so it imports nothing heavy.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.api.validation import is_templated, validate_path_id

if TYPE_CHECKING:
    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

DEFAULT_CONN_ID = "loadtest_default"


def check_literal_ids(**values: Any) -> None:
    """Refuse bad ids at DAG-parse time when they are plain strings (templates are checked later)."""
    for parameter, value in values.items():
        if isinstance(value, str) and not is_templated(value):
            validate_path_id(parameter, value)


class LoadTestHookMixin:
    """Gives a task ``self.hook``, built on first use: never at DAG-parse time, once per task run."""

    loadtest_conn_id: str

    @cached_property
    def hook(self) -> LoadTestHook:
        from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

        return LoadTestHook(loadtest_conn_id=self.loadtest_conn_id)
