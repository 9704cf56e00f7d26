"""The main window's menu actions that ask the user something (a file name, a note) or show
something (About, the PromQL copied), then hand over to the session or the model. Each
takes the main window."""

from __future__ import annotations

import time

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox


def copy_promql(w) -> None:
    """The PromQL behind every plotted series of the shown deployment, to the clipboard."""
    key = w.model.selected
    if key is None:
        return
    text = "\n".join(f"# {name}\n{q}" for name, q in w.model.session.promql(key).items())
    QGuiApplication.clipboard().setText(text)
    w.statusBar().showMessage(f"PromQL of {key[0]}/{key[1]} copied to the clipboard", 5000)


def export_config(w) -> None:
    key = w.model.selected
    if key is None:
        return
    path, _ = QFileDialog.getSaveFileName(w, f"Export the config of '{key[0]}'",
                                          f"{key[0]}.yaml", "Serve config (*.yaml *.yml)")
    if path:
        w.model.deploys.export_config(key[0], path)


def import_config(w) -> None:
    path, _ = QFileDialog.getOpenFileName(w, "Apply a Serve config file", "",
                                          "Serve config (*.yaml *.yml);;All files (*)")
    if path:
        w.model.deploys.import_config(path)


def about(w) -> None:
    QMessageBox.about(
        w, "About serve-console",
        "serve-console — a monitoring and control console for Ray Serve.\n\n"
        "Deploy the bundled demos, put load on them and watch queue depth, latency "
        "percentiles and batch sizes live.")


def add_note(w) -> None:
    t = time.time()  # the moment the user asked, not when the dialog closes
    text, ok = QInputDialog.getMultiLineText(
        w, "Add a note", "A note for this moment (a marker on the plots and a row in the "
        "session's report):")
    if ok:
        w.model.add_note(text, t)


def report_failure(model, shown_in, title: str, message: str) -> None:
    """Something a tool window started failed: *model*'s event log says so, and a box too
    while a person is at the console and the window (*shown_in*) is open."""
    model.log(message, "error")
    if model.interactive and shown_in.isVisible():
        QMessageBox.warning(shown_in, title, message)
