"""Menu actions as every window of the console makes them: text, shortcut, a tooltip that
is also the status-bar tip, and the slot."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence


def add_action(owner, menu, text, shortcut, tip, slot) -> QAction:
    action = QAction(text, owner)
    if shortcut:
        action.setShortcut(QKeySequence(shortcut))
    action.setToolTip(tip)
    action.setStatusTip(tip)
    action.triggered.connect(slot)
    menu.addAction(action)
    return action
