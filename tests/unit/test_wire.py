"""What each client does with the bytes a server or a proxy really sends: framings the service (or a
proxy in front of it) may use, answers that go wrong, and hostile answers. Every test runs the sync
hook (requests, urllib3, http.client) and the triggerer's client (aiohttp) on the same bytes, against
servers on 127.0.0.1 (``tests/unit/wire.py``).

The ``test_hole_*`` tests are the holes issue 19 found in the hand-made triggerer client (and, where
said, in the sync path); ``test_fail_closed_*`` the answers issue 18 saw read as "no alarms".
"""

from __future__ import annotations

import base64
import gzip
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_loadtest.api import endpoints
from airflow_provider_loadtest.api.errors import LoadTestApiError
from airflow_provider_loadtest.api.retry import RetryPolicy
from tests.unit.wire import (
    CLIENTS,
    JSON,
    Proxy,
    Server,
    call,
    calls,
    certificate,
    close_after,
    hold,
    no_proxy_environment,
    no_waits,
    ok,
    trickle,
)

__all__ = ["no_proxy_environment", "no_waits"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("no_waits", "no_proxy_environment")

STATE = endpoints.get_bench_result("br-1")
ALARMS = endpoints.get_threshold_alarms("br-1")
CRITICAL = b'[{"id": "a-1", "severity": "CRITICAL", "name": "p95 above 800 ms"}]'


def state(client: str, server: Server, **kw: Any) -> str:
    return str(call(client, server.url, STATE, **kw).state)


# --- framings both clients read ------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_keep_alive_answers_share_one_connection(client: str) -> None:
    with Server([ok(), ok()]).running() as server:
        assert [answer.state for answer in calls(client, server.url, [STATE, STATE])] == ["RUNNING"] * 2
    assert server.connections == 1


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5;ext=1\r\n{"id"\r\n1D\r\n: "br-1", "state": "RUNNING"}\r\n0\r\nX-Trailer: yes\r\n\r\n',
        close_after(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + JSON),
        close_after(b"HTTP/1.0 200 OK\r\n\r\n" + JSON),
        b"HTTP/1.1 100 Continue\r\n\r\n" + ok(),
        ok(gzip.compress(JSON), b"Content-Encoding: gzip"),
        ok(gzip.compress(JSON[:10]) + gzip.compress(JSON[10:]), b"Content-Encoding: gzip"),
        ok(zlib.compress(JSON), b"Content-Encoding: deflate"),
        ok(zlib.compress(JSON)[2:-4], b"Content-Encoding: deflate"),  # raw deflate, as some servers send
    ],
    ids=[
        "chunked",
        "close-delimited",
        "http10",
        "100-continue",
        "gzip",
        "gzip-2-members",
        "deflate",
        "raw-deflate",
    ],
)
def test_framings_and_codings_are_read(client: str, answer: Any) -> None:
    with Server([answer]).running() as server:
        assert state(client, server) == "RUNNING"


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("answer", "said"),  # said: what the message must hold ("" when any failure will do)
    [
        (close_after(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + JSON), ""),
        (close_after(b"HTTP/1.1 200 OK\r\nContent-Le"), ""),
        (close_after(b""), ""),
        (close_after(b"<html>not http</html>\r\n\r\n"), ""),
        (b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n[]", ""),
        (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n" + JSON, ""),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", ""),
        (b"HTTP/1.1 200 OK\r\nbroken header line\r\nContent-Length: %d\r\n\r\n%s" % (len(JSON), JSON), ""),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ""),
        (hold(b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 70_000), ""),
        (ok(b"not gzip at all", b"Content-Encoding: gzip"), "does not decompress"),
        (close_after(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n" + gzip.compress(JSON)[:-12]), ""),
        (ok(JSON, b"Content-Encoding: br"), "not asked for"),
    ],
    ids=[
        "body-cut-short",
        "head-cut-short",
        "closed-without-answer",
        "not-http",
        "bad-status",
        "bad-length",
        "two-lengths",
        "bad-header",
        "bad-chunk-size",
        "endless-headers",
        "corrupt-gzip",
        "gzip-cut-short",
        "coding-not-asked-for",
    ],
)
def test_a_broken_answer_is_the_calls_error(client: str, answer: Any, said: str) -> None:
    with Server([answer]).running() as server, pytest.raises(LoadTestApiError, match=said or None) as raised:
        call(client, server.url, STATE)
    assert "br-1" in str(raised.value)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_idle_connection_the_server_closed_is_not_reused(client: str) -> None:
    with Server([close_after(ok()), ok()]).running() as server:  # ok(), then it hangs up
        answers = calls(client, server.url, [STATE, STATE], pause_s=0.2)  # a new connection, no error
        assert [answer.state for answer in answers] == ["RUNNING"] * 2
    assert server.connections == 2


# --- issue 19's holes -------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    "answer",
    [
        ok(status=b"+99 OK"),
        ok(status=b"-10 OK"),
        ok(status=b"+200 OK"),
        ok(status=b"2_00 OK"),
        ok(status=b"0200 OK"),
        JSON.join([b"HTTP/1.1 200 OK\r\nContent-Length: +%d\r\n\r\n" % len(JSON), b""]),
        JSON.join([b"HTTP/1.1 200 OK\r\nContent-Length: 0_%d\r\n\r\n" % len(JSON), b""]),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+%x\r\n%s\r\n0\r\n\r\n" % (len(JSON), JSON),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x%x\r\n%s\r\n0\r\n\r\n" % (len(JSON), JSON),
        close_after(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunkedx\r\n\r\n%x\r\n%s\r\n0\r\n\r\n"
            % (len(JSON), JSON)
        ),
    ],
    ids=[
        "status+99",
        "status-10",
        "status+200",
        "status2_00",
        "status0200",
        "length+N",
        "length0_N",
        "chunk+2",
        "chunk0x2",
        "xchunkedx",
    ],
)
def test_hole_strict_numbers_in_status_lines_and_framing(client: str, answer: Any) -> None:
    """A status, a length or a chunk size that is not plain digits is not an answer (the hand-made
    client took ``+99`` and ``-10`` for successes, ``+5`` and ``0_5`` for lengths, and any
    ``Transfer-Encoding`` containing "chunked" for chunked; http.client and urllib3 take ``+200``,
    ``2_00``, ``+5``, ``0_5``, ``+2`` and ``0x2`` as numbers). Each answer here would read as a valid
    run state if its numbers were taken. ``xchunkedx`` is not chunked: the body is read to the
    connection's end, chunk sizes and all, and is not JSON."""
    with Server([answer]).running() as server, pytest.raises(LoadTestApiError):
        call(client, server.url, STATE)


@pytest.mark.parametrize("client", CLIENTS)
def test_hole_no_bytes_after_a_connect_answer_are_read_as_the_origins(
    client: str, tmp_path: Path, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    """A proxy that sends an answer of its own right after its ``200`` to ``CONNECT`` cannot answer for
    the origin: the client reads the origin, through TLS, or fails; never the injected answer."""
    tls = certificate(tmp_path)
    injected = ok(b'{"id": "br-1", "state": "FINISHED"}')
    with Server([ok()], tls=tls.server).running() as origin, Proxy(after_connect=injected).running() as proxy:
        no_proxy_environment.setenv("HTTPS_PROXY", proxy.url())
        try:
            seen = state(client, origin, verify_ssl=tls.ca_file)
        except LoadTestApiError as failed:  # the injected bytes broke the TLS handshake: fine too
            assert "FINISHED" not in str(failed)
        else:
            assert seen == "RUNNING"
        assert proxy.heads[0].startswith(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.".encode())


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("origin_scheme", ["https", "http"])
def test_hole_tls_to_an_https_proxy(
    client: str, origin_scheme: str, tmp_path: Path, no_proxy_environment: pytest.MonkeyPatch
) -> None:
    """An ``https://`` proxy is spoken to over TLS, its credentials with it (the hand-made client spoke
    plain http to every proxy, ``Proxy-Authorization`` in clear text). This proxy speaks TLS only: a
    client speaking plain http to it gets no answer at all."""
    tls = certificate(tmp_path)
    credentials = base64.b64encode(b"user:s3cret").decode()
    with Server([ok()], tls=tls.server).running() as origin, Proxy(tls=tls.server).running() as proxy:
        no_proxy_environment.setenv("HTTPS_PROXY", proxy.url("user:s3cret"))
        no_proxy_environment.setenv("HTTP_PROXY", proxy.url("user:s3cret"))
        if origin_scheme == "https":
            assert (
                state(client, origin, verify_ssl=tls.ca_file) == "RUNNING"
            )  # the origin, through the tunnel
            assert proxy.heads[0].startswith(f"CONNECT 127.0.0.1:{origin.port} HTTP/1.".encode())
        else:  # plain http through the proxy: absolute form, answered by the proxy itself here
            answer = call(client, "http://service.invalid:8090", STATE, verify_ssl=tls.ca_file)
            assert answer.state == "FROM-THE-PROXY"
            assert proxy.heads[0].startswith(b"GET http://service.invalid:8090/runtime/bench-results/br-1 ")
        assert f"\r\nProxy-Authorization: Basic {credentials}\r\n".encode() in proxy.heads[0]
        # The proxy's certificate is checked like the origin's: the system's CAs do not know this one.
        base = origin.url if origin_scheme == "https" else "http://service.invalid:8090"
        with pytest.raises(LoadTestApiError, match="TLS handshake failed"):
            call(client, base, STATE)


def _bomb(inflated: int) -> bytes:
    """A gzip stream of ``inflated`` zero bytes (about a thousand times smaller), built in steps."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(2**20)
    packed = [packer.compress(block) for _ in range(inflated // len(block))]
    return b"".join([*packed, packer.flush()])


@pytest.mark.parametrize("client", CLIENTS)
def test_hole_decompressed_size_is_bounded_while_inflating(
    client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small gzip answer inflating far past the answer bound stops at the bound, having held about the
    bound in memory (the hand-made client inflated whole network reads: +254 MiB for a 1 MB answer).
    Bound lowered to 1 MiB here; 64 KiB of it inflates to 64 MiB."""
    monkeypatch.setattr(endpoints, "MAX_ANSWER_BYTES", 2**20)
    bomb = _bomb(256 * 2**20)
    with Server([ok(bomb, b"Content-Encoding: gzip")]).running() as server:
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            with pytest.raises(LoadTestApiError, match="larger than 1048576 bytes"):
                call(client, server.url, STATE)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB held while inflating"


# --- issue 18: an answer that was not read whole is never "no alarms" --------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_fail_closed_an_answer_cut_mid_headers_is_never_no_alarms(client: str) -> None:
    """The status line arrives, then the headers trickle past the whole-request deadline. http.client
    takes the watchdog's cut for the end of the headers and hands back an empty 200: read as "no
    alarms", a CRITICAL alarm the body held was never seen. Now the try is a timeout (retried as a read
    within the watch's bounds; here, one try)."""
    cut = trickle(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n",
        b"X-Padding: " + b"a" * 40 + b"\r\nContent-Length: %d\r\n\r\n" % len(CRITICAL) + CRITICAL,
    )
    with Server([cut]).running() as server, pytest.raises(LoadTestApiError, match=r"within 1\.0 s"):
        call(client, server.url, ALARMS, read_timeout_s=1.0)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("request_", "body", "said"),
    [
        (ALARMS, b"", "empty body"),
        (ALARMS, b"null", "expected a list of alarms, got null"),
        (ALARMS, b'{"alarms": []}', "expected shape"),
        (endpoints.get_global_metrics("br-1"), b"", "empty body"),
        (endpoints.get_global_metrics("br-1"), b"[]", "expected an object of metrics"),
        (endpoints.summary_metric_values("br-1", [{"id": "HITS"}]), b"", "empty body"),
        (endpoints.summary_metric_values("br-1", [{"id": "HITS"}]), b"null", "expected a list of numbers"),
    ],
    ids=[
        "alarms-empty",
        "alarms-null",
        "alarms-object",
        "metrics-empty",
        "metrics-list",
        "values-empty",
        "values-null",
    ],
)
def test_fail_closed_an_answer_empty_or_of_another_shape_is_an_error(
    client: str, request_: endpoints.ApiRequest[Any], body: bytes, said: str
) -> None:
    """Where JSON of a shape is due, an empty body, ``null`` or another shape is the call's error naming
    it, never "no alarms", "no metrics" or "no values" (a gate would pass what it never read)."""
    with Server([ok(body)]).running() as server, pytest.raises(LoadTestApiError, match=said):
        call(client, server.url, request_)


@pytest.mark.parametrize("client", CLIENTS)
def test_fail_closed_a_truncated_alarms_answer_is_an_error(client: str) -> None:
    cut = close_after(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + CRITICAL[:20])
    with Server([cut]).running() as server, pytest.raises(LoadTestApiError, match="not JSON"):
        call(client, server.url, ALARMS)


# --- issue 20: what no retry can change fails at once ----------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_a_tls_handshake_with_a_plain_http_server_fails_at_once(client: str, no_waits: list[float]) -> None:
    with Server([ok()] * 5).running() as server, pytest.raises(LoadTestApiError) as raised:
        call(client, f"https://127.0.0.1:{server.port}", STATE, retry=RetryPolicy())
    message = str(raised.value)
    assert "TLS handshake failed" in message and "; not retried: no retry" in message, message
    assert "write the host as http://host:port" in message and "no retry can change" in message
    assert server.connections == 1 and no_waits == []


@pytest.mark.parametrize("client", CLIENTS)
def test_an_untrusted_certificate_fails_at_once(client: str, tmp_path: Path, no_waits: list[float]) -> None:
    tls = certificate(tmp_path)
    with Server([ok()] * 5, tls=tls.server).running() as server, pytest.raises(LoadTestApiError) as raised:
        call(client, server.url, STATE, retry=RetryPolicy())  # the system's CAs do not know this one
    assert "; not retried: no retry can change this" in str(raised.value) and no_waits == []


@pytest.mark.parametrize("client", CLIENTS)
def test_a_trusted_certificate_is_read(client: str, tmp_path: Path) -> None:
    tls = certificate(tmp_path)
    with Server([ok()], tls=tls.server).running() as server:
        assert state(client, server, verify_ssl=tls.ca_file) == "RUNNING"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_refused_connection_is_still_retried(client: str, no_waits: list[float]) -> None:
    with Server([]).running() as server:
        port = server.port  # nothing listens there once the server is gone
    with pytest.raises(LoadTestApiError) as raised:
        call(client, f"http://127.0.0.1:{port}", STATE, retry=RetryPolicy(max_attempts=3))
    assert "(after 3 attempts)" in str(raised.value) and len(no_waits) == 2
