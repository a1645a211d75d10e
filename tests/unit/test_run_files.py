"""Saving a run's files: ``.gz`` files decompressed within a size bound, and never onto another file.

A JTL compresses 10-20x and a crafted stream far more: decompressing must stop at a bound with an
error naming the file, not expand until the worker is killed. And a run listing both ``results.jtl``
and ``results.jtl.gz`` must get both saved, not one overwritten by the other.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path
from typing import Any

import pytest
import requests_mock as rm

from airflow_provider_loadtest.decisions.run_files import names_to_save, saved_file
from airflow_provider_loadtest.operators.report import DownloadRunFilesOperator
from tests.unit.test_report import FILE_URL, LIST_URL

JTL = b"timeStamp,elapsed,label\n1,20,home\n"


def _run_files(requests_mock: rm.Mocker, files: dict[str, bytes]) -> None:
    requests_mock.get(LIST_URL, json=list(files))
    for name, content in files.items():
        requests_mock.get(f"{FILE_URL}?filename={name}", content=content, complete_qs=True)


def _context() -> dict[str, Any]:
    return {}


def test_a_stream_expanding_past_the_bound_is_refused_naming_the_file() -> None:
    bomb = gzip.compress(b"\0" * (4 * 2**20))  # 4 MiB of zeros in about 4 KiB
    with pytest.raises(ValueError, match=r"results\.jtl\.gz expands past 1 MiB.*decompress=False"):
        saved_file("results.jtl.gz", bomb, decompress=True, limit=2**20)


def test_a_stream_within_the_bound_is_decompressed_whole() -> None:
    content = bytes(range(256)) * 4096  # 1 MiB
    assert saved_file("r.jtl.gz", gzip.compress(content), decompress=True, limit=2**20) == ("r.jtl", content)


def test_several_gzip_members_are_all_decompressed() -> None:
    two = gzip.compress(b"first\n") + gzip.compress(b"second\n")
    assert saved_file("r.jtl.gz", two, decompress=True) == ("r.jtl", b"first\nsecond\n")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (gzip.compress(JTL)[:-6], "truncated"),
        (gzip.compress(JTL)[:12] + b"\xff" * 20, "corrupt"),
        (gzip.compress(JTL) + b"trailing junk", "junk after the member"),
    ],
    ids=["truncated", "corrupt", "junk"],  # the bytes hold gzip's mtime: ids must not (pytest-xdist)
)
def test_a_broken_stream_is_refused_naming_the_file(content: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=r"r\.jtl\.gz is not a valid gzip file"):
        saved_file("r.jtl.gz", content, decompress=True)


def test_zero_padding_after_the_last_member_is_accepted() -> None:
    assert saved_file("r.jtl.gz", gzip.compress(JTL) + b"\0" * 8, decompress=True) == ("r.jtl", JTL)


def test_a_gz_whose_plain_name_is_also_listed_is_kept_compressed() -> None:
    assert names_to_save(["results.jtl", "results.jtl.gz", "log.gz"], decompress=True) == {
        "results.jtl": False,
        "results.jtl.gz": False,
        "log.gz": True,
    }
    assert names_to_save(["log.gz"], decompress=False) == {"log.gz": False}


def test_both_files_of_a_run_are_saved_when_names_would_collide(
    loadtest_conn: str,
    requests_mock: rm.Mocker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    packed = gzip.compress(JTL + b"2,30,home\n")
    _run_files(requests_mock, {"results.jtl": JTL, "results.jtl.gz": packed})
    with caplog.at_level(logging.WARNING):
        saved = DownloadRunFilesOperator(
            task_id="f", bench_result_id="br-1", destination=str(tmp_path)
        ).execute(_context())  # type: ignore[arg-type]
    assert sorted(entry["name"] for entry in saved) == ["results.jtl", "results.jtl.gz"]
    assert (tmp_path / "results.jtl").read_bytes() == JTL
    assert (tmp_path / "results.jtl.gz").read_bytes() == packed
    captured = capsys.readouterr()  # Airflow's task logger may write to the console rather than propagate
    assert "Keeping results.jtl.gz compressed" in caplog.text + captured.out + captured.err
