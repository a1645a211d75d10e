"""The results the API server decoded already (``plugins.decoded``): read once, kept by their XCom row
and timestamp, the least recently used out first once they hold more bytes than the bound."""

from __future__ import annotations

from collections.abc import Hashable

from airflow_provider_loadtest.plugins.decoded import DecodedResults, size_of
from airflow_provider_loadtest.plugins.rows import RunResult


def result(rows: int) -> RunResult:
    return RunResult.from_xcom({"gate": [{"metric": f"M{i}", "value": 1.0} for i in range(rows)]})


class Reader:
    def __init__(self, rows: int = 9) -> None:
        self.rows = rows
        self.asked: list[list[Hashable]] = []

    def __call__(self, missing: list[Hashable]) -> dict[Hashable, RunResult]:
        self.asked.append(sorted(missing))  # type: ignore[type-var]
        return {key: result(self.rows) for key in missing}


def test_each_result_is_decoded_once_and_only_the_missing_ones_are_read() -> None:
    kept, read = DecodedResults(limit=2**20), Reader()
    first = kept.get_many([1, 2], read)
    again = kept.get_many([2, 3], read)
    assert read.asked == [[1, 2], [3]]
    assert again[2] is first[2] and set(again) == {2, 3}
    assert kept.get_many([1, 2, 3], read)[1] is first[1] and len(read.asked) == 2


def test_a_rewritten_result_has_a_new_key_and_is_read_again() -> None:
    kept, read = DecodedResults(limit=2**20), Reader()
    kept.get_many([("run", "task", -1, "t1")], read)
    kept.get_many([("run", "task", -1, "t2")], read)  # a retry wrote the value again: a new timestamp
    assert read.asked == [[("run", "task", -1, "t1")], [("run", "task", -1, "t2")]]


def test_the_kept_bytes_are_bounded_least_recently_used_out_first() -> None:
    one = size_of(result(9))
    kept, read = DecodedResults(limit=3 * one), Reader(rows=9)  # room for 3
    kept.get_many([1, 2, 3], read)
    kept.get_many([1], read)  # 1 used again: 2 is now the least recently used
    kept.get_many([4], read)
    assert kept.bytes <= 3 * one and len(kept) == 3
    kept.get_many([2], read)
    assert read.asked[-1] == [2]  # 2 went out first
    kept.get_many([1], read)
    assert read.asked[-1] == [2]  # 1 was kept
