"""The rig as one call: the services, the simulator, the cluster, the attacks, the results.

``python -m tests.production`` (``make test-prod``) and the CI slice (``test_production_slice.py``)
both go through ``production_rig`` and ``run_attacks``.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from airflow_provider_loadtest.simulator import run_simulator
from tests.chaos.runner import default_seed
from tests.production import services
from tests.production.attacks import Attack, TiResult, run_round, seed_scenarios
from tests.production.cluster import ProdCluster

#: What the ``prod`` dependency group brings (``make test-prod`` installs it; ``make venv`` removes it).
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
    attacks: Sequence[Attack], repeat: int, log: Callable[[str], None], keep: bool = False
) -> Iterator[ProdCluster]:
    """PostgreSQL, Redis, the simulator (one scenario per planned task instance) and the cluster."""
    seed = default_seed()
    seed["scenarios"] += seed_scenarios(attacks, repeat)
    home = Path(tempfile.mkdtemp(prefix="loadtest-prod-home-"))
    cluster: ProdCluster | None = None
    failed = True
    try:
        with services.postgres() as pg, services.redis() as broker, run_simulator(seed) as sim:
            log(f"PostgreSQL on 127.0.0.1:{pg.port}, Redis on 127.0.0.1:{broker.port}, simulator {sim.url}")
            cluster = ProdCluster(home, sim, pg, broker)
            try:
                cluster.boot()
                log(
                    f"Airflow up (home {home}): API server, scheduler, DAG processor, 2 triggerers, 2 workers"
                )
                yield cluster
                failed = False
            finally:
                cluster.close()
    finally:
        if keep or failed or (cluster is not None and cluster.keep_home):
            log(f"Kept the Airflow home with every log: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


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
                    f"{' (victim)' if r.victim else ''}: {status}"
                )
    return results
