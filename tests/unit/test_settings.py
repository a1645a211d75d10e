from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_loadtest.hooks.settings import (
    DEFAULT_BASE_URL,
    normalise_base_url,
    settings_from_connection,
)


@dataclass
class FakeConnection:
    host: str | None = None
    password: str | None = "k3y"
    port: int | None = None
    schema: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def extra_dejson(self) -> dict[str, Any]:
        return self.extra


@pytest.mark.parametrize(
    ("host", "schema", "port", "expected"),
    [
        (None, None, None, DEFAULT_BASE_URL),
        ("", None, None, DEFAULT_BASE_URL),
        ("https://api.octoperf.com/", None, None, "https://api.octoperf.com"),
        ("api.example.com", None, None, "https://api.example.com"),
        ("onprem.local", "http", 8090, "http://onprem.local:8090"),
        ("http://onprem.local:8090/", None, None, "http://onprem.local:8090"),
        ("https://gw.example.com/loadtest/api/", None, None, "https://gw.example.com/loadtest/api"),
        ("https://gw.example.com:8443/x", None, 9999, "https://gw.example.com:8443/x"),
    ],
)
def test_base_url_normalisation(
    host: str | None, schema: str | None, port: int | None, expected: str
) -> None:
    assert normalise_base_url(host, schema, port) == expected


def test_path_prefix_and_trailing_slash_join_cleanly() -> None:
    settings = settings_from_connection(FakeConnection(host="https://gw.example.com/api/"))
    assert settings.url("/runtime/scenarios/run/x") == "https://gw.example.com/api/runtime/scenarios/run/x"


def test_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="not an http"):
        normalise_base_url("ftp://example.com")


def test_missing_key_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="password field"):
        settings_from_connection(FakeConnection(password=None))


def test_defaults_and_ui_url() -> None:
    settings = settings_from_connection(FakeConnection(host="https://lt.example.com"))
    assert settings.ui_url == "https://lt.example.com/ui"
    assert (
        settings.report_url("w", "p", "r")
        == "https://lt.example.com/ui/workspace/w/project/p/analysis/report/r"
    )
    assert (settings.connect_timeout_s, settings.read_timeout_s, settings.verify_ssl) == (10.0, 60.0, True)


def test_extras_plain_and_prefixed() -> None:
    conn = FakeConnection(
        extra={
            "ui_url": "https://app.example.com/",
            "extra__loadtest__read_timeout": "12.5",
            "connect_timeout": 3,
            "verify_ssl": "false",
        }
    )
    settings = settings_from_connection(conn)
    assert settings.ui_url == "https://app.example.com"
    assert settings.read_timeout_s == 12.5
    assert settings.connect_timeout_s == 3.0
    assert settings.verify_ssl is False


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"read_timeout": "soon"}, "read_timeout"),
        ({"connect_timeout": -1}, "positive"),
        ({"verify_ssl": "maybe"}, "verify_ssl"),
    ],
)
def test_bad_extras_are_named(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        settings_from_connection(FakeConnection(extra=extra))


def test_repr_hides_the_key() -> None:
    settings = settings_from_connection(FakeConnection(password="very-secret-key"))
    assert "very-secret-key" not in repr(settings)
