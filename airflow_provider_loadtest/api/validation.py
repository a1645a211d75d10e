"""Checks on values that end up inside a URL path.

Kept free of heavy imports: operators call it at DAG-parse time to fail fast on literal ids.
"""

from __future__ import annotations

import re

# Characters that would change the meaning of a URL path (a new segment, a query, a fragment, an
# escape) or that no id of the service contains (whitespace, control characters).
_FORBIDDEN = re.compile(r"[/\\?#%\s\x00-\x1f\x7f]")


def validate_path_id(parameter: str, value: object) -> str:
    """Return ``value`` if it is safe as one URL path segment, else raise ``ValueError``.

    An id such as ``../../admin`` or ``abc?templateId=x`` would silently call another endpoint; the
    error names the parameter so a DAG author sees which argument to fix.
    """
    if not isinstance(value, str):
        raise ValueError(f"{parameter} must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{parameter} must not be empty")
    if value != value.strip() or _FORBIDDEN.search(value):
        raise ValueError(
            f"{parameter}={value!r} is not a valid id: ids must not contain whitespace, control characters "
            "or any of / \\ ? # %"
        )
    if value in {".", ".."} or ".." in value:
        raise ValueError(f"{parameter}={value!r} is not a valid id: '..' is not allowed")
    return value


_FILE_NAME_FORBIDDEN = re.compile(r"[/\\\x00-\x1f\x7f]")


def validate_file_name(parameter: str, value: object) -> str:
    """Return ``value`` if it is safe as a single file name, else raise ``ValueError``.

    File names travel as query values (encoded by the HTTP client) and become local file names, so
    spaces and ``%`` are fine, but a separator or ``..`` would write outside the destination folder.
    """
    if not isinstance(value, str):
        raise ValueError(f"{parameter} must be a string, got {type(value).__name__}")
    if not value.strip() or value in {".", ".."} or _FILE_NAME_FORBIDDEN.search(value):
        raise ValueError(
            f"{parameter}={value!r} is not a valid file name: it must be one name, without / \\ or "
            "control characters, and not '.' or '..'"
        )
    return value


def is_templated(value: object) -> bool:
    """Whether ``value`` is still a Jinja template (checked again once rendered)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)
