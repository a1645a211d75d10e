"""Triggerer scale: many deferred run-waits in one asyncio loop, as Airflow's triggerer runs them.

For each number of waits, a fresh process runs that many real ``LoadTestRunTrigger.run()`` generators
against simulators in other processes (runs that last an hour, so every wait keeps polling), and
reports, once every wait has polled: the CPU the process used as a share of one core (what a
deployment feels: the budget is 1,000 waits at a 10 s interval), CPU per poll, resident memory per
wait, sockets per wait, and poll lateness (how late a poll wakes after its pause, p50/p99). Beside it,
in the same run and interleaved size by size, the pattern many providers use (a new HTTP client for
every poll) and, with ``--before PATH``, the same trigger from another checkout of this repository
(``git worktree add /tmp/before <commit>``): the figures before and after a change, in one run.

The CPU is all the CPU of the measuring process (event loop, GC, every layer) over the measured
window. The simulators' own CPU is shown too (busy simulators would make polls late and flatter the
CPU figure): add ``--simulators`` when it nears 100 %. ``--json`` writes one object per measured row
(the keys of the table, plus ``simulators``, ``interval_s``, ``sim_cpu_pct``, ``load_1m``).

    .venv/bin/python benchmarks/triggerer_scale.py [--waits 100 1000 2000] [--interval 10]
        [--simulators 2] [--before /tmp/before] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import open_sockets, percentile, rss_kib, simulators, table

OURS = "ours: LoadTestRunTrigger"
BEFORE = "before: LoadTestRunTrigger at "
BASELINE = "baseline: a new client per poll"


def start_runs(urls_keys: list[tuple[str, str]], count: int) -> list[tuple[int, str]]:
    """Start ``count`` runs spread over the simulators; ``(simulator index, bench result id)``."""
    runs = []
    sessions = [requests.Session() for _ in urls_keys]
    for i in range(count):
        index = i % len(urls_keys)
        url, key = urls_keys[index]
        answer = sessions[index].post(
            f"{url}/runtime/scenarios/run/demo-scenario",
            headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
            timeout=30,
        )
        answer.raise_for_status()
        runs.append((index, answer.json()["benchResultIds"][0]))
    return runs


# --- the child process: one variant, one size ---------------------------------------------------


async def _child(spec: dict[str, Any]) -> dict[str, Any]:  # noqa: PLR0915 (one measurement, read top to bottom)
    import httpx

    if spec.get("package_root"):  # the "before" variant: the package of another checkout
        sys.path.insert(0, spec["package_root"])

    from airflow_provider_loadtest.hooks import async_client
    from airflow_provider_loadtest.hooks.settings import ConnectionSettings
    from airflow_provider_loadtest.triggers.run import LoadTestRunTrigger

    loop = asyncio.get_running_loop()
    interval = float(spec["interval"])
    sims: list[tuple[str, str]] = spec["simulators"]
    late: list[float] = []
    polls = [0]
    ended: list[str] = []  # waits that ended (they should not: the runs last an hour)

    async def timed_sleep(seconds: float) -> None:
        due = loop.time() + seconds
        await asyncio.sleep(seconds)
        late.append(max(0.0, loop.time() - due))
        polls[0] += 1

    settings = {
        f"sim{i}": ConnectionSettings(base_url=url, api_key=key, ui_url=url + "/ui")
        for i, (url, key) in enumerate(sims)
    }

    async def settings_for(conn_id: str) -> ConnectionSettings:
        return settings[conn_id]

    async_client.settings_for = settings_for  # type: ignore[assignment]
    async_client._sleep = timed_sleep  # type: ignore[assignment]

    def ours(index: int, bench_result_id: str) -> Any:
        trigger = LoadTestRunTrigger(
            loadtest_conn_id=f"sim{index}",
            run_record={"bench_result_id": bench_result_id},
            options={"check_interval_s": interval, "log_every_s": 3600.0},
            started_at=time.time(),
        )

        async def consume() -> None:
            async for event in trigger.run():
                ended.append(str(event.payload.get("message") or event.payload.get("status")))
                return

        return consume()

    async def client_per_poll(index: int, bench_result_id: str) -> None:
        url, key = sims[index]
        while True:
            async with httpx.AsyncClient(
                headers={"Authorization": f"Bearer {key}", "Accept": "application/json"}
            ) as client:
                answer = await client.get(f"{url}/runtime/bench-results/{bench_result_id}")
                answer.json()
            await timed_sleep(interval)

    make = client_per_poll if spec["variant"] == BASELINE else ours
    if make is ours:
        # Warm up the imports (client, models) with one call: a wait's first poll may come only
        # after its share of the interval (``first_poll_delay``), too late for the warm-up below.
        from airflow_provider_loadtest.api import endpoints

        index, bench_result_id = spec["runs"][0]
        async with async_client.AsyncLoadTestClient(settings[f"sim{index}"]) as client:
            await client.call(endpoints.get_bench_result(bench_result_id))
    # Warm up imports and the first connection on a wait that is not counted.
    warm = asyncio.ensure_future(make(*spec["runs"][0]))
    await asyncio.sleep(min(1.0, interval))
    warm.cancel()
    await asyncio.gather(warm, return_exceptions=True)
    late.clear()
    polls[0] = 0

    rss_before, sockets_before = rss_kib(), open_sockets()
    tasks = [asyncio.ensure_future(make(index, bid)) for index, bid in spec["runs"][1:]]
    await asyncio.sleep(2 * interval)  # every wait has polled at least once
    late.clear()
    polls_before, cpu_before, wall_before = polls[0], time.process_time(), time.perf_counter()
    await asyncio.sleep(2 * interval)
    cpu = time.process_time() - cpu_before
    polls_made = polls[0] - polls_before
    wall = time.perf_counter() - wall_before
    rss_after, sockets_after = rss_kib(), open_sockets()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    waits = len(spec["runs"]) - 1
    expected = waits * wall / interval
    import airflow_provider_loadtest

    return {
        "waits": waits,
        "package": str(Path(airflow_provider_loadtest.__file__).parents[1]),
        "cpu_core_pct": 100.0 * cpu / wall,
        "rss_per_wait_kib": (rss_after - rss_before) / waits,
        "sockets_per_wait": (sockets_after - sockets_before) / waits,
        "cpu_per_poll_ms": 1000.0 * cpu / polls_made if polls_made else float("nan"),
        "polls_made_pct": 100.0 * polls_made / expected if expected else float("nan"),
        "late_p50_s": percentile(late, 50),
        "late_p99_s": percentile(late, 99),
        "ended": len(ended),
        "first_end": ended[0] if ended else None,
    }


def _commit(checkout: Path) -> str:
    """The short commit of a checkout, to name its variant."""
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far (Linux)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(spec: dict[str, Any], sim_pids: list[int]) -> dict[str, Any]:
    """One variant at one size in a fresh process; with the busiest simulator's CPU over that time."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(spec, handle)
    sims_before, wall_before = [cpu_seconds(pid) for pid in sim_pids], time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--child", handle.name],
        check=True,
        capture_output=True,
        text=True,
        timeout=30 * float(spec["interval"]) + 300,
    ).stdout
    wall = time.perf_counter() - wall_before
    Path(handle.name).unlink()
    figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    busiest = max(cpu_seconds(pid) - before for pid, before in zip(sim_pids, sims_before, strict=True))
    figures["sim_cpu_pct"] = 100.0 * busiest / wall
    figures["load_1m"] = os.getloadavg()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--waits", type=int, nargs="+", default=[100, 1000, 2000])
    parser.add_argument("--interval", type=float, default=10.0, help="check_interval of every wait (s)")
    parser.add_argument("--simulators", type=int, default=2)
    parser.add_argument("--baseline-max", type=int, default=1000, help="skip the baseline above this")
    parser.add_argument(
        "--before", type=Path, help="also measure the trigger of this checkout (another commit's worktree)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(json.loads(args.child.read_text())))))
        return
    results: list[dict[str, Any]] = []
    with simulators(args.simulators) as sims:
        urls_keys = [(s.url, s.api_key) for s in sims]
        sim_pids = [s.process.pid for s in sims]
        runs = start_runs(urls_keys, max(args.waits) + 1)
        variants: list[tuple[str, str | None]] = [(OURS, None)]
        if args.before:
            variants.append((BEFORE + _commit(args.before), str(args.before.resolve())))
        variants.append((BASELINE, None))
        for waits in args.waits:
            for variant, package_root in variants:
                if variant == BASELINE and waits > args.baseline_max:
                    continue
                spec = {
                    "variant": variant,
                    "package_root": package_root,
                    "interval": args.interval,
                    "simulators": urls_keys,
                    "runs": runs[: waits + 1],
                }
                figures = run_child(spec, sim_pids)
                figures.update(variant=variant, simulators=args.simulators, interval_s=args.interval)
                results.append(figures)
                print(f"  measured {variant} x {waits}", file=sys.stderr, flush=True)
    rows = [
        [
            r["variant"],
            str(r["waits"]),
            f"{r['cpu_core_pct']:.1f} %",
            f"{r['cpu_per_poll_ms']:.3f}",
            f"{r['rss_per_wait_kib']:.1f}",
            f"{r['sockets_per_wait']:.2f}",
            f"{r['polls_made_pct']:.0f} %",
            f"{r['late_p50_s']:.3f}",
            f"{r['late_p99_s']:.3f}",
            f"{r['sim_cpu_pct']:.0f} %",
        ]
        for r in results
    ]
    print(
        f"Deferred run-waits in one event loop, check_interval {args.interval:g} s, "
        f"{args.simulators} simulator process(es):"
    )
    print(
        table(
            rows,
            [
                "variant",
                "waits",
                "CPU % of one core",
                "CPU ms/poll",
                "RSS KiB/wait",
                "sockets/wait",
                "polls made",
                "late p50 s",
                "late p99 s",
                "busiest simulator CPU",
            ],
        )
    )
    if any(r["sim_cpu_pct"] > 80 for r in results):
        print(
            "A simulator was busy for most of a measurement: it may be the bottleneck "
            "(run again with more --simulators)."
        )
    print(f"Machine load (1 min) at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs.")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
