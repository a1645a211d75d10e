"""What an Airflow connection of type ``loadtest`` means: base URLs, key, timeouts.

Shared by the sync hook and the async trigger client so both read a connection the same way.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from airflow_provider_loadtest.api.errors import UnusableApiKeyError

DEFAULT_BASE_URL = "https://api.octoperf.com"
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_READ_TIMEOUT_S = 60.0
CONN_TYPE = "loadtest"


class ConnectionLike(Protocol):
    """The fields of an Airflow ``Connection`` this package reads (sync and async APIs alike)."""

    host: str | None
    password: str | None
    port: int | None
    schema: str | None

    @property
    def extra_dejson(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ConnectionSettings:
    """A connection resolved into what the HTTP clients need. ``repr`` never shows the key."""

    base_url: str
    api_key: str = field(repr=False)
    ui_url: str
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    verify_ssl: bool | str = True
    #: The Airflow connection these settings came from, named in a refused key's message (several
    #: connections may point at one service). Not part of the settings' identity (sessions are shared).
    conn_id: str | None = field(default=None, compare=False)

    def url(self, path: str) -> str:
        """The absolute URL of an API path (``path`` starts with ``/``)."""
        return self.base_url + path

    def report_url(self, workspace_id: str, project_id: str, report_id: str) -> str:
        """The web UI page of a report, as the service's own UI builds it."""
        return f"{self.ui_url}/workspace/{workspace_id}/project/{project_id}/analysis/report/{report_id}"


def _extra(extras: dict[str, Any], name: str) -> Any:
    # Airflow < 2.3 stored custom form fields as ``extra__<conn type>__<name>``; accept both.
    value = extras.get(name)
    if value in (None, ""):
        value = extras.get(f"extra__{CONN_TYPE}__{name}")
    return None if value == "" else value


def _as_bool(name: str, value: Any) -> bool | str:
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in {"true", "1", "yes"}:
        return True
    if text.lower() in {"false", "0", "no"}:
        return False
    if text.startswith("/"):
        return text  # a CA bundle path in ``verify_ssl``: how connections made before ``ca_bundle`` said it
    raise ValueError(f"connection extra {name!r} must be true or false, got {value!r}")


def tls_verification(verify: Any, ca_bundle: Any) -> bool | str:
    """What requests' and httpx's ``verify`` get: the form's switch plus its optional CA bundle path.

    Verification is on unless the switch is off; a CA bundle path (``ca_bundle``, or a path written in
    ``verify_ssl`` as older connections did) replaces the system's trust store while it is on.
    """
    switch = True if verify is None else _as_bool("verify_ssl", verify)
    if switch is False:
        return False
    if ca_bundle is not None:
        path = str(ca_bundle).strip()
        if not path.startswith("/"):
            raise ValueError(f"connection extra 'ca_bundle' must be an absolute file path, got {ca_bundle!r}")
        return path
    return switch


def environment_verify(verify: bool | str) -> bool | str:
    """The connection's TLS setting; with plain verification on, the CA bundle ``requests`` would take
    from ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE`` (the connection's own ``ca_bundle`` wins).

    Both clients read it here, so a worker's calls and a triggerer's waits trust the same CAs.
    """
    if verify is True:
        return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    return verify


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every error behind it, however deep requests, urllib3 or aiohttp wrapped it
    (``__cause__``, ``__context__``, a ``reason``, aiohttp's ``os_error``, the arguments)."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        error = todo.pop()
        if not isinstance(error, BaseException) or id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        todo.extend(
            [
                error.__cause__,
                error.__context__,
                getattr(error, "reason", None),
                getattr(error, "os_error", None),
                *error.args,
            ]
        )


def could_not_connect(exc: BaseException, detail: str = "") -> str:
    """Why no connection could be opened, in the words that say what to check: a host name that does
    not resolve (a typo, DNS) is not a port where nothing listens (the service down, the wrong port).
    ``detail`` (the client's own words) is added only when neither is recognised."""
    chain = list(causes(exc))
    if any(
        isinstance(error, socket.gaierror) or type(error).__name__ == "ClientConnectorDNSError"
        for error in chain
    ):
        return "could not connect: the host name was not resolved (check the host for a typo, and DNS)"
    if any(isinstance(error, ConnectionRefusedError) for error in chain):
        return (
            "could not connect: connection refused (nothing listens on that port: check the port, "
            "and that the service runs)"
        )
    return f"could not connect ({detail})" if detail else "could not connect"


def failure_at(url: str, failure: str, *, tls_failed: bool = False) -> str:
    """A transport failure naming the URL it tried (the key travels in a header, never in the URL).

    A failed TLS handshake is most often an ``https://`` URL aimed at a plain-http server: a host given
    without a scheme (the URI form ``loadtest://:KEY@host:8080`` included) means https.
    """
    text = f"{failure} at {url}"
    if tls_failed and url.startswith("https://"):
        text += (
            "; if the service there speaks plain http, write the host as http://host:port "
            "(URI form: loadtest://:KEY@host:port/http)"
        )
    return text


def _as_seconds(name: str, value: Any, default: float) -> float:
    if value is None:
        return default
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"connection extra {name!r} must be a number of seconds, got {value!r}") from None
    if seconds <= 0:
        raise ValueError(f"connection extra {name!r} must be positive, got {value!r}")
    return seconds


def normalise_base_url(host: str | None, schema: str | None = None, port: int | None = None) -> str:
    """Turn the connection's host field into a base URL with no trailing slash.

    Accepts ``api.example.com``, ``https://api.example.com/``, ``http://onprem:8090/api`` (a path prefix
    is kept); the connection's schema and port fields fill in what the host leaves out.
    """
    text = (host or "").strip()
    if not text:
        return DEFAULT_BASE_URL
    if "://" not in text:
        scheme = schema if schema in {"http", "https"} else "https"
        text = f"{scheme}://{text}"
    parts = urlsplit(text)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"connection host {host!r} is not an http(s) URL")
    netloc = parts.netloc
    if port and parts.port is None:
        netloc = f"{netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_api_key(key: str) -> str:
    """Return ``key`` if it can travel in an HTTP header, else raise ``UnusableApiKeyError`` (a
    ``ValueError`` that Airflow does not retry) naming the
    problem (never the key): a pasted key with a newline or a non-Latin-1 character would otherwise
    fail deep in the HTTP client, or be retried and blamed on the service."""
    if _CONTROL.search(key):
        raise UnusableApiKeyError(
            "the load-testing connection's API key contains a line break or another control character "
            "(often a copy-paste accident): paste the key again in the connection's password field"
        )
    if key != key.strip():
        raise UnusableApiKeyError(
            "the load-testing connection's API key starts or ends with spaces: remove them in the "
            "connection's password field"
        )
    try:
        key.encode("latin-1")
    except UnicodeEncodeError:
        raise UnusableApiKeyError(
            "the load-testing connection's API key contains characters that cannot be sent in an HTTP "
            "header (outside Latin-1): check that the password field holds the key itself"
        ) from None
    return key


def settings_from_connection(conn: ConnectionLike) -> ConnectionSettings:
    """Read a ``loadtest`` connection; a missing key is an error here rather than a 401 later."""
    if not conn.password:
        raise ValueError(
            "the load-testing connection has no API key: put the key from your profile in the web UI "
            "in the connection's password field"
        )
    extras = conn.extra_dejson or {}
    base_url = normalise_base_url(conn.host, conn.schema, conn.port)
    ui_url = str(_extra(extras, "ui_url") or base_url + "/ui").rstrip("/")
    return ConnectionSettings(
        base_url=base_url,
        api_key=check_api_key(conn.password),
        ui_url=ui_url,
        connect_timeout_s=_as_seconds(
            "connect_timeout", _extra(extras, "connect_timeout"), DEFAULT_CONNECT_TIMEOUT_S
        ),
        read_timeout_s=_as_seconds("read_timeout", _extra(extras, "read_timeout"), DEFAULT_READ_TIMEOUT_S),
        verify_ssl=tls_verification(_extra(extras, "verify_ssl"), _extra(extras, "ca_bundle")),
        conn_id=getattr(conn, "conn_id", None) or None,
    )
