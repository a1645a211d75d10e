"""How much one page of the "Load tests" view holds, whatever XCom holds.

XCom is written by tasks: any user allowed to run a DAG can leave a gate of 20,000 rows, a metric name
of a megabyte, a number at the edge of a float's range. The page stays bounded in every dimension, and
says what it left out (``page.Omitted``): the rows read per night, the series drawn as charts, the
table's columns, the failing rows listed per night, the length of any text, and the bytes of the page.
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
#: Gate rows in one JSON answer (``/api/...``: 2,000 nights of 1,000 rows would be 2 million).
JSON_ROWS = 100_000
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
