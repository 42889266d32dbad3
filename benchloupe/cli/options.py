"""CLI helpers shared by the analysis commands: config dataclasses as options, progress on stderr."""

from __future__ import annotations

import dataclasses
import sys
import time

from benchloupe.cli.errors import CliError


def _field_type(f: dataclasses.Field) -> type:
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    for name, typ in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if t.startswith(name):
            return typ
    default = f.default if f.default is not dataclasses.MISSING else None
    return type(default) if default is not None else str


def add_config_args(parser, config_cls, *, skip: tuple[str, ...] = ()) -> None:
    """One ``--option`` per field of a frozen config dataclass; the help shows the paper's default."""
    group = parser.add_argument_group(f"{config_cls.__name__} (defaults: {(config_cls.__doc__ or '').strip().splitlines()[0]})")
    for f in dataclasses.fields(config_cls):
        if f.name in skip or not f.init:
            continue
        flag = "--" + f.name.replace("_", "-")
        typ = _field_type(f)
        default = f.default if f.default is not dataclasses.MISSING else None
        if typ is bool:
            group.add_argument(flag, dest=f"cfg_{f.name}", type=_bool, default=None, metavar="yes|no",
                               help=f"default: {default}")
        else:
            group.add_argument(flag, dest=f"cfg_{f.name}", type=typ, default=None, metavar=f.name.upper(),
                               help=f"default: {default if default is not None else 'per variant'}")


def _bool(s: str) -> bool:
    if s.lower() in ("1", "yes", "true", "on"):
        return True
    if s.lower() in ("0", "no", "false", "off"):
        return False
    raise ValueError(s)


def config_from_args(args, config_cls, **fixed):
    kw = {f.name: getattr(args, f"cfg_{f.name}") for f in dataclasses.fields(config_cls)
          if f.init and getattr(args, f"cfg_{f.name}", None) is not None}
    kw.update(fixed)
    try:
        return config_cls(**kw)
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc).splitlines()[0]) from None


class StderrProgress:
    """Progress lines on stderr, only once a job has run for more than a second, at most 4 per second."""

    def __init__(self, label: str, quiet: bool = False):
        self.label, self.quiet = label, quiet
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.shown = False

    def __call__(self, done: float, total: float, message: str) -> None:
        now = time.perf_counter()
        if self.quiet or now - self.t0 < 1.0 or now - self.last < 0.25:
            return
        self.last = now
        pct = f"{100 * done / total:5.1f}% " if total else ""
        print(f"[{self.label} {now - self.t0:6.1f}s] {pct}{message}", file=sys.stderr, flush=True)
        self.shown = True
