"""Tune → Traffic… : the traffic panel (widgets.traffic_panel) in a non-modal window,
wired to its controller (console.model.traffic)."""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDialog, QVBoxLayout, QWidget

from backend.traffic.rollout import RolloutReport
from backend.tuning.knob_state import APPLIED, FAILED, PENDING, KnobState
from console.model.console_model import ConsoleModel
from console.model.traffic import TrafficController
from console.windows.window_dialogs import report_failure
from console.windows.model_links import ModelLinks
from widgets.traffic_panel import TrafficPanel


class TrafficUi(QObject):
    def __init__(self, model: ConsoleModel, parent: QWidget) -> None:
        """Traffic management of *model* (its controller, its knobs' reports, its log for
        failures), in a dialog over *parent*."""
        super().__init__(parent)
        self._links = ModelLinks(self)  # cut when this view goes
        self._model = model
        self.controller: TrafficController = model.traffic
        self.dialog = QDialog(parent)
        self.dialog.setWindowTitle("Traffic")
        self.dialog.setModal(False)
        self.dialog.resize(760, 560)
        self.panel = TrafficPanel(self.dialog)
        QVBoxLayout(self.dialog).addWidget(self.panel)
        p, c = self.panel, self.controller
        p.app_selected.connect(c.select)
        p.shares_requested.connect(c.set_shares)
        p.affinity_requested.connect(c.set_affinity)
        p.rollout_requested.connect(c.start_rollout)
        p.pause_requested.connect(c.pause)
        p.abort_requested.connect(c.abort)
        self._links.connect(c.apps_changed, p.set_apps)
        self._links.connect(c.router_changed, p.set_router)
        self._links.connect(c.stats, p.set_stats)
        self._links.connect(c.client_stats, p.set_client_stats)
        self._links.connect(c.running_changed, p.set_running)
        self._links.connect(c.rollout_text, p.set_rollout_text)
        self._links.connect(c.failed, self._on_controller_failed)
        self._links.connect(c.finished, self._on_controller_finished)
        # The router's knob changes, as the model's knob states report them.
        self._links.connect(model.knobs.reported, self._on_knob_reported)
        # The controller may have looked before this window existed: show what it knows.
        p.set_apps(c.apps())
        p.set_router(c.router())

    def show(self, app: str | None = None) -> TrafficPanel:
        if app and not self.controller.running and app in [
                self.panel.app_box.itemText(i) for i in range(self.panel.app_box.count())]:
            self.panel.app_box.setCurrentText(app)
        self.dialog.show()
        self.dialog.raise_()
        return self.panel

    def _on_controller_failed(self, message: str) -> None:
        self.panel.set_state(message)
        report_failure(self._model, self.dialog, "Traffic", message)

    def _on_controller_finished(self, report: RolloutReport) -> None:
        self.panel.set_state(f"Rollout {report.outcome}.")

    def _on_knob_reported(self, state: KnobState) -> None:
        router = self.controller.router()
        if router is None or (state.app, state.deployment) != (router.app, router.router):
            return
        if state.status == PENDING:
            self.panel.set_state("Applying…")
        elif state.status == APPLIED:
            self.panel.set_state("Applied.")
        elif state.status == FAILED:
            self.panel.set_state(f"Failed: {state.message}")
