"""``LoadTestHook``: an Airflow connection turned into authenticated calls to the service.

The hook executes the call descriptions of ``api.endpoints`` with one keep-alive ``requests.Session``;
what to call, what is safe to repeat and how to read answers is decided there, not here.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Generator, Mapping
from dataclasses import replace
from functools import cached_property
from types import UnionType
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, TypeVar

import requests
import urllib3.exceptions
from airflow.sdk import BaseHook
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.endpoints import AnswerBody, ApiRequest, decode_answer, timed_out_detail
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import Attempts, LoggerLike, NoAnswer, RetryPolicy
from airflow_provider_loadtest.decisions import report_pdf
from airflow_provider_loadtest.decisions.report_pdf import DEFAULT_PDF_POLL_INTERVAL_S, DEFAULT_PDF_TIMEOUT_S
from airflow_provider_loadtest.decisions.templates import choose_template
from airflow_provider_loadtest.decisions.watch import Log, Sleep
from airflow_provider_loadtest.hooks.bounded import BoundedAdapter, MalformedAnswer, Watchdog
from airflow_provider_loadtest.hooks.settings import (
    ConnectionSettings,
    causes,
    could_not_connect,
    environment_verify,
    failure_at,
    settings_from_connection,
)

if TYPE_CHECKING:
    from airflow_provider_loadtest.models import (
        AnyReportTemplate,
        BenchReport,
        BenchResult,
        DesignProject,
        ExportReportConfig,
        GlobalMetrics,
        Progress,
        Scenario,
        ThresholdAlarm,
    )

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger(__name__)
_CHUNK_BYTES = 64 * 1024


def _sleep(seconds: float) -> None:
    """Indirection so tests can check the waits without spending them."""
    time.sleep(seconds)


def connection_never_opened(exc: requests.RequestException) -> bool:
    """Whether a failed request provably never reached the service.

    True for a refused connection, a DNS failure (urllib3's ``NewConnectionError`` and its
    ``NameResolutionError``), a connect timeout and a TLS handshake that failed (``handshake_failed``):
    no byte of the request was sent. A read timeout or a connection dropped after sending proves
    nothing, and a load test started twice costs the user real money, so those are not "never opened"
    (nor a TLS error while the answer was read).
    """
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if not isinstance(exc, requests.ConnectionError) or not exc.args:
        return False
    if handshake_failed(exc):
        return True
    reason = getattr(exc.args[0], "reason", exc.args[0])
    return isinstance(reason, NewConnectionError)


#: Where Python's ssl module and urllib3 raise a TLS failure while the connection is being set up (the
#: handshake, the certificate and host name checks): before any byte of the request is sent.
_HANDSHAKE_FRAMES = frozenset(
    {"do_handshake", "_ssl_wrap_socket_and_match_hostname", "ssl_wrap_socket", "_match_hostname"}
)


def handshake_failed(exc: BaseException) -> bool:
    """Whether a TLS error behind ``exc`` was raised while the connection was being set up (so the
    request never left), not while an answer was read (a TLS error then may follow a sent request)."""
    for error in causes(exc):
        if not isinstance(error, ssl.SSLError | ssl.CertificateError):
            continue
        tb = error.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_name in _HANDSHAKE_FRAMES:
                return True
            tb = tb.tb_next
    return False


def _read_body(
    request: ApiRequest[Any], response: requests.Response, ends_at: float, sink: BinaryIO | None = None
) -> bytes | None:
    """The answer's bytes, or ``None`` when the whole-request deadline (monotonic ``ends_at``) passed.

    Each read is bounded by the socket timeout; this bounds their sum, so a server sending one byte
    per second cannot keep the call alive. Leaving ``with response`` closes the connection.
    """
    coding = response.headers.get("Content-Encoding")
    body = AnswerBody(request, response.status_code, sink=sink, coding=coding)
    try:
        # One socket read at most, as it came: AnswerBody inflates it in bounded steps.
        while chunk := response.raw.read1(_CHUNK_BYTES, decode_content=False):
            body.add(chunk)
            if time.monotonic() > ends_at:
                return None
    except ReadTimeoutError as exc:  # urllib3's own errors: say them as requests would
        raise requests.ReadTimeout(exc) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise requests.ConnectionError(exc) from exc
    return body.content


def never_succeeds(exc: requests.RequestException) -> bool:
    """Whether no retry can change this failure: a TLS handshake or certificate refused (most often an
    ``https://`` URL aimed at a plain-http server, which the message names), a malformed URL or proxy
    setting. A refused connection is retried: the service may be restarting."""
    return tls_failed(exc) or isinstance(
        exc,
        requests.exceptions.InvalidURL
        | requests.exceptions.InvalidSchema
        | requests.exceptions.MissingSchema
        | requests.exceptions.InvalidProxyURL
        | requests.exceptions.InvalidHeader,
    )


def environment_proxies(base_url: str) -> dict[str, str]:
    """The proxies the environment gives ``base_url``'s host (``NO_PROXY`` honoured), as ``requests``
    would find them on each call with ``trust_env``."""
    return dict(requests.utils.get_environ_proxies(base_url))


def cause_of(exc: BaseException, kind: type[BaseException] | UnionType) -> BaseException | None:
    """The first error of ``kind`` behind ``exc``, however deep requests and urllib3 wrapped it."""
    return next((error for error in causes(exc) if isinstance(error, kind)), None)


def tls_failed(exc: BaseException) -> bool:
    """Whether a TLS handshake or certificate check caused ``exc`` (a proxy's refused certificate comes
    as a ``ProxyError``)."""
    return cause_of(exc, ssl.SSLError | ssl.CertificateError | requests.exceptions.SSLError) is not None


def describe_transport_failure(exc: requests.RequestException, url: str | None = None) -> str:
    """A short, key-free account of a failure that produced no HTTP answer, naming the URL it tried."""
    if url is not None:
        return failure_at(url, describe_transport_failure(exc), tls_failed=tls_failed(exc))
    if tls_failed(exc):
        return "the TLS handshake failed" + (
            " with the proxy" if isinstance(exc, requests.exceptions.ProxyError) else ""
        )
    if isinstance(exc, requests.ConnectTimeout):
        return "could not connect in time"
    if isinstance(exc, requests.ReadTimeout):
        return "the service did not answer in time (read timeout)"
    if connection_never_opened(exc):
        return could_not_connect(exc)
    malformed = cause_of(exc, MalformedAnswer)
    if malformed is not None:  # the words the triggerer's client uses for the same bytes
        return f"the answer is not valid HTTP ({malformed})"
    if isinstance(exc, requests.ConnectionError):
        return "the connection was dropped before an answer arrived"
    return f"the request failed: {type(exc).__name__}"


class LoadTestHook(BaseHook):
    """Talks to the load-testing service with the connection ``loadtest_conn_id``.

    Connection fields: host = API base URL (empty for the SaaS ``https://api.octoperf.com``; an
    on-premise URL with a path prefix works), password = API key. Extras: ``ui_url``,
    ``connect_timeout``, ``read_timeout`` (seconds), ``verify_ssl`` (switch), ``ca_bundle`` (path).

    Every call has the same retry policy (reads retried on 429, 5xx and connection errors, honouring
    ``Retry-After``; a start never sent again once it may have reached the service) and fails with
    ``LoadTestApiError``. The triggers use its async twin, ``hooks.async_client.AsyncLoadTestClient``.
    """

    conn_name_attr = "loadtest_conn_id"
    default_conn_name = "loadtest_default"
    conn_type = "loadtest"
    hook_name = "Load Testing Service"

    #: Reads back off and try again within these bounds; see ``RetryPolicy``.
    retry_policy: ClassVar[RetryPolicy] = RetryPolicy()

    def __init__(self, loadtest_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loadtest_conn_id = loadtest_conn_id

    # --- connection form (Airflow < 3.2 reads these; 3.2+ reads get_provider_info) --------------

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        """The extra fields of the form on Airflow 3.1, built from the same ``conn-fields`` as 3.2+.

        Airflow 3.1's UI turns these WTForms fields into its form (it needs ``wtforms``, which the FAB
        provider brings); wtforms is imported here, never at module level, so workers don't pay for it.
        """
        from wtforms import BooleanField, StringField
        from wtforms.validators import Optional

        fields: dict[str, Any] = {}
        for name, spec in _connection_type()["conn-fields"].items():
            default = spec["schema"].get("default")
            if "boolean" in spec["schema"]["type"]:
                fields[name] = BooleanField(
                    spec["label"], validators=[Optional()], description=spec["description"], default=default
                )
            else:  # 3.1 draws only text, password, integer and boolean fields: numbers go as text
                fields[name] = StringField(
                    spec["label"],
                    validators=[Optional()],
                    description=spec["description"],
                    default=None if default is None else str(default),
                )
        return fields

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Relabel the generic connection form for this service (Airflow 3.1)."""
        behaviour = _connection_type()["ui-field-behaviour"]
        return {
            "hidden_fields": behaviour["hidden-fields"],
            "relabeling": behaviour["relabeling"],
            "placeholders": behaviour["placeholders"],
        }

    def get_conn(self) -> requests.Session:
        """The authenticated ``requests`` session, as Airflow hooks hand out their client."""
        return self.session

    # --- plumbing ------------------------------------------------------------------------------

    @cached_property
    def settings(self) -> ConnectionSettings:
        """The connection, read once per hook."""
        conn = self.get_connection(self.loadtest_conn_id)
        settings = settings_from_connection(conn)
        _mask(settings.api_key)
        return settings

    @cached_property
    def session(self) -> requests.Session:
        """One keep-alive session per hook, carrying the key and a User-Agent naming this package.

        The environment (proxies, ``NO_PROXY``, ``REQUESTS_CA_BUNDLE``) is read once, here, for the
        connection's host: ``requests`` otherwise scans it on every call (about a quarter of a small
        call's CPU), and its ``.netrc`` lookup could replace the key's ``Authorization`` header.
        """
        session = requests.Session()
        session.trust_env = False
        session.proxies.update(environment_proxies(self.settings.base_url))
        session.headers.update(
            {
                "Authorization": f"Bearer {self.settings.api_key}",
                "Accept": "application/json",
                "User-Agent": (
                    f"airflow-provider-loadtest/{__version__} python-requests/{requests.__version__}"
                ),
                # Only what AnswerBody inflates (requests would add br or zstd when those are installed).
                "Accept-Encoding": endpoints.ACCEPT_ENCODING,
            }
        )
        session.verify = environment_verify(self.settings.verify_ssl)
        adapter = BoundedAdapter()  # its connections obey ``Watchdog`` (the headers' time bound)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        return session

    def close(self) -> None:
        """Release the keep-alive connections (the hook can still be used afterwards)."""
        if "session" in self.__dict__:
            self.session.close()
            del self.__dict__["session"]

    def call(self, request: ApiRequest[T], sink: BinaryIO | None = None) -> T:
        """Send ``request``, retrying only what is safe to retry, and decode the answer.

        Reads retry on connection errors, 429 and 502/503/504 with exponential backoff and jitter,
        honouring ``Retry-After``, within ``retry_policy``'s attempt and total-wait bounds. A call
        marked ``ONLY_IF_NOT_SENT`` (starting a load test) is retried only when the connection was
        never opened; after a read timeout, a dropped connection or any HTTP answer it is not repeated.
        """
        settings = self.settings
        tries = Attempts(request, self.retry_policy, self.log)
        delay: float | None
        while True:
            budget = tries.budget(settings.read_timeout_s)
            try:
                status, headers, body = self._exchange(request, budget, sink)
            except NoAnswer as failure:
                delay = tries.after(failure)
            else:
                delay = tries.after_answer(status, headers.get("Retry-After"))
                if delay is None:
                    return decode_answer(
                        request,
                        status,
                        headers.get("Content-Type"),
                        body,
                        settings.api_key,
                        location=headers.get("Location"),
                        conn_id=settings.conn_id,
                    )
            _sleep(delay)

    def _exchange(
        self, request: ApiRequest[Any], budget: float, sink: BinaryIO | None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One try within ``budget`` seconds in all: the answer's status, headers and body, or
        ``NoAnswer`` saying what happened instead."""
        settings = self.settings
        url = settings.url(request.path)
        ends_at = time.monotonic() + budget
        watchdog = Watchdog(budget)  # the headers: read line by line, out of ``_read_body``'s reach
        try:
            with watchdog:
                response = self.session.request(
                    request.method,
                    url,
                    params=dict(request.params) or None,
                    json=request.json_body,
                    headers={"Accept": request.accept},
                    timeout=(min(settings.connect_timeout_s, budget), budget),
                    allow_redirects=False,  # a redirect would re-send a start to another host
                    stream=True,  # read in chunks against the whole-request deadline and size bound
                )
        except requests.RequestException as exc:
            if watchdog.fired:  # the watchdog cut a trickle of headers: say so
                raise NoAnswer(timed_out_detail(budget)) from None
            raise NoAnswer(
                describe_transport_failure(exc, url),
                never_opened=connection_never_opened(exc),
                final=never_succeeds(exc),
            ) from None
        with response:
            if watchdog.fired:
                # Cut mid-headers, ``http.client`` may take the cut for the end of the headers and make
                # an answer of what it had (an empty 200, say): that answer is not the service's.
                raise NoAnswer(timed_out_detail(budget))
            try:
                body = _read_body(request, response, ends_at, sink)
            except requests.RequestException as exc:
                raise NoAnswer(describe_transport_failure(exc, url)) from None
            if body is None:
                raise NoAnswer(timed_out_detail(budget))
            return response.status_code, response.headers, body

    def drive(self, steps: Generator[Any, Any, R], log: LoggerLike) -> R:
        """Run a ``watch`` generator: make its calls, take its pauses, write its log lines."""
        send: Any = None
        error: LoadTestApiError | None = None
        while True:
            try:
                action = steps.throw(error) if error is not None else steps.send(send)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            send, error = None, None
            if isinstance(action, Sleep):
                _sleep(action.seconds)
            elif isinstance(action, Log):
                log.log(action.level, action.message)
            else:
                try:
                    send = self.call(action)
                except LoadTestApiError as exc:
                    error = exc

    # --- the service ---------------------------------------------------------------------------

    def run_scenario(
        self,
        scenario_id: str,
        template_id: str | None = None,
        name: str | None = None,
        properties: Mapping[str, str] | None = None,
        subscription_id: str | None = None,
    ) -> BenchReport:
        """Start a load test of ``scenario_id`` and return its report (``bench_result_id`` is the run).

        ``subscription_id`` picks the subscription that pays, for accounts with several. Never retried
        once the request may have reached the service: a second load test costs real money. Only a
        connection that could not be opened at all (refused, DNS) is tried again.
        """
        return self.call(
            endpoints.run_scenario(
                scenario_id,
                template_id=template_id,
                name=name,
                properties=properties,
                subscription_id=subscription_id,
            )
        )

    def list_templates(self, workspace_id: str) -> list[AnyReportTemplate]:
        """All report templates of a workspace (one that does not match the models comes back opaque:
        id and name only, logged)."""
        return self.call(endpoints.list_templates(workspace_id))

    def find_template(
        self, workspace_id: str, name: str | None = None, template_id: str | None = None
    ) -> AnyReportTemplate | None:
        """The workspace's template with this id, or named this (exact, then case-insensitive)."""
        return choose_template(
            self.list_templates(workspace_id), workspace_id=workspace_id, name=name, template_id=template_id
        )

    def get_scenario(self, scenario_id: str) -> Scenario:
        """A scenario (its ``project_id`` is the design project it belongs to)."""
        return self.call(endpoints.get_scenario(scenario_id))

    def get_design_project(self, project_id: str) -> DesignProject:
        """A design project (its ``workspace_id`` is the workspace it belongs to)."""
        return self.call(endpoints.get_design_project(project_id))

    def list_design_projects(self, workspace_id: str) -> list[DesignProject]:
        """The design projects of a workspace (where its scenarios live)."""
        return self.call(endpoints.list_design_projects(workspace_id))

    def list_scenarios(self, project_id: str) -> list[Scenario]:
        """The scenarios of a design project."""
        return self.call(endpoints.list_scenarios(project_id))

    def find_workspace_id(self, scenario_id: str) -> str | None:
        """The workspace of a scenario, as the Jenkins plugin finds it for the report link: the
        scenario's ``projectId``, then that design project's ``workspaceId``.

        Only a link depends on it, so a failed lookup never fails the caller: it answers ``None`` and
        says why in the log.
        """
        try:
            project_id = self.get_scenario(scenario_id).project_id
            if not project_id:
                raise ValueError(f"scenario {scenario_id!r} names no projectId")
            workspace_id = self.get_design_project(project_id).workspace_id
            if not workspace_id:
                raise ValueError(f"design project {project_id!r} names no workspaceId")
        except Exception as exc:  # only a link depends on it: nothing here may fail the run
            self.log.warning(
                "No report link: could not find the workspace of scenario %r: %s", scenario_id, exc
            )
            return None
        return workspace_id

    def get_bench_report(self, report_id: str) -> BenchReport:
        """A report (its ``bench_result_id`` is the run it belongs to)."""
        return self.call(endpoints.get_bench_report(report_id))

    def get_bench_result(self, bench_result_id: str) -> BenchResult:
        """The run's current state."""
        return self.call(endpoints.get_bench_result(bench_result_id))

    def get_progress(self, bench_result_id: str) -> Progress:
        """How far the run is."""
        return self.call(endpoints.get_progress(bench_result_id))

    def get_global_metrics(self, bench_result_id: str) -> GlobalMetrics:
        """Live headline metrics of the run."""
        return self.call(endpoints.get_global_metrics(bench_result_id))

    def get_threshold_alarms(self, bench_result_id: str) -> list[ThresholdAlarm]:
        """The run's threshold alarms (PASSED, WARNING or CRITICAL)."""
        return self.call(endpoints.get_threshold_alarms(bench_result_id))

    def get_summary_metric_values(
        self, bench_result_id: str, metrics: list[dict[str, Any]]
    ) -> list[float | None]:
        """The run's summary value of each metric (``None`` where the service gave none), in order."""
        return self.call(endpoints.summary_metric_values(bench_result_id, metrics))

    def get_junit_report(self, bench_result_id: str) -> str:
        """The run as JUnit XML."""
        return self.call(endpoints.get_junit_report(bench_result_id))

    def list_run_files(self, bench_result_id: str) -> list[str]:
        """The names of the run's files (JUnit XML, logs, printed PDFs)."""
        return self.call(endpoints.list_run_files(bench_result_id))

    def download_run_file(self, bench_result_id: str, filename: str) -> bytes:
        """One file of the run, in memory (up to ``endpoints.MAX_DOWNLOAD_BYTES``)."""
        return self.call(endpoints.download_run_file(bench_result_id, filename))

    def save_run_file(self, bench_result_id: str, filename: str, path: str | os.PathLike[str]) -> int:
        """One file of the run streamed to the local file ``path``, never whole in memory (same size
        bound; a retried download rewrites the file); returns its size in bytes."""
        with open(path, "wb") as sink:
            self.call(endpoints.download_run_file(bench_result_id, filename), sink=sink)
            return sink.tell()

    def export_report_pdf(
        self,
        report_id: str,
        bench_result_id: str,
        config: ExportReportConfig | Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_PDF_TIMEOUT_S,
        poll_interval: float = DEFAULT_PDF_POLL_INTERVAL_S,
    ) -> bytes:
        """The report as a PDF: print it, wait for the print task (at most ``timeout`` s), download it.

        Both ids are needed: the print task takes the report id, and the file it produces is stored
        with the run (``bench_result_id``). Raises ``LoadTestApiError`` when the task fails, times out
        or produces something that is not a PDF.
        """
        steps = report_pdf.export_report_pdf(
            report_id,
            bench_result_id,
            config=report_pdf.export_config(config),
            timeout_s=timeout,
            poll_interval_s=poll_interval,
            secret=self.settings.api_key,
        )
        return self.drive(steps, self.log)

    def stop_run(self, bench_result_id: str) -> BenchResult | None:
        """Abort the run (a no-op for a run that already ended); logs and returns the state the
        service answers (``None`` when its answer is not a BenchResult)."""
        result = self.call(endpoints.stop_run(bench_result_id))
        if result is not None:
            self.log.info("Asked to stop run %s: the service reports it %s", bench_result_id, result.state)
        return result

    def report_url(self, workspace_id: str, project_id: str, report_id: str) -> str:
        """The report's page in the web UI."""
        return self.settings.report_url(workspace_id, project_id, report_id)

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: is the service there, and does it accept the key?

        The button tests the form under a random connection id of Airflow's own (its API server's
        "transient" id), so a refused key's message says "the connection" (the one on the screen), not
        that id."""
        self.settings = replace(self.settings, conn_id=None)
        try:
            workspaces = self.call(endpoints.member_workspaces())
        except Exception as exc:
            return False, str(exc)
        return True, (
            f"Connected to {self.settings.base_url}: the API key is valid and its user is a member of "
            f"{len(workspaces)} workspace(s)."
        )


def _connection_type() -> dict[str, Any]:
    from airflow_provider_loadtest.get_provider_info import get_provider_info

    (conn_type,) = get_provider_info()["connection-types"]
    return dict(conn_type)


def _mask(secret: str) -> None:
    """Ask Airflow to redact the key from task logs, wherever a third party might print it."""
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # pragma: no cover - older task SDKs
        return
    mask_secret(secret)
