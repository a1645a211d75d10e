"""The "Load test report" button on a task: the run's report in the service's web UI."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

#: XCom key holding the report's web UI URL, pushed as soon as a run starts.
REPORT_URL_XCOM_KEY = "loadtest_report_url"

#: Where ``publish`` leaves the URL on the operator, for ``get_link`` at the end of the same task process.
_URL_ATTRIBUTE = "_loadtest_report_url"


class LoadTestReportLink(BaseOperatorLink):
    """Links a task to the report of the load test it started.

    Airflow 3 computes links on the worker when a task ends and stores them in XCom under
    ``xcom_key``; ``publish`` pushes that XCom the moment the run starts, so the button works while
    the test is still running (or the task is deferred), not only afterwards.

    ``get_link`` reads the URL ``publish`` left on the operator instead of asking the XCom API: a task
    that failed before starting a run has no such XCom, and the API logs every miss as
    ``[error] XCom not found``, which reads like a second failure. A task resumed after deferral
    publishes again from the run record the trigger hands back.
    """

    name = "Load test report"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        url = getattr(operator, _URL_ATTRIBUTE, None)
        return url if isinstance(url, str) else ""

    @classmethod
    def publish(cls, context: Any, url: str | None) -> None:
        """Make the link available now (no-op without a URL; XCom only inside a real task run)."""
        if not url or not hasattr(context, "get"):
            return
        task = context.get("task")
        if task is not None:
            setattr(task, _URL_ATTRIBUTE, url)
        ti = context.get("ti")
        if ti is None:
            return
        ti.xcom_push(key=REPORT_URL_XCOM_KEY, value=url)
        ti.xcom_push(key=cls().xcom_key, value=url)
