"""``python -m airflow_provider_loadtest.simulator``: serve the simulator until SIGTERM or SIGINT.

Prints two lines a shell script can read (flushed at once)::

    LOADTEST_SIMULATOR_URL=http://127.0.0.1:PORT
    LOADTEST_SIMULATOR_API_KEY=sim-api-key
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from airflow_provider_loadtest.simulator.server import check_host, run_simulator


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m airflow_provider_loadtest.simulator",
        description="Serve a local simulator of the load-testing service's REST API.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only by default)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument(
        "--seed", metavar="FILE", help="JSON seed file (default: the one shipped with the package)"
    )
    parser.add_argument("--run-seconds", type=float, help="duration of every run, overriding the seed")
    parser.add_argument(
        "--allow-non-loopback", action="store_true", help="allow binding a non-loopback address"
    )
    parser.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        check_host(args.host, args.allow_non_loopback)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        with run_simulator(
            seed=args.seed,
            run_seconds=args.run_seconds,
            host=args.host,
            port=args.port,
            allow_non_loopback=args.allow_non_loopback,
            log_level=args.log_level,
        ) as sim:
            print(f"LOADTEST_SIMULATOR_URL={sim.url}", flush=True)
            print(f"LOADTEST_SIMULATOR_API_KEY={sim.api_key}", flush=True)
            while not stop.wait(0.5):
                pass
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
