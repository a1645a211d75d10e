"""What a Spring/Jackson server refuses before (or while) reading a request: a wrong client fails here first.

* **406** when the ``Accept`` header excludes what the endpoint produces (Spring's content negotiation):
  JSON documents produce ``application/json``, the JUnit report ``application/xml``, file downloads
  ``application/octet-stream``, the print task's id ``text/plain``. No header, ``*/*`` and ``type/*``
  accept anything of that type; a range with ``q=0`` refuses it.
* **415** when a request body is sent with a content type other than JSON (``application/json`` or
  ``application/*+json``; a missing content type counts as ``application/octet-stream``). A request with
  neither a body nor a content type is a request without a body.
* **400** when a polymorphic body lacks its ``@type`` (Jackson cannot choose the class to build), or names
  one the service does not know.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_loadtest.simulator.state import SimulatorError

JSON = "application/json"
XML = "application/xml"
OCTET_STREAM = "application/octet-stream"
TEXT = "text/plain"

#: Metric classes seen in the official clients' request bodies (Jenkins: HitMetric, Maven: MonitoringMetric).
METRIC_TYPES = frozenset({"HitMetric", "MonitoringMetric"})


def _media_ranges(accept: str) -> list[tuple[str, str, float]]:
    ranges: list[tuple[str, str, float]] = []
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        if not media:
            continue
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        main, _, sub = media.lower().partition("/")
        ranges.append((main, sub or "*", quality))
    return ranges


def accepts(accept: str | None, produced: str) -> bool:
    """Whether an ``Accept`` header admits the media type ``produced`` (RFC 9110 media ranges)."""
    if accept is None or not accept.strip():
        return True
    main, _, sub = produced.partition("/")
    best: tuple[int, float] | None = None  # (specificity, quality) of the most specific matching range
    for range_main, range_sub, quality in _media_ranges(accept):
        if range_main == "*" and range_sub == "*":
            specificity = 0
        elif range_main == main and range_sub == "*":
            specificity = 1
        elif range_main == main and range_sub == sub:
            specificity = 2
        else:
            continue
        if best is None or specificity > best[0]:
            best = (specificity, quality)
    return best is not None and best[1] > 0


def check_accept(accept: str | None, produced: str) -> None:
    if not accepts(accept, produced):
        raise SimulatorError(
            406, f"Could not find acceptable representation: this endpoint produces {produced}"
        )


def is_json_content_type(content_type: str | None) -> bool:
    media = (content_type or "").split(";")[0].strip().lower()
    main, _, sub = media.partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


def check_json_body(content_type: str | None, body: bytes) -> None:
    """415 for a body (or a content type) that is not JSON; nothing for a request without either."""
    if not content_type and not body:
        return
    if not is_json_content_type(content_type):
        shown = (content_type or OCTET_STREAM).split(";")[0].strip()
        raise SimulatorError(415, f"Content type '{shown}' not supported: send {JSON}")


def require_type(document: Any, expected: str | frozenset[str], where: str) -> str:
    """The ``@type`` of ``document``; 400 when it is not an object, lacks ``@type`` or names another class."""
    allowed = frozenset({expected}) if isinstance(expected, str) else expected
    names = " or ".join(sorted(allowed))
    if not isinstance(document, dict):
        raise SimulatorError(400, f'{where} must be a JSON object with "@type": {names}')
    kind = document.get("@type")
    if kind is None:
        raise SimulatorError(400, f'{where}: missing type id property "@type" (expected {names})')
    if kind not in allowed:
        raise SimulatorError(400, f"{where}: could not resolve type id {kind!r} (known: {names})")
    return str(kind)
