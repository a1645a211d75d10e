"""``python -m airflow_provider_loadtest.simulator``: serve the simulator until SIGTERM or SIGINT.

Prints two lines a shell script can read (flushed at once), then the Airflow connection to paste into
the shell that runs Airflow::

    LOADTEST_SIMULATOR_URL=http://127.0.0.1:PORT
    LOADTEST_SIMULATOR_API_KEY=sim-api-key
    export AIRFLOW_CONN_LOADTEST_DEFAULT='loadtest://:sim-api-key@127.0.0.1:PORT/http'

The URI's path is the connection's schema: ``/http`` because the simulator speaks plain http (a URI
without it means https, and the connection test would fail the TLS handshake).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from urllib.parse import quote, urlsplit

from airflow_provider_loadtest.simulator.server import check_host, run_simulator


def connection_uri(url: str, api_key: str) -> str:
    """The ``loadtest://`` URI of a connection to the simulator at ``url`` (``http://host:port``): the
    key URL-encoded, the scheme in the URI's path (the connection's schema field)."""
    parts = urlsplit(url)
    return f"loadtest://:{quote(api_key, safe='')}@{parts.netloc}/{parts.scheme}"


def banner(url: str, api_key: str) -> list[str]:
    """What the CLI prints once it listens: two lines for scripts, then the connection to paste."""
    return [
        f"LOADTEST_SIMULATOR_URL={url}",
        f"LOADTEST_SIMULATOR_API_KEY={api_key}",
        "# the connection, for the shell that runs Airflow:",
        f"export AIRFLOW_CONN_LOADTEST_DEFAULT='{connection_uri(url, api_key)}'",
    ]


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
            for line in banner(sim.url, sim.api_key):
                print(line, flush=True)
            while not stop.wait(0.5):
                pass
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
