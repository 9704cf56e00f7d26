"""A strip across the top of the window for what the user must know now: the cluster is
not answering (since when, retrying), the local cluster died, a restarted head lost the
applications. It shows a sentence and up to a few buttons; it renders, nothing more."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

_STYLES = {
    "error": "background: #5c1f1f; color: #ffecec; border: 1px solid #c0392b;",
    "warning": "background: #5a4512; color: #fff6e0; border: 1px solid #d08a00;",
    "info": "background: #1f3d5c; color: #e8f2ff; border: 1px solid #3a7bd5;",
}


class ConnectionBanner(QFrame):
    # The key of the button the user pressed (as given to show_message).
    action_triggered = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("connectionBanner")
        self._label = QLabel()
        self._label.setWordWrap(True)
        self._box = QHBoxLayout(self)
        self._box.setContentsMargins(8, 4, 8, 4)
        self._box.addWidget(self._label, 1)
        self._buttons: dict[str, QPushButton] = {}
        self.hide()

    def show_message(self, text: str, level: str = "error",
                     actions: list[tuple[str, str, str]] = ()) -> None:
        """Show *text*; *actions* are (key, button text, tooltip)."""
        self.setStyleSheet(f"#connectionBanner {{ {_STYLES.get(level, _STYLES['info'])} "
                           "border-radius: 3px; } QLabel { border: none; }")
        self._label.setText(text)
        self._label.setToolTip(text)
        wanted = [a[0] for a in actions]
        for key in [k for k in self._buttons if k not in wanted]:
            self._buttons.pop(key).deleteLater()
        for key, label, tip in actions:
            button = self._buttons.get(key)
            if button is None:
                button = QPushButton(label)
                button.clicked.connect(lambda _=False, k=key: self.action_triggered.emit(k))
                self._box.addWidget(button)
                self._buttons[key] = button
            button.setText(label)
            button.setToolTip(tip)
        self.show()

    def clear(self) -> None:
        self.hide()
        self._label.setText("")

    def text(self) -> str:
        return self._label.text() if not self.isHidden() else ""

    def action_keys(self) -> list[str]:
        return list(self._buttons) if not self.isHidden() else []

    def trigger(self, key: str) -> None:
        """Press a button (tests, scripts)."""
        self._buttons[key].click()
