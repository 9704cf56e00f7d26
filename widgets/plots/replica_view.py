"""The per-replica breakdown of one deployment: each replica's requests/s, latency and
ongoing requests over time, a table of its replicas now, and a warning when Serve's
router leaves the load uneven.

Drawn from a second `SeriesStore` whose keys are ReplicaKeys (application, deployment,
replica id), the way LivePlots draws a deployment (pyqtgraph's scrollingPlots pattern):
a replica's curves are created once, when it first shows up in the store, and get
`setData` when its newest sample changes; clip-to-view and peak downsampling keep long
histories cheap. Each replica keeps one colour, in every plot and in the table, for as
long as the view lives; a replica with no sample inside the time window (stopped, or
scaled away) loses its curves. The x axis is wall-clock time, as in LivePlots, so the
console keeps the window (and pause) of both views in step; window, pause, markers and
ages are the plot-stack base's (widgets/plots/plot_stack.py).

The table renders `ReplicaRow`s the console builds (backend.scaling.replica_table.build_rows);
nothing here asks the cluster for anything.
"""

from __future__ import annotations

import html
import time

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QLabel,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from backend.metrics.series import SERIES, ReplicaKey, SeriesStore, replica_id
from backend.model import FAILED, HEALTHY, PENDING
from backend.scaling.replica_table import ReplicaRow, imbalance
from widgets.plots.plot_stack import PlotStack
from widgets.plots import plot_style
from widgets.plots.plot_style import MIN_PLOT_HEIGHT
from widgets.theme import status_color
from widgets.plots.replica_table import (COL_HELD, COL_ONGOING, COL_P99, COL_REPLICA, COL_RPS,
                                   COL_STARTED, COL_STATE, COLUMNS, SortItem, fmt,
                                   fmt_fixed, sort_key, format_started, make_replica_table)


# Ten colours that stay apart from each other on the plots' dark background, in the
# order replicas get them (the first three differ most: most deployments have ≤ 3).
PALETTE = ("#4fc3f7", "#ffa726", "#66bb6a", "#ef5350", "#ba68c8", "#fff176",
           "#26a69a", "#f48fb1", "#a1887f", "#e0e0e0")

# The plots, top to bottom: (title, unit, ((series, dashed), ...)).
REQUESTS, LATENCY, ONGOING = "Requests/s per replica", "Latency per replica", \
    "Ongoing per replica"
PLOTS: tuple[tuple[str, str, tuple[tuple[str, bool], ...]], ...] = (
    (REQUESTS, "1/s", (("requests_per_s", False),)),
    # p99 solid, p50 dashed in the replica's colour: the gap between them is the tail.
    (LATENCY, "ms", (("latency_p99_ms", False), ("latency_p50_ms", True))),
    (ONGOING, "requests", (("ongoing_requests", False),)),
)
_PLOTTED = tuple(s for _, _, curves in PLOTS for s, _ in curves)
_PLOT_OF = {s: title for title, _, curves in PLOTS for s, _ in curves}

# The table shows this many rows before it scrolls (more replicas: drag the splitter).
TABLE_ROWS = 6

NO_KEY_TEXT = "No deployment selected: select one in the application tree to see its replicas."
IMBALANCE_TIP = (
    "Flagged when the busiest RUNNING replica serves at least twice the requests/s of "
    "the least busy one. Replicas younger than 10 s are left out: they have not been "
    "given their share yet. Serve's router picks the less loaded of two random replicas, "
    "so steady traffic should spread evenly; a lasting gap points at model-id routing "
    "(multiplexing), a slower node, or a replica that is not taking requests.")


class ReplicaView(PlotStack):
    """Three linked time plots (one curve per replica), the replica table below."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._key: tuple[str, str] | None = None
        self._rows: list[ReplicaRow] = []
        # Colour per replica id, per deployment: kept when a replica goes away, so a
        # replica that comes back (or a switch back to the deployment) looks the same.
        self._colours: dict[tuple[str, str], dict[str, str]] = {}
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}  # (series, replica id)
        self._samples: dict[str, pg.PlotDataItem] = {}  # legend sample per replica
        self._drawn_t: dict[tuple[str, str], float | None] = {}  # newest sample drawn
        self._drawn_span: float | None = None  # the window they were drawn for (None: all)
        self._started_texts: list[str] = []
        self._icons: dict[str, QIcon] = {}

        self._key_label = QLabel()
        self._key_label.setToolTip("The deployment whose replicas are shown. "
                                   "Select one in the application tree.")
        self._build_plots()
        self._placeholder = QLabel()
        self._placeholder.setObjectName("placeholder")
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._placeholder.setWordWrap(True)
        self._placeholder.setStyleSheet(f"color: {status_color('muted')}; font-style: italic;")
        self._stack = QStackedWidget()
        self._stack.addWidget(self._placeholder)
        self._stack.addWidget(self._graphics)

        self._imbalance = QLabel()
        self._imbalance.setWordWrap(True)
        self._imbalance.setTextFormat(Qt.TextFormat.PlainText)
        self._imbalance.setStyleSheet("QLabel { background: rgba(208,138,0,40); "
                                      f"border: 1px solid {status_color('warning')}; border-radius: 3px; "
                                      "padding: 4px; }")
        self._imbalance.setToolTip(IMBALANCE_TIP)
        self._imbalance.setVisible(False)
        self._table = make_replica_table()
        self._table.setObjectName("replicaTable")

        self._bottom = QWidget()
        self._bottom.setObjectName("replicaTableArea")
        bottom = QVBoxLayout(self._bottom)
        bottom.setContentsMargins(4, 2, 4, 2)
        bottom.setSpacing(2)
        bottom.addWidget(self._imbalance)
        bottom.addWidget(self._table)

        # The user decides how much room the table takes; the plots get the rest.
        self._splitter = QSplitter(Qt.Orientation.Vertical)
        self._splitter.setChildrenCollapsible(False)
        self._splitter.addWidget(self._stack)
        self._splitter.addWidget(self._bottom)
        self._splitter.setStretchFactor(0, 3)
        self._splitter.setStretchFactor(1, 1)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self._key_label.setContentsMargins(4, 2, 4, 0)
        layout.addWidget(self._key_label)
        layout.addWidget(self._splitter, 1)

        for title, _, _ in PLOTS:
            self._set_plot_age(title, None)
        self._update_key_label()
        self._update_visibility(has_curves=False)

    # ----------------------------------------------------------------- construction

    def _build_plots(self) -> None:
        self._graphics = self._new_graphics()
        self._graphics.setMinimumHeight(MIN_PLOT_HEIGHT * len(PLOTS))
        self._plots: dict[str, pg.PlotItem] = {}
        master: pg.PlotItem | None = None
        layout = self._graphics.ci
        for row, (title, unit, curves) in enumerate(PLOTS):
            plot = self._new_plot(unit, "\n".join(
                f"{SERIES[s].label}: {SERIES[s].help}" + (" (dashed)" if dashed else "")
                for s, dashed in curves) + "\nOne curve per replica.", top=master is None)
            # Time labels once, under the bottom plot.
            self.show_time_axis(plot, row == len(PLOTS) - 1)
            if master is None:
                master = plot
            else:
                plot.setXLink(master)
            layout.addItem(plot, row=row, col=0)
            self._plots[title] = plot
        # One legend for the three plots (a replica has one colour everywhere), in its
        # own column so it never covers data.
        self._legend = self._new_legend()
        layout.addItem(self._legend, row=0, col=1, rowspan=len(PLOTS))
        layout.layout.setAlignment(self._legend, Qt.AlignmentFlag.AlignTop)

    # ----------------------------------------------------------------- public API

    def set_store(self, store: SeriesStore | None) -> None:
        """The per-replica store (keys: (application, deployment, replica id))."""
        self._drop_all_curves()
        super().set_store(store)

    def set_key(self, key: tuple[str, str] | None) -> None:
        """Show this deployment's replicas (None: nothing selected)."""
        key = tuple(key) if key is not None else None  # type: ignore[assignment]
        if key == self._key:
            return
        self._key = key
        self._drop_all_curves()
        self._rows = []
        self._fill_table()
        self._update_key_label()
        self._show_changed()

    def key(self) -> tuple[str, str] | None:
        return self._key

    def set_rows(self, rows: list[ReplicaRow]) -> None:
        """The selected deployment's replicas now (backend.scaling.replica_table.build_rows)."""
        rows = list(rows)
        if rows == self._rows:
            return  # the console sends rows on every poll; most change nothing
        self._rows = rows
        self._fill_table()
        self._update_imbalance(self._last_now())
        self._update_visibility(has_curves=bool(self._curves))

    def _redraw(self, now: float, history: bool = False) -> None:
        """The table's ages and warning, then the plots (the base's redraw: a curve gets
        setData only when its replica has a newer sample, which pollers add about once
        a second, and labels change only when their text does), then the empty state."""
        self._update_started(now)
        self._update_imbalance(now)
        super()._redraw(now, history)
        self._update_visibility(has_curves=bool(self._curves))

    # ----------------------------------------------------------------- for tests

    def curves(self) -> dict[tuple[str, str], pg.PlotDataItem]:
        """The curves drawn now, keyed (series, replica id); tests read getData()."""
        return dict(self._curves)

    def plots(self) -> dict[str, pg.PlotItem]:
        return dict(self._plots)

    def colour(self, replica_id: str) -> str | None:
        """The colour a replica is drawn in (None before it first appeared)."""
        if self._key is None:
            return None
        return self._colours.get(self._key, {}).get(replica_id)

    def table_rows(self) -> list[list[str]]:
        """The table's text, row by row as sorted on screen, shown columns only."""
        cols = [c for c in range(len(COLUMNS)) if not self._table.isColumnHidden(c)]
        return [[self._table.item(r, c).text() for c in cols]
                for r in range(self._table.rowCount())]

    def table(self) -> QTableWidget:
        return self._table

    def imbalance_text(self) -> str:
        """The imbalance warning shown above the table; '' when none is shown."""
        return self._imbalance.text() if not self._imbalance.isHidden() else ""

    # ----------------------------------------------------------------- drawing

    def _stack_plots(self) -> list[pg.PlotItem]:
        return list(self._plots.values())

    def _can_draw(self) -> bool:
        return self._store is not None and self._key is not None

    def _plot_name(self, plot: pg.PlotItem) -> str:
        title = next(t for t, p in self._plots.items() if p is plot)
        return " ".join([*(k for k in self._key or () if k), title])

    def _replicas_in_store(self) -> dict[str, ReplicaKey]:
        """{replica id: its store key} for the selected deployment."""
        out = {}
        if self._store is not None and self._key is not None:
            app, dep = self._key
            for k in self._store.keys():
                if len(k) == 3 and k[0] == app and k[1] == dep:
                    out[k[2]] = k  # type: ignore[assignment]
        return out

    def _draw(self, since: float | None, only: pg.PlotItem | None = None) -> None:
        """Bring the curves in step with the store: a curve per replica with a sample
        since *since*, given data when its replica has a newer sample than drawn (with
        *only*, on that plot's curves; replicas come and go on every plot at once)."""
        store = self._store
        assert store is not None
        span = None if since is None else self._window
        if span != self._drawn_span:  # a wider window (or all history) needs older points
            self._drawn_t.clear()
            self._drawn_span = span
        replicas = self._replicas_in_store()  # one pass over the store's keys per tick
        present: dict[str, tuple[ReplicaKey, dict[str, float | None]]] = {}
        for rid, rkey in replicas.items():
            newest = {s: store.last_time(rkey, s) for s in _PLOTTED}
            times = [t for t in newest.values() if t is not None]
            # A replica with nothing inside the window has gone (stopped, scaled away).
            if times and (since is None or max(times) >= since):
                present[rid] = (rkey, newest)
        for rid in [r for r in self._samples if r not in present]:
            self._drop_replica(rid)
        for rid, (rkey, newest) in present.items():
            if rid not in self._samples:
                self._add_replica(rid)
            for s in _PLOTTED:
                if only is not None and self._plots[_PLOT_OF[s]] is not only:
                    continue
                drawn_key = (s, rid)
                if drawn_key in self._drawn_t and self._drawn_t[drawn_key] == newest[s]:
                    continue  # nothing new: points that left the window lie off-screen
                x, y = store.snapshot(rkey, s, since=since)
                self.set_curve_data(self._curves[drawn_key], x, y)
                self._drawn_t[drawn_key] = newest[s]

    def _add_replica(self, rid: str) -> None:
        colour = self._colour_for(rid)
        for s in _PLOTTED:
            dashed = next(d for _, _, curves in PLOTS for name, d in curves if name == s)
            self._curves[(s, rid)] = self._add_curve(
                self._plots[_PLOT_OF[s]], colour,
                style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine,
                name=f"{SERIES[s].label} {replica_id(rid)}")
        # The legend's sample stands for the replica in all three plots.
        sample = pg.PlotDataItem(pen=pg.mkPen(colour, width=2))
        self._samples[rid] = sample
        self._set_in_legend(rid, self._legend, sample, html.escape(replica_id(rid)), True)

    def _drop_replica(self, rid: str) -> None:
        for s in _PLOTTED:
            curve = self._curves.pop((s, rid), None)
            if curve is not None:
                self._plots[_PLOT_OF[s]].removeItem(curve)
            self._drawn_t.pop((s, rid), None)
        sample = self._samples.pop(rid, None)
        if sample is not None:
            self._set_in_legend(rid, self._legend, sample, "", False)

    def _drop_all_curves(self) -> None:
        for rid in list(self._samples):
            self._drop_replica(rid)
        self._drawn_t.clear()

    def _colour_for(self, rid: str) -> str:
        """The replica's colour: the next of PALETTE in order of first appearance,
        skipping colours that replicas shown now have, while there are free ones."""
        assert self._key is not None
        assigned = self._colours.setdefault(self._key, {})
        if rid in assigned:
            return assigned[rid]
        in_use = {assigned[r] for r in self._samples if r in assigned}
        in_use |= {assigned[r.replica_id] for r in self._rows if r.replica_id in assigned}
        start = len(assigned)
        for i in range(len(PALETTE)):
            colour = PALETTE[(start + i) % len(PALETTE)]
            if colour not in in_use:
                break
        else:
            colour = PALETTE[start % len(PALETTE)]
        assigned[rid] = colour
        return colour

    def _update_ages(self, now: float) -> None:
        store, key = self._store, self._key
        assert store is not None and key is not None
        newest_per_plot: dict[str, float] = {}
        for rid in self._samples:
            rkey = (*key, rid)
            newest_replica: float | None = None
            for s in _PLOTTED:
                t = store.last_time(rkey, s)
                if t is None:
                    continue
                title = _PLOT_OF[s]
                newest_per_plot[title] = max(newest_per_plot.get(title, t), t)
                newest_replica = t if newest_replica is None else max(newest_replica, t)
            if newest_replica is not None:
                self._set_replica_age(rid, now - newest_replica)
        for title, _, _ in PLOTS:
            t = newest_per_plot.get(title)
            self._set_plot_age(title, None if t is None else now - t)

    def _set_replica_age(self, rid: str, age_s: float) -> None:
        # The legend says how fresh each replica's figures are: a replica that stops
        # reporting (stopping, stuck) goes amber before its curves leave the window.
        self._show_legend_age(rid, self._legend, self._samples[rid],
                              html.escape(replica_id(rid)), age_s, tip_name=f"replica {rid}")

    def _set_plot_age(self, title: str, age_s: float | None) -> None:
        unit = next(u for t, u, _ in PLOTS if t == title)
        extra = (f"&nbsp;&nbsp;<span style='color:{plot_style.AGE_OK}'>p99 solid, p50 dashed</span>"
                 if title == LATENCY else "")
        self._show_title_age(title, self._plots[title], title, unit, age_s, extra)

    # ----------------------------------------------------------------- table

    def _fill_table(self) -> None:
        table = self._table
        selected = self._selected_replica()
        # Filled unsorted (rows land where written), then sorted once by the user's column.
        table.setSortingEnabled(False)
        table.setRowCount(len(self._rows))
        now = self._last_now()
        self._started_texts = []
        for r, row in enumerate(self._rows):
            state_colour = status_color("healthy" if row.state in HEALTHY else "pending"
                                        if row.state in PENDING else "failed"
                                        if row.state in FAILED else "muted")
            started = format_started(row.start_time_s, now)
            self._started_texts.append(started)
            cells = (
                (row.replica_id, row.replica_id),
                (row.node_ip or "—", row.node_ip or ""),
                (row.state, row.state),
                (started, sort_key(-row.start_time_s if row.start_time_s is not None
                                   else None)),
                (fmt_fixed(row.requests_per_s, 1), sort_key(row.requests_per_s)),
                (fmt(row.ongoing, 1), sort_key(row.ongoing)),
                (fmt(row.p99_ms, 0 if (row.p99_ms or 0) >= 10 else 1), sort_key(row.p99_ms)),
                (", ".join(row.held_models) or "—", len(row.held_models)),
            )
            for c, (text, key) in enumerate(cells):
                item = SortItem(text)
                item.setData(Qt.ItemDataRole.UserRole, key)
                if c in (COL_RPS, COL_ONGOING, COL_P99):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                table.setItem(r, c, item)
            replica = table.item(r, COL_REPLICA)
            replica.setIcon(self._icon(self._colour_for(row.replica_id))
                            if self._key is not None else QIcon())
            replica.setToolTip(f"replica {row.replica_id}")
            table.item(r, COL_STATE).setForeground(QBrush(QColor(state_colour)))
            if row.start_time_s is not None:
                table.item(r, COL_STARTED).setToolTip(time.strftime(
                    "started %Y-%m-%d %H:%M:%S", time.localtime(row.start_time_s)))
            held = table.item(r, COL_HELD)
            held.setToolTip("\n".join(row.held_models) or "holds no model now")
        # Only multiplexed deployments' replicas hold models; the column is noise elsewhere.
        multiplexed = any(row.held_models for row in self._rows)
        table.setColumnHidden(COL_HELD, not multiplexed)
        # Held model lists are long: they take the spare width; figures stay by their headers.
        table.horizontalHeader().setStretchLastSection(multiplexed)
        # Room for up to TABLE_ROWS rows without scrolling: the splitter keeps at least that.
        shown = min(len(self._rows), TABLE_ROWS)
        table.setMinimumHeight(table.horizontalHeader().sizeHint().height()
                               + shown * table.verticalHeader().defaultSectionSize()
                               + 2 * table.frameWidth() + 2)
        table.setSortingEnabled(True)
        if selected is not None:
            for r in range(table.rowCount()):
                if table.item(r, COL_REPLICA).text() == selected:
                    table.selectRow(r)
                    break

    def _selected_replica(self) -> str | None:
        items = self._table.selectedItems()
        for item in items:
            if item.column() == COL_REPLICA:
                return item.text()
        return None

    def _update_started(self, now: float) -> None:
        # Ages tick by themselves; only the cells whose text changes are touched. The
        # sort key (start time) does not change, so the order stays.
        if not self._rows:
            return
        by_id = {row.replica_id: row for row in self._rows}
        for r in range(self._table.rowCount()):
            rid = self._table.item(r, COL_REPLICA).text()
            row = by_id.get(rid)
            if row is None:
                continue
            text = format_started(row.start_time_s, now)
            item = self._table.item(r, COL_STARTED)
            if item.text() != text:
                item.setText(text)

    def _update_imbalance(self, now: float) -> None:
        text = imbalance(self._rows, now=now) if self._key is not None else ""
        if text != self._imbalance.text():
            self._imbalance.setText(text)
        self._imbalance.setVisible(bool(text))

    def _icon(self, colour: str) -> QIcon:
        # A coloured square ties a table row to its curves whatever the table's palette.
        icon = self._icons.get(colour)
        if icon is None:
            pixmap = QPixmap(10, 10)
            pixmap.fill(QColor(colour))
            icon = self._icons[colour] = QIcon(pixmap)
        return icon

    # ----------------------------------------------------------------- empty states

    def _update_key_label(self) -> None:
        if self._key is None:
            self._key_label.setText("<i>No deployment selected</i>")
        else:
            app, dep = self._key
            self._key_label.setText(f"<b>{html.escape(app)}</b> / {html.escape(dep)}"
                                    " — per replica")

    def _update_visibility(self, has_curves: bool) -> None:
        if self._key is None:
            text = NO_KEY_TEXT
        elif not has_curves:
            app, dep = self._key
            text = (f"No per-replica metrics for {app} / {dep} yet. They appear a few "
                    "seconds after its replicas start reporting; requests/s and latency "
                    "once they serve requests.")
        else:
            text = ""
        if text and self._placeholder.text() != text:
            self._placeholder.setText(text)
        self._stack.setCurrentIndex(0 if text else 1)
        # The table lists Serve's replicas even before their metrics arrive.
        self._bottom.setVisible(self._key is not None and bool(self._rows))
