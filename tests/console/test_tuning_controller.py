"""Live tuning through the console's controller, against a real cluster under load."""

from __future__ import annotations

import json
import random
import time

import pytest

from backend.load.generator import LoadGenerator, LoadTarget
from console.model.connection import ConnectionState
from console.model.live_session import Session
from tests.console.test_connect import StallMeter
from tests.figures import figure
from tests.helpers import DashboardProxy


@pytest.fixture
def session(qtbot, ray_cluster):
    s = Session()
    with qtbot.waitSignal(s.connected, timeout=20_000):
        s.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
    with qtbot.waitSignal(s.status_changed, timeout=10_000):
        pass
    yield s
    s.shutdown()


def declarative_configs(client) -> dict[str, str]:
    details = client.serve_details()
    return {name: json.dumps(a["deployed_app_config"], sort_keys=True)
            for name, a in details["applications"].items()}


# Load errors under contention: in the parallel pass (load average 15-18, a clean clone of
# 2026-12-07) the demo answered 30 req/s with a p50 of 17 s and 333 errors; alone it
# passes. test.sh runs the quiet tests one at a time.
@pytest.mark.quiet
def test_thirty_random_changes_under_load(qtbot, session, cluster_client, tuning_app):
    app, dep, url = tuning_app
    rng = random.Random(43288)
    before = declarative_configs(cluster_client)
    gen = LoadGenerator(LoadTarget(url=url, body='{"seed": {seq}}'))
    # 30 req/s: within what one replica serves unbatched (the demo's CPU model costs
    # ~25 ms a call), so max_batch_size=1 among the random changes is no overload.
    gen.start(30)
    applied, failed = [], []
    session.tuning.applied.connect(lambda *a: applied.append(a))
    session.tuning.failed.connect(lambda *a: failed.append(a))
    last: dict[str, object] = {}
    try:
        qtbot.wait(3000)  # steady load first
        for _ in range(30):
            path, value = rng.choice([
                ("user_config.max_batch_size", rng.choice([1, 2, 4, 8, 16, 32])),
                ("user_config.batch_wait_timeout_s", rng.choice([0.001, 0.005, 0.01, 0.02])),
                ("max_ongoing_requests", rng.randint(32, 96)),
                ("num_replicas", rng.choice([1, 2])),
            ])
            last[path] = value
            session.tuning.request(app, dep, path, value)
            qtbot.wait(rng.randint(20, 400))  # quick succession, some within the debounce
        qtbot.waitUntil(lambda: not session.tuning.busy(), timeout=180_000)
        qtbot.wait(1500)  # requests sent during the last apply finish
        stats = gen.stats()
    finally:
        gen.stop()
    assert not failed, failed
    assert applied, "nothing was applied"
    assert stats.errors == 0, stats.last_error
    assert stats.ok > 250
    cfg = cluster_client.serve_status().deployment(app, dep).config
    for path, value in last.items():
        head, _, key = path.partition(".")
        actual = cfg[head][key] if key else cfg[head]
        assert actual == value, (path, actual, value)
    after = declarative_configs(cluster_client)
    for name, text in before.items():
        if name != app:
            assert after[name] == text, name
    # Coalescing: far fewer PUTs than requested changes, and every one took effect.
    assert len(applied) < 30


def test_gui_stays_responsive_while_a_slow_cluster_applies(qtbot, ray_cluster, tuning_app):
    app, dep, _ = tuning_app
    slow = DashboardProxy(ray_cluster.dashboard_url, delay_s=0.7)
    s = Session()
    try:
        with qtbot.waitSignal(s.connected, timeout=30_000):
            s.connect_remote(slow.url, ray_cluster.token)
        qtbot.waitUntil(lambda: s.status is not None, timeout=30_000)
        current = s.knob_values(app, dep)["max_ongoing_requests"]
        states = []
        s.connection.state_changed.connect(lambda state, _msg: states.append(state))
        meter = StallMeter()
        t0 = time.monotonic()
        with qtbot.waitSignal(s.tuning.applied, timeout=120_000):
            s.tuning.request(app, dep, "max_ongoing_requests", current + 1)
        meter.stop()
        figure(f"apply through a dashboard slowed by 0.7 s a call: {time.monotonic() - t0:.1f} "
               f"s, GUI loop's longest stall {meter.max_stall * 1000:.0f} ms (longest gap "
               f"{meter.max_gap * 1000:.0f} ms)")
        assert meter.max_stall < StallMeter.LIMIT_S, meter.says()
        # Slow is not gone: the connection was never reported lost.
        assert ConnectionState.LOST not in states, states
    finally:
        s.shutdown()
        slow.close()


def test_refused_change_reports_the_reason(qtbot, session, tuning_app):
    app, dep, _ = tuning_app
    states = []
    session.tuning.knob_state.connect(lambda *a: states.append(a))
    with qtbot.waitSignal(session.tuning.failed, timeout=60_000) as blocker:
        session.tuning.request(app, dep, "max_ongoing_requests", 0)
    reason = blocker.args[3]
    assert "max_ongoing_requests" in reason
    assert states[-1][2:4] == ("max_ongoing_requests", "failed")


def test_min_above_max_is_refused_before_sending(qtbot, session, tuning_app):
    app, dep, _ = tuning_app
    with qtbot.waitSignal(session.tuning.failed, timeout=10_000) as blocker:
        session.tuning.request(app, dep, "autoscaling", True)
        session.tuning.request(app, dep, "autoscaling_config.min_replicas", 3)
        session.tuning.request(app, dep, "autoscaling_config.max_replicas", 2)
    assert "min_replicas (3) > max_replicas (2)" in blocker.args[3]


def test_a_release_goes_at_once_while_steps_wait_for_the_debounce(qtbot, monkeypatch,
                                                                   ray_cluster, tuning_app):
    # A debounce of a minute: whatever applies within the test's timeouts went without it.
    monkeypatch.setattr("console.model.manual_tuning.DEBOUNCE_MS", 60_000)
    from backend.cluster.client import ClusterClient
    puts = []
    put = ClusterClient.put_serve_config
    monkeypatch.setattr(ClusterClient, "put_serve_config",
                        lambda self, config: (puts.append(config), put(self, config))[1])
    app, dep, _ = tuning_app
    s = Session()
    try:
        with qtbot.waitSignal(s.connected, timeout=20_000):
            s.connect_remote(ray_cluster.dashboard_url, ray_cluster.token)
        qtbot.waitUntil(lambda: s.status is not None, timeout=10_000)
        mor = s.knob_values(app, dep)["max_ongoing_requests"]
        mbs = 4 if s.knob_values(app, dep)["user_config.max_batch_size"] != 4 else 16
        applied = []
        s.tuning.applied.connect(lambda *a: applied.append(a[2]))
        # Arrow-key steps wait for the debounce …
        for i in range(1, 4):
            s.tuning.request(app, dep, "max_ongoing_requests", mor + i)
        qtbot.wait(1000)
        assert puts == [] and s.tuning.busy()
        # … and a release sends at once, with the steps' newest value: one PUT.
        with qtbot.waitSignal(s.tuning.applied, timeout=30_000):
            s.tuning.request(app, dep, "user_config.max_batch_size", mbs, immediate=True)
        assert applied == [{"max_ongoing_requests": mor + 3, "user_config.max_batch_size": mbs}]
        assert len(puts) == 1 and not s.tuning.busy()
        # A release while an apply to the deployment is in flight goes when it returns
        # (one apply at a time), not after the debounce; the newest value wins.
        applied.clear()
        s.tuning.request(app, dep, "max_ongoing_requests", mor + 4, immediate=True)
        s.tuning.request(app, dep, "max_ongoing_requests", mor + 5, immediate=True)
        s.tuning.request(app, dep, "max_ongoing_requests", mor + 6, immediate=True)
        qtbot.waitUntil(lambda: not s.tuning.busy(), timeout=30_000)
        assert applied == [{"max_ongoing_requests": mor + 4}, {"max_ongoing_requests": mor + 6}]
        assert len(puts) == 3
        assert s.client.serve_status().deployment(app, dep).config["max_ongoing_requests"] \
            == mor + 6
    finally:
        s.shutdown()
