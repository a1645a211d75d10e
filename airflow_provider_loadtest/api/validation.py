"""Checks on values that end up inside a URL path.

Kept free of heavy imports: operators call it at DAG-parse time to fail fast on literal ids.
"""

from __future__ import annotations

import re
import unicodedata

# Characters that would change the meaning of a URL path (a new segment, a query, a fragment, an
# escape) or that no id of the service contains (whitespace, C0 and C1 control characters).
_FORBIDDEN = re.compile(r"[/\\?#%\s\x00-\x1f\x7f-\x9f]")
#: Longer than any id of the service (they are about 20 characters) by far; a longer value is a
#: mistake (a whole document rendered into ``run=``), refused before it is scanned or sent.
MAX_ID_CHARS = 256
#: Most file systems' limit for one file name.
MAX_FILE_NAME_CHARS = 255
#: The largest text form of a run record (``run=`` rendered without native types): a real one is well
#: under 1 kB, and parsing a huge one (``ast.literal_eval``) can exhaust memory.
MAX_RECORD_CHARS = 64 * 1024


def check_length(parameter: str, value: str, limit: int) -> str:
    """Refuse a string over ``limit`` characters with an error naming the parameter, before it is
    parsed or copied: a huge value must fail clearly, not with ``MemoryError``."""
    if len(value) > limit:
        raise ValueError(f"{parameter} is {len(value)} characters long; at most {limit} are accepted")
    return value


#: Unicode categories no id holds: format characters (Cf: U+200B, U+202E, U+FEFF...) look like nothing
#: or reorder what is shown, so an id holding one is not the id a person reads; lone surrogates (Cs)
#: cannot even be encoded into a URL.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Cs"})


def _invisible(value: str) -> bool:
    """Whether ``value`` holds a character of ``_INVISIBLE_CATEGORIES``."""
    return any(unicodedata.category(char) in _INVISIBLE_CATEGORIES for char in value)


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 80 else f"{value[:40]!r}... ({len(value)} characters)"


def validate_path_id(parameter: str, value: object) -> str:
    """Return ``value`` if it is safe as one URL path segment, else raise ``ValueError``.

    An id such as ``../../admin`` or ``abc?templateId=x`` would silently call another endpoint; the
    error names the parameter so a DAG author sees which argument to fix.
    """
    if not isinstance(value, str):
        raise ValueError(f"{parameter} must be a string, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{parameter} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(
            f"{parameter}={_shown(value)} is not a valid id: longer than {MAX_ID_CHARS} characters"
        )
    if value != value.strip() or _FORBIDDEN.search(value) or _invisible(value):
        raise ValueError(
            f"{parameter}={value!r} is not a valid id: ids must not contain whitespace, control or "
            "invisible format characters, or any of / \\ ? # %"
        )
    if value in {".", ".."} or ".." in value:
        raise ValueError(f"{parameter}={value!r} is not a valid id: '..' is not allowed")
    return value


_FILE_NAME_FORBIDDEN = re.compile(r"[/\\\x00-\x1f\x7f-\x9f]")


def validate_file_name(parameter: str, value: object) -> str:
    """Return ``value`` if it is safe as a single file name, else raise ``ValueError``.

    File names travel as query values (encoded by the HTTP client) and become local file names, so
    spaces and ``%`` are fine, but a separator or ``..`` would write outside the destination folder.
    """
    if not isinstance(value, str):
        raise ValueError(f"{parameter} must be a string, got {type(value).__name__}")
    if len(value) > MAX_FILE_NAME_CHARS:
        raise ValueError(f"{parameter}={_shown(value)} is not a valid file name: too long")
    if not value.strip() or value in {".", ".."} or _FILE_NAME_FORBIDDEN.search(value) or _invisible(value):
        raise ValueError(
            f"{parameter}={value!r} is not a valid file name: it must be one name, without / \\ or "
            "control characters, and not '.' or '..'"
        )
    return value


def is_templated(value: object) -> bool:
    """Whether ``value`` is still a Jinja template (checked again once rendered)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)
