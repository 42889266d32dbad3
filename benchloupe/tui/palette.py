"""The command palette (ctrl+p): every workbench command as "area: verb", fuzzy-matched: every screen's actions
(from any screen: the command switches to that screen and runs the action there), triage actions as
"flags: verb (queue)", and "runs: start X" per registered analysis."""

from __future__ import annotations

import sys
from collections.abc import Callable

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

AREAS = (("benchmarks", "Benchmarks"), ("items", "Items"), ("models", "Models"), ("runs", "Runs"),
         ("anomalies", "Anomalies"), ("reversals", "Reversals"), ("coverage", "Coverage"), ("benchfill", "BenchFill"),
         ("itemflags", "Item flags"))


class WorkbenchCommands(Provider):
    """Screen switches, the current screen's actions, and one "runs: start X" per registered analysis."""

    def commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.app
        out: list[tuple[str, Callable[[], object], str]] = [
            (f"{area}: open", (lambda m=mode: app.action_go(m)), f"switch to the {area} screen")
            for mode, area in ((m, m) for m, _ in AREAS)
        ]
        screen = self.screen
        here = getattr(screen, "MODE", "")
        seen: set[str] = set()
        for _key, active in screen.active_bindings.items():
            b = active.binding
            if not b.id or "." not in b.id or b.action.startswith("go(") or b.id.startswith("app."):
                continue
            name = command_name(here or b.id.split(".")[0], b)
            if name in seen:
                continue
            seen.add(name)
            out.append((name, (lambda node=active.node, action=b.action: app.run_action(action, node)),
                        f"key {b.key_display or b.key}"))
        from benchloupe.tui.screens import SCREENS

        for mode, (ref, _key, title) in SCREENS.items():
            if mode == here:
                continue
            for b in screen_bindings(ref.cls):
                name = command_name(mode, b)
                if name not in seen:
                    seen.add(name)
                    out.append((name, (lambda m=mode, action=b.action: _on(app, m, action)),
                                f"key {b.key_display or b.key.split(',')[0]} on {title}"))
        out.append(("benchmarks: build demo workspace", lambda: _on(app, "benchmarks", "demo"), "key d on Benchmarks"))
        out.append(("benchmarks: import a file", lambda: _on(app, "benchmarks", "import_file"), "key o on Benchmarks"))
        out.append(("benchmark: switch", app.action_switch_benchmark, "key B: every screen shows the chosen one"))
        out.append(("export: table", app.action_export_table, "key w: the table on screen to CSV/JSON"))
        out.append(("export: decisions", app.action_export_decisions,
                    "key W: flag triage and BenchFill decisions to CSV/JSON"))
        out.append(("job: cancel", app.action_cancel_job, "key x"))
        out.append(("runs: replicate workers", app.action_replicate_workers,
                    "every core, N processes or a Dask cluster for the analyses' replicates"))
        out.append(("help: keys", app.action_help, "key ?"))
        from benchloupe.tui.screens.runs import plain_title

        jobs = sys.modules.get("benchloupe.jobs")  # imported in the background at start-up
        for name, analysis in (getattr(jobs, "ANALYSES", None) or {}).items():
            out.append((f"runs: start {name}", lambda n=name: _start(app, n), plain_title(analysis.title)))
        return out

    async def discover(self) -> Hits:
        for name, callback, help_text in self.commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self.commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


def screen_bindings(cls) -> list[Binding]:
    """A screen class's own bindings with an id (its bases' first), the ones the palette offers."""
    out = []
    for base in reversed(cls.__mro__):
        for b in vars(base).get("BINDINGS", []):
            if isinstance(b, Binding) and b.id and "." in b.id and not b.action.startswith(("go(", "app.")):
                out.append(b)
    return out


def command_name(mode: str, b: Binding) -> str:
    """ "items: search"; a triage queue's actions read "flags: next untriaged (anomalies)"."""
    if b.id.startswith("queue."):
        return f"flags: {b.description.lower()} ({mode})"
    return f"{mode}: {b.description.lower()}"


def _on(app, mode: str, action: str) -> None:
    app.switch_mode(mode)
    app.call_after_refresh(lambda: app.run_action(action, app.screen))


def _start(app, name: str) -> None:
    app.switch_mode("runs")
    app.screen.start_analysis(name)
