"""The command palette (ctrl+p): every workbench command as "area: verb", fuzzy-matched."""

from __future__ import annotations

import sys
from collections.abc import Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider

AREAS = (("benchmarks", "Benchmarks"), ("items", "Items"), ("models", "Models"), ("runs", "Runs"),
         ("anomalies", "Anomalies"), ("reversals", "Reversals"), ("coverage", "Coverage"), ("benchfill", "BenchFill"))


class WorkbenchCommands(Provider):
    """Screen switches, the current screen's actions, and one "runs: start X" per registered analysis."""

    def commands(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.app
        out: list[tuple[str, Callable[[], object], str]] = [
            (f"{area}: open", (lambda m=mode: app.action_go(m)), f"switch to the {area} screen")
            for mode, area in ((m, m) for m, _ in AREAS)
        ]
        screen = self.screen
        for _key, active in screen.active_bindings.items():
            b = active.binding
            if not b.id or "." not in b.id or b.action.startswith("go(") or b.id.startswith("app."):
                continue
            area = getattr(screen, "MODE", "") or b.id.split(".")[0]
            out.append((f"{area}: {b.description.lower()}",
                        (lambda node=active.node, action=b.action: app.run_action(action, node)),
                        f"key {b.key}"))
        out.append(("benchmarks: build demo workspace", lambda: _on(app, "benchmarks", "demo"), "key d on Benchmarks"))
        out.append(("benchmarks: import a file", lambda: _on(app, "benchmarks", "import_file"), "key o on Benchmarks"))
        out.append(("job: cancel", app.action_cancel_job, "key x"))
        out.append(("help: keys", app.action_help, "key ?"))
        jobs = sys.modules.get("benchloupe.jobs")  # imported in the background at start-up
        for name, analysis in (getattr(jobs, "ANALYSES", None) or {}).items():
            out.append((f"runs: start {name}", lambda n=name: _start(app, n), analysis.title))
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


def _on(app, mode: str, action: str) -> None:
    app.switch_mode(mode)
    app.call_after_refresh(lambda: app.run_action(action, app.screen))


def _start(app, name: str) -> None:
    app.switch_mode("runs")
    app.screen.start_analysis(name)
