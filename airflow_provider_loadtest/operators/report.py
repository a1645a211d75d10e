"""Operators that deliver a finished run's artifacts: the PDF report, the JUnit XML and the logs.

Like ``run_scenario``, this module is imported at DAG-parse time, so it imports only Airflow's base
class and cheap helpers; the hook, the models and the object-storage code load when a task runs.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_loadtest.api.validation import (
    MAX_RECORD_CHARS,
    check_length,
    validate_file_name,
    validate_path_id,
)
from airflow_provider_loadtest.compat import conf
from airflow_provider_loadtest.decisions.run_files import (
    AGENT_LOG_PATTERNS,
    is_agent_log,
    names_to_save,
    saved_file,
    select_run_files,
)
from airflow_provider_loadtest.operators.common import DEFAULT_CONN_ID, LoadTestHookMixin, check_literal_ids

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath


__all__ = [
    "AGENT_LOG_PATTERNS",
    "DownloadReportOperator",
    "DownloadRunFilesOperator",
    "is_agent_log",
    "run_ids",
]

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
            "run=run_test.output) or the ids explicitly"
            + (" (report_id alone is enough: the report names its run)." if need_report else ".")
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
        check_length("run", run, MAX_RECORD_CHARS)  # before parsing: a huge text would exhaust memory
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(run)
            except (ValueError, SyntaxError, RecursionError):
                continue
            if isinstance(value, Mapping):
                return value
    raise ValueError(
        f"run must be the dict RunScenarioOperator returns, got {type(run).__name__}: {str(run)[:80]!r}"
    )


class DownloadReportOperator(LoadTestHookMixin, BaseOperator):
    """Save a run's report as a PDF file, for people: mail it, archive it, publish it.

    :param destination: the file to write: an absolute path, a ``file://`` URL, an object-store URL
        such as ``s3://bucket/reports/{{ dag_run.run_after | ds }}/load-test.pdf`` (with that store's
        Airflow provider installed) or an ``ObjectStoragePath``. Written atomically: readers never see
        half a PDF.
    :param run: the dict ``RunScenarioOperator`` returns (``run=run_test.output``); it carries both
        ids the download needs.
    :param report_id: the report to print (instead of ``run``; the last segment of its web UI URL).
        Alone it is enough: the report's run is read from the service (``GET /analysis/bench-reports``).
    :param bench_result_id: the run the report belongs to (its files are stored with the run); by
        default the report's first run.
    :param export_config: page settings, e.g. ``{"pageFormat": "A4", "orientation": "LANDSCAPE"}``
        (keys of the service's ``ExportReportConfig``); ``None`` uses the service's defaults.
    :param pdf_timeout: longest wait for the service to render the PDF (seconds or ``timedelta``).
    :param check_interval: seconds between two polls of the print task.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.
    :param deferrable: wait for the print task in the triggerer, freeing the worker slot; the worker
        downloads the PDF when the trigger fires. Defaults to ``[operators] default_deferrable``.
        A triggerer restart starts a fresh print task (printing is not billed).

    Returns (XCom ``return_value``) ``{"path", "size", "report_id", "bench_result_id"}``.
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
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.loadtest_conn_id = loadtest_conn_id
        self.deferrable = deferrable
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
        from airflow_provider_loadtest.lifecycle.support import refusing_what_cannot_succeed

        with refusing_what_cannot_succeed():
            return self._print_and_save()

    def _print_and_save(self) -> dict[str, Any]:
        from airflow_provider_loadtest.hooks.artifacts import storage_path

        report_id, bench_result_id = self._report_and_run()
        destination = storage_path(self.destination)  # a bad destination fails before the PDF is made
        if self.deferrable:
            self._defer_print(report_id, bench_result_id)
        pdf = self.hook.export_report_pdf(  # checks export_config before any call
            report_id,
            bench_result_id,
            config=self.export_config,
            timeout=self.pdf_timeout,
            poll_interval=self.check_interval,
        )
        return self._save(destination, pdf, report_id, bench_result_id)

    def _defer_print(self, report_id: str, bench_result_id: str) -> None:
        from airflow_provider_loadtest.decisions.report_pdf import export_config
        from airflow_provider_loadtest.triggers.report import ReportPrintTrigger

        export_config(self.export_config)  # bad settings fail here, not in the triggerer
        self.log.info("Deferring: the triggerer waits for the PDF of report %s", report_id)
        self.defer(
            trigger=ReportPrintTrigger(
                loadtest_conn_id=self.loadtest_conn_id,
                report_id=report_id,
                bench_result_id=bench_result_id,
                export_config=dict(self.export_config) if self.export_config is not None else None,
                timeout=self.pdf_timeout,
                poll_interval=self.check_interval,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the print task finished in the triggerer: download the PDF and save it."""
        from airflow_provider_loadtest.decisions.report_pdf import download_pdf
        from airflow_provider_loadtest.hooks.artifacts import storage_path
        from airflow_provider_loadtest.lifecycle.support import refusing_what_cannot_succeed
        from airflow_provider_loadtest.triggers.common import raise_for_event

        report_id, bench_result_id = str(event["report_id"]), str(event["bench_result_id"])
        if event.get("status") != "done":
            raise_for_event(event, f"Printing report {report_id} to PDF")
        with refusing_what_cannot_succeed():
            pdf = self.hook.drive(
                download_pdf(bench_result_id, event["filename"], secret=self.hook.settings.api_key), self.log
            )
            return self._save(storage_path(self.destination), pdf, report_id, bench_result_id)

    def _save(
        self, destination: ObjectStoragePath, pdf: bytes, report_id: str, bench_result_id: str
    ) -> dict[str, Any]:
        from airflow_provider_loadtest.hooks.artifacts import write_atomically

        saved = write_atomically(destination, pdf)
        self.log.info("Saved the PDF of report %s to %s (%d bytes)", report_id, saved.path, saved.size)
        return {**saved.to_xcom(), "report_id": report_id, "bench_result_id": bench_result_id}

    def _report_and_run(self) -> tuple[str, str]:
        """The report to print and the run its PDF is stored with. Given only a report id, the run is
        the report's first ``benchResultIds`` entry, read from the service (one GET)."""
        record = _as_record(self.run)
        report_id = self.report_id or record.get("report_id")
        if report_id and not (self.bench_result_id or record.get("bench_result_id")):
            report_id = validate_path_id("report_id", report_id)
            run = self.hook.get_bench_report(report_id).bench_result_id
            if not run:
                raise ValueError(
                    f"report {report_id!r} names no run (its benchResultIds is empty): pass bench_result_id"
                )
            self.log.info("Report %s belongs to run %s", report_id, run)
            return report_id, validate_path_id("bench_result_id", run)
        report, bench_result_id = run_ids(
            self.run, report_id=self.report_id, bench_result_id=self.bench_result_id, need_report=True
        )
        assert report is not None  # noqa: S101 - type narrowing: run_ids(need_report=True) raises
        return report, bench_result_id


class DownloadRunFilesOperator(LoadTestHookMixin, BaseOperator):
    """Save a run's files (JUnit XML, JMeter log, JTL results, printed reports) into a folder, for machines.

    :param destination: the folder to fill (absolute path, ``file://`` or object-store URL, or an
        ``ObjectStoragePath``). Each file is written atomically under its service-side name.
    :param run: the dict ``RunScenarioOperator`` returns; or give ``bench_result_id``.
    :param bench_result_id: the run whose files to fetch.
    :param include: shell-style patterns of the names to fetch (default: every file).
    :param include_agent_logs: also fetch the monitoring agents' logs (``*-agent.log``, gzipped or
        not), which the official CI plugins skip: one per load generator, large and rarely read.
    :param decompress: save a ``.gz`` file decompressed under its name without ``.gz``
        (``results.jtl.gz`` as ``results.jtl``), as the official clients do; ``False`` keeps it as is.
    :param loadtest_conn_id: Airflow connection of type ``loadtest``.

    A name that is not a plain file name (``../x``, ``a/b``) is skipped with a warning: it would write
    outside the folder. Returns (XCom ``return_value``) the list of ``{"name", "path", "size"}`` of the
    files written (``name`` is the name saved under). Not deferrable: it does not wait.
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
        decompress: bool = True,
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
        self.decompress = decompress

    def select(self, names: Sequence[str]) -> list[str]:
        """The names to fetch: matching ``include``, agent logs only when asked for."""
        return select_run_files(names, self.include, include_agent_logs=self.include_agent_logs)

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from airflow_provider_loadtest.lifecycle.support import refusing_what_cannot_succeed

        with refusing_what_cannot_succeed():
            return self._fetch_and_save()

    def _fetch_and_save(self) -> list[dict[str, Any]]:
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
        for name, decompress in names_to_save(chosen, decompress=self.decompress).items():
            if self.decompress and not decompress and name.lower().endswith(".gz"):
                self.log.warning("Keeping %s compressed: the run also has a file of its plain name", name)
            local_name, content = saved_file(
                name, self.hook.download_run_file(bench_result_id, name), decompress=decompress
            )
            written = write_atomically(folder / local_name, content)
            self.log.info("Saved %s (%d bytes)", written.path, written.size)
            saved.append({"name": local_name, **written.to_xcom()})
        return saved
