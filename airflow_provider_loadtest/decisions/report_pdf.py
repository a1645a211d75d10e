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
from airflow_provider_loadtest.api.errors import LoadTestApiError, trim_service_text
from airflow_provider_loadtest.api.validation import validate_path_id
from airflow_provider_loadtest.decisions.watch import Log, Sleep
from airflow_provider_loadtest.models import (
    ExportReportConfig,
    FailedTaskResult,
    PrintReportTaskResult,
    TaskStatus,
    TaskStatusEnvelope,
    UnknownTaskResult,
    require_known_values,
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
    without ``@type``; unknown keys, and values outside a closed set (``pageFormat: "A7"``), are refused
    here, listing what is allowed, rather than sent to the service after the load test ran.
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
    require_known_values(config, "export_config")
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
    it needs the run's ``bench_result_id``. The task is done when its result is a non-empty terminal
    answer: the legacy ``PrintReportTaskResult`` or a status envelope saying it succeeded. When that
    answer names no file (the envelope does not), the PDF is found in the run's file list as the
    Maven plugin does: the PDF that was not there before the task started, else the only one.

    Raises ``LoadTestApiError`` when the task fails (with the service's message, trimmed), does not
    finish within ``timeout_s``, leaves no single PDF to take, or yields something that is not a PDF.
    ``secret`` (the API key) is blanked out of any service text quoted in an error.
    """
    validate_path_id("report_id", report_id)  # both checked before any call
    validate_path_id("bench_result_id", bench_result_id)
    if timeout_s <= 0 or poll_interval_s <= 0:
        raise ValueError("timeout_s and poll_interval_s must be positive")
    now = now or _monotonic
    began = now()
    pdfs_before = yield from _pdfs_before(bench_result_id)
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
        done, filename = _finished_file(poll, envelope, secret)
        if done:
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

    if filename is None:
        filename = yield from _new_pdf(bench_result_id, pdfs_before, task_id)
    download = endpoints.download_run_file(bench_result_id, filename)
    content: bytes = yield download
    if not content.startswith(PDF_MAGIC):
        # Redact in a window wider than what is shown, so a cut never leaves part of the key.
        head = content[:_SHOWN_WINDOW_BYTES].decode("utf-8", "replace")
        start_bytes = trim_service_text(head, secret, limit=60)
        raise download.error(200, f"the file is not a PDF ({len(content)} bytes, starting {start_bytes!r})")
    yield Log(f"Downloaded {filename}: {len(content)} bytes", logging.INFO)
    return content


def _pdf_names(names: list[str]) -> list[str]:
    return [name for name in names if name.lower().endswith(".pdf")]


def _pdfs_before(bench_result_id: str) -> Generator[Any, Any, frozenset[str] | None]:
    """The run's PDFs before printing, to tell the new one apart; ``None`` when they cannot be listed
    (then only a run with a single PDF can tell which one the task produced)."""
    try:
        names: list[str] = yield endpoints.list_run_files(bench_result_id)
    except LoadTestApiError as exc:
        yield Log(
            f"Could not list the files of run {bench_result_id} before printing: {exc}", logging.WARNING
        )
        return None
    return frozenset(_pdf_names(names))


def _new_pdf(bench_result_id: str, before: frozenset[str] | None, task_id: str) -> Generator[Any, Any, str]:
    """The PDF the print task produced, from the run's file list (the task's answer named none)."""
    listing = endpoints.list_run_files(bench_result_id)
    pdfs = _pdf_names((yield listing))
    new = [name for name in pdfs if before is not None and name not in before]
    candidates = new or pdfs
    if len(candidates) == 1:
        yield Log(
            f"Print task {task_id} named no file: taking {candidates[0]} "
            f"from the files of run {bench_result_id}"
        )
        return candidates[0]
    if not candidates:
        raise listing.error(
            200, f"print task {task_id} succeeded but run {bench_result_id} lists no PDF file to download"
        )
    kind = "new PDF files" if new else "PDF files, none of them new"
    raise listing.error(
        200,
        f"print task {task_id} named no file and run {bench_result_id} has {len(candidates)} {kind}: "
        + ", ".join(sorted(candidates))
        + "; cannot tell which one it printed",
    )


def _finished_file(
    poll: ApiRequest[Any], envelope: TaskStatusEnvelope, secret: str | None
) -> tuple[bool, str | None]:
    """Whether the task is done, and the file it names (``None`` if it names none); raise if it failed."""
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
    return done, (envelope.resolved_filename or None) if done else None


def _failure_text(envelope: TaskStatusEnvelope, secret: str | None) -> str:
    text = envelope.resolved_message or "no message"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = " | ".join(lines[:_FAILURE_LINES])
    more = f" [{len(lines) - _FAILURE_LINES} more lines]" if len(lines) > _FAILURE_LINES else ""
    return trim_service_text(head, secret, limit=300) + more
