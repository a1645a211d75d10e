"""``ReportPrintTrigger``: the deferred ``DownloadReportOperator``'s wait for the PDF, in the triggerer.

It drives ``decisions.report_pdf.print_report`` (start the print task, poll it) with the async client
and fires the produced file's name; the worker downloads it in ``execute_complete``, so the PDF's bytes
never pass through the trigger event or the metadata database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class ReportPrintTrigger(BaseTrigger):
    """Print report ``report_id`` and wait for the file.

    :param loadtest_conn_id: connection to read (with Airflow's async connection API).
    :param report_id: the report to print (already rendered and checked).
    :param bench_result_id: the run whose files hold the PDF; handed back in the event for the download
        (Airflow 3.3 does not hand ``defer(kwargs=...)`` to ``execute_complete``).
    :param export_config: the ``ExportReportConfig`` as the service's JSON, or ``None``.
    :param timeout: longest wait for the print task, in seconds.
    :param poll_interval: seconds between two polls of the print task.
    """

    def __init__(
        self,
        *,
        loadtest_conn_id: str,
        report_id: str,
        bench_result_id: str,
        export_config: dict[str, Any] | None,
        timeout: float,
        poll_interval: float,
    ) -> None:
        super().__init__()
        self.loadtest_conn_id = loadtest_conn_id
        self.report_id = report_id
        self.bench_result_id = bench_result_id
        self.export_config = export_config
        self.timeout = timeout
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "loadtest_conn_id": self.loadtest_conn_id,
                "report_id": self.report_id,
                "bench_result_id": self.bench_result_id,
                "export_config": self.export_config,
                "timeout": self.timeout,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_provider_loadtest.decisions.report_pdf import export_config, print_report
        from airflow_provider_loadtest.triggers.common import drive_to_event

        event = await drive_to_event(
            self.loadtest_conn_id,
            lambda key: print_report(
                self.report_id,
                self.bench_result_id,
                config=export_config(self.export_config),
                timeout_s=self.timeout,
                poll_interval_s=self.poll_interval,
                secret=key,
            ),
            self.log,
        )
        if event["status"] == "done":
            event["filename"] = event.pop("value")
        event.update(report_id=self.report_id, bench_result_id=self.bench_result_id)
        yield TriggerEvent(event)
