"""Writing a run's files (PDF report, JUnit XML, logs) where a DAG wants them, never half-written.

Destinations are Airflow ``ObjectStoragePath`` objects or strings (``/data/x.pdf``, ``file:///...``,
``s3://bucket/key.pdf`` with the matching provider installed). A downstream task that sees the file
must see all of it, so local files are written to a temporary sibling and renamed into place, and
object stores (S3, GCS, Azure Blob) get the complete content in one upload, and an object appears
whole or not at all. Other remote filesystems (SFTP, FTP, HDFS) are written in one go too, but without
that guarantee: prefer a local path or an object store for files other tasks read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

_LOCAL_PROTOCOLS = frozenset({"", "file", "local"})


@dataclass(frozen=True)
class SavedFile:
    """Where a file went, for the task's return value."""

    path: str
    size: int

    def to_xcom(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size}


def storage_path(destination: str | os.PathLike[str] | ObjectStoragePath) -> ObjectStoragePath:
    """A destination as an ``ObjectStoragePath``; plain paths must be absolute (workers' working
    directories differ, so a relative path would land somewhere nobody looks)."""
    from airflow.sdk import ObjectStoragePath

    if isinstance(destination, ObjectStoragePath):
        return destination
    text = os.fspath(destination)
    if not text.strip():
        raise ValueError("the destination must not be empty")
    if "://" not in text:
        if not os.path.isabs(text):
            raise ValueError(f"a local destination must be an absolute path, got {text!r}")
        text = "file://" + text
    return ObjectStoragePath(text)


def is_local(path: ObjectStoragePath) -> bool:
    return str(path.protocol or "") in _LOCAL_PROTOCOLS


def write_atomically(destination: str | os.PathLike[str] | ObjectStoragePath, data: bytes) -> SavedFile:
    """Write ``data`` to ``destination`` so that readers see the old file, or the whole new one."""
    path = storage_path(destination)
    if is_local(path):
        final = _write_local(os.fspath(path.path), data)
        return SavedFile(path=final, size=len(data))
    # Object stores have no folders to create (and "creating" one can mean creating a bucket, or need
    # rights a prefix-scoped key lacks): the complete content goes up in one write.
    path.write_bytes(data)
    return SavedFile(path=str(path), size=len(data))


def _write_local(final: str, data: bytes) -> str:
    directory, name = os.path.split(final)
    if not name:
        raise ValueError(f"the destination {final!r} names a folder, not a file")
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, _mode_for(final))
        os.replace(temporary, final)
    except BaseException:
        _remove_quietly(temporary)
        raise
    return final


def _mode_for(final: str) -> int:
    """Keep the replaced file's permissions (a report kept private stays private); a new file gets
    what the process's umask allows, as ``open()`` would have given it."""
    try:
        return os.stat(final).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
