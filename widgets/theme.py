"""One theme for the whole console: the Qt frame (menus, tree, docks, panels) and the plots
take the same palette, light or dark, and the status colours keep their meaning in both.

View → Theme offers System (follows the platform's colour scheme, live), Light and Dark.
`apply_theme` sets the application's palette (Fusion style, so every platform draws the
same), pyqtgraph's defaults for plots made later, and restyles the plots that exist:
backgrounds, axes, titles, legends and curves (a curve keeps the colour it was made with
and is drawn in the theme's version of it: bright on dark, deeper on light, so a line
stays visible on either).

Status colours are read at paint time through `status_color(kind)`: healthy, warning,
failed, pending, applied, info, muted — each with a contrast of at least 4.5:1 against its
theme's base (the text background), so status text stays readable (tests/widgets/
test_theme.py checks every one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QWidget

SYSTEM, LIGHT, DARK = "system", "light", "dark"
CHOICES = (SYSTEM, LIGHT, DARK)
_BASE_COLOR = "serveConsoleBaseColor"  # property: the colour a curve was made with


@dataclass(frozen=True)
class Theme:
    name: str
    window: str
    base: str
    alt_base: str
    text: str
    button: str
    highlight: str
    highlighted_text: str
    disabled_text: str
    link: str
    plot_background: str
    plot_foreground: str  # axes, ticks
    plot_text: str  # titles, legends
    age_ok: str
    age_stale: str
    marker: str
    status: dict[str, str] = field(default_factory=dict)

    @property
    def dark(self) -> bool:
        return self.name == DARK


DARK_THEME = Theme(
    name=DARK, window="#262626", base="#1d1d1d", alt_base="#242424", text="#e0e0e0",
    button="#303030", highlight="#2f6db5", highlighted_text="#ffffff",
    disabled_text="#7a7a7a", link="#6ea8fe",
    plot_background="#161616", plot_foreground="#a0a0a0", plot_text="#c8c8c8",
    age_ok="#9e9e9e", age_stale="#ffb300", marker="#ffd54f",
    status={"healthy": "#4cc36b", "warning": "#f0a830", "failed": "#ff6b6b",
            "pending": "#f0a830", "applied": "#4cc36b", "info": "#6ea8fe",
            "muted": "#9a9a9a"})

LIGHT_THEME = Theme(
    name=LIGHT, window="#f0f0f0", base="#ffffff", alt_base="#f5f5f5", text="#1a1a1a",
    button="#e6e6e6", highlight="#2f6db5", highlighted_text="#ffffff",
    disabled_text="#8a8a8a", link="#1a56b0",
    plot_background="#ffffff", plot_foreground="#505050", plot_text="#303030",
    age_ok="#6b6b6b", age_stale="#a15c00", marker="#b8860b",
    status={"healthy": "#1e7b38", "warning": "#9a5b00", "failed": "#c62828",
            "pending": "#9a5b00", "applied": "#1e7b38", "info": "#1a56b0",
            "muted": "#666666"})

THEMES = {DARK: DARK_THEME, LIGHT: LIGHT_THEME}
_current: Theme = DARK_THEME


def current() -> Theme:
    return _current


def status_color(kind: str) -> str:
    """The current theme's colour for a status (healthy, warning, failed, pending,
    applied, info, muted); read it when painting, not once at import."""
    return _current.status.get(kind, _current.text)


def system_scheme_is_dark() -> bool:
    """What the platform's colour scheme asks for (Qt's style hints); dark when unknown
    and the application's default palette is dark."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    scheme = app.styleHints().colorScheme()
    if scheme == Qt.ColorScheme.Dark:
        return True
    if scheme == Qt.ColorScheme.Light:
        return False
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def resolve(choice: str) -> Theme:
    """The theme a choice (system, light, dark) stands for now."""
    if choice not in CHOICES:
        raise ValueError(f"unknown theme {choice!r}; one of {', '.join(CHOICES)}")
    if choice == SYSTEM:
        return DARK_THEME if system_scheme_is_dark() else LIGHT_THEME
    return THEMES[choice]


# -- contrast (WCAG 2) ----------------------------------------------------------------------
def _luminance(color: str) -> float:
    c = QColor(color)

    def channel(v: int) -> float:
        s = v / 255.0
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(c.red()) + 0.7152 * channel(c.green()) + 0.0722 * channel(c.blue())


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours (1 … 21)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def curve_color(color: str, theme: Theme | None = None) -> str:
    """A curve's colour in *theme*: as made on dark; on light, deepened until it stands
    out from the white plot (contrast ≥ 3:1, the bar for graphics)."""
    theme = theme or _current
    if theme.dark:
        return color
    c = QColor(color)
    for _ in range(12):
        if contrast(c.name(), theme.plot_background) >= 3.0:
            break
        c = c.darker(115)
    return c.name()


# -- applying ----------------------------------------------------------------------------
def palette(theme: Theme) -> QPalette:
    p = QPalette()
    roles = QPalette.ColorRole
    for role, color in ((roles.Window, theme.window), (roles.WindowText, theme.text),
                        (roles.Base, theme.base), (roles.AlternateBase, theme.alt_base),
                        (roles.Text, theme.text), (roles.Button, theme.button),
                        (roles.ButtonText, theme.text), (roles.Highlight, theme.highlight),
                        (roles.HighlightedText, theme.highlighted_text),
                        (roles.ToolTipBase, theme.base), (roles.ToolTipText, theme.text),
                        (roles.Link, theme.link), (roles.PlaceholderText, theme.disabled_text),
                        (roles.BrightText, theme.highlighted_text)):
        p.setColor(role, QColor(color))
    for role in (roles.WindowText, roles.Text, roles.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(theme.disabled_text))
    return p


def apply_theme(theme: Theme) -> None:
    """Make *theme* the console's: the application's palette, plot defaults, and every
    plot that exists now."""
    global _current
    old, _current = _current, theme
    from widgets.plots import plot_style

    plot_style.use_theme(theme)
    pg.setConfigOptions(background=theme.plot_background, foreground=theme.plot_foreground)
    app = QGuiApplication.instance()
    if app is not None:
        from PySide6.QtWidgets import QApplication

        if isinstance(app, QApplication):
            # Once: setting a style again re-polishes every widget (~0.25 s of the GUI
            # thread for one window) and changes nothing.
            if app.style().name().lower() != "fusion":
                app.setStyle("Fusion")
            app.setPalette(palette(theme))
            for top in app.topLevelWidgets():
                restyle_plots(top, theme, old)


def restyle_plots(root, theme: Theme | None = None, old: Theme | None = None) -> None:
    """Every pyqtgraph view under *root* in *theme*: background, axes, titles, legends,
    curves, and the markers drawn in *old*'s marker colour. A curve's original colour is
    kept on it, so switching back is exact."""
    theme = theme or _current
    views = root.findChildren(pg.GraphicsView)
    if isinstance(root, pg.GraphicsView):
        views.append(root)
    for view in views:
        view.setBackground(theme.plot_background)
        scene = view.scene()
        if scene is None:
            continue
        for item in scene.items():
            _restyle_item(item, theme, old)
    # Plots a stack keeps out of its layout while they have no data (optional groups) are
    # in no scene: restyled too, or they would appear later in the old theme's colours.
    for widget in [root, *root.findChildren(QWidget)]:
        plots = getattr(widget, "plots", None)
        if not callable(plots):
            continue
        try:
            items = plots()
        except TypeError:
            continue
        for plot in (items.values() if isinstance(items, dict) else ()):
            if isinstance(plot, pg.PlotItem) and plot.scene() is None:
                for item in _descendants(plot):
                    _restyle_item(item, theme, old)


class _RestyleOnFirstShow(QObject):
    """Restyles its window's plots when the window is first shown, then goes: an event
    filter on that window alone (an application-wide one ran Python for every event of
    every widget: ~600 a second while the console idles, 240,000 while a window is
    built)."""

    def eventFilter(self, obj, event) -> bool:  # noqa: N802  (Qt's name)
        if event.type() == QEvent.Type.Show and obj is self.parent():
            obj.removeEventFilter(self)
            restyle_plots(obj)
            self.deleteLater()
        return False


def restyle_when_first_shown(window: QWidget) -> None:
    """A window made after the theme was applied draws curves in the colours they were
    made with; this restyles them in the theme's when *window* is first shown (curves
    added until then included)."""
    window.installEventFilter(_RestyleOnFirstShow(window))


def _descendants(item):
    stack = [item]
    while stack:
        it = stack.pop()
        yield it
        stack.extend(it.childItems())


def _restyle_item(item, theme: Theme, old: Theme | None = None) -> None:
    from PySide6.QtWidgets import QGraphicsSimpleTextItem

    marker = QColor(old.marker) if old is not None else None
    if isinstance(item, pg.AxisItem):
        pen = pg.mkPen(theme.plot_foreground)
        item.setPen(pen)
        item.setTextPen(pen)
    elif isinstance(item, pg.PlotDataItem):
        pen = item.opts.get("pen")
        if pen is None:
            return
        qpen = pg.mkPen(pen)
        base = item.property(_BASE_COLOR)
        if base is None:
            base = qpen.color().name()
            item.setProperty(_BASE_COLOR, base)
        qpen.setColor(QColor(curve_color(base, theme)))
        item.setPen(qpen)
    elif isinstance(item, pg.LabelItem):
        if item.text:
            item.setText(item.text, color=theme.plot_text)
    elif isinstance(item, pg.InfiniteLine):
        # A marker line (drawn in the marker colour); other lines keep theirs.
        if marker is not None and item.pen.color() == marker:
            pen = pg.mkPen(item.pen)
            pen.setColor(QColor(theme.marker))
            item.setPen(pen)
    elif isinstance(item, QGraphicsSimpleTextItem):
        if marker is not None and item.brush().color() == marker:
            item.setBrush(QColor(theme.marker))
