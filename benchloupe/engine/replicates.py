"""Independent replicates on every core, or on a Dask cluster, with the same numbers everywhere (issue 36).

An analysis made of independent replicates (bootstrap refits, the near-tie audit's owner-split reruns and
population perturbations, ...) hands them to :func:`run` as ``fn(shared, task)`` calls: ``shared`` is the data
every replicate reads (arrays, configs; sent once per worker batch, never a database path) and ``task`` is what
makes one replicate itself (its index, its seed, its variant).  Where they run is a context set above the engine
(:func:`use`, by the jobs layer from ``--jobs`` / ``--cluster``):

- ``Workers(jobs=1)`` (the default): one after the other in this process;
- ``Workers(jobs=N)``: N local processes through joblib (its loky backend; large arrays are memory-mapped);
- ``Workers(jobs=N, backend=...)``: whatever joblib backend the context manager selects; the jobs layer passes
  one that connects to a ``dask.distributed`` scheduler and selects joblib's ``"dask"`` backend.  The engine
  itself never opens a connection.

Same numbers for any of them: every replicate draws from its own generator, ``default_rng(child)`` with the child
:class:`numpy.random.SeedSequence` of :func:`seeds` (``SeedSequence(seed).spawn(n)[b]``), or from a seed the
method defines per replicate (the near-tie audit keeps the reference's ``family_seed + i``), never from a
generator shared in turn; results are put back in task order; and each replicate runs single-threaded (BLAS and our
own thread pools capped at one thread, :func:`single_threaded`), in this process as in a worker, so a thread
count never touches a sum's order.  The tests compare ``--jobs 1``, ``--jobs 2`` and a LocalCluster bit for bit.

Cancellation and progress are seen between batches (taken in the order they finish): the run is cut into at least
four batches per worker and at least :data:`MIN_BATCHES` in all, so a cancel stops the run within one batch and the
progress line moves at least every 2 % even on two workers (a batch costs 2-14 ms locally, 15-73 ms on a
LocalCluster: docs/PARALLEL.md).
joblib is imported here lazily (not at ``benchloupe --help``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchloupe.engine.common import Progress, check_cancel, no_progress, single_threaded
from benchloupe.hints import Opt, say

BATCHES_PER_WORKER = 4
MIN_BATCHES = 50


class ReplicateError(ValueError):
    """The replicates could not run where they were sent (no cluster at that address, a worker died, workers
    without benchloupe): one line saying what happened and what to do.  A ``ValueError`` (the faces print it as
    one line) but not an ``EngineError``: the run that met it is kept, ``failed``, with the line as its error
    (an input error leaves no run), and ``--jobs 1`` still runs it here."""


@dataclass(frozen=True)
class Workers:
    """Where replicates run: ``jobs`` workers (1: in this process); ``backend`` a zero-argument callable giving
    a context manager that selects a joblib backend (and yields how many workers it has), ``None`` for local
    processes; ``where`` names it in messages ("4 local processes", "tcp://host:8786")."""

    jobs: int = 1
    backend: Callable[[], contextlib.AbstractContextManager[int]] | None = None
    where: str = ""

    @property
    def local(self) -> bool:
        return self.backend is None


SERIAL = Workers(jobs=1, where="this process")
_WORKERS: contextvars.ContextVar[Workers | None] = contextvars.ContextVar("benchloupe_workers", default=None)


def current() -> Workers:
    """The workers of the current context (:data:`SERIAL` outside :func:`use`)."""
    return _WORKERS.get() or SERIAL


@contextlib.contextmanager
def use(workers: Workers | None) -> Iterator[Workers]:
    """Run the block's replicates on ``workers`` (``None``: keep the current ones)."""
    if workers is None:
        yield current()
        return
    token = _WORKERS.set(workers)
    try:
        yield workers
    finally:
        _WORKERS.reset(token)


def all_cores() -> int:
    """The cores this process may run on (its CPU affinity, not the machine's count): ``--jobs``'s default."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def seeds(seed: int, n: int) -> list[np.random.SeedSequence]:
    """One independent seed per replicate: ``SeedSequence(seed).spawn(n)``; replicate ``b``'s stream depends on
    ``(seed, b)`` only, whichever worker runs it and in whatever order."""
    return np.random.SeedSequence(int(seed)).spawn(int(n))


def _batches(n: int, k: int) -> list[range]:
    edges = np.linspace(0, n, min(n, k) + 1).astype(int)
    return [range(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def _run_batch(fn: Callable[[Any, Any], Any], shared: Any, tasks: Sequence[Any]) -> list:
    """One batch of replicates in a worker (or here): single-threaded, in task order."""
    with single_threaded():
        return [fn(shared, t) for t in tasks]


def _run_at(fn: Callable[[Any, Any], Any], shared: Any, start: int, tasks: Sequence[Any]) -> tuple[int, list]:
    """A batch and where its results go (batches come back in the order they finish)."""
    return start, _run_batch(fn, shared, tasks)


def run(fn: Callable[[Any, Any], Any], tasks: Sequence[Any], shared: Any = None, *, progress: Progress = no_progress,
        cancel: threading.Event | None = None, label: str = "replicate") -> list:
    """``[fn(shared, t) for t in tasks]``, on the current :class:`Workers`, in task order.

    ``fn`` must be a module-level function (workers import it by name); an exception it raises (an
    ``EngineError`` for one replicate's bad input) reaches the caller as itself.  A worker that dies, a cluster
    that cannot be reached or cannot import benchloupe raise :class:`ReplicateError`.
    """
    tasks = list(tasks)
    n = len(tasks)
    workers = current()
    if workers.local and (workers.jobs <= 1 or n <= 1) or _on_device():
        out = []
        with single_threaded():
            for b, t in enumerate(tasks):
                check_cancel(cancel)
                progress(b, n, f"{label} {b + 1}/{n}")
                out.append(fn(shared, t))
        progress(n, n, f"{label}s done")
        return out
    return _run_parallel(fn, tasks, shared, workers, progress, cancel, label)


def _on_device() -> bool:
    """On a torch backend the GPU is the parallelism: replicates stay in this process (and on the device)."""
    from benchloupe.engine import dense

    return dense.on_torch()


def _run_parallel(fn, tasks, shared, workers: Workers, progress: Progress, cancel, label: str) -> list:
    import joblib

    n = len(tasks)
    backend = workers.backend() if workers.backend is not None else _local(workers.jobs)
    out: list = [None] * n
    progress(0, n, f"{label}s on {workers.where or f'{workers.jobs} processes'}")
    try:
        with backend as slots:
            parts = _batches(n, max(MIN_BATCHES, BATCHES_PER_WORKER * max(1, slots)))
            gen = joblib.Parallel(n_jobs=slots if workers.local else -1, return_as="generator_unordered",
                                  batch_size=1, pre_dispatch="all")(
                joblib.delayed(_run_at)(fn, shared, part.start, [tasks[i] for i in part]) for part in parts)
            done = 0
            try:  # batches in the order they finish: a failed or cancelled run stops at once, not behind others
                for start, results in gen:
                    out[start:start + len(results)] = results
                    done += len(results)
                    progress(done, n, f"{label} {done}/{n} ({workers.where or 'local processes'})")
                    check_cancel(cancel)
            finally:
                gen.close()  # a cancel or an error: joblib aborts the batches not yet run
    except BaseException as exc:
        if workers.local:  # a stopped run leaves no worker and no semaphore behind (loky warns at exit otherwise)
            _stop_local()
        if isinstance(exc, Exception) and not isinstance(exc, ReplicateError):
            raise translate(exc, workers) from exc
        raise
    progress(n, n, f"{label}s done")
    return out


@contextlib.contextmanager
def _local(jobs: int) -> Iterator[int]:
    """joblib's loky processes, ``jobs`` of them; each worker's BLAS is capped at one thread as it starts."""
    import joblib

    _quiet_stop()
    with joblib.parallel_config(backend="loky", n_jobs=jobs, inner_max_num_threads=1):
        yield jobs


_LOKY_QUIET = "ignore:resource_tracker:UserWarning"


def _quiet_stop() -> None:
    """A SIGTERM or Ctrl-C during local replicates ends in one line ("benchloupe: interrupted"), not in loky's
    noise: joblib's abort can race loky's queue thread (a KeyError traceback from its ExecutorManagerThread), and
    loky's resource tracker (a process of its own, started with this environment) then warns of the semaphores it
    cleans up. The thread's death after a stop signal is not shown, and the tracker does not warn; other thread
    errors and warnings are untouched."""
    import os
    import threading

    from benchloupe import interrupt

    current = os.environ.get("PYTHONWARNINGS", "")
    if _LOKY_QUIET not in current.split(","):
        os.environ["PYTHONWARNINGS"] = f"{current},{_LOKY_QUIET}" if current else _LOKY_QUIET
    if getattr(threading.excepthook, "quiet_after_stop", False):
        return
    previous = threading.excepthook

    def hook(args) -> None:
        if interrupt.signalled() and args.thread is not None and args.thread.name == "ExecutorManagerThread":
            return
        previous(args)

    hook.quiet_after_stop = True
    threading.excepthook = hook


def _stop_local() -> None:
    """Shut the local worker processes down now (their batches are abandoned)."""
    from joblib.externals.loky import get_reusable_executor

    try:
        get_reusable_executor().shutdown(wait=True, kill_workers=True)
    except Exception:  # noqa: BLE001 - already broken (a killed worker): nothing left to stop
        pass


def translate(exc: BaseException, workers: Workers) -> BaseException:
    """The one-line :class:`ReplicateError` for a failure of the workers themselves; anything else (an error the
    replicate raised, a cancel) as it is."""
    name = type(exc).__name__
    where = workers.where or "the local worker processes"
    here = Opt("jobs", "N", verb="run it here with")
    if name in ("TerminatedWorkerError", "BrokenProcessPool"):
        return ReplicateError(say(f"a worker process died during the replicates ({where}: killed or out of "
                                  "memory); nothing was saved: run it again, with fewer ", Opt("jobs"),
                                  " if memory is short"))
    if name == "KilledWorker":
        return ReplicateError(say(f"the cluster's workers died while running the replicates ({where}); nothing "
                                  "was saved: check the workers' memory and logs, or ", here))
    if isinstance(exc, ImportError) and "benchloupe" in str(exc):
        return ReplicateError(say(f"the workers at {where} cannot import benchloupe: install the same benchloupe "
                                  "version in the workers' environment, or ", here))
    if name in ("CommClosedError", "CancelledError", "FutureCancelledError", "TimeoutError") \
            and not workers.local:
        return ReplicateError(say(f"lost the connection to the cluster at {where} during the replicates ({name}); "
                                  "nothing was saved: check the scheduler, or ", here))
    return exc
