"""Apache Otava's change-point detection as a nightly gate, for ``gate_quality.py``: run by the Python of
``.venv-otava`` (``make otava-venv``), never imported by the package or its tests (Otava pins its own
numpy and scipy).

Reads ``{"jobs": [{"series": [value, ...], "nights": [index, ...]}, ...], "max_regression_pct": B,
"window_len": W, "max_pvalue": P, "tail": T}`` on stdin; for each job and each listed night ``t`` it
analyses the last ``tail`` nights of the series up to ``t`` with ``otava.analysis.compute_change_points``
(the Hunter algorithm: E-Divisive split with a t-test, then merge) and fails the night when a change
point lies in the last three nights and the mean after it is worse (higher) than the mean before by
more than B %. Writes ``{"failed": [[0 or 1 per listed night], ...]}`` on stdout.
"""

from __future__ import annotations

import json
import sys

from otava.analysis import compute_change_points


def failed_nights(
    series: list[float], nights: list[int], bound: float, window_len: int, pvalue: float, tail: int
) -> list[int]:
    flags = []
    for night in nights:
        start = max(0, night + 1 - tail)
        window = series[start : night + 1]
        points, _ = compute_change_points(window, window_len=window_len, max_pvalue=pvalue)
        last = len(window) - 1
        fail = any(
            int(point.index) >= last - 2 and float(point.stats.forward_change_percent()) > bound
            for point in points
        )
        flags.append(int(fail))
    return flags


def main() -> None:
    job = json.load(sys.stdin)
    out = [
        failed_nights(
            one["series"],
            one["nights"],
            job["max_regression_pct"],
            job["window_len"],
            job["max_pvalue"],
            job["tail"],
        )
        for one in job["jobs"]
    ]
    json.dump({"failed": out}, sys.stdout)


if __name__ == "__main__":
    main()
