"""Layouts for the jobs people do (View → Layout), and the window's saved state.

  Watch        the plots take the window: the tree narrow, the tuning and advisor docks
               hidden, the load and the event log collapsed to one line each (their
               title bars, which say what they hold: the load's rate and p99, the
               newest event)
  Tune         the plots, the tuning and advisor docks, the load panel open (the event
               log hidden: View → Event log)
  Investigate  the per-replica view, the event log open, the load one line

The window's state (docks, their sizes) is saved with a version (`saveState(VERSION)`):
a state saved by a console with other docks is not restored, the saved layout is applied
afresh instead. View → Reset layout applies the chosen layout again and forgets what the
user moved since.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QDockWidget, QMainWindow

#: Bump when the docks change: an older saved state is then not restored.
STATE_VERSION = 2
WATCH, TUNE, INVESTIGATE = "watch", "tune", "investigate"
LAYOUTS = (WATCH, TUNE, INVESTIGATE)
DEFAULT = TUNE
_TITLES = {WATCH: "&Watch", TUNE: "&Tune", INVESTIGATE: "&Investigate"}
_TIPS = {
    WATCH: "The plots take the window: tree narrow, tuning and advisor hidden, the load "
           "and the event log one line each",
    TUNE: "The plots with the tuning and advisor docks and the load panel (the event log "
          "hidden: View → Event log)",
    INVESTIGATE: "The per-replica view with the event log open",
}
COLLAPSED_MIN_WIDTH = 420  # a collapsed dock's one line needs this much to say anything
_TREE_WIDTH = {WATCH: 200, TUNE: 340, INVESTIGATE: 300}


class WindowLayouts(QObject):
    """The View → Layout menu of main window *w* and what each layout does to it."""

    def __init__(self, w: QMainWindow, settings) -> None:
        super().__init__(w)
        self._w, self._settings = w, settings
        self.current = settings.layout() or DEFAULT
        self._collapsed: set[QDockWidget] = set()
        self._titles = {d: d.windowTitle() for d in self._docks()}
        self._load_line = ""
        self._log_line = ""
        self.actions: dict[str, QAction] = {}

    # -- the menu -------------------------------------------------------------------------
    def build_menu(self, view_menu) -> None:
        from console.windows.actions import add_action

        menu = view_menu.addMenu("&Layout")
        group = QActionGroup(self)
        for i, name in enumerate(LAYOUTS, start=1):
            a = add_action(self._w, menu, _TITLES[name], f"Ctrl+Alt+{i}", _TIPS[name],
                           lambda _checked=False, n=name: self.apply(n))
            a.setCheckable(True)
            group.addAction(a)
            self.actions[name] = a
        menu.addSeparator()
        self.reset_action = add_action(
            self._w, menu, "&Reset layout", None,
            "Put the docks back where the chosen layout has them (forgets what was moved "
            "since)", lambda: self.apply(self.current))
        self.expand_action = add_action(
            self._w, menu, "E&xpand the load and event log", "Ctrl+Shift+L",
            "Open the load panel and the event log where a layout collapsed them to one "
            "line", self.expand_all)
        self.actions[self.current].setChecked(True)

    # -- layouts --------------------------------------------------------------------------
    def apply(self, name: str) -> None:
        """Arrange the window for *name* (one of LAYOUTS) and remember the choice."""
        if name not in LAYOUTS:
            raise ValueError(f"unknown layout {name!r}; one of {', '.join(LAYOUTS)}")
        w = self._w
        self.current = name
        self._settings.set_layout(name)
        if name in self.actions:
            self.actions[name].setChecked(True)
        for d in self._docks():
            if d.isFloating():
                d.setFloating(False)
        w.advisor_dock.setVisible(name == TUNE)
        w.tuning_dock.setVisible(name == TUNE)
        w.worst_dock.setVisible(False)
        w.load_dock.setVisible(True)
        # Tune: the load panel takes the bottom's width (the log beside it, collapsed,
        # would only hold room); View → Event log shows it.
        w.log_dock.setVisible(name != TUNE)
        self.set_collapsed(w.load_dock, name != TUNE)
        self.set_collapsed(w.log_dock, name == WATCH)
        per_replica = name == INVESTIGATE
        if w.menus.per_replica_action.isChecked() != per_replica:
            w.menus.per_replica_action.setChecked(per_replica)
            w.show_per_replica(per_replica)
        sizes = w.main_splitter.sizes()
        total = sum(sizes) or w.width()
        tree = _TREE_WIDTH[name]
        w.main_splitter.setSizes([tree, max(1, total - tree)])
        open_docks = [d for d in (w.load_dock, w.log_dock) if d not in self._collapsed]
        if open_docks:
            w.resizeDocks(open_docks, [300] * len(open_docks), Qt.Orientation.Vertical)
        if name == TUNE:
            w.resizeDocks([w.tuning_dock], [400], Qt.Orientation.Horizontal)
            w.resizeDocks([w.tuning_dock, w.advisor_dock], [620, 160],
                          Qt.Orientation.Vertical)

    def set_collapsed(self, dock: QDockWidget, collapsed: bool) -> None:
        """A collapsed dock shows only its title bar: one line saying what it holds."""
        if collapsed == (dock in self._collapsed):
            return
        if collapsed:
            self._collapsed.add(dock)
        else:
            self._collapsed.discard(dock)
        dock.widget().setVisible(not collapsed)
        if collapsed:
            # The title bar's own line and a margin: shrunk further, Qt drops its text.
            dock.setMinimumHeight(dock.fontMetrics().height() + 10)
            # …and room for its line: without its widget a dock's width falls to its
            # title bar's buttons, and the text of that line is dropped.
            dock.setMinimumWidth(COLLAPSED_MIN_WIDTH)
            # The dock area keeps its height unless asked: shrink it to the title bar.
            self._w.resizeDocks([dock], [1], Qt.Orientation.Vertical)
        else:
            dock.setMinimumHeight(0)
            dock.setMinimumWidth(0)
        self._settings.set_collapsed_docks(sorted(d.objectName() for d in self._collapsed))
        self._retitle(dock)

    def collapsed(self, dock: QDockWidget) -> bool:
        return dock in self._collapsed

    def expand_all(self) -> None:
        for dock in list(self._collapsed):
            self.set_collapsed(dock, False)
        open_docks = [self._w.load_dock, self._w.log_dock]
        self._w.resizeDocks(open_docks, [300, 300], Qt.Orientation.Vertical)

    # -- start and quit -------------------------------------------------------------------
    def restore(self, layout: str | None = None) -> None:
        """At start: *layout* (the command line's) or the saved state and layout."""
        w = self._w
        state = None if layout else self._settings.geometry()[1]
        if state is not None and w.restoreState(state, STATE_VERSION):
            names = set(self._settings.collapsed_docks())
            for d in (w.load_dock, w.log_dock):
                self.set_collapsed(d, d.objectName() in names)
            return
        self.apply(layout or self.current)

    def save_state(self):
        return self._w.saveState(STATE_VERSION)

    # -- one-line titles of collapsed docks ----------------------------------------------
    def on_load_stats(self, stats) -> None:
        if stats.running:
            line = (f"{stats.achieved_rps:.1f} req/s achieved of "
                    f"{stats.target_rps:g} · p99 "
                    + (f"{stats.p99_ms:.0f} ms" if stats.p99_ms is not None else "—"))
        else:
            line = "stopped"
        if line != self._load_line:
            self._load_line = line
            self._retitle(self._w.load_dock)

    def on_event(self, entry) -> None:
        text = " | ".join(ln.strip() for ln in entry.message.splitlines() if ln.strip())
        self._log_line = f"{entry.stamp()[:8]} {entry.level}: {text}"
        self._retitle(self._w.log_dock)

    def _retitle(self, dock: QDockWidget) -> None:
        title = self._titles.get(dock, dock.windowTitle())
        if dock in self._collapsed:
            line = self._load_line if dock is self._w.load_dock else (
                self._log_line if dock is self._w.log_dock else "")
            text = f"{title} — {line}" if line else title
            if len(text) > 140:
                text = text[:139] + "…"
            dock.setWindowTitle(text)
            dock.setToolTip(f"{title}, collapsed to one line (View → Layout → Expand, "
                            f"Ctrl+Shift+L)")
        else:
            dock.setWindowTitle(title)
            dock.setToolTip("")

    def _docks(self) -> list[QDockWidget]:
        w = self._w
        return [w.tuning_dock, w.load_dock, w.log_dock, w.advisor_dock, w.worst_dock]
