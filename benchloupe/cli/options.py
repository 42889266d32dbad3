"""CLI helpers shared by the analysis commands: config dataclasses as options, numbers read against their
stated ranges, progress on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import threading
import time

from benchloupe import ranges
from benchloupe.cli.errors import CliError


class RangeError(CliError):
    """A number on the command line outside its stated range: one line naming the option, exit 1."""


class Ranged(argparse.Action):
    """An option (or positional) whose number is read and checked as it is parsed, before any work (issue 24):
    ``range`` is a :class:`benchloupe.ranges.Range` (the value becomes an int or a float) or a
    :class:`benchloupe.ranges.Numbers` (a text holding numbers, kept as the text). Text that is no number is a
    usage error (exit 2); a number outside the range is :class:`RangeError` (exit 1). The help shows the range.

    Declare one with ``p.add_argument("--gaps", action=Ranged, range=ranges.count(1, 1000), ...)``, or let
    :func:`add_config_args` find a config field's range in :data:`benchloupe.ranges.FIELDS`."""

    def __init__(self, option_strings, dest, range=None, help=None, **kw):  # noqa: A002 - argparse's keyword
        self.range = range if range is not None else ranges.any_finite()
        if help not in (None, argparse.SUPPRESS) and getattr(self.range, "stated", True):
            help = f"{help}; range: " + self.range.describe().replace("%", "%%")
        kw.pop("type", None)
        super().__init__(option_strings, dest, help=help, **kw)

    @property
    def flag(self) -> str:
        return self.option_strings[0] if self.option_strings else (self.metavar or self.dest).upper()

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values is None or isinstance(values, list) and not values:
            setattr(namespace, self.dest, values)
            return
        text = values[0] if isinstance(values, list) else values
        flag = option_string or self.flag
        try:
            if isinstance(self.range, ranges.Numbers):
                value = self.range.check(text)
            else:
                value = self.range.parse(text)
        except ranges.NotANumber as exc:
            parser.error(f"argument {flag}: {exc}")
        except ranges.OutOfRange as exc:
            if exc.off:
                raise RangeError(f"{flag} {ranges.shown(text)}: leave {flag} out for the default ({exc.off}), "
                                 f"or give {exc.expected}") from None
            raise RangeError(f"{flag} {ranges.shown(text)}: must be {exc.expected}" +
                             (f" (got {exc.got})" if exc.got != ranges.shown(text) else "")) from None
        except ValueError as exc:  # a Numbers text of the wrong shape
            raise RangeError(f"{flag} {ranges.shown(text)}: {exc}") from None
        setattr(namespace, self.dest, value)


def ranged_argument(p, *flags, range, **kw):  # noqa: A002
    """``p.add_argument`` of a number with its stated range (see :class:`Ranged`)."""
    return p.add_argument(*flags, action=Ranged, range=range, **kw)


def add_worker_args(p) -> None:
    """``--jobs`` and ``--cluster`` of the commands whose analysis is made of replicates (issue 36)."""
    ranged_argument(p, "--jobs", range=ranges.count(1, 4096, "processes"), metavar="N",
                    help="replicates (bootstrap refits, split reruns, perturbations, ...) on N local processes; "
                         "default: $BENCHLOUPE_JOBS, else every usable core. The numbers are the same for any N")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="send the replicates to a running dask.distributed scheduler, e.g. tcp://host:8786 "
                        "(default: $BENCHLOUPE_CLUSTER); needs pip install 'benchloupe[cluster]' (docs/PARALLEL.md)")


def workers_of(args):
    """The jobs layer's workers context for ``--jobs`` / ``--cluster`` (checked before anything runs)."""
    from benchloupe.jobs.workers import using, workers

    return using(workers(getattr(args, "jobs", None), getattr(args, "cluster", None)))


def _field_type(f: dataclasses.Field) -> type:
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    for name, typ in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if t.startswith(name):
            return typ
    default = f.default if f.default is not dataclasses.MISSING else None
    return type(default) if default is not None else str


# The fixed choices of config fields that are text (issue 32: --help lists them), "Class.field" or "field" for
# every class; a text field in neither this nor FREE_TEXT fails tests/unit/test_cli_help.py.
CHOICES: dict[str, tuple[str, ...]] = {
    "JointConfig.mode": ("joint", "static", "arena"),
    "JointConfig.reg_reduction": ("mean", "sum"),
    "JointConfig.variant": ("paper", "reference"),
    "EvaluateConfig.variant": ("paper", "reference"),
    "JointConfig.optimizer": ("newton", "block", "lbfgs", "adam"),
    "mode": ("auto", "joint", "static", "arena"),
    "chance": ("stated", "estimate", "none"),
    "CompressConfig.baseline_reference": ("dualeval", "own"),
    "CompressConfig.purpose": ("ranking", "estimate"),
    "CoverageConfig.method": ("map", "mml"),
    "CoverageConfig.uncertainty": ("laplace", "bootstrap", "none"),
    "CoverageConfig.prior": ("normal", "hierarchical_theta", "hierarchical_b"),
    "AuditConfig.protocol": ("primary", "full"),
    "AuditConfig.anchor_ties": ("exact", "float"),
    "AuditConfig.family_from": ("name", "column", "arch"),
    "AuditConfig.representative": ("median", "id"),
}
# text fields that take free text or a pattern their help states (names, keys, target:..., comma lists)
FREE_TEXT = {"CompressConfig.target", "CompressConfig.export_name", "CoverageConfig.target", "CoverageConfig.group",
             "CoverageConfig.robustness", "CoverageConfig.improvement", "CalibrateConfig.target",
             "CalibrateConfig.reference", "ContaminationConfig.date_key", "ContaminationConfig.cutoff_key",
             "ScreenConfig.model"}


def field_choices(config_cls, name: str) -> tuple[str, ...] | None:
    """The fixed choices of a text field of ``config_cls`` (:data:`CHOICES`), None for free text."""
    if name == "strategy" and config_cls.__name__ == "CompressConfig":
        from benchloupe.jobs.diagnostics import SELECTIONS  # loaded already: CompressConfig is defined there

        return tuple(SELECTIONS)
    return CHOICES.get(f"{config_cls.__name__}.{name}", CHOICES.get(name))


def add_config_args(parser, config_cls, *, skip: tuple[str, ...] = ()) -> None:
    """One ``--option`` per field of a frozen config dataclass; the help shows the paper's default, the range of
    a number and the choices of a text with fixed ones (issue 32: no internal class name or cut docstring in the
    group's title)."""
    group = parser.add_argument_group("analysis settings (defaults as in the paper unless noted)")
    for f in dataclasses.fields(config_cls):
        if f.name in skip or not f.init:
            continue
        flag = "--" + f.name.replace("_", "-")
        typ = _field_type(f)
        default = f.default if f.default is not dataclasses.MISSING else None
        declared = ranges.field_range(config_cls.__name__, f.name)
        shown = f"default: {default if default not in (None, '') else ('none' if default == '' else 'per variant')}"
        off = getattr(declared, "off", None)
        if off is not None and default == off[0]:  # the default lies outside the numbers one may give: say it
            shown = f"default: {off[1]} (leave the option out)"
        if typ is bool:
            group.add_argument(flag, dest=f"cfg_{f.name}", type=_bool, default=None, metavar="yes|no",
                               help=f"default: {'yes' if default else 'no'}")
        elif typ in (int, float):
            group.add_argument(flag, dest=f"cfg_{f.name}", action=Ranged, default=None, metavar=f.name.upper(),
                               range=declared or ranges.any_finite(typ is int), help=shown)
        elif declared is not None:  # a text holding numbers (coverage's beta:A,B)
            group.add_argument(flag, dest=f"cfg_{f.name}", action=Ranged, default=None, metavar=f.name.upper(),
                               range=declared, help=shown)
        elif (options := field_choices(config_cls, f.name)) is not None:
            # a value outside the list is wrong usage: argparse's one line, exit 2 (issue 37 #15: `--chance guess`
            # exited 1), as for every other option with fixed choices
            group.add_argument(flag, dest=f"cfg_{f.name}", type=str, default=None, metavar="|".join(options),
                               choices=options, help=f"one of {', '.join(options)}; {shown}")
        else:
            group.add_argument(flag, dest=f"cfg_{f.name}", type=typ, default=None, metavar=f.name.upper(),
                               help=shown)


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
    """Progress lines on stderr once a job has run for a second, at most 4 per second (issue 32: within the first
    second after that, and never silent for long): an event that came before the first second is shown when the
    second is up, and while no event comes the last one is repeated every ``HEARTBEAT`` seconds with the time
    spent, by a small timer thread that :func:`close_progress` (after each command) stops.  The percentage shown
    never goes back (a job whose stages each count from 0 shows its stage's message without one)."""

    HEARTBEAT = 2.0
    FIRST = 1.0  # seconds before the first line (README: "Long work reports progress on stderr after its first second")
    live: list[StderrProgress] = []

    def __init__(self, label: str, quiet: bool = False):
        self.label, self.quiet = label, quiet
        self.t0 = time.perf_counter()
        self.last = 0.0
        self.shown = False
        self.pct = -1.0
        self.pending: tuple[float, float, str] | None = None
        self.latest: str = ""
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self, done: float, total: float, message: str) -> None:
        if self.quiet:
            return
        with self.lock:
            self.pending = (done, total, message)
            if self.thread is None:
                self.thread = threading.Thread(target=self._tick, name="progress", daemon=True)
                StderrProgress.live.append(self)
                self.thread.start()
            now = time.perf_counter()
            if now - self.t0 >= self.FIRST and now - self.last >= 0.25:
                self._show(now)

    def _show(self, now: float, *, again: bool = False) -> None:
        if self.pending is not None:
            done, total, message = self.pending
            self.pending = None
            pct = 100 * done / total if total else -1.0
            shown = f"{pct:5.1f}% " if total and pct >= self.pct else ""
            if shown:
                self.pct = pct
            self.latest = message
        elif again:
            shown, message = "", f"{self.latest} (still working)"
        else:
            return
        print(f"[{self.label} {now - self.t0:6.1f}s] {shown}{message}", file=sys.stderr, flush=True)
        self.last = now
        self.shown = True

    def _tick(self) -> None:
        while not self.stop.wait(0.25):
            with self.lock:
                now = time.perf_counter()
                if now - self.t0 < self.FIRST:
                    continue
                if self.pending is not None and now - self.last >= 0.25:
                    self._show(now)
                elif self.shown and now - self.last >= self.HEARTBEAT:
                    self._show(now, again=True)

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=1.0)


def close_progress() -> None:
    """Stop every progress timer of the command that just ended (cli/main.py calls it after each command)."""
    while StderrProgress.live:
        StderrProgress.live.pop().close()
