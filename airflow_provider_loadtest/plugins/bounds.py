"""How much one page of the "Load tests" view holds, whatever XCom holds.

XCom is written by tasks: any user allowed to run a DAG can leave a gate of 20,000 rows, a metric name
of a megabyte, a number at the edge of a float's range. The page stays bounded in every dimension, and
says what it left out (``page.Omitted``): the rows read per night, the series drawn as charts, the
table's columns, the failing rows listed per night, the length of any text, and the bytes of the page.

And the process stays bounded whatever XCom holds or however many look (issue 35): every text is clipped
as it is decoded (``DECODED_CHARS``), so a 25 MB note never lives past its night's decode; the results
kept across requests are bounded in bytes (``decoded.CACHED_BYTES``); the JSON answer is paged
(``JSON_BYTES``); and at most ``VIEW_SLOTS`` answers are built at once, each reading with one database
connection at a time (``slots``).
"""

from __future__ import annotations

#: Gate rows read per night (a gate's rows are its metrics times its transactions: tens, a few hundred).
ROWS_PER_NIGHT = 1000
#: Series drawn as charts on one task's tab; the others are named, each transaction linked to its charts.
SERIES_DRAWN = 6
#: Metrics of all requests shown as the table's columns.
COLUMNS = 16
#: Failing rows listed per night in the table (the rest counted).
FAILING_LISTED = 8
#: Transactions named (and linked) among the series not drawn.
NAMES_LISTED = 60
#: Characters of a name (metric, transaction) and of a text (a reason, a note) shown.
NAME_CHARS, TEXT_CHARS = 120, 300
#: The longest transaction a link (``?transaction=``) names; a longer one is named, not linked.
LINKED_NAME_CHARS = 500
#: Characters of any text kept when a night is decoded (a name, a reason, a note, an id): more than any
#: page shows or links (``TEXT_CHARS``, ``LINKED_NAME_CHARS``), so clipping on decode changes no page, and
#: a longer text is cut with an ellipsis (a transaction so cut is named, not linked).
DECODED_CHARS = 1000
#: The longest report link kept (a longer one is dropped: the night shows no report link).
URL_CHARS = 2048
#: Characters of a run id read (Airflow's own ``ID_LEN``): every run id Airflow makes is kept whole and
#: linked; a longer one (only a direct database write can store it) is read this far, shown clipped, and
#: its link (escaped as any) leads to Airflow's "not found".
RUN_ID_CHARS = 250
#: Gate rows in one JSON answer (``/api/...``: 2,000 nights of 1,000 rows would be 2 million).
JSON_ROWS = 100_000
#: Bytes of one JSON answer: the nights past them are left to the next page (``next``, ``?offset=``).
JSON_BYTES = 4 * 2**20
#: Bytes of one page: past them no further chart, table row or task is rendered, and the page says so.
PAGE_BYTES = 6 * 2**20
#: Absolute values a chart draws; beyond, a value shows at the plot's edge as out of range (a float
#: reaches 1.7e308: scaled to 200 pixels, spans and steps overflow).
PLOT_RANGE = 1e15


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying so with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class PageBudget:
    """The bytes a page has rendered so far, against ``PAGE_BYTES``: the lazy parts of the page (charts,
    table rows, tasks) ask it before rendering one more."""

    def __init__(self, limit: int = PAGE_BYTES) -> None:
        self.limit = limit
        self.rendered = 0
        #: Whether a part was left out for want of room (the page then says so).
        self.cut = False

    @property
    def full(self) -> bool:
        if self.rendered >= self.limit:
            self.cut = True
            return True
        return False

    def add(self, part: str) -> None:
        """Count ``part`` as the bytes it is sent as (UTF-8): a character of a name may be 4 bytes, and a
        page of them counted in characters was 3 times ``PAGE_BYTES``."""
        self.rendered += len(part) if part.isascii() else len(part.encode("utf-8", "surrogatepass"))

    def stop(self) -> None:
        """Render no further part, and say the page was cut (the server was too busy to go on, ``slots``)."""
        self.rendered = max(self.rendered, self.limit)
        self.cut = True
