"""A recorded session, offline: the same plots, markers and event log as the live
console, a time slider to scrub, two ranges (A, B) to compare, and exports.

No cluster is needed: everything comes from the session file, read whole by the
caller (backend.recording.reader.open_session, on a worker thread).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QComboBox, QDockWidget, QFileDialog, QHBoxLayout, QInputDialog,
                               QLabel, QListWidget, QListWidgetItem, QMainWindow, QMessageBox,
                               QSlider, QSplitter, QVBoxLayout, QWidget)

from backend.recording.compare import Comparison, TimeRange, compare
from backend.recording.reader import SessionData
from console.model.tasks import TaskRunner, user_message
from console.windows.actions import add_action
from widgets.compare_view import OVERLAY, CompareView
from widgets.event_log import EventLog
from widgets.plots.live_plots import LivePlots
from widgets.theme import restyle_when_first_shown

#: Default compare ranges around a marker: A before it, B after it once settled.
RANGE_S = 60.0
SETTLE_S = 5.0
_A_BRUSH, _B_BRUSH = (31, 119, 180, 40), (255, 127, 14, 40)


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


class SessionViewer(QMainWindow):
    """One recorded session (and, when comparing two sessions, the other one as B)."""

    closed = Signal(object)  # self
    # A note was written into the file: (path, t, text) — the console does the writing.
    note_requested = Signal(str, float, str)

    def __init__(self, data: SessionData, other: SessionData | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        restyle_when_first_shown(self)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.data = data
        self.other = other
        self.interactive = True
        self._runner = TaskRunner("viewer", max_workers=1)
        self._regions: list[tuple[pg.LinearRegionItem, pg.LinearRegionItem]] = []
        self._syncing = False
        name = data.name or os.path.basename(data.path)
        self.setWindowTitle(f"serve-console — recorded session {name}"
                            + (f" vs {other.name or os.path.basename(other.path)}"
                               if other is not None else ""))
        self.resize(1400, 900)

        self._build_deployment_list()
        self._build_plots()
        self._build_center(self._build_scrubber())
        log_dock = self._build_event_log()
        self._build_compare_dock()
        self.resizeDocks([self.compare_dock], [560], Qt.Orientation.Horizontal)
        self.resizeDocks([log_dock], [200], Qt.Orientation.Vertical)

        self._recompare = QTimer(self)
        self._recompare.setSingleShot(True)
        self._recompare.setInterval(150)
        self._recompare.timeout.connect(self.update_comparison)
        self._build_regions()
        self._build_menus()
        self.statusBar().showMessage(self._describe(), 0)
        if self.deployments.count():
            self.deployments.setCurrentRow(0)
        self._place_default_ranges()
        self._redraw()

    # -- construction -----------------------------------------------------------------------
    def _build_deployment_list(self) -> None:
        """The deployments the session recorded (application-level series show with each)."""
        self.deployments = QListWidget()
        self.deployments.setToolTip("The deployments this session recorded")
        for app, dep in self.data.deployments():
            if not dep:
                continue  # application-level series (HTTP latency) show with each one
            item = QListWidgetItem(f"{app}/{dep}")
            item.setData(Qt.ItemDataRole.UserRole, (app, dep))
            self.deployments.addItem(item)
        self.deployments.currentItemChanged.connect(self._on_deployments_current_changed)

    def _build_plots(self) -> None:
        """The live console's plots on the session's store, with its markers."""
        self.plots = LivePlots()
        self.plots.set_store(self.data.store)
        self.plots.set_window(None)
        self.plots.window_changed.connect(lambda _w: self._redraw())
        for m in self.data.markers:
            self.plots.add_marker(m.t, m.label, m.detail)

    def _build_scrubber(self) -> QHBoxLayout:
        """The time slider (tenths of a second, at the session's end) and its clock."""
        data = self.data
        self.slider = QSlider(Qt.Orientation.Horizontal)
        # Tenths of a second in a Qt int (a session of up to ~6 years).
        self._span = min(2**31 - 1, max(1, int(round((data.ended_t - data.started_t) * 10))))
        self.slider.setRange(0, self._span)
        self.slider.setValue(self._span)
        self.slider.setToolTip("Scrub through the session: the plots end at this moment "
                               "(the window above sets how much they show; ←/→ step). "
                               "Pause (Space) to zoom and pan with the mouse.")
        self.slider.valueChanged.connect(lambda _v: self._redraw())
        self._time_label = QLabel("")
        scrub = QHBoxLayout()
        scrub.addWidget(QLabel("Time"))
        scrub.addWidget(self.slider, 1)
        scrub.addWidget(self._time_label)
        return scrub

    def _build_center(self, scrub: QHBoxLayout) -> None:
        """The deployments beside the plots over the scrubber, as the central widget."""
        center = QWidget()
        box = QVBoxLayout(center)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.plots, 1)
        box.addLayout(scrub)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.deployments)
        split.addWidget(center)
        split.setSizes([260, 1000])
        self.setCentralWidget(split)

    def _build_event_log(self) -> QDockWidget:
        """The session's event log, docked at the bottom; returns its dock."""
        self.event_log = EventLog(max_entries=max(1000, len(self.data.events) + 10))
        for t, level, message in self.data.events:
            self.event_log.add(message, level, t)
        log_dock = QDockWidget("Event log", self)
        log_dock.setObjectName("Event_log")
        log_dock.setWidget(self.event_log)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, log_dock)
        return log_dock

    def _build_compare_dock(self) -> None:
        """The comparison of ranges A and B, with the marker to place them around, docked
        on the right."""
        self.compare_view = CompareView()
        self.compare_view.deployment_changed.connect(lambda _k: self._update_overlay())
        self.marker_combo = QComboBox()
        self.marker_combo.setToolTip(
            f"Compare the {RANGE_S:.0f} s before a marker (A) with the {RANGE_S:.0f} s "
            f"after it, {SETTLE_S:.0f} s on to let it settle (B). Drag the shaded ranges "
            "on the plots to change them.")
        self.marker_combo.addItem("Ranges around a marker…", None)
        for m in self.data.markers:
            self.marker_combo.addItem(f"{_clock(m.t)}  {m.label}", m.t)
        self.marker_combo.currentIndexChanged.connect(self._on_marker_combo_changed)
        compare_box = QWidget()
        cbox = QVBoxLayout(compare_box)
        cbox.setContentsMargins(2, 2, 2, 2)
        cbox.addWidget(self.marker_combo)
        cbox.addWidget(self.compare_view, 1)
        self.compare_dock = QDockWidget("Compare", self)
        self.compare_dock.setObjectName("Compare")
        self.compare_dock.setWidget(compare_box)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.compare_dock)

    # -- the session ------------------------------------------------------------------------
    def _describe(self) -> str:
        d = self.data
        url = d.meta.get("cluster_url", "?")
        return (f"{url} · {_clock(d.started_t)}–{_clock(d.ended_t)} "
                f"({(d.ended_t - d.started_t) / 60:.1f} min) · {d.path}")

    def cursor_time(self) -> float:
        return self.data.started_t + self.slider.value() / 10.0

    def _redraw(self) -> None:
        now = self.cursor_time()
        self._time_label.setText(f"{_clock(now)} (+{now - self.data.started_t:.0f} s)")
        self.plots.refresh(now)

    @Slot(object, object)
    def _on_deployments_current_changed(self, item, _previous) -> None:
        if item is not None:
            self.plots.set_key(item.data(Qt.ItemDataRole.UserRole))
            self._redraw()

    def select(self, app: str, deployment: str) -> None:
        for i in range(self.deployments.count()):
            if self.deployments.item(i).data(Qt.ItemDataRole.UserRole) == (app, deployment):
                self.deployments.setCurrentRow(i)

    # -- ranges ------------------------------------------------------------------------------------
    def _build_regions(self) -> None:
        for plot in self.plots.plots().values():
            pair = []
            for brush, tip in ((_A_BRUSH, "Range A (drag to move, edges to resize)"),
                               (_B_BRUSH, "Range B (drag to move, edges to resize)")):
                region = pg.LinearRegionItem(brush=pg.mkBrush(*brush), movable=True)
                region.setZValue(-10)
                region.setToolTip(tip)
                region.sigRegionChanged.connect(self._on_region_changed)
                plot.addItem(region, ignoreBounds=True)
                pair.append(region)
            self._regions.append((pair[0], pair[1]))

    def ranges(self) -> tuple[TimeRange, TimeRange]:
        a, b = self._regions[0]
        (a0, a1), (b0, b1) = a.getRegion(), b.getRegion()
        return (TimeRange(a0, max(a1, a0 + 1), "A"),
                TimeRange(b0, max(b1, b0 + 1), "B"))

    def set_ranges(self, a: tuple[float, float], b: tuple[float, float]) -> None:
        self._syncing = True
        for ra, rb in self._regions:
            ra.setRegion(a)
            rb.setRegion(b)
        self._syncing = False
        self._recompare.start()

    def _on_region_changed(self, region) -> None:
        if self._syncing:
            return
        which = next(i for pair in self._regions for i, r in enumerate(pair) if r is region)
        self._syncing = True
        for pair in self._regions:
            if pair[which] is not region:
                pair[which].setRegion(region.getRegion())
        self._syncing = False
        self._recompare.start()

    def _place_default_ranges(self) -> None:
        d = self.data
        if self.other is not None:
            # Two sessions: A is this one's first minutes, B the other's (aligned).
            span = min(RANGE_S * 5, d.ended_t - d.started_t)
            self.set_ranges((d.started_t, d.started_t + span),
                            (d.started_t, d.started_t + span))
            return
        applied = sorted(k.applied_t for k in d.knob_changes if k.applied_t)
        if applied:
            self.around(applied[0])
        else:
            mid = (d.started_t + d.ended_t) / 2
            self.set_ranges((max(d.started_t, mid - RANGE_S), mid),
                            (mid, min(d.ended_t, mid + RANGE_S)))

    def around(self, t: float) -> None:
        """A = the RANGE_S before *t*, B = RANGE_S after it from SETTLE_S on."""
        d = self.data
        a0 = max(d.started_t, t - RANGE_S)
        b0 = min(t + SETTLE_S, d.ended_t - 1)
        self.set_ranges((a0, max(t, a0 + 1)), (b0, min(d.ended_t, b0 + RANGE_S)))

    def _on_marker_combo_changed(self, index: int) -> None:
        t = self.marker_combo.itemData(index)
        if t is not None:
            self.around(float(t))

    def _b_range(self, b: TimeRange) -> TimeRange:
        """Range B in the other session's time (same offset from its start)."""
        if self.other is None:
            return b
        shift = self.other.started_t - self.data.started_t
        return TimeRange(b.start + shift, b.end + shift, "B")

    def update_comparison(self) -> Comparison | None:
        a, b = self.ranges()
        try:
            c = compare(self.data, a, self.other, self._b_range(b))
        except ValueError as e:
            self.statusBar().showMessage(str(e), 5000)
            return None
        names = ("", "")
        if self.other is not None:
            names = (self.data.name or os.path.basename(self.data.path),
                     self.other.name or os.path.basename(self.other.path))
        self.compare_view.set_comparison(c, names)
        self._update_overlay()
        return c

    def _update_overlay(self) -> None:
        c, key = self.compare_view.comparison(), self.compare_view.current_deployment()
        if c is None or key is None:
            return
        other = self.other or self.data
        series = {}
        for name, _, _ in OVERLAY:
            ta, va = _cut(self.data.store.snapshot(key, name), c.a)
            tb, vb = _cut(other.store.snapshot(key, name), c.b)
            series[name] = (ta, va, tb, vb)
        self.compare_view.set_overlay(series)

    # -- menus -----------------------------------------------------------------------------------
    def _build_menus(self) -> None:
        menu = self.menuBar().addMenu("&Session")
        self.export_csv_action = self._action(
            menu, "Export &CSV…", "Ctrl+Shift+E",
            "One row per second, one column per series (with COLUMNS.md), plus the load "
            "generator's seconds, knob changes and events", self._on_export_csv)
        self.export_range_actions = [self._action(
            menu, f"Export range {label} as CSV…", None,
            f"The same CSV files, only the seconds inside range {label} (the shaded "
            "region on the plots)", lambda checked=False, i=i: self._on_export_range(i))
            for i, label in enumerate("AB")]
        self.export_html_action = self._action(
            menu, "Export &HTML report…", "Ctrl+Shift+H",
            "A self-contained report (plots, the comparison of A and B, config diffs, "
            "notes, event log) that opens in any browser", self._on_export_html)
        self.export_yaml_action = self._action(
            menu, "Export final Serve &config…", None,
            "The Serve config the cluster ran at the end of the session, for `serve deploy`",
            self._on_export_yaml)
        menu.addSeparator()
        self.note_action = self._action(
            menu, "Add &note at the cursor…", "Ctrl+M",
            "Annotate the moment the time slider is at (written into the session file)",
            self._on_note_triggered)
        menu.addSeparator()
        self._action(menu, "&Close", QKeySequence.StandardKey.Close, "Close this session",
                     self.close)
        view = self.menuBar().addMenu("&View")
        view.addAction(self.compare_dock.toggleViewAction())

    def _action(self, menu, text, shortcut, tip, slot) -> QAction:
        return add_action(self, menu, text, shortcut, tip, slot)

    def _ask_path(self, title: str, default: str, filt: str, folder: bool = False) -> str:
        if folder:
            return QFileDialog.getExistingDirectory(self, title, default)
        path, _ = QFileDialog.getSaveFileName(self, title, default, filt)
        return path

    def _stem(self) -> str:
        return os.path.splitext(os.path.basename(self.data.path))[0]

    def export_csv(self, folder: str, on_done=None, time_range: TimeRange | None = None
                   ) -> None:
        """CSV files of the session (of *time_range* only, when given) into *folder*,
        on a worker thread."""
        from backend.recording.export import export_csv
        what = f"CSV files in {folder}" + (
            f" (range {time_range.label}: {_clock(time_range.start)}–"
            f"{_clock(time_range.end)})" if time_range is not None else "")
        self._export(lambda: export_csv(self.data, folder, time_range), what, on_done)

    def export_html(self, path: str, on_done=None) -> None:
        from backend.recording.export import export_html
        c = self.compare_view.comparison() if self.other is None else None
        self._export(lambda: export_html(self.data, path, comparison=c), path, on_done)

    def export_yaml(self, path: str, on_done=None) -> None:
        from backend.recording.export import final_config_yaml

        def work():
            text = final_config_yaml(self.data)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        self._export(work, path, on_done)

    def _export(self, work, what: str, on_done=None) -> None:
        self.statusBar().showMessage(f"Exporting {what}…")

        def done(_result) -> None:
            self.statusBar().showMessage(f"Exported {what}", 10_000)
            if on_done:
                on_done(True, what)

        def failed(e: BaseException) -> None:
            message = f"Export failed: {user_message(e)}"
            self.statusBar().showMessage(message, 10_000)
            if self.interactive and self.isVisible():
                QMessageBox.warning(self, "Export", message)
            if on_done:
                on_done(False, message)
        self._runner.submit(work, on_done=done, on_error=failed)

    @Slot()
    def _on_export_csv(self) -> None:
        folder = self._ask_path("Export CSV into a folder", os.path.expanduser("~"), "",
                                folder=True)
        if folder:
            self.export_csv(os.path.join(folder, self._stem() + "_csv"))

    def _on_export_range(self, index: int) -> None:
        r = self.ranges()[index]
        folder = self._ask_path(f"Export range {r.label} as CSV into a folder",
                                os.path.expanduser("~"), "", folder=True)
        if folder:
            self.export_csv(os.path.join(folder, f"{self._stem()}_{r.label}_csv"),
                            time_range=r)

    @Slot()
    def _on_export_html(self) -> None:
        path = self._ask_path("Export an HTML report", self._stem() + ".html",
                              "HTML report (*.html)")
        if path:
            self.export_html(path)

    @Slot()
    def _on_export_yaml(self) -> None:
        path = self._ask_path("Export the final Serve config", self._stem() + ".yaml",
                              "Serve config (*.yaml *.yml)")
        if path:
            self.export_yaml(path)

    @Slot()
    def _on_note_triggered(self) -> None:
        t = self.cursor_time()
        text, ok = QInputDialog.getMultiLineText(
            self, "Add a note", f"A note for {_clock(t)} (saved in the session file):")
        if ok and text.strip():
            self.add_note(t, text.strip())

    def add_note(self, t: float, text: str) -> None:
        self.plots.add_marker(t, f"✎ {text[:40]}", text)
        self.event_log.add(f"Note: {text}", "info", t)
        self.note_requested.emit(self.data.path, t, text)

    def closeEvent(self, event) -> None:
        self._runner.shutdown(wait=True)  # a running export finishes its file
        self.closed.emit(self)
        super().closeEvent(event)


def _cut(tv: tuple[np.ndarray, np.ndarray], r: TimeRange) -> tuple[np.ndarray, np.ndarray]:
    t, v = tv
    inside = (t >= r.start) & (t < r.end)
    return t[inside] - r.start, v[inside]
