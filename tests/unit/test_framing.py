"""Strict framing on both clients: an answer framed with a transfer coding the client does not implement
is an error on the sync hook as on the triggerer's client, never a body read as if the coding were not
there (issue 28: ``http.client`` ignores codings it does not know and read ``xchunkedx`` by its
``Content-Length``, while aiohttp refused it).

Real bytes from a real loopback server (``tests/unit/wire.py``), through each client's real HTTP library.
"""

from __future__ import annotations

import pytest

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import RetryPolicy
from tests.unit.wire import CLIENTS, JSON, Server, call, no_waits

__all__ = ["no_waits"]  # a fixture, used by name

STATE = endpoints.get_bench_result("br-1")


def framed(coding: bytes, *, length: bool = True) -> bytes:
    """A valid run state whose head names ``coding`` (and, with ``length``, the body's exact length):
    read as if the coding were not there, it is a good answer."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: " + coding + b"\r\n"
    if length:
        head += b"Content-Length: %d\r\n" % len(JSON)
    return head + b"\r\n" + JSON


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "coding", [b"xchunkedx", b"gzip, chunked", b"chunked, identity", b"identity", b"chunked", b"Chunked"]
)
def test_a_transfer_coding_beside_a_content_length_is_refused_by_both_clients(
    client: str, coding: bytes
) -> None:
    """Each answer would read as the run's state by its length: refused, with the reason said."""
    with Server([framed(coding)]).running() as server, pytest.raises(LoadTestApiError) as raised:
        call(client, server.url, STATE)
    said = str(raised.value)
    assert "the answer is not valid HTTP" in said, said
    if client == "sync" and coding.lower() != b"chunked":
        assert f"Transfer-Encoding is '{coding.decode()}'" in said and "only chunked" in said, said


@pytest.mark.parametrize("coding", [b"xchunkedx", b"gzip"])
def test_a_coding_the_sync_client_does_not_implement_is_refused_without_a_content_length(
    coding: bytes,
) -> None:
    """Without a length http.client reads to the connection's end: the coding is named, not guessed at."""
    answer = framed(coding, length=False)
    with Server([answer]).running() as server, pytest.raises(LoadTestApiError, match="only chunked"):
        call("sync", server.url, STATE)


def test_plain_chunked_is_still_read() -> None:
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(JSON), JSON)
    answer = framed(b"chunked", length=False).removesuffix(JSON) + body
    with Server([answer]).running() as server:
        assert call("sync", server.url, STATE).state.value == "RUNNING"


@pytest.mark.parametrize("client", CLIENTS)
def test_both_clients_retry_a_misframed_read_alike(client: str, no_waits: list[float]) -> None:
    """Retried as every other malformed answer is (a read; ``api/retry.py``: only a failure that no
    retry can change, a refused certificate or a malformed URL, fails at once): a proxy answering so may
    be passing, and the two clients must not differ."""
    answers = [framed(b"xchunkedx")] * 3
    with Server(list(answers)).running() as server, pytest.raises(LoadTestApiError) as raised:
        call(client, server.url, STATE, retry=RetryPolicy(max_attempts=3))
    assert "(after 3 attempts)" in str(raised.value) and len(no_waits) == 2
    assert len(server.requests) == 3
