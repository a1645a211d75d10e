"""The JTL reader on files written by a real JMeter (``fixtures/jmeter``: Debian's JMeter 2.13, the plan
and how to make them again in its README), checked against an independent reading with the ``csv``
module and against counts by hand from the plan; and the faults such files showed, each on a file cut
or edited from them as a dying load generator or a changed setting would leave it.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_loadtest.decisions.jtl import JtlError, read_jtl
from airflow_provider_loadtest.decisions.jtl_figures import JtlSummary

FIXTURES = Path(__file__).parent / "fixtures" / "jmeter"
#: Each file's delimiter and encoding (README.md: how JMeter was told to write it).
FILES = {
    "comma.jtl": (",", "utf-8"),
    "semicolon.jtl": (";", "utf-8"),
    "tab.jtl": ("\t", "utf-8"),
    "latin1.jtl": (",", "iso-8859-1"),
}
HOME = 'Home, "quoted"; semi|pipe'
#: By hand, from the plan: 2 threads x 3 loops of 9 rows, two of them Transaction Controllers' own.
LABELS = {HOME, "Café", "Cafè", "Search", "Checkout", "Product", "Reviews", "Browse", "Login"}
CONTROLLERS = {"Checkout", "Browse"}
ROWS, SAMPLES = 54, 42
#: Failed rows by hand: Search's assertion always, Login's 401 always, Pay's 500 every other call
#: (it fails Checkout's parent row; Pay has no row of its own).
FAILED = {"Search": 6, "Login": 6, "Checkout": 3}


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def read(files: dict[str, bytes], size: int = 4096, encoding: str = "utf-8") -> JtlSummary:
    return read_jtl(((name, chunked(data, size)) for name, data in files.items()), encoding=encoding)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def independent(name: str, data: bytes | None = None) -> list[dict[str, str]]:
    """The file's rows, read by the ``csv`` module alone."""
    delimiter, encoding = FILES[name]
    text = (fixture(name) if data is None else data).decode(encoding)
    return list(csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter))


def nearest_rank(values: list[int], percent: float) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent / 100 * len(ordered) - 1e-9)) - 1]


def assert_same(summary: JtlSummary, rows: list[dict[str, str]]) -> None:
    """Every figure the file has a column for, label by label, as the independent reading gives it."""
    by_label: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_label.setdefault(row["label"], []).append(row)
    assert set(summary.transactions) == set(by_label)
    for label, mine in by_label.items():
        stats = summary.transactions[label]
        times = [int(row["elapsed"]) for row in mine]
        assert stats.hits == len(mine), label
        assert stats.errors == sum(row["success"] == "false" for row in mine), label
        for percent in (50, 80, 90, 95, 99):
            assert stats.elapsed.percentile(percent) == nearest_rank(times, percent), (label, percent)
        assert stats.metric("RESPONSE_TIME_AVG") == pytest.approx(statistics.fmean(times))
        assert (stats.elapsed.low, stats.elapsed.high) == (min(times), max(times))
        assert stats.bytes_total == sum(int(row["bytes"]) for row in mine)
        if label in CONTROLLERS:  # a Transaction Controller's Latency is 0 or its children's sum
            assert stats.latency is None and stats.metric("LATENCY_AVG") is None, label
            assert stats.controller_rows == len(mine)
        else:
            latencies = [int(row["Latency"]) for row in mine]
            assert stats.metric("LATENCY_AVG") == pytest.approx(statistics.fmean(latencies)), label
            assert stats.metric("LATENCY_MAX") == max(latencies)
            assert stats.controller_rows == 0


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_file_of_a_real_jmeter_reads_as_the_csv_module_and_the_plan_say(name: str) -> None:
    rows = independent(name)
    assert len(rows) == ROWS and {row["label"] for row in rows} == LABELS  # the fixture is what we think
    summary = read({name: fixture(name)}, encoding=FILES[name][1])
    assert_same(summary, rows)
    assert set(summary.labels) == LABELS  # Café and Cafè stay two labels
    assert summary.samples == SAMPLES and summary.controller_rows == ROWS - SAMPLES
    assert {label: stats.errors for label, stats in summary.transactions.items() if stats.errors} == FAILED
    assert summary.notes == ()


@pytest.mark.parametrize("size", [1, 7, 1000])
def test_the_chunking_of_a_real_file_changes_nothing(size: int) -> None:
    """Chunks split multi-byte characters, CR/LF pairs and multi-line quoted messages."""
    assert_same(read({"comma.jtl": fixture("comma.jtl")}, size=size), independent("comma.jtl"))


def test_every_generator_of_a_run_merges_gzipped_or_not() -> None:
    files = {"lg-1.jtl.gz": gzip.compress(fixture("comma.jtl")), "lg-2.jtl": fixture("semicolon.jtl")}
    summary = read(files)
    rows = independent("comma.jtl") + independent("semicolon.jtl")
    by_label = Counter(row["label"] for row in rows)
    assert {label: stats.hits for label, stats in summary.transactions.items()} == by_label
    assert summary.samples == 2 * SAMPLES


# --- why samples failed, from a real file -----------------------------------------------------------


def test_the_failures_of_a_real_file_per_label_and_by_code() -> None:
    failures = read({"comma.jtl": fixture("comma.jtl")}).failures
    assert set(failures.labels) == set(FAILED)
    search, login, checkout = (failures.labels[label] for label in ("Search", "Login", "Checkout"))
    assert [(item.text, item.count) for item in login.messages] == [
        ("Test failed: text expected to contain /Welcome/", 6)
    ]
    assert [(item.text, item.count) for item in login.codes] == [("401", 6)]
    # The multi-line assertion message, on one line.
    (message,) = search.messages
    assert message.count == 6 and "\n" not in message.text
    assert message.text.startswith("Test failed: text expected to equal / ****** received : [[[no results")
    assert [(item.text, item.count) for item in search.codes] == [("200", 6)]
    # The Transaction Controller's row: its message says how many children failed.
    assert checkout.controller and checkout.failed == 3
    assert [(item.text, item.count) for item in checkout.codes] == [("500", 3)]
    assert [item.text for item in checkout.messages] == [
        "Number of samples in transaction : 2, number of failing samples : 1"
    ]
    # The run's failures by code leave the controller's rows out (their children are samples).
    assert failures.failed == 12
    assert sorted((item.text, item.count) for item in failures.by_code) == [("200", 6), ("401", 6)]
    as_xcom = failures.to_xcom(["Login", "Home"])
    assert json.loads(json.dumps(as_xcom)) == as_xcom
    assert list(as_xcom["labels"]) == ["Login"]
    assert as_xcom["labels"]["Login"]["codes"] == [{"text": "401", "count": 6}]
    lines = failures.describe(["Checkout", "Login"])
    assert lines[0] == "12 sample(s) failed, by response code: 200 x6, 401 x6"
    assert lines[1].startswith("Checkout (Transaction Controller): 3 failed; codes 500 x3; messages ")
    assert lines[2] == (
        "Login: 6 failed; codes 401 x6; messages 'Test failed: text expected to contain /Welcome/' x6"
    )


# --- the faults real files showed -----------------------------------------------------------------


def test_blank_lines_before_the_header_are_skipped_and_lines_still_counted() -> None:
    data = fixture("comma.jtl")
    assert_same(read({"comma.jtl": b"\n \r\n" + data}), independent("comma.jtl"))
    header, first, *_ = data.decode().split("\n")
    bad = first.replace(",true,", ",maybe,")
    with pytest.raises(JtlError) as caught:
        read({"lg-1.jtl": f"\n\n{header}\n{first}\n{bad}\n".encode()})
    assert str(caught.value) == ("lg-1.jtl line 5: the sample has success 'maybe' (true or false expected)")


def _last_record_start(data: bytes) -> int:
    """Where the file's last record starts (its last line: the fixture's last sample is one line)."""
    return data.rstrip(b"\n").rfind(b"\n") + 1


@pytest.mark.parametrize("size", [1, 4096])
def test_a_file_cut_inside_its_last_field_leaves_that_sample_out_and_says_so(size: int) -> None:
    """The issue's case: a last ``Latency`` of 82 cut to 8 by a generator killed while writing it."""
    data = fixture("semicolon.jtl")
    assert data.endswith(b"\n") and data.split(b"\n", 1)[0].endswith(b";Latency")
    start = _last_record_start(data)
    fields = data[start:].rstrip(b"\n").split(b";")
    edited = data[:start] + b";".join([*fields[:-1], b"82"]) + b"\n"
    cut = edited[:-2]  # ends "...;8"
    summary = read({"lg-2.jtl": cut}, size=size)
    rows = independent("semicolon.jtl")[:-1]
    label = fields[2].decode()
    assert summary.transactions[label].latency.high != 8  # type: ignore[union-attr]
    assert summary.transactions[label].hits == sum(row["label"] == label for row in rows)
    assert_same(summary, rows)
    (note,) = summary.notes
    last_line = data.count(b"\n")
    assert note == (
        f"lg-2.jtl ends inside a sample (line {last_line}; its load generator stopped while writing "
        "it?): that incomplete sample was left out"
    )


def test_a_file_cut_inside_a_quoted_label_leaves_that_sample_out() -> None:
    data = fixture("comma.jtl")
    home = next(line for line in data.split(b"\n") if b'"Home, ""quoted' in line)
    cut = data + home[: home.index(b'""quoted') + 3]  # inside the quotes, then nothing
    summary = read({"lg-1.jtl": cut, "lg-2.jtl": data})
    assert_same(summary, independent("comma.jtl") * 2)
    assert len(summary.notes) == 1 and "lg-1.jtl ends inside a sample" in summary.notes[0]


def test_a_file_cut_after_a_line_break_inside_a_multi_line_message_leaves_that_sample_out() -> None:
    data = fixture("comma.jtl")
    inside = data.rindex(b"****** received  : [[[no results\n") + len(b"****** received  : [[[no results\n")
    start = data.rfind(b"\n", 0, data.rindex(b"Test failed: text expected to equal")) + 1
    rows_before = independent("comma.jtl", data[:start])
    summary = read({"lg-1.jtl": data[:inside]})
    assert_same(summary, rows_before)
    line = data[:start].count(b"\n") + 1
    assert f"lg-1.jtl ends inside a sample (line {line} and 2 more;" in summary.notes[0]


def test_a_file_cut_inside_a_character_leaves_that_sample_out() -> None:
    data = fixture("comma.jtl")
    cafe = data.rindex("Café".encode())
    summary = read({"lg-1.jtl": data[: cafe + len("Caf") + 1]}, size=1)  # half of é's two bytes
    assert_same(summary, independent("comma.jtl", data[: _last_record_start(data[:cafe])]))
    assert "ends inside a sample" in summary.notes[0]


def test_a_file_cut_inside_its_header_holds_no_sample_and_says_so() -> None:
    summary = read({"lg-1.jtl": b"timeStamp,elapsed,lab", "lg-2.jtl": fixture("comma.jtl")})
    assert_same(summary, independent("comma.jtl"))
    assert summary.notes == (
        "lg-1.jtl ends inside its header line (line 1, no line break): its load generator stopped "
        "before writing a sample; read as no sample",
    )


def test_a_latin1_file_is_refused_naming_its_encoding_never_merged() -> None:
    with pytest.raises(JtlError) as caught:
        read({"lg-1.jtl": fixture("latin1.jtl")})
    message = str(caught.value)
    data = fixture("latin1.jtl")
    at = data.index(b"Caf\xe9") + 3
    line = data[:at].count(b"\n") + 1
    assert message.startswith(f"lg-1.jtl line {line} (byte {at}): bytes e9 ")
    assert "are not utf-8" in message and "_file_encoding" in message and "encoding=" in message
    summary = read({"lg-1.jtl": data}, encoding="latin-1")  # declared: read right
    assert {"Café", "Cafè"} <= set(summary.labels)


def test_an_unknown_encoding_is_refused_before_any_file_is_read() -> None:
    with pytest.raises(LookupError):
        read_jtl([], encoding="no-such-encoding")


def test_a_file_without_header_does_not_call_any_setting_the_default() -> None:
    with pytest.raises(JtlError) as caught:
        read({"lg-1.jtl": fixture("no-header.jtl")})
    message = str(caught.value)
    assert "lg-1.jtl has no header line" in message
    assert "jmeter.save.saveservice.print_field_names=true" in message
    assert "the default)" not in message and "depends on the JMeter version" in message
