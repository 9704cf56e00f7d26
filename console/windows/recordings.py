"""Recorded sessions in the GUI: the browser (Ctrl+O), opening one offline or two to
compare, renaming, deleting, notes written into closed files. Every file operation runs
on a worker; the GUI thread only shows results."""

from __future__ import annotations

import os

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from backend.recording.library import add_note, delete_session, list_sessions, rename_session
from backend.recording.reader import open_session
from console.model.console_model import ConsoleModel
from console.model.tasks import TaskRunner, user_message
from console.windows.recording_viewer import SessionViewer
from widgets.sessions_browser import SessionsBrowser


class SessionsUi(QObject):
    #: A line for the window's status bar: (text, milliseconds shown; 0: until replaced).
    status = Signal(str, int)

    def __init__(self, model: ConsoleModel, parent: QWidget) -> None:
        """The recorded sessions of *model* (its recording part: the sessions folder and
        the file being recorded; its log for what went wrong; whether it may ask a
        person), the browser and message boxes over *parent*."""
        super().__init__(parent)
        self._model = model
        self._parent = parent
        self._recording = model.recording
        self._runner = TaskRunner("sessions", max_workers=2)
        self.browser: SessionsBrowser | None = None
        self.viewers: list[SessionViewer] = []

    @property
    def _interactive(self) -> bool:
        return self._model.interactive

    def _say(self, text: str, level: str = "info") -> None:
        self._model.log(text, level)

    # -- browser ---------------------------------------------------------------------------
    def show_browser(self) -> SessionsBrowser:
        if self.browser is None:
            b = self.browser = SessionsBrowser(self._parent)
            b.open_requested.connect(lambda path: self.open(path))
            b.compare_requested.connect(lambda a, p: self.open_two(a, p))
            b.rename_requested.connect(self.rename)
            b.delete_requested.connect(self.delete)
            b.open_file_requested.connect(self._on_open_file_requested)
            b.refresh_requested.connect(self.refresh)
        self.browser.set_folder(self._recording.sessions_folder)
        self.browser.show()
        self.browser.raise_()
        self.refresh()
        return self.browser

    def refresh(self, on_done=None) -> None:
        folder = self._recording.sessions_folder

        def done(summaries) -> None:
            if self.browser is not None:
                self.browser.set_sessions(summaries)
            if on_done:
                on_done(summaries)
        self._runner.submit(list_sessions, folder, on_done=done,
                            on_error=lambda e: self._say(
                                f"Cannot list the sessions in {folder}: {user_message(e)}",
                                "warning"))

    # -- opening ---------------------------------------------------------------------------------
    def open(self, path: str, on_opened=None) -> None:
        """Read *path* on a worker and show it; on_opened(viewer or None)."""
        self.status.emit(f"Opening {path}…", 0)

        def done(data) -> None:
            self.status.emit(f"Opened {path}", 5000)
            viewer = self._show(data)
            if on_opened:
                on_opened(viewer)

        self._runner.submit(open_session, path, on_done=done,
                            on_error=lambda e: self._open_failed(path, e, on_opened))

    def open_two(self, path_a: str, path_b: str, on_opened=None) -> None:
        """Session A against session B (B's ranges aligned at its start)."""
        self.status.emit(f"Opening {path_a} and {path_b}…", 0)

        def done(pair) -> None:
            viewer = self._show(*pair)
            if on_opened:
                on_opened(viewer)
        self._runner.submit(lambda: (open_session(path_a), open_session(path_b)),
                            on_done=done,
                            on_error=lambda e: self._open_failed(path_a, e, on_opened))

    def _show(self, data, other=None) -> SessionViewer:
        viewer = SessionViewer(data, other)
        viewer.interactive = self._interactive
        viewer.note_requested.connect(self._on_viewer_note_requested)
        viewer.closed.connect(lambda v: v in self.viewers and self.viewers.remove(v))
        self.viewers.append(viewer)
        viewer.show()
        if data.version_read < 2:
            self._say(f"{os.path.basename(data.path)} was recorded in an older format "
                      f"({data.version_read}); it was brought up to date.", "info")
        return viewer

    def _open_failed(self, path: str, error: BaseException, on_opened) -> None:
        text = f"Cannot open the session {path}: {user_message(error)}"
        self.status.emit(text, 10_000)
        self._say(text, "error")
        if self._interactive and self._parent.isVisible():
            QMessageBox.warning(self._parent, "Open session", text)
        if on_opened:
            on_opened(None)

    def _on_open_file_requested(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.browser, "Open a recorded session", self._recording.sessions_folder,
            "serve-console sessions (*.db);;All files (*)")
        if path:
            self.open(path)

    # -- changing files ---------------------------------------------------------------------------
    def rename(self, path: str, name: str) -> None:
        self._runner.submit(rename_session, path, name, on_done=lambda _r: self.refresh(),
                            on_error=lambda e: self._failed("rename", e))

    def delete(self, paths: list[str], confirm: bool = True) -> None:
        live = self._recording.path
        if live in paths:
            self._say("The session being recorded now cannot be deleted; disconnect "
                      "first.", "warning")
            paths = [p for p in paths if p != live]
        if not paths:
            return
        if confirm and self._interactive:
            names = "\n".join(os.path.basename(p) for p in paths)
            answer = QMessageBox.question(
                self.browser or self._parent, "Delete sessions",
                f"Delete {len(paths)} recorded session(s)? This cannot be undone.\n\n"
                f"{names}")
            if answer != QMessageBox.StandardButton.Yes:
                return

        def work() -> None:
            for p in paths:
                delete_session(p)
        self._runner.submit(work, on_done=lambda _r: self.refresh(),
                            on_error=lambda e: self._failed("delete", e))

    def _on_viewer_note_requested(self, path: str, t: float, text: str) -> None:
        self._runner.submit(add_note, path, t, text,
                            on_error=lambda e: self._failed("save the note", e))

    def _failed(self, what: str, error: BaseException) -> None:
        text = f"Could not {what}: {user_message(error)}"
        self._say(text, "warning")
        if self._interactive and self._parent.isVisible():
            QMessageBox.warning(self.browser or self._parent, "Sessions", text)
