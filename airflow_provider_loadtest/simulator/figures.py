"""The figures of a simulated run: headline metrics that add up, and the summary values of every metric id.

One computation feeds the live headline metrics (``/analysis/metrics/global``), the summary values
(``/analysis/metrics/summary``), the PDF and the web page, so they can never disagree: the hit count is an
integer, the hit rate is hits over the simulated seconds elapsed, errors are a share of hits, and a
finished run's summary repeats its final headline figures. Values are deterministic per scenario (its
:class:`MetricProfile`), per metric id and per run of the scenario: a profile with ``noisePct`` varies
from run to run as load tests of one build do (response times a few percent up or down, the same for
the n-th run of every such scenario, so a test or the demo can count on them), and a scenario with
``slowdownPerRun`` gets that much slower at each run besides, to show a regression.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from airflow_provider_loadtest.models.enums import MetricId
from airflow_provider_loadtest.simulator.seed import MetricProfile

#: Bytes sent per request (headers and a small body), for the SENT_BYTES_* metrics.
SENT_BYTES_PER_HIT = 640
#: Response-time distribution as multiples of the average (a right-skewed, realistic shape).
_TIME_SHAPE: dict[str, float] = {
    "MIN": 0.18,
    "MEDIAN": 0.86,
    "PERCENTILE_80": 1.32,
    "PERCENTILE_90": 1.64,
    "PERCENTILE_95": 1.95,
    "PERCENTILE_99": 2.7,
    "MAX": 6.4,
    "STD": 0.52,
}
#: Parts of the response time: the connect, latency (time to first byte) and network shares.
_TIME_PARTS: dict[str, float] = {
    "RESPONSE_TIME": 1.0,
    "LATENCY": 0.74,
    "CONNECT_TIME": 0.07,
    "NETWORK_TIME": 0.12,
}
#: Apdex thresholds (ms) used for the *_APDEX metrics.
APDEX_SATISFIED_MS = 500.0
#: How much faster a run that applies none of its users would answer (times scale by
#: ``1 - LIGHT_SPEEDUP * (1 - applied share)``): 0.5 makes a run of a fifth of its users 40 % faster.
LIGHT_SPEEDUP = 0.5
#: A run's noise is drawn within this many standard deviations: noise, never an outlier night.
NOISE_BOUND_SD = 3.0


def run_noise(noise_pct: float, run_index: int) -> float:
    """How much slower (above 1) or faster than its profile the ``run_index``-th run of a scenario is:
    ``1 + noise_pct / 100 * z``, with ``z`` a standard normal draw seeded by the run index alone
    (deterministic across processes and Python versions), bounded to :data:`NOISE_BOUND_SD`."""
    if not noise_pct:
        return 1.0
    z = random.Random(f"loadtest-simulator-run-{run_index}").gauss(0.0, 1.0)  # noqa: S311 - simulated noise
    return 1 + noise_pct / 100 * max(-NOISE_BOUND_SD, min(NOISE_BOUND_SD, z))


@dataclass(frozen=True)
class RunFigures:
    """What a run measured up to now (``seconds`` of simulated load)."""

    seconds: float
    hits: int
    errors: int
    avg_response_time_ms: float
    response_bytes: float
    users: int
    agents: int

    @classmethod
    def of(
        cls,
        profile: MetricProfile,
        progress_percent: float,
        slowdown: float,
        agents: int,
        run_index: int = 1,
        applied: float = 1.0,
        busy: float = 0.0,
    ) -> RunFigures:
        """The figures of the ``run_index``-th run of a scenario (1: the first since the last reset)
        once ``progress_percent`` of it ran, ``slowdown`` times slower than its profile besides its noise.
        ``applied``: the share of its users the run applied (hits in proportion; response times
        ``LIGHT_SPEEDUP`` of the way to half as long at no load: a lightly loaded system answers faster).
        ``busy``: a busy night's share of slower times (0.12: every transaction 12 % slower together)."""
        seconds = profile.simulated_seconds * progress_percent / 100
        hits = math.floor(profile.hits_per_second * applied * seconds)
        noise = run_noise(profile.noise_pct, run_index)
        lighter = 1 - LIGHT_SPEEDUP * (1 - applied)
        return cls(
            seconds=seconds,
            hits=hits,
            errors=math.floor(hits * profile.error_rate),
            avg_response_time_ms=round(
                profile.avg_response_time_ms * slowdown * noise * lighter * (1 + busy), 1
            ),
            response_bytes=profile.response_kb * 1024,
            users=round(profile.users * applied),
            agents=agents,
        )

    def rate(self, total: float) -> float:
        """``total`` per second of load, 0 before any load."""
        return round(total / self.seconds, 3) if self.seconds > 0 else 0.0

    def headline(self, wobble: float = 1.0) -> list[tuple[str, float | int, str]]:
        """The live headline metrics (name, value, unit); ``wobble`` varies the average while it runs."""
        return [
            ("Hits", self.hits, "hits"),
            ("Errors", self.errors, "errors"),
            ("Average response time", round(self.avg_response_time_ms * wobble, 1), "ms"),
            ("Hit rate", self.rate(self.hits), "hits/s"),
            ("Throughput", round(self.rate(self.hits * self.response_bytes) / 1024**2, 3), "MB/s"),
        ]

    def summary_value(self, metric_id: MetricId) -> float | int:
        """The value of one metric id (spec 2.5) over the whole run."""
        name = metric_id.value
        for part, share in _TIME_PARTS.items():
            if name.startswith(part + "_"):
                return self._time_value(name[len(part) + 1 :], self.avg_response_time_ms * share)
        successes = self.hits - self.errors
        counts: dict[str, float | int] = {
            "HITS_TOTAL": self.hits,
            "HITS_RATE": self.rate(self.hits),
            "HITS_SUCCESSFUL_TOTAL": successes,
            "HITS_SUCCESSFUL_PERCENT": round(100 * successes / self.hits, 3) if self.hits else 0.0,
            "ERRORS_TOTAL": self.errors,
            "ERRORS_RATE": self.rate(self.errors),
            "ERRORS_PERCENT": round(100 * self.errors / self.hits, 3) if self.hits else 0.0,
            "ASSERTIONS_SUCCESS_TOTAL": successes,
            "ASSERTIONS_FAILURE_TOTAL": self.errors,
            "ASSERTIONS_ERROR_TOTAL": 0,
            "THROUGHPUT_TOTAL": math.floor(self.hits * self.response_bytes),
            "THROUGHPUT_RATE": self.rate(self.hits * self.response_bytes),
            "RESPONSE_SIZE": round(self.response_bytes, 1),
            "SENT_BYTES_TOTAL": self.hits * SENT_BYTES_PER_HIT,
            "SENT_BYTES_RATE": self.rate(self.hits * SENT_BYTES_PER_HIT),
            "SENT_BYTES_AVG": SENT_BYTES_PER_HIT,
            "SENT_BYTES_MIN": SENT_BYTES_PER_HIT - 120,
            "SENT_BYTES_MAX": SENT_BYTES_PER_HIT + 480,
            "SENT_BYTES_STD": 64.0,
            "USERLOAD": self.users,
            "LOAD_GENERATOR": self.agents,
            "MONITORING": 0,
            # Breakdowns (methods, codes, media types) summarised as the number of hits they classify.
            "HTTP_METHODS": self.hits,
            "HTTP_RESPONSE_CODES": self.hits,
            "HTTP_MEDIA_TYPES": self.hits,
            "HTTP_MEDIA_TYPES_THROUGHPUT": self.rate(self.hits * self.response_bytes),
        }
        return counts[name]

    def _time_value(self, statistic: str, average: float) -> float:
        if statistic == "AVG":
            return round(average, 1)
        if statistic == "VAR":
            return round((average * _TIME_SHAPE["STD"]) ** 2, 1)
        if statistic == "APDEX":
            # Satisfied below T, tolerating below 4T: an average well under T scores close to 1.
            return round(max(0.0, min(1.0, 1.0 - average / (8 * APDEX_SATISFIED_MS))), 3)
        return round(average * _TIME_SHAPE[statistic], 1)
