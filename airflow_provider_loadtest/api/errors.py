"""The package's exceptions.

Airflow shows an exception's message as the task's failure reason, so the message carries everything a
user needs to act (which call, which status, what the service said) and never the API key.
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus

from airflow.sdk.exceptions import AirflowException

from airflow_provider_loadtest.compat import AirflowFailException

_MAX_MESSAGE_CHARS = 500


def redact(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` blanked out, also percent-encoded (as a service or proxy echoing a
    URL or form would write it), in any case of the hex digits."""
    if not secret:
        return text
    forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    pattern = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.sub(pattern, "***", text, flags=re.IGNORECASE)


def trim_service_text(text: str, secret: str | None = None, limit: int = _MAX_MESSAGE_CHARS) -> str:
    """Shorten a response body for a message, and blank out ``secret`` should the service echo it.

    The key is blanked out before anything is cut, so a cut never leaves part of it."""
    cleaned = " ".join(redact(text, secret).split())
    if len(cleaned) > limit:
        cleaned = cleaned[:limit] + f"... [{len(cleaned) - limit} more characters]"
    return cleaned


#: Answers that say the request itself is wrong: sending it again can never succeed.
NEVER_SUCCEEDS_STATUSES = frozenset({400, 401, 403, 404, 405, 406, 410, 415, 422})


class LoadTestApiError(AirflowException):
    """A call to the load-testing service failed.

    ``status`` is ``None`` when no HTTP answer arrived (connection error, timeout), and the answer's
    status when it arrived but was refused or unreadable. ``reached_service`` is ``False`` only when
    the request provably never left this machine (connection refused, DNS failure, connect timeout):
    the service cannot have acted on it.
    """

    def __init__(
        self,
        *,
        operation: str,
        method: str,
        path: str,
        status: int | None,
        detail: str,
        reached_service: bool = True,
    ) -> None:
        self.operation = operation
        self.method = method
        self.path = path
        self.status = status
        self.detail = detail
        self.reached_service = reached_service
        status_text = f"HTTP {status}" if status is not None else "no HTTP answer"
        super().__init__(f"{operation} failed ({method} {path}, {status_text}): {detail}")

    @property
    def never_succeeds(self) -> bool:
        """The service refused the request itself (bad key, no rights, unknown id, bad body): a retry
        would get the same answer, so the task should fail without retries."""
        return self.status in NEVER_SUCCEEDS_STATUSES

    @property
    def outcome_unknown(self) -> bool:
        """Whether the service may have acted on the request although we got no usable answer.

        True after a read timeout or a dropped connection (``status`` None but sent), a 5xx, or a 2xx
        whose body could not be read. A 4xx (or a 3xx, which is never followed) means the service, or
        a proxy in front of it, refused it; a request that never left cannot have been acted on.
        """
        if not self.reached_service:
            return False
        return self.status is None or self.status >= 500 or 200 <= self.status < 300

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only __init__: teach pickle (used when Airflow ships exceptions between processes).
        return (
            _rebuild_error,
            (self.operation, self.method, self.path, self.status, self.detail, self.reached_service),
        )


def _rebuild_error(
    operation: str, method: str, path: str, status: int | None, detail: str, reached_service: bool = True
) -> LoadTestApiError:
    return LoadTestApiError(
        operation=operation,
        method=method,
        path=path,
        status=status,
        detail=detail,
        reached_service=reached_service,
    )


class TemplateNotFoundError(AirflowException):
    """No report template of the workspace matches the name or id the task asked for."""


class AmbiguousTemplateError(AirflowException):
    """Several report templates match a name: choosing one would be a guess."""


class UnusableApiKeyError(AirflowFailException, ValueError):
    """The connection's API key cannot be sent at all (a line break, a control character, a character
    outside Latin-1, surrounding spaces).

    No retry can fix it, so Airflow fails the task at once instead of retrying it; still a
    ``ValueError`` for callers that treat every bad setting alike. The message never shows the key.
    """


class ScenarioNotFoundError(AirflowFailException, ValueError):
    """No scenario of the project or workspace has the name the task asked for: no retry can change
    that, so the task fails at once, before anything starts; the message lists the names there are."""


class AmbiguousScenarioError(AirflowFailException, ValueError):
    """Several scenarios have the name the task asked for: starting one of them would be a guess."""
