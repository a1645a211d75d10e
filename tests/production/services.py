"""PostgreSQL and Redis for the rig: the Debian packages' binaries, as throwaway instances we own.

Each instance lives in a temporary directory (data, socket, log), listens on 127.0.0.1 only, on a free
port, and is stopped and removed when the ``with`` block ends; the system's own clusters and services
(``/var/lib/postgresql``, ``redis-server.service``) are never touched. PostgreSQL refuses to run as root:
as root, its commands run as the ``postgres`` user the package created.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from devtools.airflow_cluster import free_port, wait_for

#: The Debian packages the rig needs, and a binary each brings.
DEBIAN_PACKAGES = {"postgresql": "pg_ctl", "redis-server": "redis-server"}


def postgres_bin(tool: str) -> str | None:
    """``tool`` of the newest PostgreSQL the Debian package installed (not on PATH there), or PATH's."""
    found = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"), key=lambda p: int(Path(p).parts[4].split(".")[0])
    )
    return found[-1] if found else shutil.which(tool)


def missing_packages() -> list[str]:
    """The Debian packages whose binaries are not installed."""
    missing = []
    for package, binary in DEBIAN_PACKAGES.items():
        path = postgres_bin(binary) if package == "postgresql" else shutil.which(binary)
        if path is None:
            missing.append(package)
    return missing


def ensure_packages(log: object = print) -> None:
    """Install the missing Debian packages with apt-get (as root, or through ``sudo -n``), saying so first.

    Installing does not start them as services here (the rig starts its own instances); where the
    package's post-install does start the system's default cluster or service, that one is left alone.
    """
    missing = missing_packages()
    if not missing:
        return
    prefix: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            raise RuntimeError(f"missing Debian packages {missing}: install them (apt-get install {missing})")
        prefix = ["sudo", "-n"]
    assert callable(log)
    log(f"Installing Debian packages system-wide with apt-get: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*prefix, "apt-get", "install", "-y", "--no-install-recommends", *missing]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run([*prefix, "apt-get", "update", "-q"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    still = missing_packages()
    if still:
        raise RuntimeError(f"apt-get installed {missing} but these binaries are still missing: {still}")


def _as_postgres(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (PostgreSQL refuses root)."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@dataclass
class Postgres:
    """A throwaway PostgreSQL cluster: ``stop``/``start``/``restart`` make the outages the rig needs."""

    root: Path
    port: int
    password: str

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``airflow`` database (psycopg2; Airflow derives the asyncpg one)."""
        return f"postgresql+psycopg2://airflow:{self.password}@127.0.0.1:{self.port}/airflow"

    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=airflow password={self.password} dbname=airflow"

    def _pg_ctl(self, *args: str, timeout: float = 120) -> None:
        pg_ctl = postgres_bin("pg_ctl")
        assert pg_ctl is not None
        argv = _as_postgres([pg_ctl, "-D", str(self.data), "-l", str(self.root / "postgres.log"), *args])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        self._pg_ctl("start", "-w", "-t", "60")

    def stop(self) -> None:
        """Stop it now (``-m fast``: open connections are cut, as in a crash or failover)."""
        self._pg_ctl("stop", "-w", "-m", "fast", "-t", "60")

    def restart(self) -> None:
        self._pg_ctl("restart", "-w", "-m", "fast", "-t", "60")

    def running(self) -> bool:
        pid_file = self.data / "postmaster.pid"
        return pid_file.exists()


@contextmanager
def postgres() -> Iterator[Postgres]:
    """A new cluster with an ``airflow`` role (password auth) owning an ``airflow`` database."""
    initdb = postgres_bin("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL's initdb is missing: apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="loadtest-prod-pg-"))
    pg = Postgres(root, free_port(), secrets.token_hex(16))
    try:
        if os.geteuid() == 0:
            root.chmod(0o755)
            shutil.chown(root, "postgres")
        pwfile = root / "pwfile"
        pwfile.write_text(pg.password)
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres")
        done = subprocess.run(
            _as_postgres(
                [
                    initdb,
                    "-D",
                    str(pg.data),
                    "-U",
                    "airflow",
                    "--pwfile",
                    str(pwfile),
                    "--auth",
                    "scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        pwfile.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(pg.port),
            "unix_socket_directories": f"'{pg.data}'",
            "max_connections": "300",
            "fsync": "off",  # a throwaway cluster: durability buys nothing here
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        with (pg.data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{k} = {v}\n" for k, v in settings.items()))
        pg.start()
        createdb = postgres_bin("createdb")
        assert createdb is not None
        subprocess.run(
            [createdb, "-h", "127.0.0.1", "-p", str(pg.port), "-U", "airflow", "-O", "airflow", "airflow"],
            env={**os.environ, "PGPASSWORD": pg.password},
            capture_output=True,
            check=True,
            timeout=60,
        )
        yield pg
    finally:
        if pg.running():
            with suppress(RuntimeError):
                pg.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Redis:
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextmanager
def redis() -> Iterator[Redis]:
    """A Redis server on 127.0.0.1 that persists nothing (the Celery broker), stopped at the end."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is missing: apt-get install redis-server")
    root = Path(tempfile.mkdtemp(prefix="loadtest-prod-redis-"))
    instance = Redis(free_port())
    log = (root / "redis.log").open("ab")
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(instance.port),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(root),
            "--daemonize",
            "no",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for("redis to listen", lambda: _answers_ping(instance.port) or proc.poll() is not None, 30, 0.2)
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited: {(root / 'redis.log').read_text()[-2000:]}")
        yield instance
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _answers_ping(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def wait_until_accepting(pg: Postgres, timeout: float = 60) -> None:
    """Block until the cluster accepts connections (after a start)."""
    import psycopg2

    def ok() -> bool:
        try:
            psycopg2.connect(pg.dsn(), connect_timeout=2).close()
        except psycopg2.OperationalError:
            return False
        return True

    wait_for("PostgreSQL to accept connections", ok, timeout, 0.5)
