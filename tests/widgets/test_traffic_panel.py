"""TrafficPanel through its API: a row per version, shares that always sum to 100 %,
the change asked for when a value is settled (not while a slider is held), affinity, the
per-version numbers, and the rollout form (bad steps refused with the reason)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from backend.load.load_model import VersionLoad
from backend.traffic.rollout_guard import VersionStats
from backend.traffic.router import TrafficRouter
from widgets.traffic_panel import EMPTY_TEXT, TrafficPanel, parse_steps

R = TrafficRouter("versions", "VersionRouter", {"ModelV1": 90.0, "ModelV2": 10.0}, False)


@pytest.fixture
def panel(qtbot):
    p = TrafficPanel()
    qtbot.addWidget(p)
    p.set_apps(["versions"])
    p.set_router(R)
    return p


def test_rows_show_the_routers_shares(panel):
    assert sorted(panel._rows) == ["ModelV1", "ModelV2"]
    assert panel._rows["ModelV1"].slider.value() == 900
    assert panel._rows["ModelV2"].box.value() == 10.0
    assert panel.new_box.currentText() == "ModelV2"  # the smaller share is the new one
    assert not panel.affinity_box.isChecked()


def test_a_typed_share_moves_the_others_and_asks_once(panel, qtbot):
    with qtbot.waitSignal(panel.shares_requested) as asked:
        panel._rows["ModelV1"].box.setValue(25)
    assert asked.args == ["versions", {"ModelV1": 25.0, "ModelV2": 75.0}]
    assert panel._rows["ModelV2"].slider.value() == 750


def test_a_held_slider_asks_only_when_released(panel, qtbot):
    got = []
    panel.shares_requested.connect(lambda app, s: got.append(s))
    slider = panel._rows["ModelV2"].slider
    slider.setSliderDown(True)
    slider.setValue(300)
    slider.setValue(400)
    assert got == [] and panel.shares() == {"ModelV1": 60.0, "ModelV2": 40.0}
    # What the cluster reports meanwhile does not pull the slider back under the hand.
    panel.set_router(R)
    assert slider.value() == 400
    slider.setSliderDown(False)
    assert got == [{"ModelV1": 60.0, "ModelV2": 40.0}]


def test_affinity_and_numbers(panel, qtbot):
    with qtbot.waitSignal(panel.affinity_requested) as asked:
        panel.affinity_box.click()
    assert asked.args == ["versions", True]
    panel.set_stats({"ModelV1": (VersionStats(300, 3, 42.0), 20.0, 10.0)})
    assert panel._rows["ModelV1"].stats.text() == \
        "30.0 req/s · p50 20 / p99 42 ms · 1.0 % errors"
    assert panel._rows["ModelV2"].stats.text() == "–"
    panel.set_client_stats([VersionLoad("ModelV2", 3.0, 27, 3, 12.0, 50.0)])
    assert panel._rows["ModelV2"].client.text() == \
        "load: 3.0 req/s · p50 12 / p99 50 ms · 10.0 % errors"
    assert panel._rows["ModelV1"].client.text() == ""


def test_a_router_without_affinity_says_so(panel):
    panel.set_router(TrafficRouter("colours", "Split", {"Blue": 80.0, "Green": 20.0}, None))
    assert sorted(panel._rows) == ["Blue", "Green"]
    assert not panel.affinity_box.isEnabled()
    assert "no session_affinity key" in panel.affinity_box.toolTip()


def test_without_a_router_the_panel_says_how_to_get_one(qtbot):
    p = TrafficPanel()
    qtbot.addWidget(p)
    p.show()
    assert p.empty_label.isVisible() and p.empty_label.text() == EMPTY_TEXT
    assert not p._roll_group.isEnabled()


def test_the_rollout_form(panel, qtbot):
    panel.steps_edit.setText("0, 10%, 100")
    with qtbot.waitSignal(panel.rollout_requested) as asked:
        qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    assert asked.args[0]["steps"] == (0.0, 10.0, 100.0) and asked.args[0]["new"] == "ModelV2"
    panel.set_running(True)
    assert not panel.start_button.isEnabled() and panel.abort_button.isEnabled()
    assert not panel._rows["ModelV1"].slider.isEnabled()
    with qtbot.waitSignal(panel.pause_requested) as paused:
        panel.pause_button.click()
    assert paused.args == [True] and panel.pause_button.text() == "Resume"
    panel.set_running(False)
    assert panel.pause_button.text() == "Pause" and panel.start_button.isEnabled()


@pytest.mark.parametrize("text,words", [("", "percentages"), ("a, b", "numbers"),
                                        ("0, 150", "within"), ("10, 5", "rise")])
def test_bad_steps_are_refused_with_the_reason(text, words):
    with pytest.raises(ValueError, match=words):
        parse_steps(text)
