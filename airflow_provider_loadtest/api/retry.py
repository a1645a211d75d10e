"""When to try a call again, and how long to wait first.

Pure arithmetic shared by the sync hook and the async trigger client, so both back off the same way.

Checked against tenacity (in Airflow's own dependencies): what it would do here is count the tries and
sleep, a dozen lines of ``Attempts``. What this module is for, it leaves to callbacks: which failures a
resend is safe after (a start only when the connection never opened), ``Retry-After``, the total-wait
bound, the watch deadline clipping both each back-off and each try's own time budget (``budget``, which
tenacity has no notion of), and the error text saying why a call was not sent again. Expressed as
tenacity's ``stop``/``wait``/``retry``/``before_sleep`` callbacks, with answers to retry turned into
exceptions and the last one turned back into the call's error, the same rules would take as many lines in
two loops (sync and async) instead of one class: kept by hand.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from airflow_provider_loadtest.api.endpoints import ApiRequest

#: Answers worth asking again (reads only: a start is never resent once it may have reached the service).
#: 500 is here because the service answers it for passing faults (a database hiccup) as well.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


def _now() -> float:
    """Epoch seconds; an indirection so tests can move the clock of every call's tries."""
    return time.time()


class NoAnswer(Exception):
    """A try that got no HTTP answer, as a transport describes it: what happened (key-free, naming the
    URL), whether the request provably never left (``never_opened``) and whether no retry can change
    it (``final``). Both clients turn their HTTP library's errors into this, so both retry alike."""

    def __init__(self, failure: str, *, never_opened: bool = False, final: bool = False) -> None:
        super().__init__(failure)
        self.failure = failure
        self.never_opened = never_opened
        self.final = final


#: The least time one try of a call gets even at its deadline, so a last poll can still read the state.
MIN_TRY_S = 1.0


class LoggerLike(Protocol):
    """What the package needs of a logger: stdlib loggers and Airflow's structlog loggers both fit."""

    def log(self, level: int, msg: str, /, *args: Any) -> Any: ...

    def warning(self, msg: str, /, *args: Any) -> Any: ...


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), or ``None``."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, bounded both in attempts and in total waiting time.

    The total bound matters more than the count: a task with a 1-hour execution timeout should not
    spend it sleeping on a service that keeps answering 503.
    """

    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    max_total_wait_s: float = 120.0

    def delay(self, attempt: int, retry_after: str | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1).

        A ``Retry-After`` from the service wins over our own backoff (capped at ``max_delay_s``).
        """
        asked = parse_retry_after(retry_after)
        if asked is not None:
            return min(asked, self.max_delay_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return (rng or random).uniform(ceiling / 2, ceiling)

    def allows(self, attempt: int, waited_s: float, next_delay_s: float) -> bool:
        """Whether another attempt fits in both budgets after ``attempt`` attempts so far."""
        return attempt < self.max_attempts and waited_s + next_delay_s <= self.max_total_wait_s

    def next_delay(
        self,
        *,
        safe: bool,
        attempt: int,
        waited_s: float,
        status: int | None = None,
        retry_after: str | None = None,
    ) -> float | None:
        """Seconds to wait before trying again, or ``None`` to give up now.

        ``status`` is the HTTP status, or ``None`` for a failure with no answer; ``safe`` says whether
        sending the request again is harmless (see ``RetrySafety``).
        """
        if not safe or (status is not None and status not in RETRYABLE_STATUSES):
            return None
        delay = self.delay(attempt, retry_after)
        return delay if self.allows(attempt, waited_s, delay) else None


def transport_failure_detail(failure: str, attempts: int, safe: bool, *, final: bool = False) -> str:
    """The error text for a call that got no HTTP answer, saying why it was not sent again."""
    detail = f"{failure} (after {attempts} attempts)" if attempts > 1 else failure
    if final:
        detail += "; not retried: no retry can change this"
    elif not safe:
        detail += (
            "; the request may have reached the service, so it was not sent again "
            "(check the service for a run started now before retrying)"
        )
    return detail


def log_retry(
    log: LoggerLike,
    request: ApiRequest[Any],
    *,
    failure: str,
    delay: float,
    attempt: int,
    policy: RetryPolicy,
) -> None:
    """One warning per retry, naming the call (never the key: requests carry no headers here)."""
    log.warning(
        "%s (%s %s): %s; trying again in %.1f s (attempt %d of at most %d)",
        request.operation,
        request.method,
        request.path,
        failure,
        delay,
        attempt + 1,
        policy.max_attempts,
    )


@dataclass
class Attempts:
    """The tries of one call: whether to go again, how long to wait first, and a log line for each.

    The sync hook and the async client only send bytes and report what came back, so both transports
    retry, give up and log identically.
    """

    request: ApiRequest[Any]
    policy: RetryPolicy
    log: LoggerLike
    attempt: int = 1
    waited_s: float = 0.0
    #: Epoch clock the request's ``deadline`` is measured on (tests plug in a fake one).
    now: Callable[[], float] = field(default=lambda: _now())  # noqa: PLW0108 - late: tests patch _now

    def budget(self, cap_s: float) -> float:
        """Seconds this try may take in all (connect, send, every read), or raises the call's error.

        ``cap_s`` (the connection's read timeout) caps one try; the request's ``deadline`` (the watch
        deadline) caps it further. A first try always gets ``MIN_TRY_S`` so a last poll can still read
        the state; a retry that would start past the deadline is not sent.
        """
        deadline = self.request.deadline
        if deadline is None:
            return cap_s
        left = deadline - self.now()
        if left <= 0 and self.attempt > 1:
            raise self.request.error(
                None, f"the task's deadline passed before try {self.attempt} could be sent"
            ) from None
        return min(cap_s, max(left, MIN_TRY_S))

    def after_no_answer(self, failure: str, *, never_opened: bool, final: bool = False) -> float:
        """Seconds to wait after a try that got no HTTP answer; raises the call's error on giving up.

        ``never_opened`` (refused, DNS, connect timeout) proves the service never saw the request,
        which makes even a costly call safe to send again. ``final`` failures (a TLS handshake or a
        certificate refused, a malformed URL or proxy setting) fail at once: every retry would fail
        the same way, and the message already names the fix.
        """
        safe = self.request.may_resend(never_opened=never_opened)
        delay = (
            None if final else self.policy.next_delay(safe=safe, attempt=self.attempt, waited_s=self.waited_s)
        )
        if delay is None:
            raise self.request.error(
                None,
                transport_failure_detail(failure, self.attempt, safe, final=final),
                reached_service=not never_opened,
            ) from None
        return self._again(failure, delay)

    def after_answer(self, status: int, retry_after: str | None) -> float | None:
        """Seconds to wait after an HTTP answer that asks for a retry, or ``None`` to read it as final."""
        delay = self.policy.next_delay(
            safe=self.request.may_resend(never_opened=False),
            attempt=self.attempt,
            waited_s=self.waited_s,
            status=status,
            retry_after=retry_after,
        )
        return None if delay is None else self._again(f"HTTP {status}", delay)

    def after(self, failure: NoAnswer) -> float:
        """``after_no_answer`` for a failure a transport described as a :class:`NoAnswer`."""
        return self.after_no_answer(failure.failure, never_opened=failure.never_opened, final=failure.final)

    def _again(self, failure: str, delay: float) -> float:
        deadline = self.request.deadline
        if deadline is not None:
            # Never back off past the watch deadline: wait until it at most, then ``budget`` refuses.
            delay = max(0.0, min(delay, deadline - self.now()))
        log_retry(
            self.log, self.request, failure=failure, delay=delay, attempt=self.attempt, policy=self.policy
        )
        self.attempt += 1
        self.waited_s += delay
        return delay
