"""``--jobs`` and ``--cluster`` through the CLI (issue 36): the same stored numbers on one process, two
processes and a Dask LocalCluster; a cluster that cannot be used, a worker that dies: one line, exit 1, the run
``failed`` with nothing saved, and ``--jobs 1`` still works."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.store import runs
from benchloupe.store.db import connect

ROOT = Path(__file__).resolve().parents[2]
needs_distributed = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("distributed") is None,
    reason="dask.distributed is not installed (pip install 'benchloupe[cluster]')")


def _thetas(db, rid):
    conn = connect(db)
    try:
        return runs.load_artifact(conn, rid, "replicates")["thetas"]
    finally:
        conn.close()


def _runs(db, kind="bootstrap"):
    conn = connect(db)
    try:
        rows = conn.execute("SELECT id, status, error FROM runs WHERE kind = ? ORDER BY id", (kind,)).fetchall()
        outputs = conn.execute("SELECT count(*) FROM run_artifacts a JOIN runs r ON r.id = a.run_id "
                               "WHERE r.status != 'done'").fetchone()[0]
        return [tuple(r) for r in rows], outputs
    finally:
        conn.close()


def _errors(err: str) -> list[str]:
    """The error lines (progress lines aside), and never a traceback."""
    assert "Traceback" not in err
    return [ln for ln in err.splitlines() if ln.startswith("benchloupe:")]


def _bootstrap(db, capsys, *extra) -> tuple[int, str, str]:
    code = main(["bootstrap", "demo-math", "--db", str(db), "--B", "6", "--json", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_bootstrap_jobs_one_and_two_store_the_same_numbers(demo_db, capsys):
    code, out1, _ = _bootstrap(demo_db, capsys, "--jobs", "1")
    assert code == 0
    code, out2, _ = _bootstrap(demo_db, capsys, "--jobs", "2")
    assert code == 0
    r1, r2 = json.loads(out1)["run_id"], json.loads(out2)["run_id"]
    np.testing.assert_array_equal(_thetas(demo_db, r1), _thetas(demo_db, r2))


def test_jobs_zero_is_refused_before_anything_runs(demo_db, capsys):
    code, _, err = _bootstrap(demo_db, capsys, "--jobs", "0")
    assert code == 1 and len(_errors(err)) == 1 and "--jobs 0" in err
    assert _runs(demo_db) == ([], 0)


def test_cluster_without_distributed_says_what_to_install(demo_db):
    """A Python without dask.distributed (hidden from this interpreter): one line naming the extra."""
    code = ("import sys; sys.modules['distributed'] = None; from benchloupe.cli.main import main; "
            f"sys.exit(main(['bootstrap', 'demo-math', '--db', {str(demo_db)!r}, '--B', '4', "
            "'--cluster', 'tcp://127.0.0.1:8786']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 1, p.stderr
    lines = _errors(p.stderr)
    assert len(lines) == 1 and "pip install 'benchloupe[cluster]'" in lines[0]
    assert _runs(demo_db) == ([], 0)


@needs_distributed
def test_unreachable_cluster_fails_the_run_in_one_line_and_jobs_one_still_works(demo_db, capsys):
    code, _, err = _bootstrap(demo_db, capsys, "--cluster", "tcp://127.0.0.1:9")  # nothing listens on port 9
    assert code == 1
    lines = _errors(err)
    assert len(lines) == 1 and "cannot reach a Dask scheduler at tcp://127.0.0.1:9" in lines[0]
    rows, outputs = _runs(demo_db)
    assert [r[1] for r in rows] == ["failed"] and "cannot reach a Dask scheduler" in rows[0][2]
    assert outputs == 0  # nothing half-written
    code, _, err = _bootstrap(demo_db, capsys, "--jobs", "1")
    assert code == 0


@needs_distributed
def test_coverage_on_an_unreachable_cluster_fails_its_run_in_one_line(demo_db, capsys):
    args = ["coverage", "demo-math", "--db", str(demo_db), "--n-draws", "200"]
    before = _runs(demo_db, "coverage")[0]  # the demo's own coverage runs
    assert main([*args, "--cluster", "tcp://127.0.0.1:9"]) == 1
    lines = _errors(capsys.readouterr().err)
    assert len(lines) == 1 and "cannot reach a Dask scheduler at tcp://127.0.0.1:9" in lines[0]
    rows, outputs = _runs(demo_db, "coverage")
    assert rows[:len(before)] == before and [r[1] for r in rows[len(before):]] == ["failed"] and outputs == 0
    assert main([*args, "--jobs", "1"]) == 0


@needs_distributed
def test_wrong_cluster_address_and_env_variable(demo_db, capsys, monkeypatch):
    monkeypatch.setenv("BENCHLOUPE_CLUSTER", "not-an-address")
    code, _, err = _bootstrap(demo_db, capsys)
    lines = _errors(err)
    assert code == 1 and len(lines) == 1 and "cannot reach a Dask scheduler at not-an-address" in lines[0]
    assert [r[1] for r in _runs(demo_db)[0]] == ["failed"]


def _loky_workers(pid: int) -> list[int]:
    out = []
    for child in Path("/proc").glob("[0-9]*"):
        try:
            stat = (child / "stat").read_text()
            cmd = (child / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and "loky" in cmd and "resource_tracker" not in cmd:
            out.append(int(child.name))
    return out


def _cpu_s(pid: int) -> float:
    try:
        f = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_a_worker_killed_mid_run_fails_the_run_in_one_line(demo_db):
    """SIGKILL one of the --jobs 2 worker processes once it is computing replicates: exit 1, one line, the run
    ``failed`` without outputs; --jobs 1 runs the same command afterwards."""
    cmd = [sys.executable, "-m", "benchloupe", "bootstrap", "demo-math", "--db", str(demo_db), "--B", "4000",
           "--jobs", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 240
    while killed is None and p.poll() is None and time.monotonic() < deadline:
        for w in _loky_workers(p.pid):
            if _cpu_s(w) > 0.5:  # importing is done: it is running replicates
                os.kill(w, signal.SIGKILL)
                killed = w
                break
        time.sleep(0.05)
    out, err = p.communicate(timeout=240)
    assert killed is not None, f"no worker seen running (exit {p.returncode}): {err}"
    assert p.returncode == 1, err
    lines = _errors(err)
    assert len(lines) == 1 and "a worker process died" in lines[0], err
    rows, outputs = _runs(demo_db)
    assert [r[1] for r in rows] == ["failed"] and outputs == 0
    ok = subprocess.run(cmd[:-2] + ["--B", "4", "--jobs", "1"], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=300)
    assert ok.returncode == 0, ok.stderr


@pytest.fixture(scope="module")
def local_cluster():
    """A real dask.distributed LocalCluster: a scheduler and 2 worker processes of one thread each."""
    pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install 'benchloupe[cluster]')")
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      host="127.0.0.1") as cluster:
        yield cluster


def test_local_cluster_stores_the_numbers_of_jobs_one(demo_db, capsys, local_cluster):
    code, out1, _ = _bootstrap(demo_db, capsys, "--jobs", "1")
    assert code == 0
    before = local_cluster.scheduler.transition_counter
    code, out2, err = _bootstrap(demo_db, capsys, "--cluster", local_cluster.scheduler_address)
    assert code == 0, err
    # they ran on the cluster: its scheduler moved tasks (the progress line naming the address comes only after
    # the first second, which a quiet machine does not reach: CI failed on that)
    assert local_cluster.scheduler.transition_counter > before
    r1, r2 = json.loads(out1)["run_id"], json.loads(out2)["run_id"]
    np.testing.assert_array_equal(_thetas(demo_db, r1), _thetas(demo_db, r2))


def test_audit_on_a_local_cluster_equals_jobs_one(demo_db, capsys, local_cluster):
    args = ["audit", "neartie", "demo-chem", "--db", str(demo_db), "--controls", "49", "--k-grid", "1,2,4",
            "--split-seeds", "3", "--json"]
    assert main([*args, "--jobs", "1"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main([*args, "--cluster", local_cluster.scheduler_address]) == 0
    two = json.loads(capsys.readouterr().out)
    assert one["summary"]["split_stability"] == two["summary"]["split_stability"]
    assert one["table1"] == two["table1"]


UNCERTAINTY = ("ddm_sd", "max_gap_sd", "max_gap_mean", "topk_sum_sd", "prob_max_gap_exceeds_uniform", "max_gap_ci")


def test_coverage_draws_store_the_same_numbers_on_one_two_processes_and_a_cluster(demo_db, capsys, local_cluster):
    """`coverage` with C.6 Laplace draws: --jobs 1, --jobs 2 and a LocalCluster store the same draws' summaries
    and gap intervals, bit for bit."""
    runs_out = []
    before = local_cluster.scheduler.transition_counter
    for where in (["--jobs", "1"], ["--jobs", "2"], ["--cluster", local_cluster.scheduler_address]):
        code = main(["coverage", "demo-math", "--db", str(demo_db), "--n-draws", "300", "--json", *where])
        out, err = capsys.readouterr()
        assert code == 0, err
        runs_out.append(json.loads(out))
    assert local_cluster.scheduler.transition_counter > before  # the last run's draws went to the cluster
    first = runs_out[0]
    assert all(np.isfinite(first["metrics"]["max_gap_ci"]))
    for other in runs_out[1:]:
        assert {k: other["metrics"][k] for k in UNCERTAINTY} == {k: first["metrics"][k] for k in UNCERTAINTY}
        assert other["gaps"] == first["gaps"]


@needs_distributed
def test_cluster_whose_workers_lack_benchloupe(demo_db, capsys, tmp_path):
    """A real `dask worker` whose Python cannot import benchloupe (blocked in its preload): one line that says
    so, the run failed and empty, and --jobs 1 still works."""
    from distributed import LocalCluster

    block = tmp_path / "no_benchloupe.py"
    block.write_text("import sys\nsys.modules['benchloupe'] = None  # this worker's environment lacks benchloupe\n")
    with LocalCluster(n_workers=0, processes=True, dashboard_address=":0", host="127.0.0.1") as cluster:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
                                   "--nthreads", "1", "--no-nanny", "--no-dashboard", "--preload", str(block)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            from distributed import Client

            with Client(cluster.scheduler_address, timeout=30) as c:
                c.wait_for_workers(1, timeout=120)
            code, _, err = _bootstrap(demo_db, capsys, "--cluster", cluster.scheduler_address)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    lines = _errors(err)
    assert code == 1 and len(lines) == 1 and "cannot import benchloupe" in lines[0], err
    rows, outputs = _runs(demo_db)
    assert [r[1] for r in rows] == ["failed"] and outputs == 0
    assert _bootstrap(demo_db, capsys, "--jobs", "1")[0] == 0



def _first_batch_plugin(scheduler):
    """A scheduler plugin (added to ``scheduler``) whose ``processing`` event is set, with ``pid`` the worker
    process's id, once the first replicate batch is processing on a worker."""
    from distributed.diagnostics.plugin import SchedulerPlugin

    class FirstBatch(SchedulerPlugin):
        name = "benchloupe-first-batch"

        def __init__(self) -> None:
            self.processing = threading.Event()
            self.pid: int | None = None
            self.left: list[str] = []  # workers the scheduler lost

        def remove_worker(self, scheduler, worker, **kwargs) -> None:
            self.left.append(worker)

        def transition(self, key, start, finish, *args, **kwargs) -> None:
            if finish == "processing" and "_run_at" in str(key) and not self.processing.is_set():
                ws = scheduler.tasks[key].processing_on
                if ws is not None and ws.pid:
                    self.pid = ws.pid
                    self.processing.set()

    plugin = FirstBatch()
    scheduler.add_plugin(plugin)
    return plugin


def _table_rows(db) -> dict[str, list]:
    conn = connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {n: sorted(repr(tuple(r)) for r in conn.execute(f'SELECT * FROM "{n}"')) for n in names}
    finally:
        conn.close()


def _kill_first_busy_worker(cluster, db, B: int) -> subprocess.CompletedProcess:
    """The real CLI's bootstrap on ``cluster``; SIGKILL the worker process its first batch runs on, as soon as
    the scheduler has it processing (the process is a worker of the cluster's nanny: the nanny starts another)."""
    plugin = _first_batch_plugin(cluster.scheduler)
    try:
        p = subprocess.Popen([sys.executable, "-m", "benchloupe", "bootstrap", "demo-math", "--db", str(db), "--B",
                              str(B), "--json", "--cluster", cluster.scheduler_address], cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert plugin.processing.wait(timeout=300), "no replicate batch reached a worker"
            os.kill(plugin.pid, signal.SIGKILL)
            out, err = p.communicate(timeout=300)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
    finally:
        cluster.scheduler.remove_plugin(plugin.name)
    assert len(plugin.left) == 1  # the worker killed, and only that one
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@needs_distributed
def test_a_cluster_worker_killed_mid_run_is_replaced_and_the_numbers_stay(demo_db, capsys, local_cluster):
    """SIGKILL the Dask worker running the first batch: the scheduler sends its batches to the other worker
    (seeds are per replicate), and the run stores the numbers of --jobs 1."""
    from distributed import Client

    done = _kill_first_busy_worker(local_cluster, demo_db, 80)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    code, out1, _ = _bootstrap(demo_db, capsys, "--jobs", "1", "--B", "80")
    assert code == 0
    np.testing.assert_array_equal(_thetas(demo_db, json.loads(done.stdout)["run_id"]),
                                  _thetas(demo_db, json.loads(out1)["run_id"]))
    with Client(local_cluster.scheduler_address, timeout=30) as c:  # the nanny's new worker, for the next tests
        c.wait_for_workers(2, timeout=120)


@needs_distributed
def test_a_cluster_that_gives_up_on_a_batch_fails_the_run_in_one_line(demo_db, capsys, local_cluster):
    """``allowed-failures`` 0: the first worker death makes the scheduler give up on the batches it was running
    (KilledWorker). One line, exit 1, the run ``failed`` and nothing else of it in the database; --jobs 1 runs
    the same command afterwards.  (Before the fix the command waited forever.)"""
    from distributed import Client

    before = _table_rows(demo_db)
    scheduler = local_cluster.scheduler
    allowed, scheduler.allowed_failures = scheduler.allowed_failures, 0
    try:
        done = _kill_first_busy_worker(local_cluster, demo_db, 80)
    finally:
        scheduler.allowed_failures = allowed
        with Client(local_cluster.scheduler_address, timeout=30) as c:  # the nanny's new worker, for later tests
            c.wait_for_workers(2, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = _errors(done.stderr)
    assert len(lines) == 1 and "the cluster's workers died while running the replicates" in lines[0], done.stderr
    after = _table_rows(demo_db)
    added = sorted(set(after["runs"]) - set(before["runs"]))
    assert set(before["runs"]) <= set(after["runs"]) and len(added) == 1
    assert "'failed'" in added[0] and "workers died" in added[0]
    # the run's header, written with its row when it started (what it reads), and nothing else of it
    rid = int(added[0].strip("(").split(",")[0])
    assert all(r.startswith(f"({rid}, ") for r in set(after["run_inputs"]) - set(before["run_inputs"]))
    header = ("runs", "run_inputs")
    assert {n: r for n, r in after.items() if n not in header} == {n: r for n, r in before.items() if n not in header}
    assert _bootstrap(demo_db, capsys, "--jobs", "1")[0] == 0


_LOGS_AFTER_CONNECT = """
import logging, sys
from benchloupe.jobs.workers import DaskCluster
c = DaskCluster(sys.argv[1]); c._connect()
try:
    raise OSError("stream closed")
except OSError:
    for name in ("tornado.application", "distributed.comm.tcp", "distributed.client", "asyncio"):
        logging.getLogger(name).error("boom from %s", name, exc_info=True)
c.close()
print("connected")
"""


@needs_distributed
def test_a_cluster_connection_prints_no_library_log_lines(local_cluster):
    """Once connected, the libraries' own error logs (a worker's stream closed under a read: tornado's "Exception
    in callback" with its traceback, distributed's comm errors) never reach stderr: the run's one line says what
    happened. distributed's logging set-up prints tornado.application errors at import (CI once showed that
    traceback under the line, when a killed worker's connection was being read)."""
    p = subprocess.run([sys.executable, "-c", _LOGS_AFTER_CONNECT, local_cluster.scheduler_address], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "connected", p.stderr
    assert "boom" not in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_the_dask_backend_is_registered_once():
    """joblib's backend registry holds one class under benchloupe's name for the whole process: each cluster run
    registered a new class (a new subclass per `with using(...)`, the old one left to the garbage collector)."""
    pytest.importorskip("distributed")
    from joblib.parallel import BACKENDS

    from benchloupe.jobs.workers import _dask_backend

    name = _dask_backend()
    first = BACKENDS[name]
    assert _dask_backend() == name and BACKENDS[name] is first
