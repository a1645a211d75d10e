"""The rig as one call: the services, the simulator, the cluster, the attacks, the results.

``python -m tests.production`` (``make test-prod``) and the CI slice (``test_production_slice.py``)
both go through ``production_rig`` and ``run_attacks``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

from airflow_provider_loadtest.simulator import run_simulator
from tests.chaos.runner import default_seed
from tests.load import cpu_hog
from tests.production import services
from tests.production.attacks import Attack, TiResult, run_round, seed_scenarios
from tests.production.cluster import TRIGGERERS, ProdCluster
from tests.production.hostname import HOLD_LINE, SLOW_STATE_ENV

#: What the ``prod`` dependency group brings (``make test-prod`` installs it; ``make venv`` removes it).
#: How long a triggerer's task-instance state read takes in a loaded rig, in seconds (uniform).
SLOW_STATE_S = (6.0, 20.0)
PROD_MODULES = ("airflow.providers.celery", "celery", "asyncpg", "psycopg2", "redis")


def missing_prerequisites() -> str | None:
    """Why the rig cannot run here, or ``None``."""
    absent = [m for m in PROD_MODULES if importlib.util.find_spec(m.split(".")[0]) is None]
    if not absent and importlib.util.find_spec("airflow.providers.celery") is None:
        absent = ["apache-airflow-providers-celery"]
    if absent:
        return f"the prod dependency group is not installed ({', '.join(absent)}): run make test-prod"
    packages = services.missing_packages()
    if packages:
        return f"Debian packages {', '.join(packages)} are missing: make test-prod installs them"
    return None


@contextmanager
def production_rig(
    attacks: Sequence[Attack],
    repeat: int,
    log: Callable[[str], None],
    keep: bool = False,
    *,
    loaded: bool = False,
) -> Iterator[ProdCluster]:
    """PostgreSQL, Redis, the simulator (one scenario per planned task instance) and the cluster.

    ``loaded`` (issue 34): the machine's cores busy (``tests.load.cpu_hog``, one busy process per core,
    from before Airflow boots to the end) and the triggerers' task-instance state reads answered after
    a random ``SLOW_STATE_S`` (``tests.production.hostname``), as a production API server under load.
    """
    seed = default_seed()
    seed["scenarios"] += seed_scenarios(attacks, repeat)
    home = Path(tempfile.mkdtemp(prefix="loadtest-prod-home-"))
    cluster: ProdCluster | None = None
    failed = True
    try:
        with (
            services.postgres() as pg,
            services.redis() as broker,
            run_simulator(seed) as sim,
            cpu_hog() if loaded else nullcontext([]) as hogs,
        ):
            log(f"PostgreSQL on 127.0.0.1:{pg.port}, Redis on 127.0.0.1:{broker.port}, simulator {sim.url}")
            cluster = ProdCluster(home, sim, pg, broker)
            if loaded:
                slow = f"{SLOW_STATE_S[0]:g},{SLOW_STATE_S[1]:g}"
                for name in TRIGGERERS:
                    cluster.component_env[name] = {SLOW_STATE_ENV: slow}
                log(
                    f"Loaded: {len(hogs)} busy processes (pids {', '.join(map(str, hogs))}) on "
                    f"{os.cpu_count()} cores; the triggerers' task-instance state reads take "
                    f"{SLOW_STATE_S[0]:g}-{SLOW_STATE_S[1]:g} s"
                )
            try:
                cluster.boot()
                log(
                    f"Airflow up (home {home}): API server, scheduler, DAG processor, 2 triggerers, 2 workers"
                )
                yield cluster
                failed = False
            finally:
                if loaded:
                    log(held_state_reads(home))
                cluster.close()
    finally:
        if keep or failed or (cluster is not None and cluster.keep_home):
            log(f"Kept the Airflow home with every log: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


def held_state_reads(home: Path) -> str:
    """What the slowed triggerers held, from their logs."""
    held = []
    for name in TRIGGERERS:
        log = home / f"{name}.log"
        if log.exists():
            text = log.read_text(errors="replace")
            held += [float(m) for m in re.findall(re.escape(HOLD_LINE) + r" ([0-9.]+) s", text)]
    if not held:
        return "The triggerers held no task-instance state read"
    return f"The triggerers held {len(held)} task-instance state read(s): {min(held):.1f}-{max(held):.1f} s"


def run_attacks(
    cluster: ProdCluster, attacks: Sequence[Attack], repeat: int, log: Callable[[str], None]
) -> list[TiResult]:
    results: list[TiResult] = []
    for attack in attacks:
        for number in range(1, repeat + 1):
            rnd = attack.plan(number)
            got = run_round(cluster, rnd, log)
            results += got
            for r in got:
                status = "ok" if not r.broken else "BROKEN: " + "; ".join(r.broken)
                log(
                    f"    {r.run_id}: {r.state} try {r.tries}, starts {r.starts}, stopped {r.stopped}, "
                    f"stop calls {r.stop_calls}, verdict +{r.verdict_s or 0:.0f} s"
                    + (f", run stopped +{r.stopped_s:.1f} s" if r.stopped_s is not None else "")
                    + f"{' (victim)' if r.victim else ''}: {status}"
                )
    return results
