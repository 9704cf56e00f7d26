"""The main window is built from a model and nothing else (issue 58, item 2): each dock is
handed the model's part it shows and bound to it, so what the model and its parts say
reaches the window with no cluster, and what the user does there goes to the model."""

from __future__ import annotations

from console.model.connection import ConnectionState


def test_the_docks_follow_the_models_parts_with_no_cluster(offline_window):
    win = offline_window
    model = win.model
    entry = model.log("a line the model logged", "warning")
    assert win.event_log.entries()[-1] == entry
    model.load_rate.emit(42.0)  # a start the model asked for shows its rate first
    assert win.load_panel.rate() == 42.0
    model.connection.state_changed.emit(ConnectionState.LOST, "Cluster lost")
    assert "not answering" in win.knob_panel.unavailable_reason()
    assert "not answering" in win.advisor_panel.unavailable_reason()
    model.connection.state_changed.emit(ConnectionState.CONNECTED, "Connected")
    assert win.knob_panel.unavailable_reason() == ""
    assert win.advisor_panel.unavailable_reason() == ""


def test_what_the_user_does_in_a_dock_goes_to_the_model(offline_window):
    win = offline_window
    logged = []
    win.model.event_added.connect(logged.append)
    # Start with nothing deployed: the model says there is nowhere to send load.
    win.load_panel.start_requested.emit(5.0)
    assert any("No application with an HTTP route" in e.message for e in logged)
    assert not win.model.load.running


def test_the_sessions_ui_is_handed_the_model_and_a_parent_not_the_window(
        qtbot, offline_window, tmp_path):
    """Sessions… works from the model (its recording, its log) over any parent widget;
    what it says for the status bar reaches the window's through a signal."""
    from PySide6.QtWidgets import QWidget

    from console.windows.recordings import SessionsUi

    model = offline_window.model
    model.interactive = False
    parent = QWidget()
    qtbot.addWidget(parent)
    ui = SessionsUi(model, parent)
    said: list[str] = []
    ui.status.connect(lambda text, _ms: said.append(text))
    bad = tmp_path / "not-a-session.db"
    bad.write_text("not a recorded session")
    opened: list = []
    ui.open(str(bad), on_opened=opened.append)
    qtbot.waitUntil(lambda: bool(opened), timeout=10_000)
    assert opened == [None]
    assert said[0] == f"Opening {bad}…" and said[-1].startswith("Cannot open the session")
    assert model.events[-1].message == said[-1] and model.events[-1].level == "error"
    offline_window.open_recorded_session(str(bad), on_opened=opened.append)
    qtbot.waitUntil(lambda: len(opened) == 2, timeout=10_000)
    assert offline_window.statusBar().currentMessage().startswith("Cannot open the session")


def test_the_status_bar_and_the_banner_follow_the_connection_part(qtbot, offline_window):
    """The status bar's connection and Serve labels and the banner's paused metrics are
    the model's connection state (console/model/connection.py), with no cluster."""
    from PySide6.QtWidgets import QStatusBar

    from console.windows.window_banner import WindowBanner
    from console.windows.window_status import WindowStatus
    from widgets.connection_banner import ConnectionBanner

    model = offline_window.model
    bar = QStatusBar()
    qtbot.addWidget(bar)
    shown = ConnectionBanner()
    qtbot.addWidget(shown)
    banner = WindowBanner(shown, model, bar)
    status = WindowStatus(bar, model, banner.metrics_text, lambda: None, bar)
    c = model.connection
    c.connecting("Starting a local Ray cluster…")
    c.progress("Waiting for the dashboard…")  # what connecting is doing now
    assert status.connection.text() == "Waiting for the dashboard…"
    c.connected("s1", "Connected: local cluster")
    assert status.connection.text() == "Connected: local cluster"
    assert banner.metrics_text("")[0] != "Metrics: paused (cluster not answering)"
    c.poll_failed("refused")
    assert status.serve.text() == "Cluster not answering"
    assert status.serve.toolTip() == "refused"
    assert status.connection.text().startswith("Disconnected since")
    assert banner.metrics_text("")[0] == "Metrics: paused (cluster not answering)"
    assert "retry" in shown.action_keys()
    c.closed()
    assert (status.connection.text(), status.serve.text()) == ("Not connected", "")
    c.progress("late progress of a cancelled connect")  # changes nothing once closed
    assert status.connection.text() == "Not connected"
