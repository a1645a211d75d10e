"""The JTL reader against JTLs built here, with answers computed independently (sorted lists).

JMeter writes its CSV with the quoting rules of RFC 4180: a responseMessage or label holding the
delimiter, a quote or a line break is quoted, quotes doubled. The reader must get every figure exactly
(percentiles nearest-rank) whatever the chunking, over several generators, gzipped or not, and refuse
what it cannot read with a message naming the file and the line.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_provider_loadtest.decisions.jtl import JtlError, JtlReader, jtl_files, read_jtl
from airflow_provider_loadtest.decisions.jtl_figures import (
    PERCENTILE_RELATIVE_ERROR,
    SAMPLE_METRICS,
    JtlSummary,
    bucket,
    bucket_middle,
    columns_for,
)
from airflow_provider_loadtest.decisions.samples import figures as jtl_figures
from airflow_provider_loadtest.decisions.samples import jtl

HEADER = [
    "timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType",
    "success", "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Latency",
    "IdleTime", "Connect",
]  # fmt: skip
START_MS = 1_767_225_600_000
MESSAGES = ["OK", 'Internal, "Server" Error', "line one\nline two", "crlf\r\ninside", "tab\there"]
LABELS = ["Home", "Checkout, step 2", 'Search "books"', "api/items\nnew line", "Login"]


@dataclass(frozen=True)
class Sample:
    start: int
    elapsed: int
    label: str
    ok: bool
    message: str
    received: int
    sent: int
    latency: int
    connect: int

    def row(self, thread: str) -> list[str]:
        code = "200" if self.ok else "500"
        return [
            str(self.start), str(self.elapsed), self.label, code, self.message, thread, "text",
            "true" if self.ok else "false", "" if self.ok else "Assertion, failed", str(self.received),
            str(self.sent), "10", "20", f"https://example.test/{self.label}", str(self.latency), "0",
            str(self.connect),
        ]  # fmt: skip


def samples(count: int, seed: int = 7, labels: Sequence[str] = LABELS) -> list[Sample]:
    rng = random.Random(seed)
    found = []
    for i in range(count):
        label = labels[i % len(labels)] if i < len(labels) else rng.choice(labels)
        elapsed = int(rng.lognormvariate(5, 0.8))
        found.append(
            Sample(
                start=START_MS + rng.randrange(600_000),
                elapsed=elapsed,
                label=label,
                ok=rng.random() > 0.05,
                message=rng.choice(MESSAGES),
                received=rng.randrange(100, 50_000),
                sent=rng.choice((512, 640, 700)),
                latency=int(elapsed * rng.uniform(0.3, 0.9)),
                connect=rng.choice((0, 0, 0, 4, 17)),
            )
        )
    return found


def jtl_text(
    rows: Sequence[Sample], *, delimiter: str = ",", lineterminator: str = "\r\n", quote_all: bool = False
) -> str:
    out = io.StringIO()
    quoting = csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL
    writer = csv.writer(out, delimiter=delimiter, lineterminator=lineterminator, quoting=quoting)
    writer.writerow(HEADER)
    for i, sample in enumerate(rows):
        writer.writerow(sample.row(f"lg 1-{i % 9}"))
    return out.getvalue()


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def read(files: dict[str, bytes], size: int = 65536, metrics: Sequence[str] | None = None) -> JtlSummary:
    return read_jtl(((name, chunked(content, size)) for name, content in files.items()), metrics)


def nearest_rank(values: Sequence[int], percent: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100 * len(ordered) - 1e-9)) - 1]


def expected(rows: Sequence[Sample]) -> dict[str, dict[str, float]]:
    """Every figure of every label, computed from the whole list."""
    first = min(s.start for s in rows)
    last = max(s.start + s.elapsed for s in rows)
    span = max(last - first, 1) / 1000  # the reader counts at least 1 ms
    found: dict[str, dict[str, float]] = {}
    for label in {s.label for s in rows}:
        mine = [s for s in rows if s.label == label]
        times = [s.elapsed for s in mine]
        errors = sum(not s.ok for s in mine)
        figures: dict[str, float] = {
            "HITS_TOTAL": len(mine),
            "HITS_RATE": len(mine) / span,
            "HITS_SUCCESSFUL_TOTAL": len(mine) - errors,
            "HITS_SUCCESSFUL_PERCENT": 100 * (len(mine) - errors) / len(mine),
            "ERRORS_TOTAL": errors,
            "ERRORS_RATE": errors / span,
            "ERRORS_PERCENT": 100 * errors / len(mine),
            "RESPONSE_TIME_MEDIAN": nearest_rank(times, 50),
            "THROUGHPUT_TOTAL": sum(s.received for s in mine),
            "THROUGHPUT_RATE": sum(s.received for s in mine) / span,
            "RESPONSE_SIZE": statistics.fmean(s.received for s in mine),
            "SENT_BYTES_TOTAL": sum(s.sent for s in mine),
            "SENT_BYTES_RATE": sum(s.sent for s in mine) / span,
        }
        for p in (80, 90, 95, 99):
            figures[f"RESPONSE_TIME_PERCENTILE_{p}"] = nearest_rank(times, p)
        for prefix, values in (
            ("RESPONSE_TIME", times),
            ("LATENCY", [s.latency for s in mine]),
            ("CONNECT_TIME", [s.connect for s in mine]),
            ("SENT_BYTES", [s.sent for s in mine]),
        ):
            figures[f"{prefix}_AVG"] = statistics.fmean(values)
            figures[f"{prefix}_MIN"] = min(values)
            figures[f"{prefix}_MAX"] = max(values)
            figures[f"{prefix}_STD"] = statistics.pstdev(values)
            if prefix != "SENT_BYTES":
                figures[f"{prefix}_VAR"] = statistics.pvariance(values)
        found[label] = figures
    return found


def assert_figures(summary: JtlSummary, rows: Sequence[Sample]) -> None:
    want = expected(rows)
    assert summary.labels == sorted(want)
    for label, figures in want.items():
        got = summary.transactions[label].metrics()
        assert set(got) == set(SAMPLE_METRICS) == set(figures)
        for metric, value in figures.items():
            assert got[metric] == pytest.approx(value, rel=1e-9, abs=1e-9), (label, metric)


# --- known answers -------------------------------------------------------------------------------------


def test_every_figure_of_every_label_is_exact_with_quoting_commas_and_line_breaks() -> None:
    rows = samples(3000)
    text = jtl_text(rows)
    assert '"api/items\r\nnew line"' not in text and '"api/items\nnew line"' in text  # the test's own JTL
    assert_figures(read({"lg-1.jtl": text.encode()}), rows)


@pytest.mark.parametrize("size", [1, 7, 4096, 10**9])
def test_the_chunking_changes_nothing(size: int) -> None:
    rows = samples(400)
    assert_figures(read({"lg-1.jtl": jtl_text(rows).encode()}, size=size), rows)


def test_records_spanning_batches_are_carried_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 50 characters: quoted line breaks cross batch ends all the time."""
    monkeypatch.setattr(jtl, "_BATCH_CHARS", 50)
    rows = samples(300)
    for terminator in ("\r\n", "\n", "\r"):
        # csv.writer quotes a field holding a line break only if the break is in its lineterminator
        text = jtl_text(rows, lineterminator=terminator, quote_all=terminator == "\r")
        assert_figures(read({"lg-1.jtl": text.encode()}, size=13), rows)


def test_generators_are_merged_gzipped_or_not() -> None:
    rows = samples(2400, seed=3)
    parts = [rows[:800], rows[800:1700], rows[1700:]]
    first, second, third = (jtl_text(part).encode() for part in parts)
    half = len(third) // 2
    files = {
        "lg-1.jtl.gz": gzip.compress(first),
        "lg-2.jtl": second,
        # Two gzip members one after the other (a concatenated file), then zero padding.
        "lg-3.jtl.gz": gzip.compress(third[:half]) + gzip.compress(third[half:]) + b"\0" * 10,
    }
    for size in (5, 1000, 10**9):
        summary = read(files, size=size)
        assert summary.files == ("lg-1.jtl.gz", "lg-2.jtl", "lg-3.jtl.gz")
        assert summary.samples == 2400
        assert_figures(summary, rows)


def test_a_gzip_labelled_file_already_decompressed_on_the_way_is_read_as_text() -> None:
    rows = samples(50)
    assert_figures(read({"lg-1.jtl.gz": jtl_text(rows).encode()}), rows)


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_other_delimiters_are_told_from_the_header(delimiter: str) -> None:
    rows = samples(200)
    assert_figures(read({"lg-1.jtl": jtl_text(rows, delimiter=delimiter).encode()}), rows)


def test_a_utf8_bom_and_non_ascii_labels() -> None:
    rows = samples(100, labels=["Café", "Zürich ✓", "東京"])
    assert_figures(read({"lg-1.jtl": b"\xef\xbb\xbf" + jtl_text(rows).encode()}), rows)


def test_percentiles_are_nearest_rank() -> None:
    rows = [Sample(START_MS + i, i, "one", True, "OK", 10, 640, i, 0) for i in range(1, 101)]
    stats = read({"lg.jtl": jtl_text(rows).encode()}).transactions["one"]
    assert [stats.metric(f"RESPONSE_TIME_PERCENTILE_{p}") for p in (80, 90, 95, 99)] == [80, 90, 95, 99]
    assert stats.metric("RESPONSE_TIME_MEDIAN") == 50
    single = read({"lg.jtl": jtl_text(rows[:1]).encode()}).transactions["one"]
    assert single.metric("RESPONSE_TIME_PERCENTILE_99") == 1 and single.metric("RESPONSE_TIME_STD") == 0


def test_the_same_value_written_twice_is_counted_once_as_a_number() -> None:
    text = jtl_text([]) + f"{START_MS},7,a,200,OK,t,text,true,,1,1,1,1,u,7,0,0\r\n"
    text += f"{START_MS},007,a,200,OK,t,text,true,,1,1,1,1,u,7,0,0\r\n"
    stats = read({"x.jtl": text.encode()}).transactions["a"]
    assert stats.elapsed.counts == ((7, 2),) and stats.metric("RESPONSE_TIME_MAX") == 7


def test_rates_use_the_run_span_from_first_start_to_last_end() -> None:
    rows = [
        Sample(START_MS, 500, "a", True, "OK", 1, 1, 1, 0),
        Sample(START_MS + 1000, 9000, "b", False, "OK", 1, 1, 1, 0),
        Sample(START_MS + 4000, 100, "a", True, "OK", 1, 1, 1, 0),
    ]
    summary = read({"x.jtl": jtl_text(rows).encode()})
    assert summary.span_s == 10.0
    assert summary.transactions["a"].metric("HITS_RATE") == 0.2
    assert summary.transactions["b"].metric("ERRORS_RATE") == 0.1


# --- percentiles past the exact range -----------------------------------------------------------------


def test_buckets_are_monotone_and_their_middles_within_the_stated_error() -> None:
    previous = -1
    for value in [*range(0, 5000), *range(5000, 10**7, 997), 2**31 - 1, 2**40 + 12345]:
        key = bucket(value)
        assert key >= previous
        previous = key
        assert abs(bucket_middle(key) - value) <= PERCENTILE_RELATIVE_ERROR * max(value, 1)
    assert PERCENTILE_RELATIVE_ERROR < 0.01


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_from_buckets_are_within_one_percent_of_the_exact_ones(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Few distinct values allowed, so that every label's times end in buckets."""
    monkeypatch.setattr(jtl_figures, "EXACT_VALUES", 20)
    rng = random.Random(seed)
    rows = [
        Sample(START_MS, int(rng.lognormvariate(6 + (i % 3), 1.2)), f"t{i % 3}", True, "OK", 1, 1, 1, 0)
        for i in range(20_000)
    ]
    summary = read(
        {"a.jtl": jtl_text(rows[:9000]).encode(), "b.jtl.gz": gzip.compress(jtl_text(rows[9000:]).encode())}
    )
    for label, stats in summary.transactions.items():
        assert not stats.elapsed.exact
        times = [s.elapsed for s in rows if s.label == label]
        assert stats.metric("RESPONSE_TIME_AVG") == pytest.approx(statistics.fmean(times), rel=1e-12)
        assert stats.metric("RESPONSE_TIME_MAX") == max(times)
        for p in (50, 80, 90, 95, 99, 99.9, 100):
            exact = nearest_rank(times, p)
            got = stats.elapsed.percentile(p)
            assert got is not None
            assert abs(got - exact) <= PERCENTILE_RELATIVE_ERROR * exact, (label, p, got, exact)


def test_an_exact_file_merges_with_a_bucketed_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jtl_figures, "EXACT_VALUES", 50)
    wide = [Sample(START_MS, 100 + 37 * i, "a", True, "OK", 1, 1, 1, 0) for i in range(200)]
    narrow = [Sample(START_MS, 5 + i % 3, "a", True, "OK", 1, 1, 1, 0) for i in range(30)]
    for files in ([narrow, wide], [wide, narrow]):
        summary = read({f"lg-{i}.jtl": jtl_text(part).encode() for i, part in enumerate(files)})
        stats = summary.transactions["a"]
        times = [s.elapsed for s in wide + narrow]
        assert stats.hits == 230 and not stats.elapsed.exact
        assert stats.metric("RESPONSE_TIME_MIN") == 5
        for p in (10, 50, 95):
            exact = nearest_rank(times, p)
            assert abs((stats.elapsed.percentile(p) or 0) - exact) <= PERCENTILE_RELATIVE_ERROR * exact


# --- what the gate needs only -------------------------------------------------------------------------


def test_a_gate_on_times_and_errors_reads_only_those_columns() -> None:
    assert columns_for(["RESPONSE_TIME_PERCENTILE_95", "ERRORS_PERCENT"]) == frozenset()
    assert columns_for(["HITS_RATE", "LATENCY_AVG", "RESPONSE_SIZE"]) == {"timeStamp", "Latency", "bytes"}
    rows = samples(300)
    summary = read({"x.jtl": jtl_text(rows).encode()}, metrics=["RESPONSE_TIME_PERCENTILE_95"])
    stats = summary.transactions["Home"]
    assert (
        stats.metric("RESPONSE_TIME_PERCENTILE_95") == expected(rows)["Home"]["RESPONSE_TIME_PERCENTILE_95"]
    )
    assert stats.metric("LATENCY_AVG") is None and stats.metric("HITS_RATE") is None
    assert stats.metric("RESPONSE_TIME_APDEX") is None  # not computable from samples


def test_a_column_one_generator_lacks_has_no_value() -> None:
    rows = samples(40)
    without = "\r\n".join(
        ",".join(field for i, field in enumerate(line.split(",")) if i != 0)  # no timeStamp
        for line in ["timeStamp,elapsed,label,success", "1,5,Home,true"]
    )
    summary = read({"a.jtl": jtl_text(rows).encode(), "b.jtl": (without + "\r\n").encode()})
    assert summary.transactions["Home"].metric("HITS_RATE") is None
    assert summary.transactions["Home"].hits == sum(s.label == "Home" for s in rows) + 1


# --- empty files and files to refuse ------------------------------------------------------------------


def test_empty_files_and_a_header_only_file_hold_no_samples() -> None:
    summary = read(
        {"a.jtl": b"", "b.jtl.gz": gzip.compress(b""), "c.jtl": jtl_text([]).encode(), "d.jtl": b"\n\n"}
    )
    assert summary.samples == 0 and summary.labels == [] and summary.span_s is None
    assert summary.files == ("a.jtl", "b.jtl.gz", "c.jtl", "d.jtl")


def test_blank_lines_between_samples_are_skipped() -> None:
    rows = samples(30)
    text = jtl_text(rows).replace("\r\n", "\r\n\r\n", 5)
    assert read({"x.jtl": text.encode()}).samples == 30


def test_a_run_without_jtl_file_is_refused_naming_its_files() -> None:
    with pytest.raises(JtlError, match=r"Run r-1 has no JTL file .*its files: jmeter\.log, report\.pdf"):
        jtl_files(["report.pdf", "jmeter.log"], "r-1")
    with pytest.raises(JtlError, match="its files: none"):
        jtl_files([])
    names = ["lg-2.jtl.gz", "jmeter.log", "lg-1.JTL", "lg-1.JTL.gz", "x.jtl", "x.jtl.gz", "y.jtl.log"]
    assert jtl_files(names) == ["lg-1.JTL", "lg-2.jtl.gz", "x.jtl"]


def _refused(content: bytes | str, name: str = "lg-1.jtl") -> str:
    data = content.encode() if isinstance(content, str) else content
    with pytest.raises(JtlError) as caught:
        read({name: data}, size=3)
    return str(caught.value)


def test_an_xml_jtl_is_refused() -> None:
    message = _refused('<?xml version="1.0" encoding="UTF-8"?>\n<testResults version="1.2">\n')
    assert "lg-1.jtl is an XML JTL" in message and "output_format=csv" in message
    assert "XML JTL" in _refused(gzip.compress(b"  \n<testResults>"), "lg-1.jtl.gz")


def test_a_missing_column_is_named_with_the_columns_found() -> None:
    message = _refused("timeStamp,elapsed,label,responseCode\n1,2,a,200\n")
    assert (
        "lg-1.jtl lacks the column(s) success (its columns: timeStamp, elapsed, label, responseCode)"
        in message
    )


def test_a_file_without_header_or_not_a_jtl() -> None:
    assert "has no header line" in _refused(f"{START_MS},12,Home,200,OK,t,text,true\n")
    assert "is not a JMeter CSV results file" in _refused("hello,world\n")


def _edited(line: int, edit: Callable[[list[str]], list[str]]) -> str:
    """A JTL of 10 samples whose data ``line`` (2 is the first) is changed by ``edit``."""
    rows = [Sample(START_MS + i, 10 + i, "a", True, 'OK, "fine"', 100, 640, 5, 0) for i in range(10)]
    records = list(csv.reader(io.StringIO(jtl_text(rows), newline="")))
    records[line - 1] = edit(records[line - 1])
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(records)
    return out.getvalue()


def test_a_row_with_too_few_fields_is_named_with_its_line() -> None:
    message = _refused(_edited(7, lambda fields: fields[:14]))  # a generator killed mid-write
    assert message == "lg-1.jtl line 7: the sample has 14 fields where the header has 17"


@pytest.mark.parametrize(
    ("column", "value", "detail"),
    [
        (7, "maybe", "success 'maybe' (true or false expected)"),
        (1, "1.5", "elapsed '1.5' (a whole number expected)"),
        (0, "2026/01/01 00:00:00.000", "timeStamp '2026/01/01 00:00:00.000' (epoch milliseconds"),
        (9, "", "bytes '' (a whole number expected)"),
    ],
)
def test_a_bad_value_is_named_with_its_line(column: int, value: str, detail: str) -> None:
    message = _refused(_edited(5, lambda fields: [*fields[:column], value, *fields[column + 1 :]]))
    assert message.startswith(f"lg-1.jtl line 5: the sample has {detail}")


def test_a_bad_value_in_a_column_counted_as_text_is_named() -> None:
    message = _refused(_edited(5, lambda fields: [*fields[:14], "n/a", *fields[15:]]))
    assert message.startswith("lg-1.jtl: column Latency holds 'n/a' (a whole number expected)")


def test_an_unclosed_quote_is_malformed_not_a_hang() -> None:
    """An unclosed quote followed by more lines than a cut sample spans is a malformed file (an
    unclosed quote within a few lines of the end is a cut sample: ``test_jmeter_files``)."""
    tail = "".join(f"{START_MS},5,a,200,OK\r\n" for _ in range(jtl.MAX_CUT_LINES + 1))
    text = jtl_text(samples(5, labels=["a"])) + f'{START_MS},5,"a,200,OK\r\n' + tail
    assert "malformed CSV" in _refused(text)
    in_the_middle = jtl_text(samples(5, labels=["a"])) + f'{START_MS},5,"a"b,200,OK\r\n' + tail
    assert "malformed CSV (',' expected after '\"')" in _refused(in_the_middle)


def test_broken_gzip_streams_are_refused() -> None:
    packed = gzip.compress(jtl_text(samples(200)).encode())
    assert "ends before the end of its gzip stream" in _refused(packed[: len(packed) // 2], "a.jtl.gz")
    assert "is not a valid gzip file" in _refused(packed[:20] + b"\xff" * 40 + packed[60:], "a.jtl.gz")
    assert "data after the last gzip member is not gzip" in _refused(packed + b"trailing", "a.jtl.gz")


def test_a_compression_bomb_stops_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jtl, "MAX_DECOMPRESSED_BYTES", 2**20)
    bomb = gzip.compress(jtl_text(samples(1)).encode() + b"\n" * (4 * 2**20))
    assert "expands past" in _refused(bomb, "a.jtl.gz")


# --- as a download sink -------------------------------------------------------------------------------


def test_a_retried_download_restarts_the_file_and_counts_once() -> None:
    rows = samples(500)
    data = gzip.compress(jtl_text(rows).encode())
    reader = JtlReader()
    sink = reader.file("lg-1.jtl.gz")
    sink.seek(0)  # what a download sink is told before the first try
    sink.truncate()
    sink.write(data[: len(data) // 2])  # the first try breaks off half-way
    assert sink.tell() == len(data) // 2
    sink.seek(0)
    sink.truncate()
    for chunk in chunked(data, 1000):
        sink.write(memoryview(chunk))
    sink.close()
    sink.close()  # closing twice adds nothing
    assert_figures(reader.summary(), rows)
    with pytest.raises(JtlError, match="fed after it was closed"):
        sink.write(b"x")


def test_the_hook_streams_a_download_into_the_reader_and_a_retried_call_counts_once(
    loadtest_conn: str, requests_mock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LoadTestHook.call(..., sink=file)``: the download's chunks go straight into the parser (never
    whole in memory); the first answer (a 503) is retried, and the file counts once."""
    from airflow_provider_loadtest.api import endpoints
    from airflow_provider_loadtest.hooks import loadtest as hook_module
    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

    monkeypatch.setattr(hook_module, "_sleep", lambda seconds: None)
    rows = samples(2000)
    packed = gzip.compress(jtl_text(rows).encode())
    url = "https://loadtest.example.test/analysis/logs/br-1?filename=lg-1.jtl.gz"
    requests_mock.get(url, [{"status_code": 503}, {"content": packed}])
    reader = JtlReader()
    part = reader.file("lg-1.jtl.gz")
    LoadTestHook(loadtest_conn_id=loadtest_conn).call(
        endpoints.download_run_file("br-1", "lg-1.jtl.gz"),
        sink=part,  # type: ignore[arg-type]
    )
    part.close()
    assert part.tell() == len(packed)
    assert_figures(reader.summary(), rows)
