"""Tree of Serve applications → deployments → replicas, updated in place each poll.

Items are kept across `set_status` calls (keyed by app / deployment / replica id) so
the user's selection, expansion and scroll position survive the status poller.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

from backend.model import (FAILED, HEALTHY, PENDING, ApplicationInfo, DeploymentInfo,
                           ReplicaInfo, ServeStatus, unschedulable_reason)
from backend.metrics.model_info import ModelInfo
from backend.scaling.explain import ReplicaCounts, replica_counts
from widgets.theme import status_color

COL_NAME, COL_STATUS, COL_REPLICAS, COL_MESSAGE = range(4)
HEADERS = ("Name", "Status", "Replicas", "Message")

# Mid-tone colours that read on light and dark palettes alike.
# Status colours come from the theme (widgets/theme.py), read when a row is painted.

PLACEHOLDER_TEXT = "No Serve applications — use Deploy demo"
READ_ONLY_NOTE = "(deployed from code – read-only)"

# Item roles: what a row stands for, independent of its display text.
_KIND_ROLE = Qt.ItemDataRole.UserRole
_KEY_ROLE = Qt.ItemDataRole.UserRole + 1
# The status column's style as last set ("colour|bold"): a status poll restyles only the
# rows whose style changed (a fleet's 1,100 rows cost ~75 ms a second otherwise).
_STYLE_ROLE = Qt.ItemDataRole.UserRole + 2
_APP, _DEPLOYMENT, _REPLICA, _PLACEHOLDER = "app", "deployment", "replica", "placeholder"
_MODEL = "model"  # the row under a deployment that shows its model's figures
MODEL_ROW_PREFIX = "↳ "
_NOTE = "note"  # the row under a deployment that says why it is short of its target
NOTE_ROW_PREFIX = "⚠ "
# The autoscaler's inputs older than this on arrival make its metrics health "late": Ray
# pushes them every 10 s by default (RAY_SERVE_*_AUTOSCALING_METRIC_PUSH_INTERVAL_S) and
# the delay is measured from each report's own time, so seconds mean a backed-up controller.
METRICS_LATE_MS = 2000.0


def status_class(status: str) -> str | None:
    """'healthy' / 'pending' / 'failed' for a Serve status word, None if unknown."""
    s = (status or "").upper()
    if s in HEALTHY:
        return "healthy"
    if s in PENDING:
        return "pending"
    if s in FAILED:
        return "failed"
    return None


class AppTree(QTreeWidget):
    """Serve applications, their deployments and replicas, with coloured status."""

    deployment_selected = Signal(str, str)  # (application, deployment)
    selection_cleared = Signal()  # the selected deployment vanished or nothing is selected

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(len(HEADERS))
        self.setHeaderLabels(list(HEADERS))
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        header = self.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(COL_NAME, QHeaderView.ResizeMode.Interactive)
        self.setColumnWidth(COL_NAME, 190)
        self.setColumnWidth(COL_STATUS, 100)
        self.setColumnWidth(COL_REPLICAS, 70)
        self.headerItem().setToolTip(
            COL_REPLICAS, "Running replicas / target replicas; '+N' replicas starting "
            "(being placed or constructed)")
        self.headerItem().setToolTip(COL_MESSAGE, "Serve's message, e.g. why a deployment failed")
        self.setToolTip("Serve applications on the cluster. Select a deployment to plot "
                        "its metrics and send load to it.")

        self._apps: dict[str, QTreeWidgetItem] = {}
        # The console's own word on an application while Ray has none yet (e.g. "waiting
        # for room: …" from the deploy pre-flight; Ray says so only after 30 s).
        self._notes: dict[str, str] = {}
        self._deployments: dict[tuple[str, str], QTreeWidgetItem] = {}
        # Each deployment row's newest DeploymentInfo, to redraw it when its model
        # figures arrive between polls; and the figures themselves (set_model_info).
        self._deployment_infos: dict[tuple[str, str], DeploymentInfo] = {}
        self._model_info: dict[tuple[str, str], ModelInfo] = {}
        self._model_rows: dict[tuple[str, str], QTreeWidgetItem] = {}
        # Why a deployment is short of its target, in words (console.model.scaling): shown in
        # the message column in place of Ray's message, which says it late or not at all.
        self._scaling_notes: dict[tuple[str, str], str] = {}
        # …and in a row of its own under the deployment, across all columns: the message
        # column is off-screen in the tree's default width (the foreign-cluster check).
        self._note_rows: dict[tuple[str, str], QTreeWidgetItem] = {}
        # The autoscaler's metrics health: p99 ms its inputs take to reach the controller.
        self._metrics_delay: dict[tuple[str, str], float] = {}
        self._replicas: dict[tuple[str, str, str], QTreeWidgetItem] = {}
        # Each deployment's replica keys (a status poll visits a fleet's 1,000 replicas:
        # finding one deployment's among all of them cost 100 × 1,000 comparisons).
        self._replicas_of: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
        self._emitted: tuple[str, str] | None = None
        # The theme's status colours each deployment's rows were last styled with (with
        # _deployment_infos: what they show).
        self._styled_with: dict[tuple[str, str], tuple] = {}
        self._colours: tuple = ()
        self._last_status: ServeStatus | None = None  # the snapshot shown (a theme restyles it)
        self._placeholder: QTreeWidgetItem | None = None
        self._filter = ""  # casefolded; see set_filter
        self._show_placeholder(True)

        self.itemSelectionChanged.connect(self._on_tree_selection_changed)

    # ----------------------------------------------------------------- public API

    def restyle(self) -> None:
        """A new theme: every row in its status colours now, not at the next status that
        changes something (a steady cluster's status is shown once)."""
        if self._last_status is not None and _status_colours() != self._colours:
            self.set_status(self._last_status)

    def set_status(self, status: ServeStatus) -> None:
        """Show this snapshot, updating existing rows rather than rebuilding them; a
        deployment whose info (and replicas) equal the last snapshot's is not visited
        (a fleet's 1,100 rows cost ~17 ms of the GUI thread a second otherwise)."""
        self._last_status = status
        # Updates below may remove the selected row; report the outcome once at the end.
        selected = self.selectedItems()
        # Rows are coloured from the theme: a new theme restyles every row once.
        self._colours = _status_colours()
        self.blockSignals(True)
        try:
            seen_apps: set[str] = set()
            for app in status.applications:
                seen_apps.add(app.name)
                self._update_app(app)
            for name in [n for n in self._apps if n not in seen_apps]:
                self._remove_app(name)
            self._show_placeholder(not self._apps)
            if self._filter:
                self._apply_filter()  # rows added by this update obey it too
            if selected and not self._is_live(selected[0]):
                # Qt would move the selection to a neighbouring row; plotting some other
                # deployment the user never picked is worse than showing none.
                self.clearSelection()
                self.selectionModel().clearCurrentIndex()
        finally:
            self.blockSignals(False)
        self._on_tree_selection_changed()

    def set_filter(self, text: str) -> None:
        """Show only the applications and deployments whose name or status contains
        *text* (case-insensitive; "" shows all): a deployment also shows when its
        application's name matches, an application when any of its deployments shows.
        Rows are hidden, not removed, and the filter holds across status updates."""
        self._filter = text.strip().casefold()
        self._apply_filter()

    def filter_matches(self) -> list[tuple[str, str]]:
        """(app, deployment) of the deployments a typed filter shows; [] without one."""
        if not self._filter:
            return []
        return [item.child(i).data(COL_NAME, _KEY_ROLE)
                for item in self._apps.values() if not item.isHidden()
                for i in range(item.childCount())
                if item.child(i).data(COL_NAME, _KIND_ROLE) == _DEPLOYMENT
                and not item.child(i).isHidden()]

    def _apply_filter(self) -> None:
        f = self._filter
        for name, app_item in self._apps.items():
            app_matches = not f or f in name.casefold() or _status_matches(app_item, f)
            shown = 0
            for i in range(app_item.childCount()):
                child = app_item.child(i)
                if child.data(COL_NAME, _KIND_ROLE) != _DEPLOYMENT:
                    continue
                dep = child.data(COL_NAME, _KEY_ROLE)[1]
                show = app_matches or f in dep.casefold() or _status_matches(child, f)
                child.setHidden(not show)
                shown += show
            app_item.setHidden(not (app_matches or shown))

    def set_notes(self, notes: dict[str, str]) -> None:
        """Per-application notes shown in the message column while the application
        itself reports no message. Takes effect with the next set_status."""
        self._notes = dict(notes)

    def set_model_info(self, infos: dict[tuple[str, str], ModelInfo]) -> None:
        """What demo replicas say about their models, by (app, deployment): a row right
        under the deployment's, across all columns so that the narrow tree shows it
        (device, parameters, ms per batch), with the details in its tooltip and the
        deployment's."""
        old, self._model_info = self._model_info, dict(infos)
        for key in set(old) | set(self._model_info):
            item, dep = self._deployments.get(key), self._deployment_infos.get(key)
            if item is not None and dep is not None:
                self._describe_deployment(item, dep)

    def set_scaling_notes(self, notes: dict[tuple[str, str], str]) -> None:
        """Why deployments are not at their target replica count, by (app, deployment)
        ({} when all are): shown in their rows at once."""
        old, self._scaling_notes = self._scaling_notes, dict(notes)
        for key in set(old) | set(self._scaling_notes):
            item, dep = self._deployments.get(key), self._deployment_infos.get(key)
            if item is not None and dep is not None:
                self._describe_deployment(item, dep)

    def set_metrics_health(self, delays_ms: dict[tuple[str, str], float]) -> None:
        """The autoscaler's metrics delay (p99 ms) by (app, deployment), for autoscaling
        deployments with fresh figures: in the row's tooltip, and in its note row when
        late (METRICS_LATE_MS) — a busy controller decides on old numbers."""
        delays = {k: float(v) for k, v in delays_ms.items()}
        if delays == self._metrics_delay:
            return
        old, self._metrics_delay = self._metrics_delay, delays
        for key in set(old) | set(delays):
            item, dep = self._deployments.get(key), self._deployment_infos.get(key)
            if item is not None and dep is not None:
                self._describe_deployment(item, dep)

    def model_info(self, app: str, deployment: str) -> ModelInfo | None:
        return self._model_info.get((app, deployment))

    def selected_key(self) -> tuple[str, str] | None:
        """(app, deployment) of the selection: a deployment row, a replica under one, or
        an application's first deployment; None without a selection."""
        items = self.selectedItems()
        return self._key_for_item(items[0]) if items else None

    def select_key(self, app: str, deployment: str) -> bool:
        """Select a deployment's row (e.g. restoring the last session); False if absent."""
        item = self._deployments.get((app, deployment))
        if item is None:
            return False
        self.setCurrentItem(item)
        return True

    def deployment_item(self, app: str, deployment: str) -> QTreeWidgetItem | None:
        return self._deployments.get((app, deployment))

    # ----------------------------------------------------------------- slots

    def _on_tree_selection_changed(self) -> None:
        key = self.selected_key()
        if key == self._emitted:
            return  # e.g. moving between replicas of one deployment: same plots, no signal
        self._emitted = key
        if key is None:
            self.selection_cleared.emit()
        else:
            self.deployment_selected.emit(*key)

    # ----------------------------------------------------------------- internals

    def _is_live(self, item: QTreeWidgetItem) -> bool:
        return any(item is i for d in (self._apps, self._deployments, self._replicas)
                   for i in d.values())

    def _key_for_item(self, item: QTreeWidgetItem) -> tuple[str, str] | None:
        kind = item.data(COL_NAME, _KIND_ROLE)
        if kind in (_DEPLOYMENT, _REPLICA):
            return tuple(item.data(COL_NAME, _KEY_ROLE)[:2])  # type: ignore[return-value]
        if kind == _APP:
            first = item.child(0)
            return self._key_for_item(first) if first is not None else None
        return None

    def _show_placeholder(self, show: bool) -> None:
        if show and self._placeholder is None:
            item = QTreeWidgetItem([PLACEHOLDER_TEXT])
            item.setData(COL_NAME, _KIND_ROLE, _PLACEHOLDER)
            item.setFlags(Qt.ItemFlag.NoItemFlags)  # not selectable: there is nothing to pick
            item.setToolTip(COL_NAME, "Deploy a demo application, or `serve deploy` one, "
                                      "and it will appear here.")
            font = QFont(item.font(COL_NAME))
            font.setItalic(True)
            item.setFont(COL_NAME, font)
            self.addTopLevelItem(item)
            item.setFirstColumnSpanned(True)
            self._placeholder = item
        elif not show and self._placeholder is not None:
            self.takeTopLevelItem(self.indexOfTopLevelItem(self._placeholder))
            self._placeholder = None

    def _update_app(self, app: ApplicationInfo) -> None:
        item = self._apps.get(app.name)
        if item is None:
            item = QTreeWidgetItem()
            item.setData(COL_NAME, _KIND_ROLE, _APP)
            item.setData(COL_NAME, _KEY_ROLE, (app.name,))
            self.addTopLevelItem(item)
            item.setExpanded(True)  # new applications open on their deployments
            self._apps[app.name] = item
        name = app.name if app.declarative else f"{app.name}  {READ_ONLY_NOTE}"
        _set_text(item, COL_NAME, name)
        italic = not app.declarative
        if item.font(COL_NAME).italic() != italic:
            font = QFont(item.font(COL_NAME))
            font.setItalic(italic)
            item.setFont(COL_NAME, font)
        self._set_status(item, app.status)
        running = sum(d.running_replicas for d in app.deployments)
        targets = [d.target_num_replicas for d in app.deployments]
        target = sum(targets) if targets and all(t is not None for t in targets) else None
        _set_text(item, COL_REPLICAS, _replica_text(running, target))
        note = self._notes.get(app.name, "")
        self._set_message(item, app.message or note)
        tip = f"Application {app.name}: {app.status}"
        if note and not app.message:
            tip += f"\n\n{note}"
        if app.route_prefix:
            tip += f"\nroute prefix {app.route_prefix}"
        if not app.declarative:
            tip += ("\nDeployed from code (serve.run): the console can watch it but cannot "
                    "reproduce or reconfigure it through the REST API.")
        if app.message:
            tip += f"\n\n{app.message}"
        _set_tooltip(item, tip)

        seen: set[str] = set()
        for dep in app.deployments:
            seen.add(dep.name)
            self._update_deployment(item, dep)
        for key in [k for k in self._deployments if k[0] == app.name and k[1] not in seen]:
            self._remove_deployment(key)

    def _update_deployment(self, parent: QTreeWidgetItem, dep: DeploymentInfo) -> None:
        item = self._deployments.get(dep.key)
        if (item is not None and self._deployment_infos.get(dep.key) == dep
                and self._styled_with.get(dep.key) == self._colours):
            return  # as shown (its other inputs have setters that redescribe it)
        if item is None:
            item = QTreeWidgetItem()
            item.setData(COL_NAME, _KIND_ROLE, _DEPLOYMENT)
            item.setData(COL_NAME, _KEY_ROLE, dep.key)
            parent.addChild(item)  # collapsed: replicas are detail, shown on demand
            self._deployments[dep.key] = item
        _set_text(item, COL_NAME, dep.name)
        self._set_status(item, dep.status)
        counts = replica_counts(dep)
        _set_text(item, COL_REPLICAS, _counts_text(counts))
        self._deployment_infos[dep.key] = dep
        self._describe_deployment(item, dep)
        self._styled_with[dep.key] = self._colours

        seen: set[str] = set()
        for rep in dep.replicas:
            seen.add(rep.replica_id)
            self._update_replica(item, dep, rep)
        mine = self._replicas_of.get(dep.key, set())
        for key in [k for k in mine if k[2] not in seen]:
            mine.discard(key)
            r = self._replicas.pop(key)
            item.removeChild(r)

    def _describe_deployment(self, item: QTreeWidgetItem, dep: DeploymentInfo) -> None:
        """The message column and tooltip, and the model row where its replica gave
        figures."""
        info = self._model_info.get(dep.key)
        note = self._scaling_notes.get(dep.key, "")
        delay = self._metrics_delay.get(dep.key)
        late = (f"the autoscaler's metrics arrive {delay / 1000:.1f} s late (p99): a busy "
                "controller, its decisions lag the load"
                if delay is not None and delay >= METRICS_LATE_MS else "")
        shown = "; ".join(t for t in (note, late) if t)
        self._set_message(item, shown or dep.message, warn=bool(shown))
        self._place_model_row(item, dep.key, info)
        self._place_note_row(item, dep.key, shown)
        counts = replica_counts(dep)
        tip = (f"Deployment {dep.app}/{dep.name}: {dep.status}\n"
               f"{_replica_text(dep.running_replicas, dep.target_num_replicas)} replicas running"
               + (f", {counts.starting} starting" if counts.starting else "")
               + (f", {counts.stopping} stopping" if counts.stopping else "")
               + f"\nScaling: {counts.scaling_status}"
               + (f" · autoscaling between {counts.min_replicas} and {counts.max_replicas} "
                  "replicas" if counts.autoscaling else " · fixed num_replicas"))
        if delay is not None:
            tip += (f"\nAutoscaler metrics: p99 {delay:.0f} ms from report to controller "
                    + ("(late)" if late else "(healthy)"))
        if note:
            tip += f"\n\nNot at target: {note}"
        if late:
            tip += f"\n\n{late[0].upper()}{late[1:]}."
        if info is not None:
            tip += f"\n\n{info.details()}"
        if dep.message:
            tip += f"\n\n{dep.message}"
        _set_tooltip(item, tip)

    def _place_model_row(self, item: QTreeWidgetItem, key: tuple[str, str],
                         info: ModelInfo | None) -> None:
        row, parent = self._model_rows.get(key), item.parent()
        if info is None or parent is None:
            if row is not None:
                self._remove_model_row(key)
            return
        if row is None:
            row = QTreeWidgetItem()
            row.setData(COL_NAME, _KIND_ROLE, _MODEL)
            row.setData(COL_NAME, _KEY_ROLE, key)
            # Shown, never selected: it is about the deployment above it.
            row.setFlags(Qt.ItemFlag.ItemIsEnabled)
            parent.insertChild(parent.indexOfChild(item) + 1, row)
            row.setFirstColumnSpanned(True)
            font = QFont(row.font(COL_NAME))
            font.setItalic(True)
            row.setFont(COL_NAME, font)
            self._model_rows[key] = row
        _set_text(row, COL_NAME, MODEL_ROW_PREFIX + info.summary())
        _set_tooltip(row, info.details())

    def _place_note_row(self, item: QTreeWidgetItem, key: tuple[str, str], note: str) -> None:
        row, parent = self._note_rows.get(key), item.parent()
        if not note or parent is None:
            if row is not None:
                self._remove_note_row(key)
            return
        if row is None:
            row = QTreeWidgetItem()
            row.setData(COL_NAME, _KIND_ROLE, _NOTE)
            row.setData(COL_NAME, _KEY_ROLE, key)
            row.setFlags(Qt.ItemFlag.ItemIsEnabled)  # shown, never selected
            model = self._model_rows.get(key)
            after = model if model is not None and model.parent() is parent else item
            parent.insertChild(parent.indexOfChild(after) + 1, row)
            row.setFirstColumnSpanned(True)
            row.setForeground(COL_NAME, QBrush(QColor(status_color("pending"))))
            self._note_rows[key] = row
        _set_text(row, COL_NAME, NOTE_ROW_PREFIX + note)
        _set_tooltip(row, f"Why {key[0]}/{key[1]} is not at its target replica count:\n{note}")

    def _remove_note_row(self, key: tuple[str, str]) -> None:
        row = self._note_rows.pop(key, None)
        if row is not None and row.parent() is not None:
            row.parent().removeChild(row)

    def _remove_model_row(self, key: tuple[str, str]) -> None:
        row = self._model_rows.pop(key, None)
        if row is not None and row.parent() is not None:
            row.parent().removeChild(row)

    def _update_replica(self, parent: QTreeWidgetItem, dep: DeploymentInfo,
                        rep: ReplicaInfo) -> None:
        key = (dep.app, dep.name, rep.replica_id)
        item = self._replicas.get(key)
        if item is None:
            item = QTreeWidgetItem()
            item.setData(COL_NAME, _KIND_ROLE, _REPLICA)
            item.setData(COL_NAME, _KEY_ROLE, key)
            parent.addChild(item)
            self._replicas[key] = item
            self._replicas_of.setdefault(key[:2], set()).add(key)
        _set_text(item, COL_NAME, rep.replica_id)
        self._set_status(item, rep.state)
        where = []
        if rep.node_ip:
            where.append(f"node {rep.node_ip}")
        if rep.pid is not None:
            where.append(f"pid {rep.pid}")
        _set_text(item, COL_MESSAGE, " · ".join(where))
        _set_tooltip(item, f"Replica {rep.replica_id}: {rep.state}"
                           + (f"\n{' · '.join(where)}" if where else ""))

    def _remove_app(self, name: str) -> None:
        for key in [k for k in self._deployments if k[0] == name]:
            self._remove_deployment(key)
        item = self._apps.pop(name)
        self.takeTopLevelItem(self.indexOfTopLevelItem(item))

    def _remove_deployment(self, key: tuple[str, str]) -> None:
        for rkey in self._replicas_of.pop(key, set()):
            self._replicas.pop(rkey, None)
        item = self._deployments.pop(key)
        self._deployment_infos.pop(key, None)
        self._styled_with.pop(key, None)
        self._remove_model_row(key)
        self._remove_note_row(key)
        parent = item.parent()
        if parent is not None:
            parent.removeChild(item)

    def _set_status(self, item: QTreeWidgetItem, status: str) -> None:
        _set_text(item, COL_STATUS, status)
        cls = status_class(status)
        color = status_color(cls) if cls else None  # the theme's, now
        bold = cls == "failed"
        style = f"{color}|{bold}"
        if item.data(COL_STATUS, _STYLE_ROLE) == style:
            return
        brush = QBrush(QColor(color)) if color else QBrush()
        if item.foreground(COL_STATUS) != brush:
            item.setForeground(COL_STATUS, brush)
        if item.font(COL_STATUS).bold() != bold:
            font = QFont(item.font(COL_STATUS))
            font.setBold(bold)
            item.setFont(COL_STATUS, font)
        item.setData(COL_STATUS, _STYLE_ROLE, style)

    def _set_message(self, item: QTreeWidgetItem, message: str, warn: bool = False) -> None:
        # One line in the column (the full text is in the tooltip); a traceback's last
        # line is the informative one.
        lines = [ln for ln in (message or "").strip().splitlines() if ln.strip()]
        # Replicas that cannot be placed: Ray's sentence is long and its useful part
        # (resources required vs available) comes last; show that part.
        short = unschedulable_reason(message) or (lines[-1].strip() if lines else "")
        _set_text(item, COL_MESSAGE, short)
        failed = message and status_class(item.text(COL_STATUS)) == "failed"
        color = status_color("failed") if failed else status_color("pending") if warn else ""
        if item.data(COL_MESSAGE, _STYLE_ROLE) == color:
            return  # styled so already (comparing brushes cost ~10 ms a poll at 1,100 rows)
        brush = QBrush(QColor(color)) if color else QBrush()
        if item.foreground(COL_MESSAGE) != brush:
            item.setForeground(COL_MESSAGE, brush)
        item.setData(COL_MESSAGE, _STYLE_ROLE, color)


def _status_matches(item: QTreeWidgetItem, text: str) -> bool:
    return text in item.text(COL_STATUS).casefold()


def _replica_text(running: int, target: int | None) -> str:
    return f"{running}/{target if target is not None else '?'}"


def _counts_text(counts: ReplicaCounts) -> str:
    text = _replica_text(counts.running, counts.target)
    return f"{text} +{counts.starting}" if counts.starting else text


def _set_text(item: QTreeWidgetItem, col: int, text: str) -> None:
    # Setting an equal text still emits dataChanged and repaints; skip it.
    if item.text(col) != text:
        item.setText(col, text)


def _set_tooltip(item: QTreeWidgetItem, tip: str) -> None:
    if item.toolTip(COL_NAME) != tip:
        for col in range(len(HEADERS)):
            item.setToolTip(col, tip)


def _status_colours() -> tuple:
    """The theme's colours of the healthy, pending and failed statuses."""
    return tuple(status_color(c) for c in ("healthy", "pending", "failed"))
