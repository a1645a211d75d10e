"""What a new user meets first: a connection failure says which URL was tried (never the key), a URI-form
connection aimed at a plain-http server gets a hint at the scheme, TLS settings read as the form says."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.hooks import async_client
from airflow_provider_loadtest.hooks import loadtest as hook_module
from airflow_provider_loadtest.hooks.async_client import AsyncLoadTestClient
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook
from airflow_provider_loadtest.hooks.settings import tls_verification
from tests.conftest import API_KEY

HINT = "write the host as http://host:port"


class _Plain(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"[]")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def plain_http_port() -> Iterator[int]:
    """A plain-http server on loopback (what a URI-form connection without a scheme meets on-premise)."""
    with _serving(_Plain) as port:
        yield port


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(hook_module, "_sleep", lambda seconds: None)
    monkeypatch.setattr(async_client, "_sleep", no_sleep)


def _uri_conn(monkeypatch: pytest.MonkeyPatch, port: int, path: str = "") -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", f"loadtest://:{API_KEY}@127.0.0.1:{port}{path}")


def test_uri_form_on_plain_http_names_the_url_and_hints_at_the_scheme(
    monkeypatch: pytest.MonkeyPatch, plain_http_port: int
) -> None:
    _uri_conn(monkeypatch, plain_http_port)
    ok, message = LoadTestHook().test_connection()
    assert not ok
    assert f"https://127.0.0.1:{plain_http_port}/workspaces/member-of" in message
    assert "TLS handshake failed" in message and HINT in message
    assert API_KEY not in message


def test_uri_form_with_http_schema_speaks_http(monkeypatch: pytest.MonkeyPatch, plain_http_port: int) -> None:
    _uri_conn(monkeypatch, plain_http_port, "/http")  # the URI's path is the connection's schema field
    ok, message = LoadTestHook().test_connection()
    assert ok, message
    assert f"http://127.0.0.1:{plain_http_port}" in message


def test_async_client_hints_at_the_scheme_too(monkeypatch: pytest.MonkeyPatch, plain_http_port: int) -> None:
    _uri_conn(monkeypatch, plain_http_port)
    from airflow.sdk import BaseHook

    from airflow_provider_loadtest.hooks.settings import settings_from_connection

    settings = settings_from_connection(BaseHook.get_connection("loadtest_default"))

    async def go() -> None:
        async with AsyncLoadTestClient(settings) as client:
            await client.call(endpoints.member_workspaces())

    with pytest.raises(LoadTestApiError) as caught:
        asyncio.run(go())
    message = str(caught.value)
    assert f"https://127.0.0.1:{plain_http_port}/workspaces/member-of" in message and HINT in message
    assert API_KEY not in message


def _free_port() -> int:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _async_member_of() -> str:
    from airflow.sdk import BaseHook

    from airflow_provider_loadtest.hooks.settings import settings_from_connection

    settings = settings_from_connection(BaseHook.get_connection("loadtest_default"))

    async def go() -> None:
        async with AsyncLoadTestClient(settings) as client:
            await client.call(endpoints.member_workspaces())

    with pytest.raises(LoadTestApiError) as caught:
        asyncio.run(go())
    return str(caught.value)


REFUSED = (
    "could not connect: connection refused (nothing listens on that port: check the port, and that the "
    "service runs)"
)
NOT_RESOLVED = "could not connect: the host name was not resolved (check the host for a typo, and DNS)"


def test_refused_connection_names_the_url_and_says_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _free_port()
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_DEFAULT", f"loadtest://:{API_KEY}@127.0.0.1:{port}/http")
    ok, message = LoadTestHook().test_connection()
    assert not ok
    assert f"{REFUSED} at http://127.0.0.1:{port}/" in message, message
    assert NOT_RESOLVED not in message and HINT not in message and API_KEY not in message
    assert f"{REFUSED} at http://127.0.0.1:{port}/" in _async_member_of()


def test_a_host_name_that_does_not_resolve_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    real = socket.getaddrinfo

    def no_dns(host: object, *args: object, **kwargs: object) -> object:
        if host == "loadtest.nowhere.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setenv(
        "AIRFLOW_CONN_LOADTEST_DEFAULT", f"loadtest://:{API_KEY}@loadtest.nowhere.test:8090/http"
    )
    ok, message = LoadTestHook().test_connection()
    assert not ok
    assert f"{NOT_RESOLVED} at http://loadtest.nowhere.test:8090/" in message, message
    assert REFUSED not in message
    assert f"{NOT_RESOLVED} at http://loadtest.nowhere.test:8090/" in _async_member_of()


def test_a_tls_failure_on_the_first_try_reads_plainly(
    monkeypatch: pytest.MonkeyPatch, plain_http_port: int
) -> None:
    """No "after 1 attempt(s); not tried again": one try, and why it was not tried again."""
    _uri_conn(monkeypatch, plain_http_port)
    _, message = LoadTestHook().test_connection()
    assert "attempt" not in message
    assert message.endswith("; not retried: no retry can change this"), message


@pytest.mark.parametrize(
    ("verify", "ca_bundle", "expected"),
    [
        (None, None, True),
        (True, None, True),
        ("false", None, False),
        (None, "/etc/ssl/private-ca.pem", "/etc/ssl/private-ca.pem"),
        (True, " /etc/ssl/private-ca.pem ", "/etc/ssl/private-ca.pem"),
        (False, "/etc/ssl/private-ca.pem", False),  # the switch wins: off is off
        ("/etc/ssl/old-style.pem", None, "/etc/ssl/old-style.pem"),  # connections made before ca_bundle
    ],
)
def test_tls_switch_and_ca_bundle(verify: object, ca_bundle: object, expected: bool | str) -> None:
    assert tls_verification(verify, ca_bundle) == expected


def test_relative_ca_bundle_is_refused() -> None:
    with pytest.raises(ValueError, match="ca_bundle"):
        tls_verification(True, "certs/ca.pem")


def test_ca_bundle_reaches_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_LOADTEST_DEFAULT",
        f'{{"conn_type": "loadtest", "host": "https://x.test", "password": "{API_KEY}", '
        '"extra": {"verify_ssl": true, "ca_bundle": "/etc/ssl/private-ca.pem"}}',
    )
    session = LoadTestHook().get_conn()
    assert isinstance(session, requests.Session)
    assert session.verify == "/etc/ssl/private-ca.pem"
    assert session.headers["Authorization"] == f"Bearer {API_KEY}"


def test_headline_metrics_do_not_repeat_their_unit() -> None:
    """The live log line read "Hits 72000 hits"."""
    from airflow_provider_loadtest.decisions.watch import format_metrics

    line = format_metrics(
        {
            "Hits": {"value": 72000.0, "unit": "hits"},
            "Errors": {"value": 288, "unit": "Errors"},
            "Average response time": {"value": 612.34, "unit": "ms"},
            "Hit rate": {"value": 200.0, "unit": "hits/s"},
        }
    )
    assert line == "Hits 72,000, Errors 288, Average response time 612.34 ms, Hit rate 200 hits/s"


def test_a_templated_history_settings_rendered_as_text_gets_the_hint(
    loadtest_conn: str, requests_mock: object
) -> None:
    """A whole mapping in one template renders as a string ("got str"): the message says why and how."""
    from unittest import mock

    from airflow_provider_loadtest.compat import AirflowFailException
    from airflow_provider_loadtest.operators.run_scenario import RunScenarioOperator

    op = RunScenarioOperator(
        task_id="t", scenario_id="sc-1", baseline="history", history_settings="{{ var.value.settings }}"
    )
    op.history_settings = '{"window": 20}'  # as Airflow renders it without native objects
    with pytest.raises(AirflowFailException) as caught:
        op.execute({"ti": mock.MagicMock(name="ti")})  # type: ignore[arg-type]
    message = str(caught.value)
    assert "history_settings must be a mapping of setting name to value, got str" in message
    assert "render_template_as_native_obj=True" in message
    assert requests_mock.request_history == []  # type: ignore[attr-defined]


class _Refusing(_Plain):
    status = 401

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"message": "Invalid token"}')


class _Forbidding(_Refusing):
    status = 403


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _staging(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LOADTEST_STAGING", f"loadtest://:{API_KEY}@127.0.0.1:{port}/http")


def test_a_refused_key_names_the_connection_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several connections may point at one service: the message says whose key to fix, in the sync
    hook's and the triggerer's client's errors alike. The Test button's answer says "the connection":
    Airflow tests the form under a random id of its own (``get_random_string()``), which would mislead."""
    said = "set a valid key as the password of connection 'loadtest_staging'"
    with _serving(_Refusing) as port:
        _staging(monkeypatch, port)
        ok, message = LoadTestHook("loadtest_staging").test_connection()
        assert not ok and "the password of the connection)" in message and "loadtest_staging" not in message
        with pytest.raises(LoadTestApiError) as caught:
            LoadTestHook("loadtest_staging").call(endpoints.member_workspaces())
        assert said in str(caught.value) and caught.value.never_succeeds
        from airflow.sdk import BaseHook

        from airflow_provider_loadtest.hooks.settings import settings_from_connection

        settings = settings_from_connection(BaseHook.get_connection("loadtest_staging"))

        async def go() -> None:
            async with AsyncLoadTestClient(settings) as client:
                await client.call(endpoints.member_workspaces())

        with pytest.raises(LoadTestApiError) as refused:
            asyncio.run(go())
    assert said in str(refused.value) and API_KEY not in str(refused.value)


def test_a_forbidden_key_names_the_connection_too(monkeypatch: pytest.MonkeyPatch) -> None:
    with _serving(_Forbidding) as port:
        _staging(monkeypatch, port)
        ok, message = LoadTestHook("loadtest_staging").test_connection()
    assert not ok and "not allowed to do this" in message, message
    assert "the key of the connection)" in message and "loadtest_staging" not in message
    with _serving(_Forbidding) as port:
        _staging(monkeypatch, port)
        with pytest.raises(LoadTestApiError) as caught:
            LoadTestHook("loadtest_staging").call(endpoints.member_workspaces())
    assert "the key of connection 'loadtest_staging'" in str(caught.value)
