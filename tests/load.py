"""A loaded machine, for the tests that must hold on one (issue 34).

``cpu_hog``: busy processes beside the test, one per core, each bounded in time (it exits by itself at
its deadline even if the test process dies) and stopped by the test when it ends. A slow control plane
is the production rig's (``tests.production.hostname``: the triggerers' state reads held 6-20 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: Every busy process exits by itself this long after it started, whatever happens to the test.
HOG_MAX_S = 1800.0

_HOG = (
    "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
)


@contextmanager
def cpu_hog(processes: int | None = None, seconds: float = HOG_MAX_S) -> Iterator[list[int]]:
    """``processes`` busy Python processes (default: one per core) for at most ``seconds``; their pids."""
    count = processes if processes is not None else max(1, os.cpu_count() or 1)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _HOG, str(min(seconds, HOG_MAX_S))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
