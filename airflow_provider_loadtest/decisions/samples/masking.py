"""Secrets masked and text bounded, before a sample's message or a log line is shown anywhere.

Failure messages, response messages and JMeter log lines go to the task log, the exception and XCom,
which more people can read than the load test's own results. What a test plan may echo there: bearer
and basic credentials, ``Authorization``/``Cookie``/API-key headers, passwords in URLs
(``https://user:pass@host``), secret query or form parameters (``password=``, ``api_key=``,
``access_token=``...), secret JSON fields and JWTs. Each is replaced by ``***``, keeping the name, so
that the message still says what failed. Masking is a best effort over known shapes, not a guarantee:
a secret in free text under no known name stays as it is.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "brief", "clip_words", "mask"]

MASK = "***"
#: Names of parameters, fields and headers whose values are secrets (lower case, ``-`` and ``_`` alike).
_SENSITIVE_NAMES = (
    r"pass(?:word|wd)?|pwd|secret|client[-_]?secret|token|access[-_]?token|refresh[-_]?token|id[-_]?token"
    r"|auth(?:[-_]?token)?|api[-_]?key|apikey|x[-_]api[-_]key|key|private[-_]?key|session(?:[-_]?id)?"
    r"|jsessionid|sid|signature|sig|credentials?"
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization: Bearer abc / Proxy-Authorization: Basic abc / Cookie: a=b; c=d (to the end of the line)
    (
        re.compile(
            r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token)"
            r"(\s*[:=]\s*)[^\r\n]*"
        ),
        rf"\1\2{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer|basic|digest|token)(\s+)[A-Za-z0-9._~+/=-]{6,}"), rf"\1\2{MASK}"),
    # scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]*@"), rf"\1{MASK}@"),
    # "password": "x" (JSON) and password=x (query strings, forms, key=value text)
    (re.compile(rf"(?i)(\"(?:{_SENSITIVE_NAMES})\"\s*:\s*)\"(?:[^\"\\]|\\.)*\""), rf'\1"{MASK}"'),
    (re.compile(rf"(?i)(?<![A-Za-z0-9])((?:{_SENSITIVE_NAMES})\s*=\s*)[^&;,\s\"'<>]+"), rf"\1{MASK}"),
    # a JWT anywhere (header.payload.signature, base64url)
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),
)
_SPACES = re.compile(r"\s+")
#: What a text cut short ends with.
ELLIPSIS = "…"


def mask(text: str) -> str:
    """``text`` with every secret of a known shape replaced by ``***``."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def brief(text: str, chars: int) -> str:
    """``text`` on one line (runs of white space, line breaks included, made one space), masked, and cut
    to at most ``chars`` characters (ending with ``…`` when cut). Masked before it is cut, so that a cut
    never leaves the start of a secret unmasked."""
    return clip_words(_SPACES.sub(" ", mask(text)).strip(), chars)


#: A cut goes back to the last space when one lies in this last share of the room: a word is never
#: cut in half ("...; messag"), unless the text has no space near the end (a long URL or token).
_WORD_SLACK = 1 / 3


def clip_words(text: str, chars: int) -> str:
    """``text`` cut to at most ``chars`` characters, ending with ``…`` when cut: after the last whole
    word when one ends in the last third of the room, else mid-token (a URL, a hash)."""
    if len(text) <= chars:
        return text
    room = max(chars - 1, 0)
    space = text.rfind(" ", 0, room + 1)
    if space > 0 and space >= room * (1 - _WORD_SLACK):
        return text[:space].rstrip(" ,;:") + ELLIPSIS
    return text[:room] + ELLIPSIS
