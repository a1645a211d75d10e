"""The package's exceptions.

Airflow shows an exception's message as the task's failure reason, so the message carries everything a
user needs to act (which call, which status, what the service said) and never the API key.
"""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowException

_MAX_MESSAGE_CHARS = 500


def trim_service_text(text: str, secret: str | None = None, limit: int = _MAX_MESSAGE_CHARS) -> str:
    """Shorten a response body for a message, and blank out ``secret`` should the service echo it."""
    cleaned = " ".join(text.split())
    if secret:
        cleaned = cleaned.replace(secret, "***")
    if len(cleaned) > limit:
        cleaned = cleaned[:limit] + f"... [{len(cleaned) - limit} more characters]"
    return cleaned


class LoadTestApiError(AirflowException):
    """A call to the load-testing service failed.

    ``status`` is ``None`` when no HTTP answer arrived (connection error, timeout, unreadable answer).
    """

    def __init__(
        self,
        *,
        operation: str,
        method: str,
        path: str,
        status: int | None,
        detail: str,
    ) -> None:
        self.operation = operation
        self.method = method
        self.path = path
        self.status = status
        self.detail = detail
        status_text = f"HTTP {status}" if status is not None else "no HTTP answer"
        super().__init__(f"{operation} failed ({method} {path}, {status_text}): {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only __init__: teach pickle (used when Airflow ships exceptions between processes).
        return (_rebuild_error, (self.operation, self.method, self.path, self.status, self.detail))


def _rebuild_error(
    operation: str, method: str, path: str, status: int | None, detail: str
) -> LoadTestApiError:
    return LoadTestApiError(operation=operation, method=method, path=path, status=status, detail=detail)


class TemplateNotFoundError(AirflowException):
    """No report template of the workspace matches the name or id the task asked for."""


class AmbiguousTemplateError(AirflowException):
    """Several report templates match a name: choosing one would be a guess."""
