"""The auto-tuner's window, handed the model's auto-tuner: Tune → Auto-tune… (Ctrl+Shift+T)
opens the panel on the deployment shown; Start runs the search (console.model.autotune);
the panel shows every trial as it comes; stop / apply best / revert / export go back to
the controller. Made on first use: the console starts without importing any of it."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QWidget

from console.model.autotune import AutoTuneController
from console.model.console_model import ConsoleModel
from console.windows.window_dialogs import report_failure
from console.windows.model_links import ModelLinks
from widgets.autotune_panel import AutoTunePanel


class AutoTuneUi(QObject):
    def __init__(self, model: ConsoleModel, parent: QWidget) -> None:
        """The auto-tuner of *model* (its log for failures, its session's status for
        the deployments to offer), in a panel over *parent*."""
        super().__init__(parent)
        self._links = ModelLinks(self)  # cut when this view goes
        self._model = model
        session = model.session
        self.controller: AutoTuneController = model.autotune
        self.panel = AutoTunePanel(parent)
        p, c = self.panel, self.controller
        p.start_requested.connect(self._on_panel_start_requested)
        p.stop_requested.connect(c.stop)
        p.apply_best_requested.connect(c.apply_best)
        p.revert_requested.connect(c.revert)
        p.export_requested.connect(self._on_panel_export_requested)
        self._links.connect(c.running_changed, p.set_running)
        self._links.connect(c.candidate, p.show_candidate)
        self._links.connect(c.best, p.set_best)
        self._links.connect(c.status, p.set_status)
        self._links.connect(c.failed, self._on_controller_failed)
        self._links.connect(c.finished, self._on_controller_finished)
        self._links.connect(session.status_changed, self._on_session_status_changed)

    def show(self, key: tuple[str, str] | None = None) -> AutoTunePanel:
        self._update_deployments(key)
        if key is not None and not self.controller.running:
            self.panel.select_deployment(key)
        self.panel.show()
        self.panel.raise_()
        return self.panel

    def start(self, spec: dict[str, Any]) -> bool:
        """Start from a spec (the panel's, or a scripted run's)."""
        self.panel.set_spec(spec)
        self.panel.clear_results()
        self.panel.set_slo(float(spec["slo_p99_ms"]))
        return self.controller.start({**self.panel.spec(), **spec})

    # -- slots -----------------------------------------------------------------------------
    def _on_panel_start_requested(self, spec: dict) -> None:
        self.start(spec)

    def _on_panel_export_requested(self) -> None:
        key = self.controller.key()
        if key is None:
            return
        path, _ = QFileDialog.getSaveFileName(self.panel, "Export the best config",
                                              f"{key[0]}-tuned.yaml",
                                              "Serve config (*.yaml *.yml)")
        if path:
            self.controller.export_yaml(path)

    def _on_controller_failed(self, message: str) -> None:
        self.panel.set_status(message)
        report_failure(self._model, self.panel, "Auto-tune", message)

    def _on_controller_finished(self, summary: dict) -> None:
        from console.model.autotune import finish_text
        report = self.controller.report
        self.panel.set_finished(finish_text(report) if report else str(summary),
                                has_best=summary.get("best") is not None,
                                has_start=self.controller.start_config is not None)

    def _on_session_status_changed(self, *_: Any) -> None:
        if self.panel.isVisible():
            self._update_deployments(None)

    def _update_deployments(self, current: tuple[str, str] | None) -> None:
        status = self._model.session.status
        keys = []
        if status is not None:
            for app in status.applications:
                for dep in app.deployments:
                    keys.append((app.name, dep.name))
        self.panel.set_deployments(keys, current)
