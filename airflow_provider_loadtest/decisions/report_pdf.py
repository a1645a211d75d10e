"""Getting a report as a PDF: start a print task, wait for it, download the file it produced.

Like ``watch.watch_run``, ``export_report_pdf`` does no I/O: it yields the calls, pauses and log lines
it needs and is sent the answers, so the rules (both polling shapes, how a failure reads, the time
bound, the PDF check) live in one place whatever drives them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import trim_service_text
from airflow_provider_loadtest.api.validation import validate_path_id
from airflow_provider_loadtest.decisions.watch import Log, Sleep
from airflow_provider_loadtest.models import (
    ExportReportConfig,
    FailedTaskResult,
    PrintReportTaskResult,
    TaskStatus,
    TaskStatusEnvelope,
    UnknownTaskResult,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.api.endpoints import ApiRequest

#: Every PDF file starts with these bytes; an HTML error page or a JSON document does not.
PDF_MAGIC = b"%PDF-"
DEFAULT_PDF_TIMEOUT_S = 600.0
#: How much of a non-PDF answer is read to quote its start (key redacted first, then cut to 60).
_SHOWN_WINDOW_BYTES = 4096
DEFAULT_PDF_POLL_INTERVAL_S = 5.0
#: How much of a failed task's message goes into the error: its first lines, not a Java stack trace.
_FAILURE_LINES = 3


def _monotonic() -> float:
    """The clock of the time bound; tests move it instead of waiting."""
    return time.monotonic()


def export_config(value: ExportReportConfig | Mapping[str, Any] | None) -> ExportReportConfig | None:
    """The typed export settings from a model or from plain (templated) DAG data.

    Plain data may use the service's names (``pageFormat``) or Python ones (``page_format``), with or
    without ``@type``; unknown keys are refused here rather than silently ignored by the service.
    """
    if value is None or isinstance(value, ExportReportConfig):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"export_config must be a mapping, got {type(value).__name__}")
    data = {"@type": "ExportReportConfig", **value}
    config = ExportReportConfig.model_validate(data)
    if config.model_extra:
        raise ValueError(
            f"export_config has unknown settings {sorted(config.model_extra)}; known: "
            + ", ".join(sorted(name for name in ExportReportConfig.model_fields if name != "kind"))
        )
    return config


def export_report_pdf(
    report_id: str,
    bench_result_id: str,
    *,
    config: ExportReportConfig | None = None,
    timeout_s: float = DEFAULT_PDF_TIMEOUT_S,
    poll_interval_s: float = DEFAULT_PDF_POLL_INTERVAL_S,
    now: Callable[[], float] | None = None,
    secret: str | None = None,
) -> Generator[Any, Any, bytes]:
    """Print report ``report_id`` and return the PDF's bytes.

    The print task needs the report id; the file it produces is stored with the run, so downloading
    it needs the run's ``bench_result_id``. Raises ``LoadTestApiError`` when the task fails (with the
    service's message, trimmed), does not finish within ``timeout_s``, or yields something that is not
    a PDF. ``secret`` (the API key) is blanked out of any service text quoted in an error.
    """
    validate_path_id("bench_result_id", bench_result_id)  # only used at the end: check it before any call
    if timeout_s <= 0 or poll_interval_s <= 0:
        raise ValueError("timeout_s and poll_interval_s must be positive")
    now = now or _monotonic
    began = now()
    start = endpoints.start_print_task(report_id, config)
    task_id = yield start
    try:
        validate_path_id("task_id", task_id)
    except ValueError:
        raise start.error(
            200, f"the answer is not a task id: {trim_service_text(task_id, secret, limit=80)!r}"
        ) from None
    yield Log(f"Printing report {report_id} to PDF (print task {task_id})")

    while True:
        poll = endpoints.get_print_task_result(task_id)
        envelope: TaskStatusEnvelope = yield poll
        filename = _finished_file(poll, envelope, secret)
        if filename is not None:
            break
        waited = now() - began
        if waited >= timeout_s:
            status = envelope.status or "PENDING"
            raise poll.error(
                200,
                f"print task {task_id} of report {report_id} was still {status} after {waited:.0f} s "
                f"(timeout {timeout_s:.0f} s)",
            )
        yield Sleep(min(poll_interval_s, timeout_s - waited))

    download = endpoints.download_run_file(bench_result_id, filename)
    content: bytes = yield download
    if not content.startswith(PDF_MAGIC):
        # Redact in a window wider than what is shown, so a cut never leaves part of the key.
        head = content[:_SHOWN_WINDOW_BYTES].decode("utf-8", "replace")
        start_bytes = trim_service_text(head, secret, limit=60)
        raise download.error(200, f"the file is not a PDF ({len(content)} bytes, starting {start_bytes!r})")
    yield Log(f"Downloaded {filename}: {len(content)} bytes", logging.INFO)
    return content


def _finished_file(poll: ApiRequest[Any], envelope: TaskStatusEnvelope, secret: str | None) -> str | None:
    """The produced file's name once the task succeeded, ``None`` while it is pending; raise if it failed."""
    failed = envelope.status == TaskStatus.FAILED or isinstance(envelope.result, FailedTaskResult)
    if failed:
        raise poll.error(200, "the print task failed: " + _failure_text(envelope, secret))
    if isinstance(envelope.result, UnknownTaskResult) and envelope.status is None:
        raise poll.error(
            200, f"the print task ended with a result this version does not know: {envelope.result.kind!r}"
        )
    # A file name counts only once the task says it is done: a pending envelope may already name the
    # file it will write, and downloading it then would fetch nothing or half a PDF.
    done = envelope.status == TaskStatus.SUCCESS or (
        envelope.status is None and isinstance(envelope.result, PrintReportTaskResult)
    )
    if not done:
        return None
    if not envelope.resolved_filename:
        raise poll.error(200, "the print task succeeded but named no file to download")
    return envelope.resolved_filename


def _failure_text(envelope: TaskStatusEnvelope, secret: str | None) -> str:
    text = envelope.resolved_message or "no message"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = " | ".join(lines[:_FAILURE_LINES])
    more = f" [{len(lines) - _FAILURE_LINES} more lines]" if len(lines) > _FAILURE_LINES else ""
    return trim_service_text(head, secret, limit=300) + more
