"""The key footer, without Textual's per-recompose leak.

Textual's :class:`~textual.widgets.Footer` data-binds every ``FooterKey`` it composes to its own ``compact``
reactive. The binding is a watcher kept on the footer and pruned only when ``compact`` changes; here it never
does, while every screen switch refreshes the bindings and recomposes the keys. So each switch left the old keys
(and their styles, message queues and events) alive: ~11 widgets, ~0.6 MB a switch, without bound (issue 11:
memory must stay flat). Before composing new keys this footer drops the watchers of keys that are gone.
"""

from __future__ import annotations

from textual.widgets import Footer


class KeyFooter(Footer):
    def compose(self):
        watchers = getattr(self, "__watchers", None)
        if watchers:
            for entries in watchers.values():
                entries[:] = [(node, callback) for node, callback in entries
                              if node is self or (node.is_attached and not node._closing)]
        yield from super().compose()
