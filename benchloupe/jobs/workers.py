"""Where a run's replicates go: ``--jobs N`` local processes or a ``--cluster`` Dask scheduler (issue 36).

:func:`workers` turns the two options (and ``$BENCHLOUPE_JOBS`` / ``$BENCHLOUPE_CLUSTER``) into the engine's
:class:`~benchloupe.engine.replicates.Workers`, used around a run with :func:`using`.  The cluster connection is
opened here, in the jobs layer (the engine opens none), and only when the first replicates are sent, so an
unreachable scheduler fails the run that needed it (its row ends ``failed`` with one line) rather than a command
that never got that far.  Workers receive arrays and configs, never a database path: only this process reads
and writes SQLite.  ``dask.distributed`` is the optional extra ``benchloupe[cluster]``; without it
``--cluster`` says so in one line before anything runs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from collections.abc import Iterator

from benchloupe.engine.replicates import ReplicateError, Workers, all_cores, use
from benchloupe.hints import Opt, say

CONNECT_TIMEOUT_S = 10  # the scheduler handshake; an address nobody answers fails after this
ENV_JOBS, ENV_CLUSTER = "BENCHLOUPE_JOBS", "BENCHLOUPE_CLUSTER"
HERE = Opt("jobs", "N", verb="run it here with")


def default_jobs() -> int:
    """``$BENCHLOUPE_JOBS`` if set to a whole number >= 1, else every usable core (the CPU affinity)."""
    raw = os.environ.get(ENV_JOBS, "").strip()
    if raw:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"{ENV_JOBS}={raw!r} is not a whole number of processes >= 1: fix or unset it")
        return n
    return all_cores()


def workers(jobs: int | None = None, cluster: str | None = None) -> Workers:
    """The workers for ``--jobs`` / ``--cluster`` (``None``: the environment's or the defaults).  A cluster
    without ``distributed`` installed is refused here, in one line, before any run starts."""
    address = (cluster if cluster is not None else os.environ.get(ENV_CLUSTER, "")).strip()
    if address:
        if importlib.util.find_spec("distributed") is None:
            raise ValueError(say(Opt("cluster", address), " needs dask.distributed, which is not installed: "
                                 "pip install 'benchloupe[cluster]' (or ", HERE, ")"))
        return Workers(jobs=jobs or 1, backend=DaskCluster(address), where=address)
    n = jobs if jobs is not None else default_jobs()
    return Workers(jobs=n, where="this process" if n == 1 else f"{n} local processes")


SETTING = "replicate_workers"  # the workbench's setting, in the database's settings table


def parse_setting(text: str) -> dict:
    """The workbench's answer: blank (every core), a number of local processes, or a scheduler address."""
    text = text.strip()
    if not text:
        return {"jobs": None, "cluster": ""}
    if text.isdigit():
        if not 1 <= int(text) <= 4096:
            raise ValueError(f"{text}: give 1 to 4096 local processes, or leave it blank for every core")
        return {"jobs": int(text), "cluster": ""}
    if "://" not in text:
        raise ValueError(f"{text!r} is neither a number of processes nor a scheduler address like "
                         "tcp://host:8786")
    return {"jobs": None, "cluster": text}


def saved_setting(conn) -> dict:
    """This database's replicate-workers setting (``{"jobs": None, "cluster": ""}`` when never set)."""
    import json

    row = conn.execute("SELECT value FROM settings WHERE key = ?", (SETTING,)).fetchone()
    try:
        value = json.loads(row[0]) if row else {}
    except (TypeError, ValueError):
        value = {}
    jobs = value.get("jobs") if isinstance(value, dict) else None
    cluster = value.get("cluster") if isinstance(value, dict) else ""
    return {"jobs": jobs if isinstance(jobs, int) and jobs >= 1 else None,
            "cluster": cluster if isinstance(cluster, str) else ""}


def save_setting(db_path, text: str) -> dict:
    """Store the workbench's replicate-workers answer (checked by :func:`parse_setting`) for this database."""
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    value = parse_setting(text)
    conn = connect(db_path)
    try:
        curation.put_setting(conn, SETTING, value)
    finally:
        conn.close()
    return value


def for_database(db_path) -> Workers:
    """The workers a workbench run uses: the database's setting, else ``$BENCHLOUPE_JOBS`` /
    ``$BENCHLOUPE_CLUSTER``, else every core."""
    from benchloupe.store.db import connect

    conn = connect(db_path)
    try:
        value = saved_setting(conn)
    finally:
        conn.close()
    return workers(value["jobs"], value["cluster"] or None)


def describe(value: dict) -> str:
    """The setting in words, for the workbench's notification."""
    if value.get("cluster"):
        return f"replicates go to the Dask scheduler at {value['cluster']}"
    if value.get("jobs"):
        return f"replicates run on {value['jobs']} local process{'es' if value['jobs'] > 1 else ''}"
    return f"replicates run on every usable core ({all_cores()})"


@contextlib.contextmanager
def using(w: Workers) -> Iterator[Workers]:
    """Run the block's replicates on ``w``; a cluster connection opened inside is closed at the end."""
    try:
        with use(w):
            yield w
    finally:
        if isinstance(w.backend, DaskCluster):
            w.backend.close()


_LIBRARY_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


def _quiet_libraries() -> None:
    """No log line of the cluster's libraries reaches stderr: the run's one line says what happened. A killed
    worker's closed stream is logged by tornado ("Exception in callback", with a traceback) and by distributed's
    comms; distributed's own logging set-up (at import) gives ``tornado.application`` and its child loggers such as
    ``distributed.client`` explicit levels and a stderr handler, so silencing the parent alone is not enough, and
    asyncio's errors would reach Python's last-resort handler."""
    import logging

    names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in _LIBRARY_LOGGERS]
    for name in (*_LIBRARY_LOGGERS, *names):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


class DaskCluster:
    """A ``dask.distributed`` scheduler at ``address``, connected on first use and checked once: it has
    workers, and they import the same benchloupe as this process (a worker without it, or with another
    version, would fail or give other numbers)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.client = None
        self.slots = 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[int]:
        import joblib

        client = self._connect()
        with joblib.parallel_config(backend=_dask_backend(), client=client,
                                    wait_for_workers_timeout=CONNECT_TIMEOUT_S):
            yield self.slots

    def _connect(self):
        if self.client is not None:
            return self.client
        from distributed import Client

        _quiet_libraries()
        try:
            client = Client(self.address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 - every way a connection fails is one line here
            first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            raise ReplicateError(say(f"cannot reach a Dask scheduler at {self.address} ({first}); start one with "
                                     f"`dask scheduler` and workers with `dask worker {self.address}`, or fix ",
                                     Opt("cluster"), f" / ${ENV_CLUSTER} (or ", HERE, ")")) from None
        try:
            self._check(client)
        except BaseException:
            client.close()
            raise
        self.client = client
        return client

    def _check(self, client) -> None:
        import benchloupe

        self.slots = sum(client.ncores().values())
        if not self.slots:
            raise ReplicateError(say(f"the Dask scheduler at {self.address} has no workers: start some with "
                                     f"`dask worker {self.address}` (or ", HERE, ")"))
        try:  # builtins only: a probe defined in benchloupe could not even reach a worker without it
            versions = client.run(eval, "__import__('benchloupe.engine.replicates').__version__")
        except ImportError as exc:
            raise ReplicateError(say(f"the workers at {self.address} cannot import benchloupe ({exc}): install "
                                     f"benchloupe {benchloupe.__version__} in the workers' environment, or ",
                                     HERE)) from None
        other = sorted({v for v in versions.values() if v != benchloupe.__version__})
        if other:
            raise ReplicateError(f"the workers at {self.address} run benchloupe {', '.join(other)}, this process "
                                 f"{benchloupe.__version__}: install the same version on both sides")

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close(timeout=CONNECT_TIMEOUT_S)
            self.client = None


_BACKEND = "benchloupe-dask"


@functools.cache
def _dask_backend() -> str:
    """joblib's Dask backend, told when the scheduler gives up on a batch (registered once, under its own name).

    joblib's own backend hears of a batch only when it returns: a batch that Dask itself fails (``KilledWorker``
    after ``distributed.scheduler.allowed-failures`` worker deaths) sets its future's error but never reaches
    joblib, which then waits for it forever (joblib 1.6).  Here the failed future is reported to joblib as the
    batch's outcome, so the run ends with :func:`~benchloupe.engine.replicates.translate`'s line (the batches
    still running are released when :func:`using` closes the client)."""
    import joblib
    from joblib._dask import DaskDistributedBackend

    class Backend(DaskDistributedBackend):
        def submit(self, func, callback=None):
            job = super().submit(func, callback)
            if callback is not None:
                job.add_done_callback(lambda f: None if f.cancelled() or f.exception() is None
                                      else callback(_Lost(f.exception())))
            return job

        def retrieve_result_callback(self, out):
            if isinstance(out, _Lost):
                raise out.error
            return super().retrieve_result_callback(out)

    joblib.register_parallel_backend(_BACKEND, Backend)
    return _BACKEND


class _Lost:
    """The error of a batch that Dask failed (its worker died), handed to joblib as that batch's outcome."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
