"""Airflow's components (API server, scheduler, triggerers, workers...) as separate processes of one home.

Shared by the crash tests (``tests/integration/test_crash.py``: SQLite, LocalExecutor) and the
production-like rig (``tests/production``: PostgreSQL, Celery): each component runs in its own process
group, as a service manager would run it, so a test can signal, stop or restart it exactly as an operator
(or an outage) would. Whatever this starts, ``stop_all`` stops.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

from devtools.local_airflow import AIRFLOW

#: Environment variables a cluster never inherits from the shell that starts it: its own settings,
#: connections and variables only.
FOREIGN_PREFIXES = ("AIRFLOW_CONN_", "AIRFLOW__", "AIRFLOW_VAR_")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    """``check()``'s first truthy value, polled every ``every`` s; ``AssertionError`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def clean_environ(prefixes: Iterable[str] = FOREIGN_PREFIXES) -> dict[str, str]:
    """This process's environment without the variables that start with ``prefixes``."""
    keep = tuple(prefixes)
    return {k: v for k, v in os.environ.items() if not k.startswith(keep)}


class AirflowProcesses:
    """The components of one AIRFLOW_HOME, as process groups this object owns and always stops.

    ``start("triggerer-2", "--skip-serve-logs", command="triggerer")`` runs a second triggerer under its
    own name; each component logs to ``<home>/<name>.log``.
    """

    def __init__(self, home: Path, env: Mapping[str, str]) -> None:
        self.home = home
        self.env = dict(env)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def run(self, args: list[str], timeout: float = 120) -> str:
        """``airflow <args>`` to its end; its output, or ``AssertionError`` with the output's tail."""
        done = subprocess.run(
            [AIRFLOW, *args], env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert done.returncode == 0, f"airflow {' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done.stdout

    def start(
        self, name: str, *args: str, command: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        """Start ``airflow <command or name> <args>`` in a new process group, logging to ``<name>.log``.

        A scheduler or triggerer starts without its log server (``--skip-serve-logs``): it would bind
        8793/8794 on every interface, and two clusters at once (``make test`` runs two test files in
        parallel) would clash; the task logs are files in this home, read from there."""
        log = (self.home / f"{name}.log").open("ab")
        if (command or name) in ("scheduler", "triggerer") and "--skip-serve-logs" not in args:
            args = (*args, "--skip-serve-logs")
        self.procs[name] = subprocess.Popen(
            [AIRFLOW, command or name, *args],
            env={**self.env, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()  # the child holds its own copy

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def send(self, name: str, sig: int) -> None:
        """Send ``sig`` to the component's whole process group (as ``systemctl kill`` does)."""
        os.killpg(self.procs[name].pid, sig)

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        """Signal the process group and wait; SIGKILL it when it is still there after ``timeout``."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
                os.killpg(proc.pid, signal.SIGCONT)  # a stopped group would never see the signal
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
        # Whatever is left of the group (children that outlived the leader) goes too.
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(10)

    def stop_service(self, name: str, sig: int = signal.SIGTERM, timeout: float = 90) -> None:
        """Stop the component as a service manager does (``systemctl stop``, ``KillMode=control-group``).

        ``sig`` goes to every process of the service, the leader and all its descendants (a task
        process in its own process group included, as a cgroup holds it); each gets ``timeout`` s
        (``TimeoutStopSec``) to exit, then whatever is left is SIGKILLed.
        """
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        seen: dict[int, psutil.Process] = {}
        deadline = time.monotonic() + timeout
        signalled = False
        while True:
            for member in self._tree(proc.pid):
                if member.pid not in seen:
                    seen[member.pid] = member
                    if signalled:  # a process born after the signal (a pool refilling) gets it too
                        _send(member, sig)
            if not signalled:
                for member in seen.values():
                    _send(member, sig)
                signalled = True
            alive = [m for m in seen.values() if _running(m)]
            if not alive or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        for member in seen.values():
            if _running(member):
                _send(member, signal.SIGKILL)
        proc.wait(10)

    @staticmethod
    def _tree(pid: int) -> list[psutil.Process]:
        try:
            leader = psutil.Process(pid)
            return [leader, *leader.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.stop(name)

    def log_tail(self, chars: int = 1500) -> str:
        parts = []
        for log in sorted(self.home.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def descendants(self, name: str) -> list[psutil.Process]:
        """Every process below the component's leader (empty when it is not running)."""
        if not self.alive(name):
            return []
        try:
            return list(psutil.Process(self.procs[name].pid).children(recursive=True))
        except psutil.NoSuchProcess:
            return []

    def processes_talking_to(self, port: int, names: Iterable[str]) -> list[psutil.Process]:
        """The processes below ``names`` with a TCP connection open to ``port`` (those making a call)."""
        found = []
        for name in names:
            for proc in self.descendants(name):
                try:
                    conns = proc.net_connections(kind="tcp")
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if any(c.raddr and c.raddr.port == port for c in conns):
                    found.append(proc)
        return found


def _running(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running()) and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _send(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
        if sig != signal.SIGKILL:
            proc.send_signal(signal.SIGCONT)  # a stopped process would never see it
    except psutil.NoSuchProcess:
        pass
