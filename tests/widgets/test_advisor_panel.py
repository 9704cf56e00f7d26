"""AdvisorPanel through its API: it lists the hints it is given (symptom, knob → value,
the guides' advice as tooltip), Apply asks for exactly that hint, states show under it,
rows keep their place and state across refreshes, and nothing can be applied while the
cluster is unavailable or the hint cannot be applied."""

from __future__ import annotations

from PySide6.QtCore import Qt

from backend.tuning.advisor import INFO, Hint
from widgets.advisor_panel import APPLIED, APPLYING, EMPTY_TEXT, FAILED, AdvisorPanel

import pytest


def hint(rule="batch_cap", dep="Model", current=4, suggested=32, knob="max_ongoing_requests",
         symptom="max_batch_size 16 × max_concurrent_batches 1 = 16 > max_ongoing_requests 4",
         **kw) -> Hint:
    return Hint(id=f"{rule}:app/{dep}", rule=rule, key=("app", dep),
                title=kw.pop("title", "Batches can never fill"), symptom=symptom, knob=knob,
                knob_label=knob, current=current, suggested=suggested,
                advice="A replica never holds more than max_ongoing_requests: …", applies="live", **kw)


@pytest.fixture
def panel(qtbot) -> AdvisorPanel:
    p = AdvisorPanel()
    qtbot.addWidget(p)
    p.resize(420, 600)
    p.show()
    return p


def test_empty_panel_says_what_it_watches(panel):
    assert panel.count() == 0 and panel.hints() == []
    assert panel._empty.isVisible() and panel._empty.text() == EMPTY_TEXT


def test_hints_show_symptom_change_and_advice(panel):
    a, b = hint(), hint(rule="batches_full", dep="Other", knob="user_config.max_batch_size",
                        current=2, suggested=4, title="Batches always full")
    panel.set_hints([a, b])
    assert panel.count() == 2 and panel.hints() == [a, b]
    assert not panel._empty.isVisible() and panel._header.text() == "2 hints"
    row = panel.row(a.id)
    assert row.symptom_label.text() == a.symptom
    assert "max_ongoing_requests 4 → 32" in row.knob_label.text() and "live" in row.knob_label.text()
    assert "app/Model" in row.title_label.text() and "Batches can never fill" in row.title_label.text()
    assert "never holds more than" in row.toolTip()
    assert "never holds more than" in row.symptom_label.toolTip()
    assert row.apply_button.isEnabled()


def test_apply_asks_for_that_hint(panel, qtbot):
    a, b = hint(), hint(dep="Other")
    panel.set_hints([a, b])
    with qtbot.waitSignal(panel.apply_requested) as sig:
        qtbot.mouseClick(panel.row(b.id).apply_button, Qt.MouseButton.LeftButton)
    assert sig.args == [b.id]


def test_clicking_the_deployment_asks_to_show_it(panel, qtbot):
    panel.set_hints([hint()])
    with qtbot.waitSignal(panel.show_requested) as sig:
        panel.row(hint().id).title_label.linkActivated.emit("show")
    assert sig.args == ["app", "Model"]


def test_states_under_the_hint_and_apply_disabled_while_applying(panel, qtbot):
    h = hint()
    panel.set_hints([h])
    row = panel.row(h.id)
    panel.set_state(h.id, APPLYING)
    assert not row.apply_button.isEnabled() and row.apply_button.text() == "Applying…"
    assert not row.state_label.isHidden() and row.state_label.text() == "applying…"
    panel.set_state(h.id, FAILED, "The cluster refused it")
    assert row.apply_button.isEnabled()
    assert row.state_label.text() == "failed ✗: The cluster refused it"
    panel.set_state(h.id, APPLIED)
    assert not row.apply_button.isEnabled() and "applied ✓" in row.state_label.text()
    # The same hint refreshed with new numbers keeps its row and its state …
    panel.set_hints([hint(symptom="newer numbers")])
    assert panel.row(h.id) is row and row.state == APPLIED
    assert row.symptom_label.text() == "newer numbers"
    # … a new suggestion for it is a new proposal: Apply again.
    panel.set_hints([hint(current=32, suggested=64)])
    assert row.state == "" and row.apply_button.isEnabled()
    assert row.state_label.isHidden()


def test_rows_follow_the_order_given_and_go_when_their_hint_goes(panel):
    a, b, c = hint(dep="A"), hint(dep="B"), hint(dep="C")
    panel.set_hints([a, b, c])
    row_b = panel.row(b.id)
    panel.set_hints([c, b])
    assert panel.hints() == [c, b] and panel.row(b.id) is row_b
    assert panel.row(a.id) is None and panel.count() == 2
    panel.set_hints([])
    assert panel.count() == 0 and panel._empty.isVisible()


def test_no_apply_without_a_knob_for_a_blocked_hint_or_while_unavailable(panel, qtbot):
    no_knob = hint(rule="timeouts", knob="", current=None, suggested=None, severity=INFO,
                   title="Requests time out")
    blocked = hint(dep="Code", blocked="Deployed from code (serve.run): read-only here.")
    ok = hint(dep="Ok")
    panel.set_hints([no_knob, blocked, ok])
    assert panel.row(no_knob.id).apply_button.isHidden()
    assert not panel.row(ok.id).apply_button.isHidden()
    assert "No knob here" in panel.row(no_knob.id).knob_label.text()
    assert not panel.row(blocked.id).apply_button.isEnabled()
    assert "Deployed from code" in panel.row(blocked.id).knob_label.text()
    assert panel._header.text() == "3 hints (2 warnings)"
    panel.set_unavailable("The cluster is not answering.")
    button = panel.row(ok.id).apply_button
    assert not button.isEnabled() and button.toolTip() == "The cluster is not answering."
    with qtbot.assertNotEmitted(panel.apply_requested):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    panel.set_unavailable(None)
    assert button.isEnabled()
