"""Live tuning: one deployment's knobs as sliders, spin boxes, check boxes and JSON fields.

The panel renders the console's knob states of one deployment
(`backend.tuning.knob_state.DeploymentKnobs`: one `KnobState` per knob, owned by the
console) and turns the user's edits into `change_requested(app, deployment, path, value,
settled)`; *settled* says whether that change ends an edit (a slider released: nothing
to debounce) or is one step of a burst. Applying the change to the cluster (debounced,
newest value wins) is the console's job, and so is the knob's state: each row is bound
to its `KnobState` and holds no copy of it; the console says which state changed through
`show_state`.

Two values matter per knob: the one the control shows and the one the cluster runs (the
state's `cluster_value`). They differ while the user drags or types and while a change is
pending; then the cluster's value is shown beside the control ("cluster: 16") instead of
yanking the control back under the user's hand.
"""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QSlider, QVBoxLayout, QWidget

from backend.tuning.knob_state import DeploymentKnobs, KnobState
from widgets.knob_row import KnobRow, knob_shape, WheelGuard
from widgets.theme import status_color

EMPTY_TEXT = "Select a deployment to tune it"
GROUP_ORDER = ("batching", "concurrency", "autoscaling", "resources", "timeouts",
               "multiplexing", "traffic", "user_config", "other")
GROUP_TITLES = {"batching": "Batching", "concurrency": "Concurrency",
                "autoscaling": "Autoscaling", "resources": "Resources (per replica)",
                "timeouts": "Timeouts", "multiplexing": "Multiplexing", "traffic": "Traffic",
                "user_config": "user_config", "other": "Other"}
# ------------------------------------------------------------------ the panel

class KnobPanel(QWidget):
    """The knobs of one deployment, grouped in sections, updated in place each poll."""

    # (app, deployment, path, value, settled): see the module docstring
    change_requested = Signal(str, str, str, object, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._knob_set: DeploymentKnobs | None = None
        self._unavailable = ""  # set_unavailable(): why no knob may be changed now
        self._rows: dict[str, KnobRow] = {}
        self._sections: dict[str, tuple[QWidget, QVBoxLayout]] = {}
        self._wheel_guard = WheelGuard(self)

        self._title = QLabel()
        font = self._title.font()
        font.setBold(True)
        self._title.setFont(font)
        self._title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._title.setToolTip("The deployment these knobs change (application / deployment)")
        self._notes = QLabel()
        self._notes.setWordWrap(True)
        self._notes.setStyleSheet(f"color: {status_color('muted')}; font-size: small;")
        self._notes.setToolTip("Notes about what this deployment can tune")
        self._banner = QLabel()
        self._banner.setObjectName("banner")
        self._banner.setWordWrap(True)
        self._banner.setStyleSheet("QLabel { background: rgba(128,128,128,40); "
                                   f"border: 1px solid {status_color('muted')}; border-radius: 3px; padding: 4px; }}")
        self._banner.setToolTip("Why the knobs of this deployment cannot be changed here")
        self._warnings = QLabel()
        self._warnings.setWordWrap(True)
        self._warnings.setTextFormat(Qt.TextFormat.PlainText)
        self._warnings.setStyleSheet("QLabel { background: rgba(208,138,0,40); "
                                     f"border: 1px solid {status_color('warning')}; border-radius: 3px; "
                                     "padding: 4px; }")
        self._warnings.setToolTip("Checks across knobs: the values shown work against "
                                  "each other")
        self._empty = QLabel(EMPTY_TEXT)
        self._empty.setObjectName("emptyState")
        self._empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._empty.setWordWrap(True)
        self._empty.setStyleSheet(f"color: {status_color('muted')}; font-style: italic;")
        self._empty.setToolTip("Pick a deployment in the application tree: its knobs "
                               "appear here and apply to the running cluster.")

        self._content = QWidget()
        self._content_box = QVBoxLayout(self._content)
        self._content_box.setContentsMargins(0, 0, 4, 0)
        self._content_box.setSpacing(6)
        self._content_box.addStretch(1)
        self._scroll = QScrollArea()
        self._scroll.setWidgetResizable(True)
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._scroll.setWidget(self._content)

        box = QVBoxLayout(self)
        box.setContentsMargins(6, 6, 6, 6)
        box.setSpacing(4)
        for w in (self._title, self._notes, self._banner, self._warnings):
            box.addWidget(w)
        box.addWidget(self._scroll, 1)
        box.addWidget(self._empty, 1)
        self.setMinimumWidth(280)
        self.set_knobs(None)

    # ----------------------------------------------------------------- public API

    def set_knobs(self, knob_set: DeploymentKnobs | None) -> None:
        """Show a deployment's knob states. The same (app, deployment) again updates the
        controls in place, leaving alone those the user is editing or whose change is
        pending; another deployment rebuilds the panel; None shows the empty state."""
        old = self._knob_set
        same = (old is not None and knob_set is not None
                and (old.app, old.deployment) == (knob_set.app, knob_set.deployment))
        if not same:
            self._clear()
            self.set_warnings([])
        self._knob_set = knob_set
        has = knob_set is not None
        self._empty.setVisible(not has)
        self._scroll.setVisible(has)
        self._title.setVisible(has)
        if knob_set is None:
            self._notes.hide()
            self._banner.hide()
            return

        self._title.setText(f"{knob_set.deployment}  <span style='color:{status_color('muted')}; "
                            f"font-weight:normal'>in {html.escape(knob_set.app)}</span>")
        self._notes.setText("\n".join(knob_set.notes))
        self._notes.setVisible(bool(knob_set.notes))
        # The cluster not answering outranks the deployment's own read-only reason.
        reason = self._unavailable or knob_set.read_only_reason
        self._banner.setText(f"Read-only. {reason}" if reason else "")  # no emoji: fonts lack it
        self._banner.setVisible(bool(reason))

        wanted = [st.path for st in knob_set.states]
        for path in [p for p in self._rows if p not in wanted]:
            self._drop_row(path)
        order_changed = False
        for st in knob_set.states:
            row = self._rows.get(st.path)
            if row is not None and not self._fits(row, st):
                self._drop_row(st.path)  # e.g. a new range: the controls must be rebuilt
                row = None
            if row is None:
                row = KnobRow(st, self._wheel_guard)
                row.committed.connect(self._on_row_committed)
                self._rows[st.path] = row
                order_changed = True
            else:
                row.bind(st)
            row.set_read_only(reason)
        if order_changed or list(self._rows) != wanted:
            self._lay_out(knob_set)
        if not knob_set.states:
            self._empty.setText("This deployment has no knobs the console can change.")
            self._empty.show()
        else:
            self._empty.setText(EMPTY_TEXT)

    def knob_set(self) -> DeploymentKnobs | None:
        return self._knob_set

    def set_unavailable(self, reason: str | None) -> None:
        """Disable every knob with *reason* (e.g. the cluster is not answering); None
        enables them again (as far as the deployment allows)."""
        if (reason or "") == self._unavailable:
            return
        self._unavailable = reason or ""
        if self._knob_set is not None:
            self.set_knobs(self._knob_set)

    def unavailable_reason(self) -> str:
        return self._unavailable

    @Slot(object)
    def show_state(self, state: KnobState) -> None:
        """The console's state of a knob changed: its row (if the panel shows that knob)
        shows it again. A knob whose controls must change shape waits for `set_knobs`."""
        ks = self._knob_set
        row = self._rows.get(state.path)
        if (row is None or ks is None or (ks.app, ks.deployment) != (state.app, state.deployment)
                or not self._fits(row, state)):
            return
        row.bind(state)

    def set_warnings(self, warnings: list[str]) -> None:
        """Cross-knob checks on the values shown (amber, above the knobs)."""
        self._warnings.setText("\n".join(f"⚠ {w}" for w in warnings))
        self._warnings.setVisible(bool(warnings) and self._knob_set is not None)

    def warnings(self) -> list[str]:
        text = self._warnings.text()
        return [line.removeprefix("⚠ ") for line in text.split("\n")] if text else []

    def state(self, path: str) -> str:
        """The knob's status as its row shows it: idle, pending, applied or failed."""
        return self._rows[path].status()

    def control(self, path: str) -> QWidget:
        """The knob's main control: the spin box of a number, the check box, the JSON field."""
        return self._rows[path].main_control()

    def slider(self, path: str) -> QSlider | None:
        return self._rows[path].slider

    def row(self, path: str) -> KnobRow:
        return self._rows[path]

    def displayed_value(self, path: str) -> Any:
        return self._rows[path].displayed_value()

    # ----------------------------------------------------------------- slots

    def _on_row_committed(self, path: str, value: Any, settled: bool) -> None:
        ks = self._knob_set
        if ks is not None:
            self.change_requested.emit(ks.app, ks.deployment, path, value, settled)

    # ----------------------------------------------------------------- internals

    @staticmethod
    def _fits(row: KnobRow, state: KnobState) -> bool:
        """The row's controls and section still fit the knob as *state* describes it."""
        return (state.knob is not None and row.shape() == knob_shape(state.knob)
                and row.group() == state.knob.group)

    def _drop_row(self, path: str) -> None:
        row = self._rows.pop(path)
        row.setParent(None)
        row.deleteLater()

    def _clear(self) -> None:
        for path in list(self._rows):
            self._drop_row(path)
        for section, _ in self._sections.values():
            section.setParent(None)
            section.deleteLater()
        self._sections.clear()

    def _section(self, group: str) -> QVBoxLayout:
        if group not in self._sections:
            section = QWidget()
            layout = QVBoxLayout(section)
            layout.setContentsMargins(0, 0, 0, 0)
            layout.setSpacing(0)
            title = QLabel(GROUP_TITLES.get(group, group.replace("_", " ").capitalize()))
            title.setObjectName("sectionTitle")
            title.setStyleSheet(f"QLabel#sectionTitle {{ font-weight: bold; color: {status_color('muted')}; "
                                f"border-bottom: 1px solid {status_color('muted')}; padding-bottom: 1px; "
                                "margin-bottom: 2px; }")
            title.setToolTip(f"Knobs of the {GROUP_TITLES.get(group, group)} group")
            layout.addWidget(title)
            self._sections[group] = (section, layout)
        return self._sections[group][1]

    def _lay_out(self, knob_set: DeploymentKnobs) -> None:
        """Put the rows into their sections in order. Rows are moved, not recreated, so
        a pending edit survives knobs coming and going (e.g. autoscaling turned on)."""
        rank = {g: i for i, g in enumerate(GROUP_ORDER)}
        by_group: dict[str, list[KnobRow]] = {}
        for st in knob_set.states:
            by_group.setdefault(self._rows[st.path].group(), []).append(self._rows[st.path])
        for group in [g for g in self._sections if g not in by_group]:
            section, _ = self._sections.pop(group)
            section.setParent(None)
            section.deleteLater()
        # Take every section out of the content and put back the ones in use, in order.
        for section, layout in self._sections.values():
            self._content_box.removeWidget(section)
            for i in reversed(range(1, layout.count())):
                layout.takeAt(i)
        groups = sorted(by_group, key=lambda g: rank.get(g, len(GROUP_ORDER)))
        focus_chain: list[QWidget] = []
        for i, group in enumerate(groups):
            layout = self._section(group)
            for row in by_group[group]:
                layout.addWidget(row)
                focus_chain.extend(row.focus_widgets())
            self._content_box.insertWidget(i, self._sections[group][0])
        # Tab follows the visual order even when rows were added later.
        for a, b in zip(focus_chain, focus_chain[1:]):
            QWidget.setTabOrder(a, b)
        # Rebuilt rows keep their insertion order for the in-place check in set_knobs.
        self._rows = {st.path: self._rows[st.path] for st in knob_set.states}
