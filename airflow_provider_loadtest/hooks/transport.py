"""The triggerer's HTTP sessions: ``aiohttp``, one session per connection settings and event loop.

A triggerer runs hundreds or thousands of waits in one event loop, each sending one small request
every few seconds. Waits with the same connection settings share one ``aiohttp.ClientSession`` (its
connection pool, TLS context and DNS cache), created on first use and closed when its last wait lets
go. The settings are the key, API key included: a rotated key or any other change of the connection
gives a new session, never a stale key.

aiohttp speaks HTTP (a strict parser, keep-alive, proxies with a ``CONNECT`` tunnel, TLS to ``https://``
proxies, the whole-request timeout). What it does not do the way this package needs, and so is done
here, is configuration and what the answers are allowed to cost:

* the proxy comes from the environment by ``requests``' rules (``NO_PROXY`` with CIDR and
  ``host:port`` entries), so the worker's hook and the triggerer agree, and is read once per session;
* a CA bundle (the connection's, or ``REQUESTS_CA_BUNDLE``) gives one TLS context per process;
* answers are not decompressed by aiohttp: ``AnswerBody`` inflates them in bounded steps (aiohttp
  before 3.13.3 inflated a whole read at once);
* aiohttp's errors become a :class:`NoAnswer` saying what happened and whether a retry may help.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
from yarl import URL

from airflow_provider_loadtest import __version__
from airflow_provider_loadtest.api.endpoints import ACCEPT_ENCODING, AnswerBody, ApiRequest, timed_out_detail
from airflow_provider_loadtest.api.errors import trim_service_text
from airflow_provider_loadtest.api.retry import NoAnswer
from airflow_provider_loadtest.hooks.settings import could_not_connect, environment_verify, failure_at

if TYPE_CHECKING:
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings

#: How long an idle connection is kept before closing it; below the usual 10 s check interval would
#: reconnect on every poll, far above it would hold sockets the service may already have dropped.
KEEPALIVE_EXPIRY_S = 30.0


@functools.cache
def ssl_context(verify: bool | str) -> ssl.SSLContext | bool:
    """What the session's ``ssl`` gets: ``False`` (no verification), ``True`` (aiohttp's own default
    context, built once per process), or one context per CA bundle path and process (loading a bundle
    costs ~20 ms of CPU, blocking the event loop, and ~830 KiB). A path may be a file or a directory
    of hashed certificates; it replaces the default trust store."""
    if not isinstance(verify, str):
        return verify
    if os.path.isdir(verify):
        return ssl.create_default_context(capath=verify)
    return ssl.create_default_context(cafile=verify)


def environment_proxy(base_url: str) -> str | None:
    """The proxy the environment gives ``base_url`` (``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``, with
    ``NO_PROXY`` honoured), read by ``requests``' own rules so the worker's hook and the triggerer agree:
    urllib's ``proxy_bypass`` (and so aiohttp's ``trust_env``) knows no CIDR (``10.0.0.0/8``) nor
    ``host:port`` entries. Once per session, so importing ``requests`` here costs nothing per poll."""
    import requests.utils  # the sync hook's dependency, needed only here

    proxy: str | None = requests.utils.select_proxy(base_url, requests.utils.get_environ_proxies(base_url))
    return proxy


def describe_failure(exc: BaseException, url: str, budget_s: float, secret: str | None) -> NoAnswer:
    """A key-free account of an aiohttp failure with no HTTP answer, naming ``url``.

    Never opened (the request cannot have reached the service): a refused connection, a name that did
    not resolve, a connect timeout, a proxy that could not be reached or refused the tunnel. Final (no
    retry can change it): a TLS handshake or certificate refused, a proxy refusing the credentials.
    What the library saw follows, with ``secret`` blanked out: it may quote bytes a server sent.
    """
    detail = trim_service_text(str(exc), secret, limit=200)
    if isinstance(exc, aiohttp.ClientSSLError):  # the handshake, or the certificate (also a proxy's)
        return NoAnswer(
            failure_at(url, f"the TLS handshake failed: {detail}", tls_failed=True),
            never_opened=True,
            final=True,
        )
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return NoAnswer(failure_at(url, "could not connect in time"), never_opened=True)
    if isinstance(exc, TimeoutError):  # the whole-request bound, however slowly bytes came
        return NoAnswer(timed_out_detail(budget_s))
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return NoAnswer(
            failure_at(url, f"the proxy refused the tunnel (HTTP {exc.status} {exc.message})"),
            never_opened=True,
            final=400 <= exc.status < 500,  # 407: the proxy's credentials; no retry changes them
        )
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return NoAnswer(failure_at(url, f"could not connect to the proxy: {detail}"), never_opened=True)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return NoAnswer(
            failure_at(url, could_not_connect(exc, detail)),
            never_opened=True,
        )
    if isinstance(exc, aiohttp.InvalidURL):
        return NoAnswer(failure_at(url, f"the URL or the proxy's URL is not valid: {detail}"), final=True)
    if isinstance(exc, aiohttp.ClientResponseError):  # not an answer: a malformed status line or header
        detail = trim_service_text(exc.message, secret, limit=200)
        return NoAnswer(failure_at(url, f"the answer is not valid HTTP ({detail})"))
    name = type(exc).__name__
    return NoAnswer(failure_at(url, f"the connection failed before an answer arrived ({name}: {detail})"))


@dataclass(eq=False)
class Channel:
    """One connection's ``aiohttp`` session, shared by the waits of an event loop; ``users`` count them."""

    settings: ConnectionSettings
    users: int = 0
    closed: bool = False
    session: aiohttp.ClientSession = field(init=False, repr=False)
    proxy: URL | None = field(init=False, default=None, repr=False)  # may hold the proxy's password
    _base: URL = field(init=False, repr=False)
    _timeouts: dict[float, aiohttp.ClientTimeout] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        settings = self.settings
        self._base = URL(settings.base_url)
        proxy = environment_proxy(settings.base_url)
        self.proxy = URL(proxy) if proxy else None
        connector = aiohttp.TCPConnector(
            ssl=ssl_context(environment_verify(settings.verify_ssl)),
            limit=0,  # each wait has one request in flight at most; a cap would make polls queue
            keepalive_timeout=KEEPALIVE_EXPIRY_S,
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            headers={
                "Authorization": f"Bearer {settings.api_key}",
                "Accept-Encoding": ACCEPT_ENCODING,
                "User-Agent": f"airflow-provider-loadtest/{__version__} aiohttp/{aiohttp.__version__}",
            },
            auto_decompress=False,  # AnswerBody inflates, in bounded steps
            cookie_jar=aiohttp.DummyCookieJar(),  # the service sets no cookie that matters
            trust_env=False,  # the environment is read once, above, by requests' rules
        )

    def url(self, path: str) -> URL:
        """The URL of an API path: the base URL parsed once, the path (quoted by ``api.endpoints``)
        put on it as it is. Waits poll paths of their own, so parsing each whole URL would miss every
        cache (yarl's included) and cost four times as much."""
        return self._base.with_path(self._base.raw_path.rstrip("/") + path, encoded=True)

    def _timeout(self, budget_s: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(budget_s)
        if timeout is None:
            if len(self._timeouts) >= 16:  # budgets near a watch deadline vary; never let this grow
                self._timeouts.clear()
            connect = min(self.settings.connect_timeout_s, budget_s)
            timeout = self._timeouts[budget_s] = aiohttp.ClientTimeout(total=budget_s, connect=connect)
        return timeout

    async def exchange(
        self, request: ApiRequest[Any], budget_s: float
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One try of ``request`` within ``budget_s`` seconds in all (connect, send, every read): the
        answer's status, headers and body (read in chunks against the size bound), or ``NoAnswer``."""
        url = self.url(request.path)
        try:
            async with self.session.request(
                request.method,
                url,
                params=dict(request.params) or None,
                json=request.json_body,
                headers={"Accept": request.accept},
                # aiohttp labels a body-less POST application/octet-stream, which a Spring server
                # refuses (HTTP 415) on the calls without a body: the stop, the start
                skip_auto_headers=_NO_CONTENT_TYPE if request.json_body is None else None,
                proxy=self.proxy,
                timeout=self._timeout(budget_s),
                allow_redirects=False,  # a redirect would re-send a start to another host
            ) as response:
                body = AnswerBody(request, response.status, coding=response.headers.get("Content-Encoding"))
                async for chunk in response.content.iter_any():
                    body.add(chunk)
                return response.status, response.headers, body.content
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise describe_failure(exc, str(url), budget_s, self.settings.api_key) from None

    async def aclose(self) -> None:
        self.closed = True
        await self.session.close()


_NO_CONTENT_TYPE = ("Content-Type",)

#: Per running event loop: the channel of each connection's settings. Weak on the loop, so a loop that
#: is gone (tests run many) takes its bookkeeping with it.
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[ConnectionSettings, Channel]] = (
    weakref.WeakKeyDictionary()
)


def acquire(settings: ConnectionSettings) -> Channel:
    """The shared channel for ``settings`` in the running loop; pair with ``release``."""
    channels = _by_loop.setdefault(asyncio.get_running_loop(), {})
    channel = channels.get(settings)
    if channel is None or channel.closed:
        channel = channels[settings] = Channel(settings)
    channel.users += 1
    return channel


async def release(channel: Channel) -> None:
    """Let go of ``channel``; its last user closes it (its sockets with it)."""
    channels = _by_loop.get(asyncio.get_running_loop(), {})
    if channels.get(channel.settings) is not channel:
        return
    channel.users -= 1
    if channel.users <= 0:
        del channels[channel.settings]
        await channel.aclose()


def users(settings: ConnectionSettings) -> int:
    """The waits sharing the channel of ``settings`` in the running loop (for tests and benchmarks)."""
    channel = _by_loop.get(asyncio.get_running_loop(), {}).get(settings)
    return 0 if channel is None else channel.users
