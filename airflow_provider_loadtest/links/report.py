"""The "Load test report" button on a task: the run's report in the service's web UI."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

#: XCom key holding the report's web UI URL, pushed as soon as a run starts.
REPORT_URL_XCOM_KEY = "loadtest_report_url"


class LoadTestReportLink(BaseOperatorLink):
    """Links a task to the report of the load test it started.

    Airflow 3 computes links on the worker when a task ends and stores them in XCom under
    ``xcom_key``; ``publish`` pushes that XCom the moment the run starts, so the button works while
    the test is still running (or the task is deferred), not only afterwards.
    """

    name = "Load test report"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        url = XCom.get_value(ti_key=ti_key, key=REPORT_URL_XCOM_KEY)
        return url if isinstance(url, str) else ""

    @classmethod
    def publish(cls, context: Any, url: str | None) -> None:
        """Make the link available now (no-op without a URL or outside a real task run)."""
        ti = context.get("ti") if hasattr(context, "get") else None
        if not url or ti is None:
            return
        ti.xcom_push(key=REPORT_URL_XCOM_KEY, value=url)
        ti.xcom_push(key=cls().xcom_key, value=url)
