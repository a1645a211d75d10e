"""Operators that deliver a finished run's artifacts: the PDF report, the JUnit XML and the logs.

Like ``run_scenario``, this module is imported at DAG-parse time, so it imports only Airflow's base
class and cheap helpers; the hook, the models and the object-storage code load when a task runs.
"""

from __future__ import annotations

import ast
import fnmatch
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_loadtest.api.validation import validate_file_name, validate_path_id
from airflow_provider_loadtest.operators.common import DEFAULT_CONN_ID, LoadTestHookMixin, check_literal_ids

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath


#: Per-agent logs: one per load generator, large and rarely read. The official CI plugins skip them.
AGENT_LOG_PATTERNS: tuple[str, ...] = ("agent*.log", "agent*.log.gz", "*-agent-*.log")
DEFAULT_PDF_TIMEOUT = timedelta(minutes=10)


def run_ids(
    run: Any, *, report_id: str | None, bench_result_id: str | None, need_report: bool
) -> tuple[str | None, str]:
    """The ids to work with: explicit ones win, else those of ``run`` (what RunScenarioOperator returns).

    ``run`` may arrive as the dict itself (``run=run_test.output``) or, from a Jinja template without
    native rendering, as its text form; both are read. Missing ids are a clear error, before any call.
    """
    record = _as_record(run)
    report = report_id or record.get("report_id")
    result = bench_result_id or record.get("bench_result_id")
    missing = [
        name
        for name, value in (("report_id", report if need_report else "-"), ("bench_result_id", result))
        if not value
    ]
    if missing:
        raise ValueError(
            f"missing {' and '.join(missing)}: pass run= (the dict RunScenarioOperator returns, e.g. "
            "run=run_test.output) or the ids explicitly. No documented call turns a report id into its "
            "run's bench result id, so both are needed."
        )
    return (validate_path_id("report_id", report) if need_report else None), validate_path_id(
        "bench_result_id", result
    )


def _as_record(run: Any) -> Mapping[str, Any]:
    if run is None or run == "":
        return {}
    if isinstance(run, Mapping):
        return run
    if isinstance(run, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(run)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, Mapping):
                return value
    raise ValueError(
        f"run must be the dict RunScenarioOperator returns, got {type(run).__name__}: {str(run)[:80]!r}"
    )


def is_agent_log(filename: str) -> bool:
    """Whether a run file is a per-agent log (skipped unless asked for)."""
    name = filename.lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in AGENT_LOG_PATTERNS)


class DownloadReportOperator(LoadTestHookMixin, BaseOperator):
    """Save a run's report as a PDF file, for people: mail it, archive it, publish it.

    :param destination: the file to write: an absolute path, a ``file://`` URL, an object-store URL
        such as ``s3://bucket/reports/{{ ds }}/load-test.pdf`` (with that store's Airflow provider
        installed) or an ``ObjectStoragePath``. Written atomically: readers never see half a PDF.
    :param run: the dict ``RunScenarioOperator`` returns (``run=run_test.output``); it carries both
        ids the download needs.
    :param report_id: the report to print (instead of ``run``; the last segment of its web UI URL).
    :param bench_result_id: the run the report belongs to (its files are stored with the run).
    :param export_config: page settings, e.g. ``{"pageFormat": "A4", "orientation": "LANDSCAPE"}``
        (keys of the service's ``ExportReportConfig``); ``None`` uses the service's defaults.
    :param pdf_timeout: longest wait for the service to render the PDF.
    :param check_interval: seconds between two polls of the print task.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    Returns ``{"path", "size", "report_id", "bench_result_id"}``.
    """

    template_fields: Sequence[str] = ("destination", "run", "report_id", "bench_result_id", "export_config")
    template_fields_renderers = {"export_config": "json"}
    ui_color = "#c9e4ca"

    def __init__(
        self,
        *,
        destination: str | ObjectStoragePath,
        run: Any = None,
        report_id: str | None = None,
        bench_result_id: str | None = None,
        export_config: Mapping[str, Any] | None = None,
        pdf_timeout: float | timedelta = DEFAULT_PDF_TIMEOUT,
        check_interval: float = 5.0,
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.loadtest_conn_id = loadtest_conn_id
        check_literal_ids(report_id=report_id, bench_result_id=bench_result_id)
        self.pdf_timeout = pdf_timeout.total_seconds() if isinstance(pdf_timeout, timedelta) else pdf_timeout
        if self.pdf_timeout <= 0 or check_interval <= 0:
            raise ValueError("pdf_timeout and check_interval must be positive")
        self.destination = destination
        self.run = run
        self.report_id = report_id
        self.bench_result_id = bench_result_id
        self.export_config = export_config
        self.check_interval = check_interval

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow_provider_loadtest.hooks.artifacts import storage_path, write_atomically

        report_id, bench_result_id = run_ids(
            self.run, report_id=self.report_id, bench_result_id=self.bench_result_id, need_report=True
        )
        assert report_id is not None  # noqa: S101 - type narrowing: run_ids(need_report=True) raises
        destination = storage_path(self.destination)  # a bad destination fails before the PDF is made
        pdf = self.hook.export_report_pdf(  # checks export_config before any call
            report_id,
            bench_result_id,
            config=self.export_config,
            timeout=self.pdf_timeout,
            poll_interval=self.check_interval,
        )
        saved = write_atomically(destination, pdf)
        self.log.info("Saved the PDF of report %s to %s (%d bytes)", report_id, saved.path, saved.size)
        return {**saved.to_xcom(), "report_id": report_id, "bench_result_id": bench_result_id}


class DownloadRunFilesOperator(LoadTestHookMixin, BaseOperator):
    """Save a run's files (JUnit XML, JMeter log, printed reports) into a folder, for machines.

    :param destination: the folder to fill (absolute path, ``file://`` or object-store URL, or an
        ``ObjectStoragePath``). Each file is written atomically under its service-side name.
    :param run: the dict ``RunScenarioOperator`` returns; or give ``bench_result_id``.
    :param bench_result_id: the run whose files to fetch.
    :param include: shell-style patterns of the names to fetch (default: every file).
    :param include_agent_logs: also fetch the per-agent logs, which the official CI plugins skip:
        one per load generator, large and rarely read.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    A name that is not a plain file name (``../x``, ``a/b``) is skipped with a warning: it would write
    outside the folder. Returns the list of ``{"name", "path", "size"}`` of the files written.
    """

    template_fields: Sequence[str] = ("destination", "run", "bench_result_id", "include")
    ui_color = "#c9e4ca"

    def __init__(
        self,
        *,
        destination: str | ObjectStoragePath,
        run: Any = None,
        bench_result_id: str | None = None,
        include: Sequence[str] | None = None,
        include_agent_logs: bool = False,
        loadtest_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.loadtest_conn_id = loadtest_conn_id
        check_literal_ids(bench_result_id=bench_result_id)
        self.destination = destination
        self.run = run
        self.bench_result_id = bench_result_id
        self.include = include
        self.include_agent_logs = include_agent_logs

    def select(self, names: Sequence[str]) -> list[str]:
        """The names to fetch: matching ``include``, agent logs only when asked for."""
        patterns = [self.include] if isinstance(self.include, str) else list(self.include or ["*"])
        return [
            name
            for name in names
            if any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
            and (self.include_agent_logs or not is_agent_log(name))
        ]

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from airflow_provider_loadtest.hooks.artifacts import storage_path, write_atomically

        _, bench_result_id = run_ids(
            self.run, report_id=None, bench_result_id=self.bench_result_id, need_report=False
        )
        folder = storage_path(self.destination)
        names = self.hook.list_run_files(bench_result_id)
        chosen = []
        for name in self.select(names):  # names become local file names: never "../x"
            try:
                chosen.append(validate_file_name("filename", name))
            except ValueError as exc:
                self.log.warning("Skipping a file of run %s: %s", bench_result_id, exc)
        self.log.info(
            "Run %s has %d file(s); fetching %d: %s",
            bench_result_id,
            len(names),
            len(chosen),
            ", ".join(chosen),
        )
        saved = []
        for name in chosen:
            written = write_atomically(folder / name, self.hook.download_run_file(bench_result_id, name))
            self.log.info("Saved %s (%d bytes)", written.path, written.size)
            saved.append({"name": name, **written.to_xcom()})
        return saved
