"""The auto-tuner's window: what to search (deployment, objective, knobs with their
ranges, time budget), the trials as they come (a live table and a throughput-vs-p99
scatter with the SLO line and the best so far), and the way out (apply the best, go back
to where it started, export the best as Serve config YAML).

A view: it renders the rows (plain dicts, backend.tuning.autotune_search.Candidate.row()) it is given
and says what the user asked for through signals; the console runs the search.
"""

from __future__ import annotations

import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDialog,
                               QDoubleSpinBox, QFormLayout, QGridLayout, QGroupBox,
                               QHBoxLayout, QHeaderView, QLabel, QPushButton, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from widgets.plots import plot_style
from widgets.theme import restyle_when_first_shown

MAX_RPS, MIN_P99, MAX_TOKENS = "max_rps", "min_p99", "max_tokens"
COLUMNS = ("#", "config", "sustained req/s", "p50 ms", "p99 ms", "errors", "batch size",
           "trials", "note")
BEST_COLOR = QColor("#2e8b57")

#: The knobs offered, with their labels and the default range (low, high) shown.
KNOB_CHOICES: tuple[tuple[str, str, float, float, int], ...] = (
    # path, label, low, high, decimals
    ("user_config.max_batch_size", "max_batch_size", 1, 128, 0),
    ("user_config.batch_wait_timeout_s", "batch_wait_timeout_s (s)", 0.0, 0.1, 3),
    ("max_ongoing_requests", "max_ongoing_requests", 1, 512, 0),
    ("num_replicas", "num_replicas (within free resources)", 1, 8, 0),
    ("user_config.max_num_seqs", "max_num_seqs (slots; generate demo)", 1, 128, 0),
    ("user_config.continuous_batching", "continuous_batching (0 off, 1 on)", 0, 1, 0),
)
DEFAULT_ON = ("user_config.max_batch_size", "user_config.batch_wait_timeout_s",
              "max_ongoing_requests")


def _short(path: str) -> str:
    return path.split(".")[-1]


def config_text(config: dict[str, Any]) -> str:
    parts = []
    for path, v in config.items():
        if isinstance(v, float) and not float(v).is_integer():
            parts.append(f"{_short(path)}={v:g}")
        else:
            parts.append(f"{_short(path)}={v}")
    return ", ".join(parts)


def _num(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


class AutoTunePanel(QDialog):
    # {"deployment": (app, dep), "objective": MAX_RPS|MIN_P99, "slo_p99_ms", "at_rate",
    #  "max_error_rate", "knobs": [path], "ranges": {path: (low, high)}, "budget_s"}
    start_requested = Signal(object)
    stop_requested = Signal(str)           # "best" | "start": where to leave the cluster
    apply_best_requested = Signal()
    revert_requested = Signal()
    export_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        restyle_when_first_shown(self)
        self.setWindowTitle("Auto-tune")
        self.setModal(False)
        self.resize(980, 720)
        self._rows: dict[int, int] = {}      # candidate index → table row
        self._points: dict[int, tuple[float, float]] = {}   # index → (p99, rps)
        self._best: int | None = None
        self._running = False

        top = self._build_search()
        splitter = self._build_trials()
        out = self._build_way_out()
        layout = QVBoxLayout(self)
        layout.addWidget(top)
        layout.addWidget(splitter, 1)
        layout.addLayout(out)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self._on_start_clicked)
        self._connect_signals()
        self._on_objective_changed()
        self._update_buttons(has_best=False, has_start=False)

    # -- construction --------------------------------------------------------------------------
    def _build_search(self) -> QWidget:
        """What to search: the form and the run buttons beside the knobs with their ranges."""
        form = self._build_search_form()
        knobs_box = self._build_knobs_box()
        buttons = self._build_run_buttons()
        top = QWidget()
        top_layout = QHBoxLayout(top)
        left = QVBoxLayout()
        left.addLayout(form)
        left.addLayout(buttons)
        top_layout.addLayout(left, 1)
        top_layout.addWidget(knobs_box, 1)
        return top

    def _build_search_form(self) -> QFormLayout:
        """Deployment, objective, SLO, rate, error limit and time budget."""
        self._deployment = QComboBox()
        self._deployment.setToolTip("The deployment to tune. Load goes to its "
                                    "application's route.")
        self._objective = QComboBox()
        self._objective.addItem("Highest throughput with p99 under the SLO", MAX_RPS)
        self._objective.addItem("Lowest p99 at a given rate", MIN_P99)
        self._objective.addItem("Most output tokens/s with TTFT p99 under the SLO",
                                MAX_TOKENS)
        self._objective.setItemData(
            2, "A language model on an OpenAI-compatible route (the generate demo): every "
               "measured rate keeps the p99 time to first token within the SLO; the best "
               "config streams the most output tokens/s.", Qt.ToolTipRole)
        self._slo = QDoubleSpinBox(decimals=0, minimum=1, maximum=600_000, value=300,
                                   suffix=" ms")
        self._slo.setToolTip("Client-side p99 (coordinated-omission corrected) every "
                             "measured rate must stay within.")
        self._at_rate = QDoubleSpinBox(decimals=1, minimum=0.1, maximum=100_000, value=20,
                                       suffix=" req/s")
        self._at_rate.setToolTip("The rate at which the lowest p99 is sought.")
        self._errors = QDoubleSpinBox(decimals=2, minimum=0, maximum=50, value=0,
                                      suffix=" %")
        self._errors.setToolTip("Share of failed requests a measured rate may have.")
        self._budget = QDoubleSpinBox(decimals=0, minimum=10, maximum=86_400, value=300,
                                      suffix=" s")
        self._budget.setToolTip("The search stops when this time is up and keeps the best "
                                "found so far.")
        form = QFormLayout()
        form.addRow("Deployment:", self._deployment)
        form.addRow("Objective:", self._objective)
        form.addRow("p99 SLO:", self._slo)
        form.addRow("At rate:", self._at_rate)
        form.addRow("Error limit:", self._errors)
        form.addRow("Time budget:", self._budget)
        return form

    def _build_knobs_box(self) -> QGroupBox:
        """One row per knob in KNOB_CHOICES: a tick to search it, and its range."""
        knobs_box = QGroupBox("Knobs to search (ranges)")
        grid = QGridLayout(knobs_box)
        self._knob_checks: dict[str, QCheckBox] = {}
        self._knob_ranges: dict[str, tuple[QDoubleSpinBox, QDoubleSpinBox]] = {}
        for row, (path, label, low, high, decimals) in enumerate(KNOB_CHOICES):
            check = QCheckBox(label)
            check.setChecked(path in DEFAULT_ON)
            check.setToolTip(f"Search {_short(path)} (applied live: no replica restarts)")
            lo = QDoubleSpinBox(decimals=decimals, minimum=0, maximum=100_000, value=low)
            hi = QDoubleSpinBox(decimals=decimals, minimum=0, maximum=100_000, value=high)
            lo.setToolTip(f"Lowest {_short(path)} to try")
            hi.setToolTip(f"Highest {_short(path)} to try")
            grid.addWidget(check, row, 0)
            grid.addWidget(QLabel("from"), row, 1)
            grid.addWidget(lo, row, 2)
            grid.addWidget(QLabel("to"), row, 3)
            grid.addWidget(hi, row, 4)
            self._knob_checks[path] = check
            self._knob_ranges[path] = (lo, hi)
        return knobs_box

    def _build_run_buttons(self) -> QHBoxLayout:
        """Start, and the two ways to stop: keep the best, or revert."""
        self._start = QPushButton("Start")
        self._start.setToolTip("Start the search (Ctrl+Return)")
        self._stop_best = QPushButton("Stop, keep best")
        self._stop_best.setToolTip("Stop now and leave the deployment on the best config "
                                   "found so far (Esc)")
        self._stop_start = QPushButton("Stop, revert")
        self._stop_start.setToolTip("Stop now and put back the config it started from")
        buttons = QHBoxLayout()
        for b in (self._start, self._stop_best, self._stop_start):
            buttons.addWidget(b)
        buttons.addStretch(1)
        return buttons

    def _build_trials(self) -> QSplitter:
        """The trials: a table of every config tried beside the throughput-vs-p99 scatter."""
        self._table = QTableWidget(0, len(COLUMNS))
        self._table.setHorizontalHeaderLabels(COLUMNS)
        self._table.verticalHeader().setVisible(False)
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self._table.horizontalHeader().setSectionResizeMode(
            1, QHeaderView.ResizeMode.Stretch)
        self._table.setToolTip("Every config tried: the highest rate it sustained under the "
                               "SLO and the latencies there. 'not better' = dropped after "
                               "one trial at the best rate so far.")
        self._plot = pg.PlotWidget()
        self._plot.setObjectName("trialsPlot")
        self._plot.setLabel("bottom", "p99 at the sustained rate", units="ms")
        self._plot.setLabel("left", "sustained throughput", units="req/s")
        for axis in ("bottom", "left"):
            self._plot.getAxis(axis).enableAutoSIPrefix(False)
        self._plot.showGrid(x=True, y=True, alpha=0.2)
        plot_style.cache_axes(self._plot.getPlotItem())  # points come, axes seldom move
        self._scatter = pg.ScatterPlotItem(size=9, brush=pg.mkBrush("#1f77b4"), name="trials")
        self._best_point = pg.ScatterPlotItem(size=18, symbol="star",
                                              brush=pg.mkBrush(BEST_COLOR), name="best")
        self._slo_line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#d03b3b", style=Qt.DashLine),
                                         label="SLO", labelOpts={"position": 0.9}, name="slo")
        self._plot.addItem(self._scatter)
        self._plot.addItem(self._best_point)
        self._plot.addItem(self._slo_line)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self._table)
        splitter.addWidget(self._plot)
        splitter.setSizes([600, 380])
        return splitter

    def _build_way_out(self) -> QHBoxLayout:
        """The way out: the status line, apply the best, revert, export as YAML."""
        self._status = QLabel("Choose a deployment and press Start.")
        self._status.setObjectName("status")
        self._status.setWordWrap(True)
        self._apply = QPushButton("Apply best")
        self._apply.setToolTip("Put the best config found on the deployment")
        self._revert = QPushButton("Revert to where I started")
        self._revert.setToolTip("Put back the config the deployment ran before the search")
        self._export = QPushButton("Export best as YAML…")
        self._export.setToolTip("Save the cluster's Serve config with the best config in "
                                "place of this deployment's")
        out = QHBoxLayout()
        out.addWidget(self._status, 1)
        for b in (self._apply, self._revert, self._export):
            out.addWidget(b)
        return out

    def _connect_signals(self) -> None:
        """The controls to the panel's slots and signals (after the form is filled, so
        that building it asks for nothing)."""
        self._objective.currentIndexChanged.connect(self._on_objective_changed)
        self._start.clicked.connect(self._on_start_clicked)
        self._stop_best.clicked.connect(lambda: self.stop_requested.emit("best"))
        self._stop_start.clicked.connect(lambda: self.stop_requested.emit("start"))
        self._apply.clicked.connect(self.apply_best_requested)
        self._revert.clicked.connect(self.revert_requested)
        self._export.clicked.connect(self.export_requested)

    # -- input ---------------------------------------------------------------------------------
    def set_deployments(self, keys: list[tuple[str, str]],
                        current: tuple[str, str] | None = None) -> None:
        chosen = self.deployment()
        self._deployment.clear()
        for app, dep in keys:
            self._deployment.addItem(f"{app}/{dep}", (app, dep))
        want = chosen or current
        if want in keys:
            self._deployment.setCurrentIndex(keys.index(want))
        self._start.setEnabled(bool(keys) and not self._running)

    def deployment(self) -> tuple[str, str] | None:
        data = self._deployment.currentData()
        return tuple(data) if data else None

    def select_deployment(self, key: tuple[str, str]) -> None:
        i = self._deployment.findData(key)
        if i >= 0:
            self._deployment.setCurrentIndex(i)

    def spec(self) -> dict[str, Any]:
        """What the user asked for, as start_requested carries it."""
        knobs = [p for p, c in self._knob_checks.items() if c.isChecked()]
        ranges = {}
        for p in knobs:
            lo, hi = self._knob_ranges[p]
            decimals = lo.decimals()
            conv = (lambda v: int(round(v))) if decimals == 0 else float
            ranges[p] = (conv(lo.value()), conv(hi.value()))
        objective = self._objective.currentData()
        return {"deployment": self.deployment(), "objective": objective,
                "slo_p99_ms": self._slo.value(),
                "slo_on": "ttft" if objective == MAX_TOKENS else "latency",
                "at_rate": self._at_rate.value() if objective == MIN_P99 else None,
                "max_error_rate": self._errors.value() / 100, "knobs": knobs,
                "ranges": ranges, "budget_s": self._budget.value()}

    def set_spec(self, spec: dict[str, Any]) -> None:
        """Fill the form (a scripted run; the last settings)."""
        if spec.get("deployment"):
            self.select_deployment(tuple(spec["deployment"]))
        if "objective" in spec:
            self._objective.setCurrentIndex(self._objective.findData(spec["objective"]))
        for name, box in (("slo_p99_ms", self._slo), ("budget_s", self._budget),
                          ("at_rate", self._at_rate)):
            if spec.get(name) is not None:
                box.setValue(float(spec[name]))
        if spec.get("max_error_rate") is not None:
            self._errors.setValue(100 * float(spec["max_error_rate"]))
        if spec.get("knobs") is not None:
            for p, c in self._knob_checks.items():
                c.setChecked(p in spec["knobs"])
        for p, (lo, hi) in (spec.get("ranges") or {}).items():
            if p in self._knob_ranges:
                self._knob_ranges[p][0].setValue(float(lo))
                self._knob_ranges[p][1].setValue(float(hi))

    def _on_objective_changed(self) -> None:
        self._at_rate.setEnabled(self._objective.currentData() == MIN_P99)

    def _on_start_clicked(self) -> None:
        if self._running or not self._start.isEnabled():
            return
        spec = self.spec()
        problem = validate_spec(spec)
        if problem:
            self._status.setText(problem)
            return
        self.start_requested.emit(spec)

    # -- the run -------------------------------------------------------------------------------
    def clear_results(self) -> None:
        self._table.setRowCount(0)
        self._rows.clear()
        self._points.clear()
        self._best = None
        self._scatter.setData([], [])
        self._best_point.setData([], [])

    def set_running(self, running: bool) -> None:
        self._running = running
        self._start.setEnabled(not running and self._deployment.count() > 0)
        self._stop_best.setEnabled(running)
        self._stop_start.setEnabled(running)
        for w in (self._deployment, self._objective, self._slo, self._at_rate, self._errors,
                  self._budget, *self._knob_checks.values()):
            w.setEnabled(not running)
        if not running:
            self._on_objective_changed()
        if running:
            self._update_buttons(has_best=False, has_start=False)

    def set_slo(self, slo_ms: float) -> None:
        self._slo_line.setPos(slo_ms)

    def set_status(self, text: str) -> None:
        self._status.setText(text)

    def show_candidate(self, row: dict[str, Any]) -> None:
        """Add or update a candidate's row (Candidate.row())."""
        index = row["trial"]
        r = self._rows.get(index)
        if r is None:
            r = self._table.rowCount()
            self._table.insertRow(r)
            self._rows[index] = r
        note = row.get("skipped") or row.get("failed") or \
            ("not better (1 trial)" if row.get("dropped") else "")
        if row.get("running"):
            note = "measuring…"
        elif row.get("tokens_per_s") is not None and not note:
            note = f"{row['tokens_per_s']:.0f} output tokens/s"
        values = (index, config_text(row["config"]),
                  _num(row["rps"]) if row["rps"] else "—", _num(row.get("p50_ms")),
                  _num(row.get("p99_ms")), row.get("errors", 0), _num(row.get("batch_size")),
                  row.get("measurements", 0), note)
        for c, v in enumerate(values):
            item = QTableWidgetItem(str(v))
            if c in (0, 2, 3, 4, 5, 6, 7):
                item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            self._table.setItem(r, c, item)
        if row["rps"] and row.get("p99_ms") is not None:
            self._points[index] = (float(row["p99_ms"]), float(row["rps"]))
        self._redraw()
        self._table.scrollToItem(self._table.item(r, 0))

    def set_best(self, index: int | None) -> None:
        self._best = index
        for i, r in self._rows.items():
            for c in range(self._table.columnCount()):
                item = self._table.item(r, c)
                if item is not None:
                    item.setBackground(BEST_COLOR.lighter(190) if i == index else QColor(0, 0, 0, 0))
        self._redraw()

    def _redraw(self) -> None:
        pts = [p for i, p in sorted(self._points.items())]
        self._scatter.setData([p[0] for p in pts], [p[1] for p in pts])
        if self._best in self._points:
            x, y = self._points[self._best]
            self._best_point.setData([x], [y])
        else:
            self._best_point.setData([], [])

    def set_finished(self, text: str, *, has_best: bool, has_start: bool) -> None:
        self.set_running(False)
        self._status.setText(text)
        self._update_buttons(has_best=has_best, has_start=has_start)

    def _update_buttons(self, *, has_best: bool, has_start: bool) -> None:
        self._apply.setEnabled(has_best)
        self._export.setEnabled(has_best)
        self._revert.setEnabled(has_start)

    # -- for tests and scripted checks ---------------------------------------------------------
    def rows(self) -> list[list[str]]:
        return [[(self._table.item(r, c).text() if self._table.item(r, c) else "")
                 for c in range(self._table.columnCount())]
                for r in range(self._table.rowCount())]

    def points(self) -> tuple[list[float], list[float]]:
        x, y = self._scatter.getData()
        return list(x), list(y)

    def buttons(self) -> dict[str, QPushButton]:
        return {"start": self._start, "stop_best": self._stop_best,
                "stop_start": self._stop_start, "apply": self._apply,
                "revert": self._revert, "export": self._export}


def validate_spec(spec: dict[str, Any]) -> str:
    """What is wrong with a spec, in the user's words ('' when nothing)."""
    if not spec.get("deployment"):
        return "Choose a deployment to tune."
    if not spec.get("knobs"):
        return "Tick at least one knob to search."
    for path, (lo, hi) in (spec.get("ranges") or {}).items():
        if lo > hi:
            return f"{_short(path)}: the range's start ({lo}) is above its end ({hi})."
    if spec.get("objective") == MIN_P99 and not spec.get("at_rate"):
        return "Give the rate at which to lower p99."
    return ""
