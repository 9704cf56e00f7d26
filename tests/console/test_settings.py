"""Settings: typed, versioned, never a token; old files are read, bad entries dropped."""

from __future__ import annotations

import json

from console.settings import Settings


def test_recent_connections_keep_everything_but_a_token(tmp_path):
    path = str(tmp_path / "s.ini")
    s = Settings(path)
    s.add_recent_connection({"url": "http://a:8265", "prometheus_url": "http://p:9090",
                             "token_file": "/t", "verify_tls": False, "ca_bundle": None,
                             "token": "s3cret"})
    s.add_recent_connection({"url": "http://b:8265", "serve_http_url": "http://lb:8000"})
    s.add_recent_connection({"url": "http://a:8265", "prometheus_url": "http://p2:9090"})
    s.sync()
    again = Settings(path)
    assert again.recent_connections() == [
        {"url": "http://a:8265", "prometheus_url": "http://p2:9090"},
        {"url": "http://b:8265", "serve_http_url": "http://lb:8000"},
    ]
    assert "s3cret" not in (tmp_path / "s.ini").read_text()


def test_addresses_saved_by_an_older_version_are_offered(tmp_path):
    path = tmp_path / "s.ini"
    path.write_text('[General]\nversion=1\nrecent_addresses=http://old:8265, http://x:1\n')
    s = Settings(str(path))
    assert s.recent_connections() == [{"url": "http://old:8265"}, {"url": "http://x:1"}]
    s.add_recent_connection({"url": "http://new:8265"})
    assert [c["url"] for c in s.recent_connections()] == [
        "http://new:8265", "http://old:8265", "http://x:1"]


def test_bad_entries_are_dropped_not_fatal(tmp_path):
    path = str(tmp_path / "s.ini")
    s = Settings(path)
    s._q.setValue("recent_connections", json.dumps([
        {"url": "http://ok:8265", "verify_tls": "yes", "token": "leaked"},
        {"prometheus_url": "http://no-url"}, "junk", {"url": "http://ok:8265"}]))
    assert s.recent_connections() == [{"url": "http://ok:8265"}]
    s._q.setValue("recent_connections", "{not json")
    assert s.recent_connections() == []


def test_per_replica_view_is_remembered(tmp_path):
    """The foreign-cluster check found the key dropped as unknown at the next start."""
    path = str(tmp_path / "settings.ini")
    s = Settings(path)
    assert s.per_replica_view() is False
    s.set_per_replica_view(True)
    s.sync()
    again = Settings(path)
    assert again.per_replica_view() is True


def test_smooth_scrolling_is_remembered_through_the_window(qtbot, tmp_path):
    from backend.deploy.catalog import load_catalog
    from console.model.live_session import Session
    from console.model.console_model import ConsoleModel
    from console.windows.main_window import MainWindow

    path = str(tmp_path / "settings.ini")

    def window():
        w = MainWindow(ConsoleModel(Session(), load_catalog(), Settings(path)))
        qtbot.addWidget(w)
        return w

    first = window()
    assert not first.menus.smooth_scroll_action.isChecked()  # off unless asked for
    first.menus.smooth_scroll_action.trigger()
    assert first.plots._smooth_scroll and first.gpu_plots._smooth_scroll
    first.settings.sync()
    first.model.session.shutdown()
    again = window()
    assert again.menus.smooth_scroll_action.isChecked()
    assert again.plots._smooth_scroll and again.replica_view._smooth_scroll
    again.model.session.shutdown()


def test_where_load_came_from_is_remembered_but_not_a_pinned_node(tmp_path):
    from backend.load.load_model import ClusterLoad

    path = str(tmp_path / "s.ini")
    s = Settings(path)
    assert s.load_source() is None
    s.set_load_source(ClusterLoad(workers=3, node="a" * 56, cpus=0.5, own_proxy=False))
    s.sync()
    assert Settings(path).load_source() == ClusterLoad(workers=3, cpus=0.5, own_proxy=False)
    s.set_load_source(None)
    s.sync()
    assert Settings(path).load_source() is None
    s._q.setValue("load_source", '{"workers": 0, "cpus": 1}')  # not a valid choice
    s.sync()
    assert Settings(path).load_source() is None  # dropped with a warning, not fatal
