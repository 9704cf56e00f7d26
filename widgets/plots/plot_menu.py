"""The right-click menu of a layout of plots: copy the plot under the mouse as an image,
or save it as PNG, SVG or the CSV of its points in the time range shown (widgets/
plot_export.py), under a file name after what it shows and when; then the owner's own
actions (pause, the marker list).

The menu opens on a right *click* (press and release in place), as pyqtgraph's own
menus do: a right-drag still zooms a paused plot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox

from widgets.plots.plot_export import (copy_image, file_stem, shown_time, write_csv, write_png,
                                 write_svg)

# (action text, suffix, file-dialog filter, writer, tooltip) of each Save action.
_SAVES = (
    ("Save &PNG…", ".png", "PNG image (*.png)", write_png,
     "Save this plot as a PNG image, as shown"),
    ("Save &SVG…", ".svg", "SVG drawing (*.svg)", write_svg,
     "Save this plot as an SVG drawing, as shown (scales without blur: slides, reports)"),
    ("Save &CSV…", ".csv", "CSV table (*.csv)", write_csv,
     "Save the points of this plot's curves in the time range shown as a CSV table: "
     "the time, then one column per curve"),
)


class _LastFolder:
    """The folder the last plot file was saved in (this session, every menu): where the
    next save dialog opens."""

    path: Path | None = None

    @classmethod
    def remember(cls, path: Path) -> None:
        cls.path = path


class PlotMenu(QObject):
    """The menu of the plots *plots()* of *graphics*; *name(plot)* says what a plot shows
    (e.g. 'app Model Latency'), for the default file name."""

    def __init__(self, graphics: pg.GraphicsLayoutWidget,
                 plots: Callable[[], Iterable[pg.PlotItem]],
                 name: Callable[[pg.PlotItem], str],
                 actions: Sequence[QAction] = ()) -> None:
        super().__init__(graphics)
        self._graphics = graphics
        self._plots = plots
        self._name = name
        self._plot: pg.PlotItem | None = None  # the plot the menu was opened on

        self._menu = QMenu(graphics)
        self._menu.setObjectName("plotMenu")
        self._menu.setToolTipsVisible(True)
        copy = self._menu.addAction("&Copy image")
        copy.setToolTip("Copy this plot to the clipboard as an image, as shown")
        copy.triggered.connect(self._on_copy_triggered)
        self._exports = [copy]
        for text, suffix, filter_, writer, tip in _SAVES:
            action = self._menu.addAction(text)
            action.setToolTip(tip)
            action.triggered.connect(
                lambda _checked=False, s=suffix, f=filter_, w=writer, t=text:
                self._save(t.replace("&", "").rstrip("…"), s, f, w))
            self._exports.append(action)
        if actions:
            self._menu.addSeparator()
            self._menu.addActions(list(actions))
        graphics.scene().sigMouseClicked.connect(self._on_scene_mouse_clicked)

    # ----------------------------------------------------------------- slots

    def _on_scene_mouse_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.RightButton or event.isAccepted():
            return
        self._plot = self._plot_at(event.scenePos())
        for action in self._exports:
            action.setEnabled(self._plot is not None)
        self._menu.popup(event.screenPos().toPoint())

    def _on_copy_triggered(self) -> None:
        if self._plot is not None:
            copy_image(self._plot)

    # ----------------------------------------------------------------- internals

    def _plot_at(self, pos: QPointF) -> pg.PlotItem | None:
        """The plot under *pos* (scene coordinates); beside a plot (its legend), the
        plot of that row."""
        shown = [p for p in self._plots() if p.isVisible() and p.scene() is not None]
        for plot in shown:
            if plot.sceneBoundingRect().contains(pos):
                return plot
        for plot in shown:
            rect = plot.sceneBoundingRect()
            if rect.top() <= pos.y() <= rect.bottom():
                return plot
        return None

    def _save(self, title: str, suffix: str, filter_: str, writer) -> None:
        plot = self._plot
        if plot is None:
            return
        folder = _LastFolder.path or Path.home()
        default = folder / (file_stem(self._name(plot), shown_time(plot)) + suffix)
        path, _ = QFileDialog.getSaveFileName(self._graphics, title, str(default), filter_)
        if not path:
            return
        if not path.lower().endswith(suffix):
            path += suffix
        _LastFolder.remember(Path(path).parent)
        try:
            writer(plot, path)
        except OSError as e:
            QMessageBox.warning(self._graphics, title, f"Could not write {path}:\n{e}")
