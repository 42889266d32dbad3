"""Where the dense products of the near-tie audit and the coverage draws run (issue 16).

The audit (paper 002: control scoring, the residual-DIF Newton passes, the randomized SVD's products) and the
coverage uncertainty draws (paper 003 C.6) run on numpy by default; inside :func:`use` with a torch backend those
steps run through :mod:`benchloupe.engine.backend_torch` (torch on CUDA, or on the CPU for tests), everything else
stays on numpy.  The backend is a context (not a parameter threaded through every helper) because the same helpers
serve the primary audit, its secondary analyses and the robustness protocol's re-runs.

Device choice reuses :func:`benchloupe.engine.backend.resolve` (the fits' ``--device`` rules: auto = CUDA when
torch sees a GPU and the matrix is large, else numpy); these passes always run in float64 on the device.
torch is imported only when a torch backend is chosen.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
from collections.abc import Iterator
from dataclasses import replace

from benchloupe.engine.backend import Backend, describe
from benchloupe.engine.backend import resolve as _resolve_fit
from benchloupe.engine.common import EngineError
from benchloupe.hints import Opt, say

NUMPY = Backend("numpy", "cpu", "float64")
_ACTIVE: contextvars.ContextVar[Backend] = contextvars.ContextVar("benchloupe_dense_backend", default=NUMPY)


def resolve(device: str | Backend = "auto", n_cells: int = 0) -> Backend:
    """The backend for an audit or coverage run over ``n_cells`` cells: ``device`` "cpu" (numpy), "cuda"
    (torch on the GPU; one clear error when torch or the GPU is missing) or "auto"; a ``Backend`` passes through
    (tests force ``Backend("torch", "cpu", "float64")``)."""
    if isinstance(device, Backend):
        return device
    if device == "cuda" and not _torch_installed():
        raise EngineError(say(Opt("device", "cuda"), " needs torch, which is not installed: pip install -e '.[gpu]' "
                              "(a CUDA build of torch), or use ", Opt("device", "cpu")))
    return replace(_resolve_fit(device, n_cells), dtype="float64")


def _torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or blocked installation counts as none
        return False


def active() -> Backend:
    """The backend of the current context (numpy outside :func:`use`)."""
    return _ACTIVE.get()


def on_torch() -> bool:
    return _ACTIVE.get().kind == "torch"


@contextlib.contextmanager
def use(backend: Backend | None) -> Iterator[Backend]:
    """Run the block's audit / coverage passes on ``backend`` (``None``: keep the current one)."""
    if backend is None:
        yield active()
        return
    token = _ACTIVE.set(backend)
    try:
        yield backend
    finally:
        _ACTIVE.reset(token)


def provenance(backend: Backend) -> dict:
    """What a run records: backend, device, dtype (and the GPU's name, the CPU threads)."""
    return describe(backend)
