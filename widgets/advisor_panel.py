"""The advisor's list of hints: for each, the symptom it saw (with the numbers), the knob
and the suggested value, and an Apply button; the tooltip has the tuning guides' advice.

A view: it renders the `backend.tuning.advisor.Hint`s the console hands it and says which one
the user wants applied (`apply_requested`) or looked at (`show_requested`); the console
applies it through the normal tuning path and reports back with `set_state`. Rows are
kept by hint id, so a hint refreshed with newer numbers keeps its place, its state and
the mouse over it.
"""

from __future__ import annotations

import html
from typing import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea,
                               QSizePolicy, QVBoxLayout, QWidget)

from backend.tuning.advisor import WARNING, Hint
from widgets.theme import status_color

# Colours are the theme's (widgets/theme.py), read when a hint or state is shown.

# Apply states (set_state): the button and the line under it.
APPLYING, APPLIED, FAILED = "applying", "applied", "failed"
STATE_TEXT = {APPLYING: "applying…", APPLIED: "applied ✓ — watching whether the symptom goes",
              FAILED: "failed ✗"}
STATE_STATUS = {APPLYING: "muted", APPLIED: "applied", FAILED: "failed"}

EMPTY_TEXT = ("No hints. The advisor watches every deployment's live metrics and speaks up "
              "when a symptom from Ray Serve's tuning guides holds for 10 s or more.")


class HintRow(QFrame):
    """One hint: title and deployment, symptom, knob → suggested value, Apply."""

    def __init__(self, panel: "AdvisorPanel", hint: Hint) -> None:
        super().__init__()
        self._panel = panel
        self.setObjectName("hintRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title_label = QLabel()
        self.title_label.setTextFormat(Qt.TextFormat.RichText)
        self.title_label.setWordWrap(True)
        self.title_label.linkActivated.connect(self._on_title_label_link_activated)
        self.symptom_label = QLabel()
        self.symptom_label.setWordWrap(True)
        self.symptom_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.knob_label = QLabel()
        self.knob_label.setWordWrap(True)
        self.apply_button = QPushButton("Apply")
        self.apply_button.clicked.connect(self._on_apply_button_clicked)
        self.state_label = QLabel()
        self.state_label.setWordWrap(True)
        self.state_label.setVisible(False)
        knob_line = QHBoxLayout()
        knob_line.addWidget(self.knob_label, 1)
        knob_line.addWidget(self.apply_button, 0, Qt.AlignmentFlag.AlignTop)
        box = QVBoxLayout(self)
        box.setContentsMargins(6, 4, 6, 4)
        box.setSpacing(2)
        box.addWidget(self.title_label)
        box.addWidget(self.symptom_label)
        box.addLayout(knob_line)
        box.addWidget(self.state_label)
        self.state = ""
        self._message = ""
        self.hint = hint
        self.set_hint(hint)

    def set_hint(self, hint: Hint) -> None:
        if (hint.knob, hint.suggested) != (self.hint.knob, self.hint.suggested):
            self.state = ""  # a new suggestion: whatever was applied before is history
        self.hint = hint
        colour = status_color("warning" if hint.severity == WARNING else "info")
        app, dep = hint.key
        self.title_label.setText(
            f"<span style='color:{colour}'>●</span> <b>{html.escape(hint.title)}</b> "
            f"<a href='show'>{html.escape(app)}/{html.escape(dep)}</a>")
        self.symptom_label.setText(hint.symptom)
        if hint.knob:
            applies = f" · {hint.applies}" if hint.applies else ""
            text = f"Suggested: <b>{html.escape(hint.change_text())}</b>{applies}"
        else:
            text = "<i>No knob here fixes it: see the symptom.</i>"
        if hint.blocked:
            text += f"<br><span style='color:{status_color('muted')}'>{html.escape(hint.blocked)}</span>"
        self.knob_label.setText(text)
        tip = f"{hint.title}\n\n{hint.advice}"
        for w in (self, self.title_label, self.symptom_label, self.knob_label):
            w.setToolTip(tip)
        self.apply_button.setVisible(bool(hint.knob))
        self._update_state()

    def set_state(self, state: str, message: str = "") -> None:
        self.state = state
        self._message = message
        self._update_state()

    def _update_state(self) -> None:
        state = self.state
        self.state_label.setVisible(bool(state))
        if state:
            text = STATE_TEXT.get(state, state)
            message = self._message
            self.state_label.setText(f"{text}: {message}" if message and state == FAILED
                                     else text)
            self.state_label.setStyleSheet(f"color: {status_color(STATE_STATUS.get(state, 'muted'))};")
        why = self._panel.unavailable_reason()
        can = self.hint.applicable and not why and state not in (APPLYING, APPLIED)
        self.apply_button.setEnabled(can)
        self.apply_button.setText("Applying…" if state == APPLYING else "Apply")
        self.apply_button.setToolTip(
            why or self.hint.blocked
            or (f"Set {self.hint.change_text()} on the cluster (the normal tuning path: a "
                "marker on the plots, a line in the event log, recorded)"
                if self.hint.applicable else ""))

    def _on_apply_button_clicked(self) -> None:
        if self.apply_button.isEnabled():
            self._panel.apply_requested.emit(self.hint.id)

    def _on_title_label_link_activated(self, _link: str) -> None:
        self._panel.show_requested.emit(*self.hint.key)


class AdvisorPanel(QWidget):
    """A non-modal list of hints (newest numbers each refresh), each with Apply."""

    apply_requested = Signal(str)       # hint id
    show_requested = Signal(str, str)   # (app, deployment): show it in the plots

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: dict[str, HintRow] = {}
        self._unavailable: str | None = None
        self._header = QLabel()
        self._header.setStyleSheet(f"color: {status_color('muted')};")
        self._empty = QLabel(EMPTY_TEXT)
        self._empty.setWordWrap(True)
        self._empty.setStyleSheet(f"color: {status_color('muted')}; font-style: italic;")
        self._list = QWidget()
        self._list_box = QVBoxLayout(self._list)
        self._list_box.setContentsMargins(0, 0, 0, 0)
        self._list_box.setSpacing(4)
        self._list_box.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self._list)
        box = QVBoxLayout(self)
        box.setContentsMargins(4, 4, 4, 4)
        box.addWidget(self._header)
        box.addWidget(self._empty)
        box.addWidget(scroll, 1)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        self._update_header()

    # -- what the console hands in -----------------------------------------------------------
    def set_hints(self, hints: Sequence[Hint]) -> None:
        """Show *hints* in this order; rows of hints still shown keep their state."""
        wanted = {h.id for h in hints}
        for hid in [h for h in self._rows if h not in wanted]:
            row = self._rows.pop(hid)
            self._list_box.removeWidget(row)
            row.deleteLater()
        for i, hint in enumerate(hints):
            row = self._rows.get(hint.id)
            if row is None:
                row = self._rows[hint.id] = HintRow(self, hint)
            else:
                row.set_hint(hint)
            if self._list_box.indexOf(row) != i:
                self._list_box.removeWidget(row)
                self._list_box.insertWidget(i, row)
        self._update_header()

    def set_state(self, hint_id: str, state: str, message: str = "") -> None:
        """*state*: APPLYING, APPLIED, FAILED (with the reason), or "" (none)."""
        row = self._rows.get(hint_id)
        if row is not None:
            row.set_state(state, message)

    def set_unavailable(self, reason: str | None) -> None:
        """Disable every Apply (the cluster is not answering), saying why; None enables."""
        self._unavailable = reason
        for row in self._rows.values():
            row._update_state()

    def unavailable_reason(self) -> str:
        return self._unavailable or ""

    # -- reading it back (tests, the window's count) --------------------------------------------
    def hints(self) -> list[Hint]:
        rows = [self._list_box.itemAt(i).widget() for i in range(self._list_box.count())]
        return [r.hint for r in rows if isinstance(r, HintRow)]

    def count(self) -> int:
        return len(self._rows)

    def row(self, hint_id: str) -> HintRow | None:
        return self._rows.get(hint_id)

    def _update_header(self) -> None:
        n = len(self._rows)
        warnings = sum(1 for r in self._rows.values() if r.hint.severity == WARNING)
        self._header.setText(f"{n} hint{'s' if n != 1 else ''}"
                             + (f" ({warnings} warning{'s' if warnings != 1 else ''})"
                                if warnings and warnings != n else ""))
        self._header.setVisible(n > 0)
        self._empty.setVisible(n == 0)
