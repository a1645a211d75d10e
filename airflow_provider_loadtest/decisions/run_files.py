"""Which files of a run to fetch, and under which name to save them (the official clients' rules).

Both official clients skip the monitoring agents' logs (``*-agent.log``, gzipped or not) and save a
``.gz`` file decompressed under its name without ``.gz`` (``results.jtl.gz`` becomes ``results.jtl``).
Imported by the operators' module at DAG-parse time: only cheap standard-library imports here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

__all__ = ["AGENT_LOG_PATTERNS", "GZIP_MAGIC", "is_agent_log", "saved_file", "select_run_files"]

#: Per-agent logs: one per load generator, large and rarely read. The official CI plugins skip names
#: ending in ``-agent.log`` (and their gzipped form); the other patterns are older names we skipped.
AGENT_LOG_PATTERNS: tuple[str, ...] = (
    "*-agent.log",
    "*-agent.log.gz",
    "agent*.log",
    "agent*.log.gz",
    "*-agent-*.log",
)
#: The first two bytes of every gzip stream.
GZIP_MAGIC = b"\x1f\x8b"
_GZ = ".gz"


def is_agent_log(filename: str) -> bool:
    """Whether a run file is a monitoring agent's log (skipped unless asked for)."""
    name = filename.lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in AGENT_LOG_PATTERNS)


def select_run_files(
    names: Sequence[str], include: str | Sequence[str] | None, *, include_agent_logs: bool
) -> list[str]:
    """The names to fetch: matching ``include`` (default every file: logs, JTL results, JUnit XML,
    printed PDFs), agent logs only when asked for."""
    patterns = [include] if isinstance(include, str) else list(include or ["*"])
    return [
        name
        for name in names
        if any(fnmatch.fnmatch(name, pattern) for pattern in patterns)
        and (include_agent_logs or not is_agent_log(name))
    ]


def saved_file(name: str, content: bytes, *, decompress: bool) -> tuple[str, bytes]:
    """The name and bytes to save for a downloaded run file.

    With ``decompress``, ``x.gz`` is saved as ``x``, decompressed. Content that is not a gzip stream
    although its name ends in ``.gz`` was already decompressed on the way (an HTTP layer honouring
    ``Content-Encoding: gzip``): it is saved as is, under the name without ``.gz`` all the same.
    A corrupt gzip stream raises ``ValueError`` naming the file.
    """
    if not decompress or not name.lower().endswith(_GZ) or len(name) == len(_GZ):
        return name, content
    plain = name[: -len(_GZ)]
    if not content.startswith(GZIP_MAGIC):
        return plain, content
    import gzip
    import zlib

    try:
        return plain, gzip.decompress(content)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{name} is not a valid gzip file ({exc}); decompress=False keeps it as is") from exc
