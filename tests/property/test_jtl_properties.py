"""Property-based tests of the JTL reader (hypothesis): any samples, any text in their fields, any
chunking, gzipped or not, give the figures computed from the list of samples.

Labels and messages are drawn from text holding the delimiter, quotes, ``\\r`` and ``\\n``: the cases
a hand-written parser gets wrong, which ``csv`` must get right across batch and chunk boundaries.
"""

from __future__ import annotations

import gzip

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_provider_loadtest.decisions.samples import jtl
from tests.unit.test_jtl import START_MS, Sample, assert_figures, jtl_text, read

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TEXT = st.text(alphabet=st.sampled_from('ab ,;"\r\n\té'), min_size=1, max_size=12)
SAMPLE = st.builds(
    Sample,
    start=st.integers(START_MS, START_MS + 10**6),
    elapsed=st.integers(0, 10**6),
    label=TEXT,
    ok=st.booleans(),
    message=TEXT,
    received=st.integers(0, 10**6),
    sent=st.integers(0, 10**4),
    latency=st.integers(0, 10**6),
    connect=st.integers(0, 10**3),
)


@PROPERTY_SETTINGS
@given(
    rows=st.lists(SAMPLE, min_size=1, max_size=60),
    chunk=st.integers(1, 300),
    batch=st.integers(1, 200),
    packed=st.booleans(),
    quote_all=st.booleans(),
)
def test_any_samples_any_chunking(
    rows: list[Sample], chunk: int, batch: int, packed: bool, quote_all: bool
) -> None:
    text = jtl_text(rows, quote_all=quote_all).encode()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jtl, "_BATCH_CHARS", batch)
        summary = read(
            {"lg-1.jtl.gz" if packed else "lg-1.jtl": gzip.compress(text) if packed else text}, chunk
        )
    assert_figures(summary, rows)


@PROPERTY_SETTINGS
@given(
    rows=st.lists(SAMPLE, min_size=1, max_size=30),
    where=st.floats(0, 1),
    chunk=st.integers(1, 300),
    batch=st.integers(1, 200),
)
def test_a_file_cut_anywhere_never_gives_a_wrong_value(
    rows: list[Sample], where: float, chunk: int, batch: int
) -> None:
    """A load generator killed at any byte after its header: the samples it wrote whole are read
    exactly, the one it was writing is left out (and said), never read with a cut value."""
    text = jtl_text(rows).encode()
    header = jtl_text([]).encode()
    ends = [len(jtl_text(rows[: i + 1]).encode()) for i in range(len(rows))]
    cut = len(header) + round(where * (len(text) - len(header)))
    whole = sum(end - 1 <= cut for end in ends)  # a record is whole once its "\r" is written
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jtl, "_BATCH_CHARS", batch)
        summary = read({"lg-1.jtl": text[:cut]}, chunk)
    if whole:
        assert_figures(summary, rows[:whole])
    else:
        assert summary.samples == 0 and summary.labels == []
    at_a_boundary = cut in {len(header), *ends, *(end - 1 for end in ends)}
    assert len(summary.notes) == (0 if at_a_boundary else 1)
