"""Who runs a run (issue 10 #3, #5): a runner is alive while its process is (same host, same start time: a
reused pid is not the runner), or, on another host, while its heartbeat is fresh."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from benchloupe.store import runners


def test_this_process_is_alive_and_a_finished_one_is_not():
    me = runners.this_runner()
    assert runners.alive(me, None)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    gone = {**me, "pid": child.pid, "pstart": None}
    assert not runners.alive(gone, time.time())  # a fresh heartbeat does not revive a dead local process


def test_a_reused_pid_is_not_the_runner():
    me = runners.this_runner()
    if me["pstart"] is None:  # no /proc: the start time cannot be compared
        return
    assert not runners.alive({**me, "pstart": str(int(me["pstart"]) + 1)}, time.time())


def test_another_host_is_alive_while_it_beats():
    remote = {"pid": os.getpid(), "host": socket.gethostname() + "-other", "pstart": None, "token": "t"}
    now = time.time()
    assert runners.alive(remote, now - 1, now)
    assert not runners.alive(remote, now - runners.STALE_AFTER_S - 1, now)
    assert not runners.alive(remote, None, now)


def test_rows_from_before_runners_were_recorded_are_gone():
    for legacy in ("{}", "", None, "not json", "[1, 2]", {"pid": "12", "host": "h"}):
        assert not runners.alive(legacy, time.time())
    assert runners.describe("{}") == "an earlier version"
