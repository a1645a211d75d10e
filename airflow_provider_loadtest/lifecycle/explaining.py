"""Why a run or its gate failed, said where a person looks at 3 a.m.: the task log, the exception and
XCom (``return_value["explanation"]``).

* A run that ended ERROR or ABORTED: what the service said (its state, the alarms that broke it, who
  stopped it) and what the run's own JMeter log said (its ERROR lines, ``decisions.samples.jmeter_log``),
  read from the run's files once it ended. A log is read bounded (``LOG_HEAD_BYTES`` from its start and
  ``LOG_TAIL_BYTES`` from its end: what went wrong at the start, and what ended it), never whole.
* A failed gate: per failing transaction its most frequent failure messages and response codes, and the
  run's failed samples by response code, from the JTL files the transaction gate already read
  (``decisions.samples.failures``: masked and bounded there). Without a transaction gate no JTL is read
  for this.

Best effort: an explanation that cannot be read is said as such and never changes the verdict.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, BinaryIO, cast

if TYPE_CHECKING:
    from airflow_provider_loadtest.decisions.gate import Verdict
    from airflow_provider_loadtest.decisions.samples.failures import RunFailures
    from airflow_provider_loadtest.decisions.samples.jmeter_log import LogErrors
    from airflow_provider_loadtest.decisions.watch import RunOutcome

#: Bytes of a JMeter log kept from its start and from its end (a failed run's log is small; a long
#: run's can be large, and its ERROR lines are near one end or the other).
LOG_HEAD_BYTES = 4 * 2**20
LOG_TAIL_BYTES = 4 * 2**20
#: JMeter log files read per run (one per load generator at most).
MAX_LOG_FILES = 5
#: Seconds the JMeter logs of a failed run may take to read, retries included (the verdict waits).
LOG_READ_S = 60.0
#: Lines of the explanation put in the exception's message (the log and XCom hold the rest).
EXCEPTION_LINES = 8


def is_jmeter_log(name: str) -> bool:
    """A run file that is a JMeter log (``jmeter.log``, ``lg-1-jmeter.log.gz``...); the monitoring
    agents' logs (``*-agent.log``), which every official client skips, are not."""
    lower = name.lower().removesuffix(".gz")
    return lower.endswith(".log") and "jmeter" in lower and not lower.endswith("-agent.log")


class BoundedLog:
    """A download sink keeping the first ``head`` and last ``tail`` bytes of a (gzipped or plain) log.

    Takes what a download sink gets (``write``; ``seek(0)`` and ``truncate()`` when the download is
    retried, which restart it)."""

    def __init__(self, *, gzipped: bool, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES) -> None:
        self.gzipped, self.head_limit, self.tail_limit = gzipped, head, tail
        self.restart()

    def restart(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.skipped = 0
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gzipped else None

    def write(self, data: bytes) -> int:
        if self._inflate is None:
            self._keep(data)
            return len(data)
        chunk = data
        while chunk:
            out = self._inflate.decompress(chunk, 2**20)
            self._keep(out)
            chunk = self._inflate.unconsumed_tail
        return len(data)

    def _keep(self, data: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                cut = len(self.tail) - self.tail_limit
                self.skipped += cut
                del self.tail[:cut]

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset == 0 and whence == 0:
            self.restart()
        return 0

    def truncate(self, size: int | None = None) -> int:
        return 0

    def lines(self) -> list[str]:
        """The kept text's lines; past the head, the lines cut by the gap are left out and the gap said."""
        if not self.skipped:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace").splitlines()
        head = self.head.decode("utf-8", "replace").splitlines()[:-1]
        tail = self.tail.decode("utf-8", "replace").splitlines()[1:]
        return [*head, f"[{self.skipped} bytes of the log not read]", *tail]


@dataclass
class Explanation:
    """Why the run or its gate failed: lines for the log and the exception, and a JSON-safe form."""

    lines: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    #: Lines the exception's message already says (the service's word: the message leads with it).
    said: frozenset[str] = frozenset()

    @property
    def news(self) -> list[str]:
        """The lines beyond what the failure's own message says."""
        return [line for line in self.lines if line not in self.said]

    def for_exception(self) -> str:
        """The first lines, for the exception's message (one line each)."""
        lines = self.news
        if not lines:
            return ""
        shown = lines[:EXCEPTION_LINES]
        more = len(lines) - len(shown)
        tail = [f"... {more} more line(s) in the task log"] if more else []
        return " | ".join(line.replace("\n", " ") for line in [*shown, *tail])


def explain_run(outcome: RunOutcome, logs: LogErrors | str | None) -> Explanation:
    """Why a run ended ERROR or ABORTED: the service's word (state, breaking alarms) and the JMeter log's
    ERROR lines (``logs``; a text when the log could not be read)."""
    service = f"The service says: {outcome.message}"
    lines = [service]
    data: dict[str, Any] = {"state": outcome.state, "service": outcome.message}
    breaking = [str(alarm.get("name") or alarm.get("id")) for alarm in outcome.breaking]
    if breaking:
        lines.append("Alarms that broke the run: " + ", ".join(breaking))
        data["breaking_alarms"] = breaking
    if isinstance(logs, str):
        lines.append(logs)
        data["jmeter_log"] = {"unread": logs}
    elif logs is not None:
        lines += logs.describe()
        data["jmeter_log"] = logs.to_xcom()
    return Explanation(lines, data, frozenset({service}))


def explain_gate(verdict: Verdict, failures: RunFailures | None) -> Explanation:
    """Why the gate failed, beyond its rows: per failing transaction its failures (messages, codes),
    and the run's failed samples by response code (``failures``: from the JTL files already read)."""
    if failures is None:
        return Explanation()
    labels = list(dict.fromkeys(r.transaction for r in verdict.rows if not r.passed and r.transaction))
    lines = failures.describe(labels)
    return Explanation(lines, {"failures": failures.to_xcom(labels)})


def read_jmeter_logs(hook: Any, bench_result_id: str) -> LogErrors | str:
    """The ERROR lines of the run's JMeter log(s), or why they could not be read."""
    from airflow_provider_loadtest.api import endpoints
    from airflow_provider_loadtest.decisions.samples.jmeter_log import jmeter_log_errors

    deadline = time.time() + LOG_READ_S  # the calls' retries included
    try:
        listed = hook.call(replace(endpoints.list_run_files(bench_result_id), deadline=deadline))
        names = [n for n in listed if is_jmeter_log(str(n))]
        if not names:
            return f"Run {bench_result_id} has no JMeter log among its files."
        lines: list[str] = []
        for name in names[:MAX_LOG_FILES]:
            sink = BoundedLog(gzipped=str(name).lower().endswith(".gz"))
            request = replace(endpoints.download_run_file(bench_result_id, name), deadline=deadline)
            hook.call(request, sink=cast("BinaryIO", sink))
            lines += sink.lines()
    except Exception as exc:  # best effort: the run's own failure is what the task reports
        return f"The JMeter log of run {bench_result_id} could not be read: {exc}"
    return jmeter_log_errors(lines)
