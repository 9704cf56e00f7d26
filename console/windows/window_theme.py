"""View → Theme: System (follows the platform's colour scheme, also when it changes while
the console runs), Light or Dark; remembered in the settings. widgets/theme.py does the
painting; this is the menu, the choice and the platform's signal."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QActionGroup, QGuiApplication

from widgets.theme import CHOICES, SYSTEM, apply_theme, resolve

_TITLES = {"system": "&System", "light": "&Light", "dark": "&Dark"}
_TIPS = {"system": "Follow the platform's light or dark setting, also when it changes",
         "light": "Light frame and plots", "dark": "Dark frame and plots"}


class WindowTheme(QObject):
    """The theme choice of the console (one per application; the main window owns it)."""

    #: A theme was applied (views that colour from it outside the palette restyle).
    applied = Signal()

    def __init__(self, parent: QObject, settings) -> None:
        super().__init__(parent)
        self._settings = settings
        self.choice = settings.theme() or SYSTEM
        self.actions: dict[str, QAction] = {}
        app = QGuiApplication.instance()
        if app is not None:
            app.styleHints().colorSchemeChanged.connect(self._on_hints_color_scheme_changed)
        # Windows with plots made later (auto-tune, a recorded session) restyle
        # themselves when first shown (widgets.theme.restyle_when_first_shown).

    def build_menu(self, view_menu, owner) -> None:
        from console.windows.actions import add_action

        menu = view_menu.addMenu("T&heme")
        group = QActionGroup(self)
        for name in CHOICES:
            a = add_action(owner, menu, _TITLES[name], None, _TIPS[name],
                           lambda _checked=False, n=name: self.choose(n))
            a.setCheckable(True)
            group.addAction(a)
            self.actions[name] = a
        self.actions[self.choice].setChecked(True)

    def choose(self, choice: str, persist: bool = True) -> None:
        """Use *choice* (system, light, dark) now; *persist*: remembered (not for
        --theme, which is this run's only)."""
        theme = resolve(choice)  # ValueError for an unknown name
        self.choice = choice
        if persist:
            self._settings.set_theme(choice)
        if choice in self.actions:
            self.actions[choice].setChecked(True)
        apply_theme(theme)
        self.applied.emit()

    def _on_hints_color_scheme_changed(self, _scheme) -> None:
        if self.choice == SYSTEM:
            apply_theme(resolve(SYSTEM))
            self.applied.emit()
