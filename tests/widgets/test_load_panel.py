"""LoadPanel turns the user's rate and start/stop into signals, debounced."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QDoubleSpinBox, QLabel

from widgets.load_panel import NO_TARGET_TIP, LoadPanel


@pytest.fixture
def panel(qtbot) -> LoadPanel:
    w = LoadPanel()
    qtbot.addWidget(w)
    return w


def rate_box(panel: LoadPanel) -> QDoubleSpinBox:
    return panel.findChild(QDoubleSpinBox, "rate")


def stats_text(panel: LoadPanel) -> str:
    """The stats line as the user reads it (without its markup)."""
    doc = QTextDocument()
    doc.setHtml(panel.findChild(QLabel, "stats").text())
    return doc.toPlainText()


def test_start_and_stop_emit_with_the_rate(qtbot, panel):
    panel.set_rate(25.0)
    with qtbot.waitSignal(panel.start_requested) as sig:
        panel.start_button().click()
    assert sig.args == [25.0]
    assert "Stop" in panel.start_button().text() and panel.start_button().isChecked()
    with qtbot.waitSignal(panel.stop_requested):
        panel.start_button().click()
    assert "Start" in panel.start_button().text() and not panel.start_button().isChecked()


def test_quick_rate_changes_emit_once_with_the_last_value(qtbot, panel):
    panel.set_running(True)
    received = []
    panel.rate_changed.connect(received.append)
    for rps in (20.0, 50.0, 120.0, 300.0):
        rate_box(panel).setValue(rps)
        QApplication.processEvents()  # no pause: a loaded machine can stretch any wait
    qtbot.wait(400)
    assert received == [300.0]


def test_rate_changes_while_stopped_are_not_sent(qtbot, panel):
    with qtbot.assertNotEmitted(panel.rate_changed, wait=400):
        rate_box(panel).setValue(77.0)


def test_slider_and_spinbox_agree(panel):
    panel.slider().setValue(panel.slider().maximum())
    assert panel.rate() == 2000.0
    panel.slider().setValue(0)
    assert panel.rate() == pytest.approx(0.1)
    panel.set_rate(100.0)
    assert 0 < panel.slider().value() < panel.slider().maximum()


def test_stats_line(panel):
    panel.set_stats(1234, 1200, 34, 49.83, 12.34, 456.7)
    assert stats_text(panel) == ("sent 1,234 · ok 1,200 · errors 34 · 49.8 req/s · "
                                 "p50 12.3 ms · p99 457 ms")
    panel.set_stats(0, 0, 0, 0.0, None, None)
    assert "p50 –" in stats_text(panel)


def test_disabled_without_target_but_stop_stays_available(panel):
    panel.set_enabled_for_target(False)
    assert not panel.start_button().isEnabled() and not rate_box(panel).isEnabled()
    assert panel.start_button().toolTip() == NO_TARGET_TIP
    panel.set_enabled_for_target(True)
    panel.start_button().click()
    panel.set_enabled_for_target(False)
    assert panel.start_button().isEnabled()  # the user can still stop the load
