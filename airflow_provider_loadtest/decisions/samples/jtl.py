"""A streaming reader of a run's JMeter results (JTL) files, sans I/O: per-transaction figures.

A run's files include one JTL per load generator (``lg-1.jtl.gz``...): CSV with a header line, one
row per sample. The reader is fed their bytes in chunks as they are downloaded (gzip or not, every
generator merged) and keeps per label only running figures (``samples.figures``), never the samples:
memory grows with the number of distinct labels, not with the number of samples.

Nothing here does I/O: the hook or the operator fetches the files and feeds them. A :class:`JtlFile`
also takes the calls a download sink gets (``write``; ``seek(0)`` and ``truncate()`` when a download
is retried, which restart the file), so a download can stream straight into it. CSV is parsed by the
standard ``csv`` module (quoting, embedded delimiters and line breaks), gzip by ``zlib`` in bounded
steps. A file that is not a CSV JTL, lacks a needed column or holds a malformed row is refused with a
``JtlError`` naming the file, the line and what is wrong.

Files as a real JMeter writes them (``tests/unit/fixtures/jmeter``):

- JMeter ends every sample with a line break, so a file whose last record has none (or ends inside a
  quoted field) was cut: its load generator died, or its disk filled, while writing it. That incomplete
  sample is left out and said in ``JtlSummary.notes``, never read with a cut value (``Latency`` 82 read
  as 8) and never a reason to refuse the run's other samples: one dead generator of several still
  leaves a run whose figures describe the load it applied, and the note says which file lost a sample.
- Text is decoded strictly, as UTF-8 (JMeter's default ``_file_encoding``) unless the reader is told
  another encoding: bytes that are not UTF-8 refuse the file naming its encoding, because replacing them
  would merge different labels (``Café`` and ``Cafè`` written in Latin-1 both read as ``Caf\ufffd``), and
  guessing an encoding could name labels wrong where a gate names them.
- A Transaction Controller's own row (``responseMessage`` "Number of samples in transaction : N, number
  of failing samples : M", empty ``dataType``) counts for its label's hits, errors, times and bytes, but
  its ``Latency`` and ``Connect`` (0 with "Generate parent sample", the children's sum without) are no
  latency: a label of such rows has no latency figures, and ``JtlSummary.samples`` leaves them out.
- Failed samples' messages and codes are counted in the same pass (``samples.failures``).
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import add, itemgetter
from typing import Any

from airflow_provider_loadtest.decisions.samples.failures import FailureCounts
from airflow_provider_loadtest.decisions.samples.figures import (
    BadValue,
    JtlSummary,
    LabelFigures,
    columns_for,
    is_whole,
)

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "JtlError",
    "JtlFile",
    "JtlReader",
    "is_jtl_file",
    "jtl_files",
    "read_jtl",
]

#: Columns without which the samples say nothing about a transaction.
REQUIRED_COLUMNS: tuple[str, ...] = ("label", "elapsed", "success")
#: Columns read when present and needed (their metrics have no value without them).
OPTIONAL_COLUMNS: tuple[str, ...] = ("timeStamp", "bytes", "sentBytes", "Latency", "Connect")
#: Columns read when present, whatever the metrics: why samples failed, and Transaction Controller rows.
FAILURE_COLUMNS: tuple[str, ...] = ("responseCode", "responseMessage", "failureMessage", "dataType")
#: How a Transaction Controller's own row's ``responseMessage`` starts (JMeter's ``TransactionController``).
CONTROLLER_MESSAGE = "Number of samples in transaction : "
_CONTROLLER_ROW = re.compile(r"Number of samples in transaction : \d+, number of failing samples : \d+\Z")
#: Every column name JMeter's CSV writer uses: to recognise a header, and its delimiter.
JMETER_COLUMNS = frozenset(
    {
        "timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType",
        "success", "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL",
        "Filename", "Latency", "Encoding", "SampleCount", "ErrorCount", "Hostname", "IdleTime",
        "Connect",
    }
)  # fmt: skip
#: Delimiters JMeter can be set to write (``jmeter.save.saveservice.default_delimiter``).
DELIMITERS = (",", "\t", ";", "|")

#: Text parsed at a time: per-batch costs vanish, and the rows of a batch stay in the CPU's caches.
_BATCH_CHARS = 256 * 1024
#: A record longer than this is an unclosed quote (or no JTL), not a sample.
MAX_RECORD_CHARS = 8 * 2**20
#: Output of one inflate step: a small compressed chunk never expands at once.
_INFLATE_STEP = 2**20
#: A gzipped JTL may not expand past this (a compression bomb, or no JTL): about 150 million samples
#: of JMeter's default columns.
MAX_DECOMPRESSED_BYTES = 16 * 2**30
#: More distinct labels than this is a test plan naming samples after dynamic values (ids in URLs):
#: figures per transaction would mean little, and memory grows with labels.
MAX_LABELS = 10_000
#: An unclosed quoted field at the end of a file is a sample cut while it was written when it spans at
#: most this many lines (a multi-line assertion message); longer, it is a malformed file.
MAX_CUT_LINES = 100
_GZIP_MAGIC = b"\x1f\x8b"
_BLANK_LINES = re.compile(r"(?:[ \t]*(?:\r\n|\n|\r))+")
_LINE_BREAKS = re.compile(r"\r\n|\n|\r")


class JtlError(ValueError):
    """A JTL file the reader cannot read, with the file's name and what is wrong."""


def is_jtl_file(name: str) -> bool:
    """Whether a run file holds JMeter results (``*.jtl``, or gzipped ``*.jtl.gz``)."""
    lower = name.lower()
    return lower.endswith((".jtl", ".jtl.gz"))


def jtl_files(names: Sequence[str], bench_result_id: str | None = None) -> list[str]:
    """The JTL files among a run's file names; a ``JtlError`` listing the files when there is none
    (a run has them once it produced samples). A run listing ``x.jtl`` and ``x.jtl.gz`` (the same
    results twice) reads ``x.jtl``."""
    found = [name for name in names if is_jtl_file(name)]
    plain = {name for name in found if not name.lower().endswith(".gz")}
    found = [name for name in found if not (name.lower().endswith(".gz") and name[:-3] in plain)]
    if not found:
        run = f"Run {bench_result_id}" if bench_result_id else "The run"
        listed = ", ".join(sorted(names)[:20]) + (" ..." if len(names) > 20 else "") if names else "none"
        raise JtlError(
            f"{run} has no JTL file (*.jtl or *.jtl.gz) to read transactions from; its files: {listed}"
        )
    return sorted(found)


@dataclass
class _Columns:
    """One file's header: its names, delimiter, and where the columns read are."""

    names: list[str]
    delimiter: str
    index: dict[str, int] = field(default_factory=dict)

    def getter(self, name: str) -> Callable[[Sequence[str]], str] | None:
        position = self.index.get(name)
        return itemgetter(position) if position is not None else None


class JtlFile:
    """The parser of one JTL file: ``feed`` it the file's bytes in chunks, then ``close`` it.

    Its figures join the reader's when it is closed, so a file given up half-way (a failed download,
    then ``restart``) counts once. As a download sink: ``write`` feeds, ``seek(0)`` and ``truncate()``
    (what a retried download sends first) restart the file.
    """

    def __init__(self, reader: JtlReader, name: str) -> None:
        self.reader = reader
        self.name = name
        self.restart()

    def restart(self) -> None:
        """Forget everything fed so far (the download starts again)."""
        self._fed = 0
        self._gzip: bool | None = None
        self._head = b""  # bytes held until gzip or not can be told, and between gzip members
        self._inflater: Any = None
        self._inflated = 0
        self._decoder = codecs.getincrementaldecoder(self.reader.encoding)(errors="strict")
        self._text: list[str] = []  # decoded text not parsed yet
        self._text_chars = 0
        self._carry = ""  # complete lines whose last record goes on in the next batch
        self._columns: _Columns | None = None
        self._header_pending = True
        self._line = 0  # lines parsed so far, header included
        self._batch: tuple[str, int, int] = ("", 0, 0)  # its text, lines before it, records skipped
        self.samples = 0
        self.not_modified = 0  # samples answered 304 Not Modified (a trust caveat of the service's)
        self.labels: dict[str, LabelFigures] = {}
        self.first_ms: int | None = None
        self.last_ms: int | None = None
        self.failures = FailureCounts()
        self.notes: list[str] = []
        self._decoded_bytes = 0
        self._closed = False

    @property
    def columns(self) -> frozenset[str]:
        """The optional columns this file had (and the reader wanted)."""
        return frozenset(self._columns.index) if self._columns is not None else frozenset()

    # --- bytes in ---

    def feed(self, data: bytes) -> None:
        """Take the next chunk of the file's bytes."""
        if self._closed:
            raise JtlError(f"{self.name}: fed after it was closed")
        self._fed += len(data)
        if self._gzip is None:
            self._head += data
            if len(self._head) < len(_GZIP_MAGIC):
                return
            data, self._head = self._head, b""
            self._gzip = data.startswith(_GZIP_MAGIC)
        if self._gzip:
            self._inflate(data)
        else:
            self._decoded(data)

    def _inflate(self, data: bytes) -> None:
        import zlib

        try:
            while data:
                if self._inflater is None:  # a gzip file may hold several members, one after another
                    data, self._head = self._head + data, b""
                    if len(data) < len(_GZIP_MAGIC):
                        self._head = data
                        return
                    if not data.startswith(_GZIP_MAGIC):
                        if data.strip(b"\0"):  # zero padding after the last member is allowed
                            raise JtlError(f"{self.name}: data after the last gzip member is not gzip")
                        return
                    self._inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
                inflater = self._inflater
                self._decoded(inflater.decompress(data, _INFLATE_STEP))
                while inflater.unconsumed_tail and not inflater.eof:
                    self._decoded(inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP))
                if inflater.eof:
                    data, self._inflater = inflater.unused_data, None
                else:
                    data = b""
        except zlib.error as exc:
            raise JtlError(f"{self.name} is not a valid gzip file ({exc})") from None

    def _decoded(self, raw: bytes) -> None:
        if self._gzip:
            self._inflated += len(raw)
            if self._inflated > MAX_DECOMPRESSED_BYTES:
                raise JtlError(
                    f"{self.name} expands past {MAX_DECOMPRESSED_BYTES // 2**30} GiB once decompressed: "
                    "not read further (a compression bomb, or no JTL)"
                )
        try:
            text = self._decoder.decode(raw)
        except UnicodeDecodeError as exc:
            raise self._not_decoded(raw, exc) from None
        self._decoded_bytes += len(raw)
        for start in range(0, len(text), _BATCH_CHARS):  # a large chunk is parsed in several batches
            piece = text[start : start + _BATCH_CHARS] if len(text) > _BATCH_CHARS else text
            self._text.append(piece)
            self._text_chars += len(piece)
            if self._text_chars >= _BATCH_CHARS:
                self._drain(final=False)

    def close(self) -> None:
        """The file is complete: parse what is left, check it, add its figures to the reader's."""
        if self._closed:
            return
        if self._gzip is None and self._head:  # fewer bytes than a gzip magic: plain text
            self._gzip = False
            self._decoded(self._head)
        if self._gzip and (self._inflater is not None or self._head.strip(b"\0")):
            raise JtlError(f"{self.name} ends before the end of its gzip stream (a truncated download?)")
        try:
            tail = self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:  # the file ends inside a character: its last sample is cut (below)
            tail = ""
        if tail:
            self._text.append(tail)
        self._drain(final=True)
        try:
            for figures in self.labels.values():
                figures.check()
        except BadValue as bad:
            raise self._bad_value(bad) from None
        self._closed = True
        self.reader._add(self)

    # --- as a download sink ---

    def write(self, data: bytes) -> int:
        self.feed(bytes(data))
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset != 0 or whence != 0:
            raise io.UnsupportedOperation("a JTL file can only be restarted from its start")
        if self._fed:
            self.restart()
        return 0

    def truncate(self, size: int | None = None) -> int:
        if size not in (None, 0):
            raise io.UnsupportedOperation("a JTL file can only be restarted from its start")
        if self._fed:
            self.restart()
        return 0

    def tell(self) -> int:
        return self._fed

    def writable(self) -> bool:
        return True

    # --- text to records ---

    def _drain(self, *, final: bool) -> None:
        text = "".join(self._text)
        self._text, self._text_chars = [], 0
        if not final:
            # Complete lines only: a line ends with ``\n``, ``\r\n``, or a ``\r`` that is not the last
            # character (that one could be the first half of a ``\r\n``).
            cut = max(text.rfind("\n"), text.rfind("\r", 0, len(text) - 1)) + 1
            if cut == 0:
                self._check_record_size(len(text))
                self._text, self._text_chars = [text], len(text)
                return
            if cut < len(text):
                self._text, self._text_chars = [text[cut:]], len(text) - cut
            text = text[:cut]
        text, self._carry = self._carry + text, ""
        columns = self._columns
        if columns is None:
            blank = _BLANK_LINES.match(text)
            if blank:  # blank lines before the header: skipped, and counted
                self._line += len(_LINE_BREAKS.findall(blank.group()))
                text = text[blank.end() :]
            if not text.strip():  # nothing yet, or an empty file
                return
            if final and not _LINE_BREAKS.search(text) and not text.lstrip().startswith("<"):
                self._note(
                    f"{self.name} ends inside its header line (line {self._line + 1}, no line break): "
                    "its load generator stopped before writing a sample; read as no sample"
                )
                return
            columns = self._columns = self._header(text)
        cut = final and not text.endswith(("\n", "\r"))
        rows = self._records(columns, text, final=final, cut=cut)
        if rows:
            self._aggregate(columns, rows)

    def _check_record_size(self, chars: int) -> None:
        if chars + len(self._carry) > MAX_RECORD_CHARS:
            raise JtlError(
                f"{self.name}: the record after line {self._line} is longer than "
                f"{MAX_RECORD_CHARS // 2**20} MiB (an unclosed quote, or no line breaks): not a JTL"
            )

    def _header(self, text: str) -> _Columns:
        first = text.lstrip()
        if first.startswith("<"):
            raise JtlError(
                f"{self.name} is an XML JTL; transactions are read from CSV JTLs (JMeter's default, "
                "jmeter.save.saveservice.output_format=csv)"
            )
        self._line += text[: len(text) - len(first)].count("\n")
        line = next(iter(io.StringIO(first, newline="")), "")
        best: tuple[int, str, list[str]] = (-1, ",", [])
        for delimiter in DELIMITERS:
            names = [name.strip() for name in next(csv.reader([line], delimiter=delimiter), [])]
            known = sum(name in JMETER_COLUMNS for name in names)
            if known > best[0]:
                best = (known, delimiter, names)
        known, delimiter, names = best
        if known == 0:
            if names and names[0].lstrip("-").isdigit():
                raise JtlError(
                    f"{self.name} has no header line, so its columns cannot be told apart: JMeter writes "
                    "one with jmeter.save.saveservice.print_field_names=true (whether that is the default "
                    "depends on the JMeter version: 2.13 writes none unless it is set)"
                )
            raise JtlError(f"{self.name} is not a JMeter CSV results file (first line: {line[:120]!r})")
        missing = [name for name in REQUIRED_COLUMNS if name not in names]
        if missing:
            raise JtlError(
                f"{self.name} lacks the column(s) {', '.join(missing)} (its columns: {', '.join(names)}); "
                "JMeter writes them unless jmeter.save.saveservice.label/time/successful are false"
            )
        columns = _Columns(names, delimiter)
        wanted = (
            REQUIRED_COLUMNS
            + tuple(c for c in OPTIONAL_COLUMNS if c in self.reader.columns)
            + FAILURE_COLUMNS
        )
        for name in wanted:
            if name in names:
                columns.index[name] = names.index(name)
        return columns

    def _records(self, columns: _Columns, text: str, *, final: bool, cut: bool) -> list[list[str]]:
        """The CSV records of ``text`` (complete lines); a record that goes on past its end is kept
        for the next batch (a quoted field holding line breaks). ``cut``: the file ends without a line
        break, so its last record is incomplete."""
        before = self._line
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=columns.delimiter, strict=True)
        if cut:  # read record by record, to find where the cut one starts
            rows = self._records_slowly(columns, text, final=final, cut=cut)
        else:
            try:
                rows = list(reader)
            except csv.Error:
                rows = self._records_slowly(columns, text, final=final, cut=cut)
            else:
                self._line += reader.line_num
        skipped = 0
        if self._header_pending and rows:
            rows, skipped, self._header_pending = rows[1:], 1, False
        self._batch = (text, before, skipped)
        return rows

    def _records_slowly(self, columns: _Columns, text: str, *, final: bool, cut: bool) -> list[list[str]]:
        """Records one by one, up to the one ``csv`` refuses: at the end of the text it may go on in
        the next batch, or at the end of the file be a sample cut while it was written (left out);
        anywhere else it is malformed. With ``cut``, the last record is left out."""
        lines = io.StringIO(text, newline="").readlines()
        reader = csv.reader(iter(lines), delimiter=columns.delimiter, strict=True)
        rows: list[list[str]] = []
        done = start = 0
        try:
            for row in reader:
                rows.append(row)
                start, done = done, reader.line_num
        except csv.Error as exc:
            at_end = reader.line_num >= len(lines)
            unclosed = cut or "unexpected end of data" in str(exc)
            if final and at_end and unclosed and len(lines) - done <= MAX_CUT_LINES:
                self._left_out(done + 1, len(lines) - done)
                self._line += len(lines)
                return rows
            if final or not at_end:
                raise JtlError(f"{self.name} line {self._line + done + 1}: malformed CSV ({exc})") from None
            carry = "".join(lines[done:])
            self._check_record_size(len(carry))
            self._carry = carry
        else:
            if cut and rows:
                rows.pop()
                self._left_out(start + 1, done - start)
        self._line += done
        return rows

    def _left_out(self, first: int, count: int) -> None:
        """Say that the file's last record (from its line ``first`` of the batch, ``count`` lines) was
        cut and left out."""
        where = f"line {self._line + first}" + (f" and {count - 1} more" if count > 1 else "")
        self._note(
            f"{self.name} ends inside a sample ({where}; its load generator stopped while writing it?): "
            "that incomplete sample was left out"
        )

    def _note(self, text: str) -> None:
        self.notes.append(text)

    # --- records to figures ---

    def _aggregate(self, columns: _Columns, rows: list[list[str]]) -> None:
        """Add a batch of records to the labels' figures: grouped by label in one loop, then each
        column of each group counted in C."""
        width = len(columns.names)
        lengths = set(map(len, rows))
        if lengths != {width}:
            if lengths - {width, 0}:
                self._malformed(columns, rows, lambda row: len(row) in (0, width), "fields")
            rows = [row for row in rows if row]  # blank lines
            if not rows:
                return
        label_at = columns.index["label"]
        groups: defaultdict[str, list[list[str]]] = defaultdict(list)
        for row in rows:
            groups[row[label_at]].append(row)
        success, elapsed = itemgetter(columns.index["success"]), itemgetter(columns.index["elapsed"])
        latency, connect = columns.getter("Latency"), columns.getter("Connect")
        sent, received = columns.getter("sentBytes"), columns.getter("bytes")
        # Transaction Controller rows are looked for only in a batch whose text holds their message.
        controllers = CONTROLLER_MESSAGE in self._batch[0] and "responseMessage" in columns.index
        failures: tuple[list[list[str]], list[list[str]]] = ([], [])  # failed samplers', controllers' rows
        try:
            for label, group in groups.items():
                figures = self.labels.get(label) or self._new_label(label)
                outcomes = list(map(success, group))
                failed = outcomes.count("false")
                if failed + outcomes.count("true") != len(outcomes):
                    self._malformed(columns, rows, lambda row: success(row) in ("true", "false"), "success")
                figures.hits += len(outcomes)
                figures.errors += failed
                figures.elapsed.add(map(elapsed, group))
                flags = self._controller_flags(columns, group) if controllers else None
                timed = group  # the rows whose Latency and Connect are a latency and a connect time
                if flags is not None:
                    timed = [row for row, flag in zip(group, flags, strict=True) if not flag]
                    figures.controller_rows += len(group) - len(timed)
                for getter, moments in ((latency, figures.latency), (connect, figures.connect)):
                    if getter is not None:
                        moments.add(map(getter, timed))
                if sent is not None:
                    figures.sent_bytes.add(map(sent, group))
                if received is not None:
                    try:
                        figures.bytes += sum(map(int, map(received, group)))
                    except ValueError:
                        self._malformed(columns, rows, lambda row: is_whole(received(row)), "bytes")
                if failed:
                    _pick_failed(group, outcomes, failed, flags, failures)
        except BadValue as bad:
            raise self._bad_value(bad) from None
        if failures[0] or failures[1]:
            self._failed(columns, failures)
        self.samples += len(rows)
        self._count_not_modified(columns, rows)
        stamp = columns.getter("timeStamp")
        if stamp is not None:
            self._span(columns, rows, stamp, elapsed)

    def _count_not_modified(self, columns: _Columns, rows: list[list[str]]) -> None:
        """Count the samples answered 304, in C, and only in a batch whose text holds a "304"."""
        code = columns.getter("responseCode")
        if code is not None and "304" in self._batch[0]:
            self.not_modified += list(map(code, rows)).count("304")

    def _new_label(self, label: str) -> LabelFigures:
        if len(self.labels) >= MAX_LABELS:
            raise JtlError(
                f"{self.name} holds more than {MAX_LABELS} distinct labels: samples named "
                "after dynamic values (ids in URLs?) cannot be gated per transaction"
            )
        figures = self.labels[label] = LabelFigures()
        return figures

    def _controller_flags(self, columns: _Columns, group: list[list[str]]) -> list[bool] | None:
        """Which rows of a label's group are a Transaction Controller's own (None: none is)."""
        message = itemgetter(columns.index["responseMessage"])
        data_type = columns.getter("dataType")
        flags = [
            _CONTROLLER_ROW.match(message(row)) is not None and (data_type is None or not data_type(row))
            for row in group
        ]
        return flags if any(flags) else None

    def _failed(self, columns: _Columns, failures: tuple[list[list[str]], list[list[str]]]) -> None:
        """Count a batch's failed samples (samplers', Transaction Controllers' rows) by label, code and
        message (``failureMessage``, else ``responseMessage``): once per batch, in C."""
        label = itemgetter(columns.index["label"])
        code, failure = columns.getter("responseCode"), columns.getter("failureMessage")
        response = columns.getter("responseMessage")
        for controller, rows in enumerate(failures):
            if not rows:
                continue
            codes = list(map(code, rows)) if code is not None else [""] * len(rows)
            messages = list(map(failure, rows)) if failure is not None else [""] * len(rows)
            if response is not None and not all(messages):
                messages = [text or response(row) for text, row in zip(messages, rows, strict=True)]
            self.failures.add(
                Counter(zip(map(label, rows), codes, messages, strict=True)), controller=bool(controller)
            )

    def _span(
        self,
        columns: _Columns,
        rows: list[list[str]],
        stamp: Callable[[Sequence[str]], str],
        elapsed: Callable[[Sequence[str]], str],
    ) -> None:
        """The first start and the last end (start + elapsed) of the samples, for rates."""
        try:
            starts = list(map(int, map(stamp, rows)))
            last = max(map(add, starts, map(int, map(elapsed, rows))))
        except ValueError:
            self._malformed(columns, rows, lambda row: is_whole(elapsed(row)), "elapsed")
            self._malformed(columns, rows, lambda row: is_whole(stamp(row)), "timeStamp")
            raise JtlError(
                f"{self.name}: a malformed timeStamp or elapsed before line {self._line}"
            ) from None
        first = min(starts)
        self.first_ms = first if self.first_ms is None else min(self.first_ms, first)
        self.last_ms = last if self.last_ms is None else max(self.last_ms, last)

    def _malformed(
        self, columns: _Columns, rows: list[list[str]], good: Callable[[list[str]], bool], what: str
    ) -> None:
        """Raise naming the first row that is not ``good``, with its line (the error path: slow)."""
        for index, row in enumerate(rows):
            if good(row):
                continue
            if what == "fields":
                detail = f"has {len(row)} fields where the header has {len(columns.names)}"
            else:
                value = row[columns.index[what]]
                expected = {
                    "success": "true or false",
                    "timeStamp": "epoch milliseconds, jmeter.save.saveservice.timestamp_format=ms",
                }.get(what, "a whole number")
                detail = f"has {what} {value!r} ({expected} expected)"
            raise JtlError(f"{self.name} line {self._line_of(columns, row, index)}: the sample {detail}")

    def _line_of(self, columns: _Columns, row: list[str], index: int) -> int:
        """The line a record of the current batch ends on (parsed again: the error path)."""
        text, before, skipped = self._batch
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=columns.delimiter)
        for number, record in enumerate(reader):
            if number >= index + skipped and record == row:
                return before + reader.line_num
        return before + 1

    def _not_decoded(self, raw: bytes, exc: UnicodeDecodeError) -> JtlError:
        """The file is not in the reader's encoding: refused, naming where and how to read it."""
        pending = "".join(self._text)
        line = (
            self._line + _count_lines(self._carry) + _count_lines(pending) + raw[: exc.start].count(b"\n") + 1
        )
        offset = self._decoded_bytes + exc.start
        bad = raw[exc.start : exc.end].hex(" ")
        return JtlError(
            f"{self.name} line {line} (byte {offset}): bytes {bad} are not {self.reader.encoding} "
            f"({exc.reason}). JMeter wrote this file in another encoding (saveservice.properties' "
            "_file_encoding): its labels cannot be told apart without it (Café and Cafè would merge). "
            "Set _file_encoding=UTF-8 for the next runs, or read the file with its encoding "
            "(JtlReader(encoding='iso-8859-1'), say)"
        )

    def _bad_value(self, bad: BadValue) -> JtlError:
        return JtlError(
            f"{self.name}: column {bad.column} holds {bad.text!r} (a whole number expected), "
            f"on a line up to {self._line}"
        )


def _pick_failed(
    group: list[list[str]],
    outcomes: list[str],
    count: int,
    flags: list[bool] | None,
    failures: tuple[list[list[str]], list[list[str]]],
) -> None:
    """Add a group's ``count`` failed rows to ``failures`` (samplers', Transaction Controllers'): few,
    so found by ``list.index`` (in C) rather than a test per row."""
    at = -1
    for _ in range(count):
        at = outcomes.index("false", at + 1)
        failures[flags is not None and flags[at]].append(group[at])


def _count_lines(text: str) -> int:
    return len(_LINE_BREAKS.findall(text))


class JtlReader:
    """Reads every JTL file of a run (one per load generator) into per-label figures.

    ``reader.file(name)`` starts a file: feed it, close it; ``reader.summary()`` merges the files
    closed so far. ``metrics`` (metric ids) limits the optional columns read to those they need.
    """

    def __init__(self, metrics: Iterable[str] | None = None, *, encoding: str = "utf-8") -> None:
        #: The optional columns read: those the wanted metric ids need (all by default).
        self.columns = frozenset(OPTIONAL_COLUMNS) if metrics is None else columns_for(metrics)
        #: The files' text encoding: JMeter's ``_file_encoding`` (UTF-8 unless changed; a UTF-8 byte
        #: order mark is skipped). Bytes not in it refuse the file.
        codec = codecs.lookup(encoding)  # LookupError for an unknown one, before any file is read
        self.encoding = "utf-8-sig" if codec.name == "utf-8" else codec.name
        self._failures = FailureCounts()
        self._not_modified = 0
        self._notes: list[str] = []
        self._files: list[str] = []
        self._labels: dict[str, LabelFigures] = {}
        self._first_ms: int | None = None
        self._last_ms: int | None = None
        self._found: frozenset[str] | None = None  # the optional columns every file had

    def file(self, name: str) -> JtlFile:
        return JtlFile(self, name)

    def _add(self, part: JtlFile) -> None:
        self._files.append(part.name)
        self._not_modified += part.not_modified
        self._failures.merge(part.failures)
        self._notes += part.notes
        if part._columns is not None:
            self._found = part.columns if self._found is None else self._found & part.columns
        for label, figures in part.labels.items():
            mine = self._labels.get(label)
            if mine is None:
                self._labels[label] = figures
            else:
                mine.merge(figures)
        if part.first_ms is not None and part.last_ms is not None:
            first, last = part.first_ms, part.last_ms
            self._first_ms = first if self._first_ms is None else min(self._first_ms, first)
            self._last_ms = last if self._last_ms is None else max(self._last_ms, last)

    def summary(self) -> JtlSummary:
        """The figures of the files closed so far."""
        first, last = self._first_ms, self._last_ms
        span = max(last - first, 1) / 1000 if first is not None and last is not None else None
        found = self._found or frozenset()
        transactions = {
            label: figures.stats(label, found, span) for label, figures in sorted(self._labels.items())
        }
        failures = self._failures.result({label: figures.errors for label, figures in self._labels.items()})
        return JtlSummary(
            tuple(self._files), transactions, first, last, failures, tuple(self._notes), self._not_modified
        )


def read_jtl(
    files: Iterable[tuple[str, Iterable[bytes]]],
    metrics: Iterable[str] | None = None,
    *,
    encoding: str = "utf-8",
) -> JtlSummary:
    """Read ``(name, chunks)`` pairs (each file's bytes, chunked any way) into one summary."""
    reader = JtlReader(metrics, encoding=encoding)
    for name, chunks in files:
        part = reader.file(name)
        for chunk in chunks:
            part.feed(chunk)
        part.close()
    return reader.summary()
