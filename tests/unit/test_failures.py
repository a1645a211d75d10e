"""Why a run failed, from its samples and its JMeter log: secrets masked, text and memory bounded,
the same answer however the files are chunked or split between generators."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from airflow_provider_loadtest.decisions.samples import failures as failures_module
from airflow_provider_loadtest.decisions.samples.failures import MESSAGE_CHARS, FailureCounts, RunFailures
from airflow_provider_loadtest.decisions.samples.jmeter_log import jmeter_log_errors
from airflow_provider_loadtest.decisions.samples.jtl import read_jtl
from airflow_provider_loadtest.decisions.samples.masking import brief, clip_words, mask

FIXTURES = Path(__file__).parent / "fixtures" / "jmeter"
HEADER = ["timeStamp", "elapsed", "label", "responseCode", "responseMessage", "success", "failureMessage"]


def jtl(rows: list[tuple[str, str, str, bool, str]]) -> bytes:
    """A JTL of (label, code, responseMessage, success, failureMessage) rows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for i, (label, code, message, ok, failure) in enumerate(rows):
        writer.writerow([1_700_000_000_000 + i, 10 + i % 7, label, code, message, str(ok).lower(), failure])
    return out.getvalue().encode()


def failures_of(files: dict[str, bytes], size: int = 1 << 16) -> RunFailures:
    chunks = ((name, [data[i : i + size] for i in range(0, len(data), size)]) for name, data in files.items())
    return read_jtl(chunks).failures


# --- masking ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl", "Authorization: ***"),
        ("sent Bearer abcdef123456 to the API", "sent Bearer *** to the API"),
        ("Proxy-Authorization: Basic dXNlcjpwYXNz\nnext line", "Proxy-Authorization: ***\nnext line"),
        ("Cookie: JSESSIONID=1234; theme=dark", "Cookie: ***"),
        ("X-Api-Key: k-123456", "X-Api-Key: ***"),
        ("GET https://bob:hunter2@api.test/login failed", "GET https://bob:***@api.test/login failed"),
        (
            "https://api.test/s?q=shoes&api_key=s3cr3t&access_token=tok123&page=2",
            "https://api.test/s?q=shoes&api_key=***&access_token=***&page=2",
        ),
        ("username=alice&password=hunter2", "username=alice&password=***"),
        (
            '{"user": "alice", "password": "hu\\"nter2", "n": 1}',
            '{"user": "alice", "password": "***", "n": 1}',
        ),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_", "token ***"),
        ("id eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig in text", "id *** in text"),
        ("Test failed: code expected to equal /200/", "Test failed: code expected to equal /200/"),
        ("monkey=banana&keyboard=qwerty", "monkey=banana&keyboard=qwerty"),
    ],
)
def test_secrets_of_known_shapes_are_masked_and_the_rest_kept(text: str, masked: str) -> None:
    assert mask(text) == masked


def test_brief_is_one_line_masked_then_cut() -> None:
    assert brief("line one\n\n  line two\ttab", 100) == "line one line two tab"
    assert brief("x" * 10, 5) == "xxxx…"
    # Masked before it is cut: a cut never leaves a secret's start showing.
    assert brief("see password=hunter2hunter2", 16) == "see password=***"
    assert brief("see password=hunter2hunter2", 15) == "see password=*…"


def test_a_cut_never_ends_mid_word() -> None:
    """The demo printed "...SocketTimeoutException x1; messag": a cut ends after a whole word."""
    line = "codes 504 x3; exceptions java.net.SocketTimeoutException x1; messages 'Read timed out' x1"
    cut = clip_words(line, 66)
    assert cut == "codes 504 x3; exceptions java.net.SocketTimeoutException x1…", cut
    assert len(cut) <= 66
    assert brief(line, 66) == cut
    assert clip_words(line, len(line)) == line
    # No space near the end (a URL, a token): cut where the room ends rather than keep a stub.
    assert (
        clip_words("see https://example.test/" + "a" * 60, 40) == "see https://example.test/aaaaaaaaaaaaaa…"
    )


# --- failures from samples ------------------------------------------------------------------------


def test_messages_and_codes_per_label_most_frequent_first_masked_and_bounded() -> None:
    long = "Assertion failed: " + "y" * 500
    rows = (
        [("Login", "401", "Unauthorized", False, "Test failed: token=abc123 refused")] * 4
        + [("Login", "401", "Unauthorized", False, "Test failed: token=zzz999 refused")] * 2
        + [("Login", "500", "Internal Server Error", False, "")] * 3
        + [("Login", "200", "OK", True, "")] * 20
        + [("Search", "200", "OK", False, long)] * 2
        + [("Search", "Non HTTP response code: java.net.SocketTimeoutException", "Read timed out", False, "")]
    )
    found = failures_of({"lg-1.jtl": jtl(rows)})
    login = found.labels["Login"]
    assert login.failed == 9
    # The two tokens are masked before counting: one message, six samples.
    assert [(c.text, c.count) for c in login.messages] == [
        ("Test failed: token=*** refused", 6),
        ("Internal Server Error", 3),  # no failureMessage: the responseMessage says why
    ]
    assert [(c.text, c.count) for c in login.codes] == [("401", 6), ("500", 3)]
    search = found.labels["Search"]
    assert len(search.messages[0].text) == MESSAGE_CHARS and search.messages[0].text.endswith("…")
    assert found.failed == 12
    assert [(c.text, c.count) for c in found.by_code] == [
        ("401", 6),
        ("500", 3),
        ("200", 2),
        ("Non HTTP response code: java.net.SocketTimeoutException", 1),
    ]
    assert "Login" in found.labels and "Home" not in found.labels


def test_the_top_is_bounded_and_the_rest_counted_as_other() -> None:
    rows = [("a", str(500 + i % 8), f"m{i % 8}", False, "") for i in range(80)]
    rows += [("a", "599", "m0", False, "")] * 3  # m0 and 599 are the most frequent
    found = failures_of({"lg-1.jtl": jtl(rows)})
    label = found.labels["a"]
    assert len(label.messages) == len(label.codes) == failures_module.TOP
    assert label.messages[0].text == "m0" and label.messages[0].count == 13
    assert label.other_messages == 83 - sum(c.count for c in label.messages)
    assert label.describe().endswith(f"{label.other_messages} other")


def test_memory_is_bounded_by_distinct_messages_over_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(failures_module, "MAX_DISTINCT", 6)
    rows = [("a", "500", f"order {i} failed", False, "") for i in range(50)]
    counts = FailureCounts()
    counts.add(Counter((r[0], r[1], r[2]) for r in rows), controller=False)
    assert sum(map(len, counts.messages.values())) + sum(map(len, counts.codes.values())) <= 6
    assert len(counts.shown) <= 6  # the masked texts' cache too
    result = counts.result({"a": 50})
    assert result.labels["a"].failed == 50
    assert sum(c.count for c in result.labels["a"].messages) + result.labels["a"].other_messages == 50


def test_the_same_answer_however_chunked_and_split_between_generators() -> None:
    rows = [("L" + str(i % 3), str(400 + i % 5), f"msg {i % 4}", i % 3 == 0, "") for i in range(300)]
    whole = failures_of({"lg-1.jtl": jtl(rows)})
    split = failures_of({"lg-1.jtl": jtl(rows[:100]), "lg-2.jtl": jtl(rows[100:])}, size=7)
    assert split == whole
    assert whole.to_xcom() == json.loads(json.dumps(whole.to_xcom()))


def test_a_run_without_failures_says_so() -> None:
    found = failures_of({"lg-1.jtl": jtl([("a", "200", "OK", True, "")] * 3)})
    assert found == RunFailures() and found.describe() == ["No sample failed."]
    assert found.to_xcom() == {"failed": 0, "by_code": [], "other_codes": 0, "labels": {}}


# --- the JMeter log ---------------------------------------------------------------------------------

LOG4J2 = """\
2024-05-22 10:27:04,001 INFO o.a.j.JMeter: Version 5.6.3
2024-05-22 10:27:05,137 ERROR o.a.j.t.JMeterThread: Test failed!
java.lang.IllegalStateException: no token for https://bob:hunter2@idp.test/token
\tat org.apache.jmeter.threads.JMeterThread.run(JMeterThread.java:123)
\tat java.base/java.lang.Thread.run(Thread.java:840)
\tat more.Frames(X.java:1)
2024-05-22 10:27:06,000 WARN o.a.j.p.h.s.HTTPSamplerBase: slow
2024-05-22 10:27:07,500 ERROR o.a.j.t.JMeterThread: Test failed!
java.lang.IllegalStateException: again
2024-05-22 10:27:08,000 ERROR o.a.j.e.StandardJMeterEngine: Error in Authorization: Bearer abcdefghij
"""


def test_the_error_lines_of_a_log4j2_jmeter_log_with_traces_masked() -> None:
    errors = jmeter_log_errors(LOG4J2)
    assert errors.total == 3 and errors.left_out == 0
    first, second = errors.entries
    assert (first.time, first.level, first.message, first.count) == (
        "2024-05-22 10:27:05,137",
        "ERROR",
        "o.a.j.t.JMeterThread: Test failed!",
        2,
    )
    assert first.trace == (
        "java.lang.IllegalStateException: no token for https://bob:***@idp.test/token",
        "at org.apache.jmeter.threads.JMeterThread.run(JMeterThread.java:123)",
        "at java.base/java.lang.Thread.run(Thread.java:840)",
    )
    assert second.message == "o.a.j.e.StandardJMeterEngine: Error in Authorization: ***"
    assert errors.describe()[0] == "The JMeter log holds 3 ERROR line(s):"
    assert errors.to_xcom() == json.loads(json.dumps(errors.to_xcom()))


def test_the_error_lines_of_a_real_jmeter_2_13_log() -> None:
    text = (FIXTURES / "missing-users.jmeter.log").read_text()
    errors = jmeter_log_errors(text)
    (entry,) = errors.entries
    assert errors.total == entry.count == text.count(" ERROR - ")
    assert entry.message == (
        "jmeter.config.CSVDataSet: java.io.FileNotFoundException: /nonexistent/users.csv "
        "(No such file or directory)"
    )


def test_the_log_errors_are_bounded() -> None:
    lines = [f"2024-05-22 10:27:05,137 ERROR o.a.j.X: failure {i} " + "z" * 1000 for i in range(50)]
    errors = jmeter_log_errors(iter(lines), limit=4, line_chars=80)
    assert len(errors.entries) == 4 and errors.left_out == 46 and errors.total == 50
    assert all(len(entry.message) == 80 for entry in errors.entries)
    assert "46 other message(s) not shown" in errors.describe()[0]
    assert jmeter_log_errors("").describe() == ["The JMeter log holds no ERROR line."]
