"""The per-replica view's table (widgets/plots/replica_view.py): its columns, how it writes
figures and start times into cells, and how those cells sort (by value, not text)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

# Table columns: (header, tooltip).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Replica", "Serve's replica id; the square is the replica's colour in the plots."),
    ("Node", "IP address of the node the replica runs on."),
    ("State", "The replica's state as Serve reports it (RUNNING, STARTING, STOPPING …)."),
    ("Started", "How long ago the replica started."),
    ("Requests/s", "Requests the replica finished per second, newest figure "
                   "(ray_serve_deployment_request_counter per replica)."),
    ("Ongoing", "Requests executing or queued at the replica now "
                "(ray_serve_replica_processing_queries)."),
    ("p99 (ms)", "99th percentile processing latency at the replica over the last few "
                 "seconds (ray_serve_deployment_processing_latency_ms)."),
    ("Held models", "Model ids the replica holds in its multiplexing cache now "
                    "(ray_serve_registered_multiplexed_model_id); shown for multiplexed "
                    "deployments."),
)
(COL_REPLICA, COL_NODE, COL_STATE, COL_STARTED, COL_RPS, COL_ONGOING, COL_P99,
 COL_HELD) = range(len(COLUMNS))


def format_started(start_time_s: float | None, now: float) -> str:
    """A replica's age for the table: '12 s ago', '3 min ago', '2 h ago', '—'."""
    if start_time_s is None:
        return "—"
    age = max(0.0, now - start_time_s)
    if age < 120:
        return f"{int(age)} s ago"
    if age < 7200:
        return f"{int(age // 60)} min ago"
    if age < 172800:
        return f"{int(age // 3600)} h ago"
    return f"{int(age // 86400)} d ago"


def fmt(v: float | None, digits: int) -> str:
    if v is None:
        return "—"
    if digits == 0 or float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def fmt_fixed(v: float | None, digits: int) -> str:
    # Rates keep their decimals so a column of them lines up ('12.0' above '9.5').
    return "—" if v is None else f"{v:.{digits}f}"


def sort_key(v: float | str | None) -> tuple:
    # Blank figures sort before every number; strings and numbers never meet.
    if v is None:
        return (0,)
    return (1, v)


class SortItem(QTableWidgetItem):
    """A cell that sorts by the value it shows, not by its text ('10.0' after '9.5')."""

    def __lt__(self, other: QTableWidgetItem) -> bool:  # type: ignore[override]
        mine = self.data(Qt.ItemDataRole.UserRole)
        theirs = other.data(Qt.ItemDataRole.UserRole)
        if mine is None or theirs is None:
            return super().__lt__(other)
        return mine < theirs



def make_replica_table() -> QTableWidget:
    """The replica table: its columns with their tooltips, read-only, one row selected at a
    time, sorted by replica id, the held-models column hidden until a deployment
    multiplexes."""
    table = QTableWidget(0, len(COLUMNS))
    for col, (text, tip) in enumerate(COLUMNS):
        item = QTableWidgetItem(text)
        item.setToolTip(tip)
        table.setHorizontalHeaderItem(col, item)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    table.setAlternatingRowColors(True)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.setSortingEnabled(True)
    table.sortByColumn(COL_REPLICA, Qt.SortOrder.AscendingOrder)
    table.setColumnHidden(COL_HELD, True)
    return table
