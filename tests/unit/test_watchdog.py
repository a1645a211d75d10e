"""The sync hook's whole-request bound: one reaper thread for every call, not a thread per call.

The trickle tests (``test_trickle.py``) show the bound cuts a slow answer; these show what the shared
reaper must also get right: a call that left is never cut (its socket may already serve the next
call), the reaper's bookkeeping does not grow with the number of calls, and a forked worker (Airflow's
task runner forks) gets a reaper of its own.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import requests_mock

from airflow_provider_loadtest.hooks import bounded
from airflow_provider_loadtest.hooks.bounded import Watchdog
from airflow_provider_loadtest.hooks.loadtest import LoadTestHook


def _wait_for(condition: object, seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.01)):  # bounded
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


def test_a_call_past_its_deadline_has_its_socket_cut() -> None:
    ours, peer = socket.socketpair()
    with ours, peer, Watchdog(0.05) as dog:
        dog.track(ours)
        ours.settimeout(5)
        assert ours.recv(1) == b""  # the shutdown ends the blocked read at once, long before 5 s
        assert dog.fired


def test_a_call_that_left_is_never_cut() -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        with Watchdog(0.05) as dog:
            dog.track(ours)
        time.sleep(0.2)  # well past the deadline
        assert not dog.fired
        peer.sendall(b"x")
        assert ours.recv(1) == b"x"  # still usable: the next call on this connection is not cut


def test_a_deadline_reached_while_the_call_leaves_does_not_cut_it() -> None:
    # The reaper may take a watchdog off its heap just before the call leaves; firing it afterwards
    # must do nothing, or it would cut a connection already back in the pool.
    ours, peer = socket.socketpair()
    with ours, peer:
        with Watchdog(3600) as dog:
            dog.track(ours)
        dog.fire()  # what the reaper does with a watchdog it popped a moment too late
        assert not dog.fired
        peer.sendall(b"x")
        assert ours.recv(1) == b"x"


def test_one_reaper_thread_and_no_growth_however_many_calls(loadtest_conn: str) -> None:
    hook = LoadTestHook()
    with requests_mock.Mocker() as mock:
        mock.get("https://loadtest.example.test/runtime/bench-results/br-1", json={"state": "RUNNING"})
        for _ in range(500):
            hook.get_bench_result("br-1")
    reapers = [t for t in threading.enumerate() if t.name == "loadtest-watchdog"]
    assert len(reapers) == 1
    assert bounded._reaper.pending() <= 2  # finished calls leave the heap as new ones arrive


def test_an_earlier_deadline_wakes_the_reaper() -> None:
    ours, peer = socket.socketpair()
    with ours, peer, Watchdog(3600) as late, Watchdog(0.05) as early:
        early.track(ours)
        assert _wait_for(lambda: early.fired)
        assert not late.fired


def test_a_forked_worker_gets_a_reaper_of_its_own() -> None:
    with Watchdog(0.01):
        pass  # the parent's reaper thread exists
    pid = os.fork()
    if pid == 0:  # the child: its reaper must fire although the parent's thread did not come along
        code = 1
        try:
            ours, _peer = socket.socketpair()  # the peer stays open and silent: only the cut ends recv
            with Watchdog(0.05) as dog:
                dog.track(ours)
                ours.settimeout(5)
                code = 0 if ours.recv(1) == b"" and dog.fired else 1
        finally:
            os._exit(code)
    for _ in range(1000):  # bounded: about 10 s
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child's watchdog never fired")
