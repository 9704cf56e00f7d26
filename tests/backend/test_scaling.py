"""Scaling on a real cluster (the session's Ray head, real Serve): a step of load makes the
autoscaler upscale and the console says so once, with Ray's reason from the controller's
log; without the log it still says so, from the status; a num_replicas change is a
config change; a replica that cannot be placed says what it needs and what is free.

Polled once a second as the console does (status + controller log tail), through the
dashboard only. The apps are 0-CPU replicas (tests.helpers.scaling_app) and are removed
at the end: the session cluster has 2 CPUs and other tests follow.
"""

from __future__ import annotations

import copy
import http.server
import re
import threading
import time

import pytest
import requests

from backend.cluster.client import ClusterClient
from backend.deploy.deployer import deploy_app, put_applications
from backend.errors import ApiError
from backend.preflight.fit import cluster_resources
from backend.load.load_model import LoadTarget
from backend.load.generator import LoadGenerator
from backend.scaling.explain import (SOURCE_LOG, SOURCE_STATUS, DecisionTracker, parse_scaling_log,
                                     replica_counts, why_not_at_target)
from tests.figures import figure
from tests.helpers import remove_apps, scaling_app

POLL_S = 1.0
RATE = 20.0          # 20 req/s of 200 ms requests: ~4 ongoing against a target of 1
LOG_REASON = re.compile(r"^Upscaling from (\d+) to (\d+) replicas\. Current ongoing requests: "
                        r"\d+\.\d\d, current running replicas: (\d+)\.$")


class Watch:
    """Polls like the console: one status and one log tail per second, fed to a tracker
    with the log and to one without it (a cluster whose log cannot be read)."""

    def __init__(self, client: ClusterClient, app: str) -> None:
        self.client, self.app = client, app
        self.with_log = DecisionTracker()
        self.status_only = DecisionTracker()
        self.said_log: list = []
        self.said_status: list = []
        self.timeline: list[tuple[float, int | None, int, int]] = []  # t, target, running, starting
        self.last = None

    def poll(self) -> None:
        now = time.time()
        status = self.client.serve_status()
        text = self.client.controller_log(lines=200, timeout_s=10)
        # Other tests' apps may scale too: only this app's decisions count here.
        self.said_log += [d for d in self.with_log.update(status, text, now)
                          if d.app == self.app]
        self.said_status += [d for d in self.status_only.update(status, None, now)
                             if d.app == self.app]
        dep = status.deployment(self.app, "Scaler")
        if dep is not None:
            c = replica_counts(dep)
            self.timeline.append((status.fetched_at, c.target, c.running, c.starting))
            self.last = dep

    def until(self, done, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll()
            if done():
                return
            assert time.monotonic() < deadline, (
                f"{what} not within {timeout_s:.0f} s; timeline {self.timeline[-15:]}; "
                f"said (log) {self.said_log}; said (status) {self.said_status}")
            time.sleep(POLL_S)

    def first(self, cond) -> float | None:
        return next((t for t, *rest in self.timeline if cond(*rest)), None)


def _chain(decisions, start: int, end: int) -> bool:
    at = start
    for d in decisions:
        if d.old != at:
            return False
        at = d.new
    return at == end


def test_a_step_of_load_scales_up_with_rays_reason_and_back_down(ray_cluster, cluster_client):
    client = cluster_client
    app = scaling_app(client, "scaling_t", min_replicas=1, max_replicas=3,
                      target_ongoing_requests=1, upscale_delay_s=1)
    status = deploy_app(client, app, timeout_s=180, http_options_if_new={
        "host": "127.0.0.1", "port": ray_cluster.serve_http_port})
    url = f"http://127.0.0.1:{status.http_port}/scaling_t"
    gen = LoadGenerator(LoadTarget(url=url, method="GET"))
    try:
        w = Watch(client, "scaling_t")
        w.until(lambda: w.last is not None and replica_counts(w.last).running == 1
                and w.last.status == "HEALTHY", 60, "one healthy replica before the load")
        step = time.time()
        gen.start(RATE)
        ups_log = lambda: [d for d in w.said_log if d.direction == "upscale"]  # noqa: E731
        ups_status = lambda: [d for d in w.said_status if d.direction == "upscale"]  # noqa: E731

        def upscaled() -> bool:
            c = replica_counts(w.last)
            return (c.target or 0) > 1 and c.running == c.target and bool(ups_log()) \
                and bool(ups_status()) and _chain(ups_log(), 1, c.target)
        w.until(upscaled, 90, "an upscale to a target above 1, its replicas running")
        # A few more polls: a decision said twice would show up now.
        for _ in range(5):
            time.sleep(POLL_S)
            w.poll()
        stats = gen.stats()
        assert stats.errors == 0, stats
        target = replica_counts(w.last).target
        assert 1 < target <= 3

        # With the log: Ray's own reason and time, each step once (a chain 1 → … → target).
        assert ups_log() and all(d.source == SOURCE_LOG for d in ups_log()), w.said_log
        assert _chain(ups_log(), 1, target), ups_log()
        first = ups_log()[0]
        m = LOG_REASON.match(first.reason)
        assert m and m.group(3) == "1", first.reason
        shown = w.first(lambda tgt, run, start: (tgt or 0) > 1)
        assert step - 1 <= first.t <= shown + 1, (step, first, shown)
        # Exactly the log's decisions since the step: none lost, none doubled.
        logged = [d for d in parse_scaling_log(client.controller_log(lines=500))
                  if d.app == "scaling_t" and d.t >= step - 1]
        assert [(d.old, d.new, round(d.t, 3)) for d in logged if d.new > d.old] == \
            [(d.old, d.new, round(d.t, 3)) for d in ups_log()]

        # Without the log: the status's words, once per change the polls saw.
        said = ups_status()
        assert all(d.source == SOURCE_STATUS for d in said), said
        assert all(re.fullmatch(r"Upscaling from \d to \d replicas\.", d.reason)
                   for d in said), said
        assert len({(d.old, d.new) for d in said}) == len(said), said
        assert said[-1].new == target

        running_at = w.first(lambda tgt, run, start: run > 1)
        all_at = w.first(lambda tgt, run, start: tgt == target and run == target)
        figure(f"scaling: step of {RATE:g} req/s → controller log decision "
               f"{first.t - step:.1f} s → status shows target {shown - step:.1f} s → "
               f"a 2nd replica RUNNING {running_at - step:.1f} s → all {target} "
               f"{all_at - step:.1f} s (polled every {POLL_S:g} s)")
        print(f"\nlog decision: {first.text()}\nstatus-only decision: {said[0].text()}")

        # Load off: the autoscaler goes back to 1 (downscale_delay_s 5), said once each way.
        gen.stop()
        quiet = time.time()
        w.until(lambda: replica_counts(w.last).target == 1
                and replica_counts(w.last).running == 1
                and any(d.direction == "downscale" for d in w.said_log)
                and any(d.direction == "downscale" for d in w.said_status),
                90, "the downscale to 1")
        downs = [d for d in w.said_log if d.direction == "downscale"]
        assert len(downs) == 1 and downs[0].source == SOURCE_LOG, w.said_log
        assert downs[0].reason.startswith(f"Downscaling from {target} to 1 replicas. Current "
                                          "ongoing requests: 0.00")
        assert downs[0].t >= quiet
        assert len([d for d in w.said_status if d.direction == "downscale"]) == 1
        figure(f"scaling: load off → downscale decision {downs[0].t - quiet:.1f} s "
               "(downscale_delay_s 5)")
    finally:
        gen.stop()
        remove_apps(client, {"scaling_t"})


def test_a_num_replicas_change_is_said_once_as_a_config_change(ray_cluster, cluster_client):
    client = cluster_client
    app = scaling_app(client, "scaling_fixed")
    dep = app["deployments"][0]
    del dep["autoscaling_config"]
    dep["num_replicas"] = 1
    deploy_app(client, app, timeout_s=180, http_options_if_new={
        "host": "127.0.0.1", "port": ray_cluster.serve_http_port})
    try:
        w = Watch(client, "scaling_fixed")
        w.poll()
        changed = copy.deepcopy(app)
        changed["deployments"][0]["num_replicas"] = 2
        put_applications(client, [changed])
        w.until(lambda: w.said_log and replica_counts(w.last).running == 2, 60,
                "the change to 2 replicas")
        for _ in range(4):           # held-back or doubled decisions would come now
            time.sleep(POLL_S)
            w.poll()
        for said in (w.said_log, w.said_status):
            assert [d.text() for d in said] == [
                "upscale 1 → 2: config change (num_replicas 1 → 2): Upscaling from 1 to 2 "
                "replicas."], said
            assert said[0].source == SOURCE_STATUS
    finally:
        remove_apps(client, {"scaling_fixed"})


def test_a_replica_that_cannot_be_placed_says_what_it_needs(ray_cluster, cluster_client):
    client = cluster_client
    app = scaling_app(client, "scaling_big", ray_actor_options={"num_cpus": 64})
    dep = app["deployments"][0]
    del dep["autoscaling_config"]
    dep["num_replicas"] = 2
    put_applications(client, [app], http_options_if_new={
        "host": "127.0.0.1", "port": ray_cluster.serve_http_port})
    try:
        deadline = time.monotonic() + 60
        while True:
            d = client.serve_status().deployment("scaling_big", "Scaler")
            if d is not None and len(d.replicas) == 2:
                break
            assert time.monotonic() < deadline, d
            time.sleep(1)
        c = replica_counts(d)
        assert (c.target, c.running, c.starting, c.autoscaling) == (2, 0, 2, False)
        assert d.required_resources == {"CPU": 64.0}
        res = cluster_resources(client, timeout_s=10)  # as console/model/scaling.py asks
        free = res.free
        total = res.total["CPU"]  # what this cluster really has (all the machine's CPUs)
        assert 0 <= free["CPU"] <= total < 64
        text = why_not_at_target(d, free, total=res.total)
        assert re.fullmatch(
            r"2 of 2 replicas waiting for resources \(\d+ s\): each needs \{CPU: 64\}; "
            r"free now: \{CPU: " + re.escape(f"{round(free['CPU'], 3):g}") + r"\} — more than "
            r"the whole cluster has \(\{CPU: " + re.escape(f"{round(total, 3):g}") +
            r"\}\): it never fits unless nodes join; lower the replica's resources", text), text
        # Free resources unknown (the console could not ask): still what it needs.
        assert "each needs {CPU: 64}" in why_not_at_target(d, None)
        print(f"\nwhy not at target: {text}")
    finally:
        remove_apps(client, {"scaling_big"})


# -- the controller log API ------------------------------------------------------------------

@pytest.fixture
def serve_running(ray_cluster, cluster_client):
    """Serve's controller runs on the session cluster (an app deployed if none was)."""
    if cluster_client.serve_status().serve_running:
        yield
        return
    deploy_app(cluster_client, scaling_app(cluster_client, "scaling_log"), timeout_s=180,
               http_options_if_new={"host": "127.0.0.1",
                                    "port": ray_cluster.serve_http_port})
    try:
        yield
    finally:
        remove_apps(cluster_client, {"scaling_log"})


def test_controller_log_is_the_tail_of_the_controllers_log(ray_cluster, cluster_client,
                                                           serve_running):
    client = ClusterClient(ray_cluster.dashboard_url, ray_cluster.token, timeout_s=10)
    text = client.controller_log(lines=5)
    lines = text.splitlines()
    assert 1 <= len(lines) <= 5
    assert re.match(r"^[A-Z]+ \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} controller \d+ -- ",
                    lines[0]), lines
    node, name = client._controller_log_file
    info = client.serve_details()["controller_info"]
    assert (node, "/" + name) == (info["node_id"], info["log_file_path"])

    # The file vanished (or was never there): found again, not an error.
    client._controller_log_file = (node, "serve/controller_1.log")
    client._controller_noted = None
    assert client.controller_log(lines=5).splitlines()[-1] == \
        cluster_client.controller_log(lines=5).splitlines()[-1]
    assert client._controller_log_file == (node, name)

    # A Ray whose details do not name the file: the newest the log API lists.
    other = ClusterClient(ray_cluster.dashboard_url, ray_cluster.token, timeout_s=10)
    other._controller_noted = (node, "")
    assert other.controller_log(lines=3)
    assert other._controller_log_file == (node, name)


@pytest.mark.parametrize("code", [403, 404])
def test_a_dashboard_that_refuses_the_log_api_gives_a_clear_error(ray_cluster, code,
                                                                  serve_running):
    """A proxy in front of the dashboard that forwards all but the log API."""
    upstream = ray_cluster.dashboard_url

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if self.path.startswith("/api/v0/logs"):
                body = b"Forbidden" if code == 403 else b"404: Not Found"
                self.send_response(code)
            else:
                r = requests.get(upstream + self.path, timeout=10, headers={
                    k: v for k, v in self.headers.items() if k.lower() != "host"})
                body = r.content
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("Content-Type", "text/plain"))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ClusterClient(f"http://127.0.0.1:{server.server_port}", ray_cluster.token)
        assert client.serve_status().serve_running
        with pytest.raises(ApiError) as e:
            client.controller_log()
        expected = "log API is not allowed" if code == 403 else "has no log API"
        assert expected in str(e.value), str(e.value)
    finally:
        server.shutdown()
        server.server_close()
