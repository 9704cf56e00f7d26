"""Fixtures of the console tests."""

from __future__ import annotations

import pytest

from backend.deploy.catalog import load_catalog
from console.model.console_model import ConsoleModel
from console.windows.main_window import MainWindow
from console.model.live_session import Session
from console.settings import Settings
# The console tests' own real cluster, not the backend tests' (tests/cluster_fixtures.py).
from tests.helpers import console_window
from tests.cluster_fixtures import (  # noqa: F401  (fixtures, found by name)
    batched_demo, cluster_client, load_on, prometheus_url, ray_cluster, tuning_app)


@pytest.fixture
def connected_window(qtbot, tmp_path, ray_cluster):
    """The main window, connected to the session's cluster as `serve-console --address
    URL --ray-client ray://127.0.0.1:PORT` would be (settings in a temporary file; never
    a modal box). Closed, and its session
    shut down, after the test. A test module that needs something on the cluster first
    (a demo, a patched fetch) asks for that before this fixture."""
    with console_window(qtbot, tmp_path, lambda s: s.connect_remote(
            ray_cluster.dashboard_url, ray_cluster.token,
            ray_client_url=f"ray://127.0.0.1:{ray_cluster.client_port}"), 20_000) as win:
        yield win


@pytest.fixture
def offline_window(qtbot, tmp_path):
    """The main window with a session that is not connected (settings in a temporary
    file); closed, and its session shut down, after the test."""
    session = Session()
    win = MainWindow(ConsoleModel(session, load_catalog(), Settings(str(tmp_path / "s.ini"))))
    qtbot.addWidget(win)
    yield win
    win.close()
    session.shutdown()
