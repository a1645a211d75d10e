"""The JTL reader's old home: its names now live in ``decisions.samples.jtl`` (re-exported here so that
every existing import keeps working)."""

from __future__ import annotations

from airflow_provider_loadtest.decisions.samples.jtl import (
    DELIMITERS,
    JMETER_COLUMNS,
    MAX_DECOMPRESSED_BYTES,
    MAX_LABELS,
    MAX_RECORD_CHARS,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    JtlError,
    JtlFile,
    JtlReader,
    is_jtl_file,
    jtl_files,
    read_jtl,
)

__all__ = [
    "DELIMITERS",
    "JMETER_COLUMNS",
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LABELS",
    "MAX_RECORD_CHARS",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "JtlError",
    "JtlFile",
    "JtlReader",
    "is_jtl_file",
    "jtl_files",
    "read_jtl",
]
