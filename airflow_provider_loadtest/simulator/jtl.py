"""The JMeter results (JTL) files of a simulated run: one per load generator, CSV as JMeter writes it.

The samples add up to the run's figures (``RunFigures``: hits, errors, average response time, bytes
received and sent, simulated seconds): several transactions of an online shop, each with its own share
of the hits, speed and response size, drawn deterministically (stratified quantiles of a log-normal
distribution, so that every run of a scenario gives the same file). A scenario with a
``slowTransaction`` puts most of its slowdown on that one transaction, so a transaction's budget can
fail while the run's own figures still pass; with a profile's ``transactionNoisePct`` each transaction
also varies from run to run on its own. At most ``MAX_SAMPLES`` samples are written, so that a long
profile stays cheap to serve.

A failed sample says why as JMeter would: each transaction fails its own way (``Transaction.failures``:
a response code, JMeter's response message, an assertion's failure message), the first way twice as
often as the second, so that a failed gate can show each transaction's most frequent messages and codes.
One Login failure echoes a password in a URL, as a careless assertion does: it must be masked where it
is shown.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

from airflow_provider_loadtest.simulator.figures import NOISE_BOUND_SD, SENT_BYTES_PER_HIT, RunFigures

#: A run's JTL files hold at most this many samples in all (the seed's profiles stay under it).
MAX_SAMPLES = 100_000
#: The epoch milliseconds of the first simulated run's first sample; each run starts a day later.
START_MS = 1_767_225_600_000
#: The columns JMeter 5 writes by default, in its order.
COLUMNS = (
    "timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType",
    "success", "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Latency",
    "IdleTime", "Connect",
)  # fmt: skip
#: Log-normal spread of each transaction's times: with the mix of transactions, the run's p95 comes to 1.95
#: times its mean and its median to 0.88, as the run's figures say (``figures._TIME_SHAPE``).
SIGMA = 0.3
#: The share of a run's slowdown carried by its ``slowTransaction`` (a scenario's ``slowShare`` default).
SLOW_SHARE = 0.7
#: A failed sample's responseCode, responseMessage and failureMessage, as JMeter writes them.
Failure = tuple[str, str, str]
_TIMEOUT: Failure = (
    "Non HTTP response code: java.net.SocketTimeoutException",
    "Non HTTP response message: Read timed out",
    "",
)
#: A Response Assertion on the code: JMeter's message spans several lines.
_CODE_200 = (
    "Test failed: code expected to equal /\n\n****** received  : [[[{}]]]\n\n"
    "****** comparison: [[[200]]]\n\n/"
)


@dataclass(frozen=True)
class Transaction:
    label: str
    share: float  # of the hits
    speed: float  # mean response time, relative
    size: float  # mean response size, relative
    sent: int  # bytes sent per request, relative to the run's average
    method: str = "GET"
    #: How its samples fail: the first way twice as often as the second.
    failures: tuple[Failure, Failure] = (("500", "Internal Server Error", ""), _TIMEOUT)


TRANSACTIONS: tuple[Transaction, ...] = (
    Transaction("Home", 0.22, 0.6, 1.6, -60, failures=(("503", "Service Unavailable", ""), _TIMEOUT)),
    Transaction("Search products", 0.18, 1.1, 0.9, 0, failures=(
        _TIMEOUT, ("200", "OK", "Test failed: text expected to contain /results/"))),
    Transaction("Product page", 0.20, 0.9, 1.2, -40, failures=(
        ("404", "Not Found", _CODE_200.format(404)),
        ("500", "Internal Server Error", _CODE_200.format(500)))),
    Transaction("api/items", 0.14, 0.5, 0.4, -120, failures=(
        ("500", "Internal Server Error", ""), ("200", "OK", "No results for path: $['items']"))),
    Transaction("api/cart", 0.10, 0.7, 0.3, 20),
    Transaction("Add to cart", 0.08, 1.2, 0.5, 240, "POST", failures=(
        ("409", "Conflict", "Test failed: text expected to contain /added/"), _TIMEOUT)),
    Transaction("Login", 0.05, 1.3, 0.6, 260, "POST", failures=(
        ("401", "Unauthorized", "Test failed: code expected to equal /200/"),
        ("401", "Unauthorized",
         "Login refused for https://shop.example.test/login?user=demo&password=demo-Secret-1"))),
    Transaction("Checkout", 0.03, 2.4, 0.8, 380, "POST", failures=(
        ("502", "Bad Gateway", "Test failed: text expected to contain /Order confirmed/"), _TIMEOUT)),
)  # fmt: skip


def _split(total: int, weights: list[float]) -> list[int]:
    """``total`` split in proportion to ``weights``, in whole numbers that add up (largest remainder)."""
    exact = [total * w / sum(weights) for w in weights]
    parts = [math.floor(x) for x in exact]
    for i in sorted(range(len(weights)), key=lambda i: parts[i] - exact[i])[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _times(count: int, mean: float) -> list[float]:
    """``count`` response times, log-normal with this ``mean``: its stratified quantiles (the same on
    every call, no random draw)."""
    normal = NormalDist()
    mu = math.log(max(mean, 1.0)) - SIGMA**2 / 2
    return [math.exp(mu + SIGMA * normal.inv_cdf((k + 0.5) / count)) for k in range(count)]


def _scaled(values: list[float], total: int, least: int = 0) -> list[int]:
    """``values`` scaled to whole numbers (at least ``least``) that add up to ``total`` exactly."""
    if not values:
        return []
    factor = total / (sum(values) or 1.0)
    found = [max(least, round(v * factor)) for v in values]
    missing = total - sum(found)  # the rounding's: less than one per value
    step = 1 if missing > 0 else -1
    for j in range(len(found)):
        if missing == 0:
            break
        if found[j] + step >= least:
            found[j] += step
            missing -= step
    return found


def own_noise(noise_pct: float, run_index: int) -> dict[str, float]:
    """Each transaction's own factor in the ``run_index``-th run of a scenario (``transactionNoisePct``):
    ``1 + noise_pct / 100 * z``, ``z`` a standard normal draw seeded by the run index and the label
    (deterministic across processes), bounded to ``NOISE_BOUND_SD``; empty without noise."""
    if not noise_pct:
        return {}
    found = {}
    for t in TRANSACTIONS:
        z = random.Random(f"loadtest-simulator-run-{run_index}-{t.label}").gauss(0.0, 1.0)  # noqa: S311
        found[t.label] = 1 + noise_pct / 100 * max(-NOISE_BOUND_SD, min(NOISE_BOUND_SD, z))
    return found


def means(
    figures: RunFigures,
    slowdown: float,
    slow_transaction: str | None,
    *,
    slow_share: float = SLOW_SHARE,
    own: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each transaction's mean response time: hit-weighted, they average the run's; a slow transaction
    carries ``slow_share`` of what the run's slowdown added; ``own``: each transaction's own noise
    factor (``own_noise``), the others' means making up for it so that the run's average holds."""
    own = own or {}
    weight = sum(t.share * t.speed * own.get(t.label, 1.0) for t in TRANSACTIONS)
    base = figures.avg_response_time_ms / max(slowdown, 1.0)
    found = {t.label: base * t.speed * own.get(t.label, 1.0) / weight for t in TRANSACTIONS}
    slow = next((t for t in TRANSACTIONS if t.label == slow_transaction), None)
    extra = figures.avg_response_time_ms - base
    if slow is None or extra <= 0:
        return {label: mean * figures.avg_response_time_ms / base for label, mean in found.items()}
    others = 1 - slow.share
    for t in TRANSACTIONS:
        if t is slow:
            found[t.label] += slow_share * extra / slow.share
        else:
            found[t.label] += (1 - slow_share) * extra / others
    return found


@dataclass(frozen=True)
class _Samples:
    """A run's samples before they are written: each one's transaction and success, its response time
    (ms), and how the failed ones failed."""

    kinds: list[tuple[Transaction, bool]]
    times: list[int]
    why: dict[int, Failure]


def _samples(
    figures: RunFigures,
    slowdown: float,
    slow_transaction: str | None,
    slow_share: float,
    own: Mapping[str, float] | None,
) -> _Samples:
    hits = min(figures.hits, MAX_SAMPLES)
    errors = round(figures.errors * hits / figures.hits) if figures.hits else 0
    counts = _split(hits, [t.share for t in TRANSACTIONS])
    failing = _split(errors, [float(c) for c in counts]) if hits else [0] * len(counts)
    mean_of = means(figures, slowdown, slow_transaction, slow_share=slow_share, own=own)
    kinds: list[tuple[Transaction, bool]] = []
    raw_times: list[float] = []
    why: dict[int, Failure] = {}  # a failed sample's index: how it failed
    for transaction, count, fails in zip(TRANSACTIONS, counts, failing, strict=True):
        why.update((len(kinds) + k, transaction.failures[k % 3 == 2]) for k in range(fails))
        kinds += [(transaction, k >= fails) for k in range(count)]
        raw_times += _times(count, mean_of[transaction.label]) if count else []
    times = _scaled(raw_times, round(hits * figures.avg_response_time_ms), least=1)
    return _Samples(kinds, times, why)


def times_csv(
    figures: RunFigures,
    *,
    slowdown: float = 1.0,
    slow_transaction: str | None = None,
    slow_share: float = SLOW_SHARE,
    own: Mapping[str, float] | None = None,
) -> str:
    """The run's samples as a JTL of three columns (``label``, ``elapsed``, ``success``): the response
    times ``render`` writes, for a tenth of its cost. What the demo and the tests read to know a
    transaction's figures in runs the simulator never served (a gate's earlier nights)."""
    drawn = _samples(figures, slowdown, slow_transaction, slow_share, own)
    rows = (
        f"{t.label},{elapsed},{'true' if ok else 'false'}\n"
        for (t, ok), elapsed in zip(drawn.kinds, drawn.times, strict=True)
    )
    return "label,elapsed,success\n" + "".join(rows)


def render(
    figures: RunFigures,
    *,
    run_number: int,
    generators: list[str],
    slowdown: float = 1.0,
    slow_transaction: str | None = None,
    slow_share: float = SLOW_SHARE,
    own: Mapping[str, float] | None = None,
) -> dict[str, str]:
    """The JTL text of each load generator (``generators``: their names), the samples dealt in turn.

    Hits and errors add up to the run's; so do, to the unit, the response times (the run's average),
    the bytes received (its response size) and the bytes sent.
    """
    drawn = _samples(figures, slowdown, slow_transaction, slow_share, own)
    kinds, times, why = drawn.kinds, drawn.times, drawn.why
    hits = len(kinds)
    received = _scaled(
        [t.size * (0.85 + 0.3 * ((k * 37) % 100) / 99) for k, (t, _) in enumerate(kinds)],
        math.floor(hits * figures.response_bytes),
    )
    sent = _scaled([float(SENT_BYTES_PER_HIT + t.sent) for t, _ in kinds], hits * SENT_BYTES_PER_HIT)
    order = list(range(hits))
    random.Random(f"{run_number}:{hits}").shuffle(order)  # noqa: S311 - deterministic per run, no secret
    span_ms = max(figures.seconds * 1000, 1.0)
    start = START_MS + 86_400_000 * (run_number - 1)
    users = max(figures.users, 1)
    out = {name: io.StringIO() for name in generators}
    writers = {name: csv.writer(out[name], lineterminator="\n") for name in generators}
    for writer in writers.values():
        writer.writerow(COLUMNS)
    for index, k in enumerate(order):
        transaction, ok = kinds[k]
        generator = generators[index % len(generators)]
        code, message, failure = ("200", "OK", "") if ok else why[k]
        elapsed = times[k]
        writers[generator].writerow(
            (
                start + math.floor(index * span_ms / hits),
                elapsed,
                transaction.label,
                code,
                message,
                f"{generator} Shop users 1-{index % users + 1}",
                "text",
                "true" if ok else "false",
                failure,
                received[k],
                sent[k],
                users,
                users * len(generators),
                f"https://shop.example.test/{transaction.label.lower().replace(' ', '-')}",
                round(elapsed * 0.74),
                0,
                round(elapsed * 0.07) if index % 10 == 0 else 0,
            )
        )
    return {name: text.getvalue() for name, text in out.items()}
