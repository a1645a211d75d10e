"""Which files of a run to fetch, and under which name to save them (the official clients' rules).

Both official clients skip the monitoring agents' logs (``*-agent.log``, gzipped or not) and save a
``.gz`` file decompressed under its name without ``.gz`` (``results.jtl.gz`` becomes ``results.jtl``).
Imported by the operators' module at DAG-parse time: only cheap standard-library imports here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

__all__ = [
    "AGENT_LOG_PATTERNS",
    "GZIP_MAGIC",
    "MAX_DECOMPRESSED_BYTES",
    "is_agent_log",
    "names_to_save",
    "saved_file",
    "select_run_files",
]

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
#: A decompressed file is held in memory before it is written: past this size (the download bound)
#: decompressing stops with an error, rather than a small download expanding until the worker dies.
MAX_DECOMPRESSED_BYTES = 2 * 2**30
_INFLATE_STEP = 64 * 2**20


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


def names_to_save(names: Sequence[str], *, decompress: bool) -> dict[str, bool]:
    """For each name to fetch, whether to decompress it: ``x.gz`` is not decompressed when ``x`` is
    fetched too (a run may list ``results.jtl`` and ``results.jtl.gz``), or one would overwrite the
    other; it is then saved as is, under its own name."""
    taken = set(names)
    return {name: decompress and _is_gz(name) and name[: -len(_GZ)] not in taken for name in names}


def _is_gz(name: str) -> bool:
    return name.lower().endswith(_GZ) and len(name) > len(_GZ)


def saved_file(
    name: str, content: bytes, *, decompress: bool, limit: int = MAX_DECOMPRESSED_BYTES
) -> tuple[str, bytes]:
    """The name and bytes to save for a downloaded run file.

    With ``decompress``, ``x.gz`` is saved as ``x``, decompressed. Content that is not a gzip stream
    although its name ends in ``.gz`` was already decompressed on the way (an HTTP layer honouring
    ``Content-Encoding: gzip``): it is saved as is, under the name without ``.gz`` all the same.
    A corrupt gzip stream, or one that would expand past ``limit`` bytes, raises ``ValueError``
    naming the file.
    """
    if not decompress or not _is_gz(name):
        return name, content
    plain = name[: -len(_GZ)]
    if not content.startswith(GZIP_MAGIC):
        return plain, content
    return plain, _gunzip(name, content, limit)


def _gunzip(name: str, content: bytes, limit: int) -> bytes:
    """Every gzip member of ``content``, read in steps so that the size bound holds on the way
    (``gzip.GzipFile`` inflates no more than a read asks for, and reads every member and zero padding)."""
    import gzip
    import io
    import zlib

    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(content)) as stream:
            while step := stream.read(_INFLATE_STEP):
                out += step
                if len(out) > limit:
                    raise ValueError(
                        f"{name} expands past {limit // 2**20} MiB once decompressed; "
                        "decompress=False keeps it as is"
                    )
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{name} is not a valid gzip file ({exc}); decompress=False keeps it as is") from exc
    return bytes(out)
