"""The footer of the chat: Textual's ``Footer``, changed in place instead of rebuilt.

Textual's ``Footer`` rebuilds all its keys whenever the screen's bindings are refreshed,
a frame later: two layout passes of the whole screen (every message view included) each
time, and the chat refreshes them twice a turn (Escape "Stop reply" shows while a reply
is written). This one does nothing when what it shows is the same, only re-styles a key
whose enabled state changed, and shows or hides just the keys that come or go (a key
that goes stays, hidden, for when it comes back), at once, so their layout pass is the
one the chat's own change (a message view mounted) makes. Anything else (grouped keys,
a new order) is rebuilt as ``Footer`` does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class Shown(NamedTuple):
    """A key as the footer shows it."""

    key: str
    key_display: str
    description: str
    action: str
    enabled: bool
    tooltip: str


class ChatFooter(Footer):
    def shown(self, screen: Screen[Any]) -> list[Shown] | None:
        """The keys ``Footer.compose`` would show (the command palette's aside), in its order;
        None when a binding group is shown (left to ``Footer``)."""
        keys: list[Shown] = []
        actions: set[str] = set()
        for _node, binding, enabled, tooltip in screen.active_bindings.values():
            if not binding.show:
                continue
            if binding.group is not None:
                return None
            if binding.action in actions:  # Footer shows the first binding of an action
                continue
            actions.add(binding.action)
            keys.append(Shown(binding.key, self.app.get_key_display(binding), binding.description,
                              binding.action, enabled, tooltip or ""))
        return keys

    def rebuild(self, screen: Screen[Any]) -> None:
        """``Footer.bindings_changed``, minus its pause while the app has no focus: a reply
        that ends while the terminal is in the background must not leave "Stop reply" shown."""
        self._bindings_ready = True
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if not (self._bindings_ready and self.is_attached and screen is self.screen):
            self.rebuild(screen)
            return
        wanted = self.shown(screen)
        current = [key for key in self.query_children(FooterKey) if not key.has_class("-command-palette")]
        if wanted is None or len(current) != len(self.children) - len(self.query_children(".-command-palette")):
            self.rebuild(screen)
            return
        wanted_actions = {w.action for w in wanted}
        present = [key.action for key in current]
        if [a for a in present if a in wanted_actions] != [w.action for w in wanted if w.action in present]:
            self.rebuild(screen)  # the order changed
            return
        by_action = {key.action: key for key in current}
        for old in current:
            if old.action not in wanted_actions and old.display:
                old.display = False  # kept for when it comes back (Escape, after each reply)
        palette = self.query_children(".-command-palette")
        for index, want in enumerate(wanted):
            key = by_action.get(want.action)
            if key is None:
                new = FooterKey(want.key, want.key_display, want.description, want.action,
                                disabled=not want.enabled, tooltip=want.tooltip)
                new.set_reactive(FooterKey.compact, self.compact)  # (compose data-binds it; it never changes here)
                following = next((by_action[w.action] for w in wanted[index + 1:] if w.action in by_action), None)
                if following is not None:
                    self.mount(new, before=following)
                elif palette:
                    self.mount(new, before=palette.first())
                else:
                    self.mount(new)
                by_action[want.action] = new
                continue
            if (key.key, key.key_display, key.description) != (want.key, want.key_display, want.description):
                self.rebuild(screen)  # the same action on another key
                return
            if key._disabled == want.enabled or (key.tooltip or "") != want.tooltip:
                key._disabled = not want.enabled
                key.set_class(not want.enabled, "-disabled")
                key.tooltip = want.tooltip or None
            if not key.display:
                key.display = True
