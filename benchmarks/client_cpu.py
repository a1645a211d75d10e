"""Client CPU per call: ``LoadTestHook`` beside a bare ``requests.Session`` and Airflow's ``HttpHook.run``.

The simulator answers in another process, so the CPU time of this process is what a worker pays per
call: building the request, sending it, reading and decoding the answer. For each call the watch loop
makes, and for ``list_templates``, rounds of calls are timed with ``time.process_time``, the variants
interleaved round by round; the figure is our median over the bare session's median (1.0 = free).
The bare session is the budget's baseline; a second one, a session with ``trust_env=False`` (no
environment scan per call, as our hook's), shows what our own code costs on top of the transport.
``HttpHook`` (apache-airflow-providers-http) is measured when installed (``make bench`` installs it in
the benchmark environment only: the package does not depend on it).

    .venv/bin/python benchmarks/client_cpu.py [--rounds 15] [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import connection_env, simulators, spread, table

WORKSPACE = "demo-workspace"
BARE = "bare requests.Session + json.loads"
LEAN = "bare Session, trust_env=False"


def calls(url: str, key: str, bench_result_id: str) -> dict[str, dict[str, Callable[[], Any]]]:
    """For each API call: the variants that make it (each returns the decoded answer)."""
    import requests

    from airflow_provider_loadtest.api import endpoints
    from airflow_provider_loadtest.hooks.loadtest import LoadTestHook

    hook = LoadTestHook()
    bare = requests.Session()
    bare.headers.update({"Authorization": f"Bearer {key}", "Accept": "application/json"})
    # The cheapest a requests session gets: no environment scan per call (what our hook does too).
    lean = requests.Session()
    lean.trust_env = False
    lean.headers.update(bare.headers)
    alarms_body = endpoints.get_threshold_alarms(bench_result_id).json_body
    # (the call, its path, method and JSON body, and our hook's method making it)
    made: list[tuple[str, str, str, Any, Callable[[], Any]]] = [
        (
            "get_bench_result",
            f"/runtime/bench-results/{bench_result_id}",
            "GET",
            None,
            lambda: hook.get_bench_result(bench_result_id),
        ),
        (
            "get_progress",
            f"/runtime/bench-results/progress/{bench_result_id}",
            "GET",
            None,
            lambda: hook.get_progress(bench_result_id),
        ),
        (
            "get_global_metrics",
            f"/analysis/metrics/global/{bench_result_id}",
            "GET",
            None,
            lambda: hook.get_global_metrics(bench_result_id),
        ),
        (
            "get_threshold_alarms",
            "/analysis/threshold-alarms",
            "POST",
            alarms_body,
            lambda: hook.get_threshold_alarms(bench_result_id),
        ),
        (
            "list_templates",
            f"/analysis/bench-report-templates/by-workspace/{WORKSPACE}",
            "GET",
            None,
            lambda: hook.list_templates(WORKSPACE),
        ),
    ]
    http_hooks = {method: _http_hook(method) for method in ("GET", "POST")}
    table_: dict[str, dict[str, Callable[[], Any]]] = {}
    for name, path, method, body, ours in made:
        variants: dict[str, Callable[[], Any]] = {
            BARE: lambda p=path, m=method, b=body: json.loads(bare.request(m, url + p, json=b).content),
            LEAN: lambda p=path, m=method, b=body: json.loads(lean.request(m, url + p, json=b).content),
            "ours: LoadTestHook": ours,
        }
        http_hook = http_hooks[method]
        if http_hook is not None:
            variants["HttpHook.run + .json()"] = lambda h=http_hook, p=path, b=body: h.run(p, json=b).json()
        table_[name] = variants
    return table_


def _http_hook(method: str) -> Any:
    try:
        from airflow.providers.http.hooks.http import HttpHook
    except ImportError:
        print("(apache-airflow-providers-http is not installed: HttpHook not measured)", file=sys.stderr)
        return None
    return HttpHook(method=method, http_conn_id="bench_http")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="calls per round and variant")
    args = parser.parse_args()
    with simulators(1) as (sim,):
        os.environ.update(connection_env(sim))
        host = sim.url.split("://", 1)[1]
        os.environ["AIRFLOW_CONN_BENCH_HTTP"] = json.dumps(
            {
                "conn_type": "http",
                "host": host.split(":")[0],
                "port": int(host.split(":")[1]),
                "schema": "http",
                "extra": {"Authorization": f"Bearer {sim.api_key}", "Accept": "application/json"},
            }
        )
        import requests

        started = requests.post(
            f"{sim.url}/runtime/scenarios/run/demo-scenario",
            headers={"Authorization": f"Bearer {sim.api_key}", "Accept": "application/json"},
            timeout=30,
        ).json()
        per_call = calls(sim.url, sim.api_key, started["benchResultIds"][0])
        samples: dict[tuple[str, str], list[float]] = {}
        for variants in per_call.values():  # warm-up: connections, imports, caches
            for fn in variants.values():
                for _ in range(5):
                    fn()
        for _ in range(args.rounds):
            for name, variants in per_call.items():
                for variant, fn in variants.items():
                    begin = time.process_time()
                    for _ in range(args.calls):
                        fn()
                    cost = (time.process_time() - begin) / args.calls * 1e6
                    samples.setdefault((name, variant), []).append(cost)
    rows = []
    for name, variants in per_call.items():
        bare = statistics.median(samples[(name, BARE)])
        for variant in variants:
            values = samples[(name, variant)]
            rows.append([name, variant, spread(values), f"{statistics.median(values) / bare:.2f}x"])
    print(f"CPU per call in this process, microseconds, median [min-max] of {args.rounds} rounds:")
    print(table(rows, ["call", "variant", "CPU us/call", "vs bare session"]))


if __name__ == "__main__":
    main()
