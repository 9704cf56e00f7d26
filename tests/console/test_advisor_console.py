"""The advisor on the real cluster: each symptom is created on a deployment of its own (a
bad config, load from the product's LoadGenerator), the console's window shows the hint
for it in the advisor panel, a healthy deployment under load gets none, and Apply in the
panel changes the knob on the cluster through the normal tuning path (marker, event
log, recorded with source "advisor").

The deployments run tests/console/data/advisor_probe: their work is sleeping (0-CPU
replicas), so ten of them fit on the 2-core test cluster side by side and one test
watches all the symptoms at once. Each scenario's load stops once its hint is seen
(and applied, where the test applies it): deep queues at the proxy would slow
everything else down.

| deployment  | created how                                                      | hint             |
|-------------|------------------------------------------------------------------|------------------|
| adv_limit   | max_ongoing_requests 1, 200 ms requests, 6 req/s (over its ~4)   | replica_limit    |
| adv_full    | max_batch_size 2, 400 ms a batch (blocking), max_ongoing 1000, 7/s | batches_full   |
| adv_wait    | max_batch_size 32, wait 0.3 s, 10 ms a batch, 3 req/s            | batch_wait_empty |
| adv_tail    | max_batch_size 2, wait 0.5 s, Poisson arrivals at 6 req/s        | tail_batch_wait  |
| adv_cap     | max_batch_size 16 > max_ongoing_requests 4, 3 req/s              | batch_cap        |
| adv_cache   | @serve.multiplexed cache of 1, 20 model ids, 5 req/s             | model_cache      |
| adv_cold    | min_replicas 0, a 30 s constructor, 2 req/s: scale from zero     | caller_queue     |
| adv_target  | min_replicas 2, each replica reserving 60 % of the free memory   | not_at_target    |
| adv_slow    | 5 s a request, one at a time; the console's own load at 3 req/s  | timeouts         |
| adv_healthy | max_batch_size 8, wait 10 ms, 20 ms a batch, 5 req/s             | none             |

The caller_queue rule's other flavour (a router/proxy too slow while replicas have
room) could not be created here: a saturated proxy on this machine shows as client
latency, not as requests queued in the router (ray_serve_deployment_queued_queries
stays 0); it is tested on values in tests/backend/test_advisor.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from backend.tuning.advisor import (BATCH_CAP, BATCH_WAIT_EMPTY, BATCHES_FULL, CALLER_QUEUE,
                                    MODEL_CACHE, NOT_AT_TARGET, REPLICA_LIMIT, TAIL_BATCH_WAIT,
                                    TIMEOUTS)
from backend.deploy.deployer import put_applications
from backend.errors import AnswerTimeout
from backend.load.load_model import POISSON, LoadModel, ModelIds
from backend.load.generator import LoadGenerator, LoadTarget
from backend.deploy.packaging import build_package
from backend.preflight.fit import cluster_resources
from backend.recording.reader import open_session
from tests.cluster_fixtures import own_cluster_fixtures
from tests.figures import figure
from tests.helpers import remove_apps

# Its own head: its eleven applications' metric series (Ray's agent keeps every counter
# and histogram of every replica that ran) would be a third of the package head's page
# for every later console test (tests/cluster_fixtures.py).
ray_cluster, cluster_client, batched_demo = own_cluster_fixtures()

PROBE_DIR = Path(__file__).parent / "data" / "advisor_probe"
HEALTHY = "adv_healthy"


def probe(client, name: str, user_config: dict, import_path: str = "advisor_probe:batched",
          deployment: str = "Probe", args: dict | None = None, **options) -> dict:
    package = build_package(PROBE_DIR)
    if not client.package_exists(package.uri):
        client.upload_package(package.uri, package.data)
    app = {"name": name, "route_prefix": f"/{name}", "import_path": import_path,
           "runtime_env": {"py_modules": [package.uri]},
           "deployments": [{"name": deployment, "user_config": user_config, **options}]}
    if args is not None:
        app["args"] = args
    return app


def batched(client, name: str, max_ongoing_requests: int = 64, **user_config) -> dict:
    return probe(client, name, user_config, max_ongoing_requests=max_ongoing_requests,
                 num_replicas=1)


# (application, rule expected, load: requests/s or a LoadModel, model ids or None)
SCENARIOS = [
    ("adv_limit", REPLICA_LIMIT, 6.0, None),  # ~250 ms a request: 4/s held it at the edge
    ("adv_full", BATCHES_FULL, 7.0, None),
    ("adv_wait", BATCH_WAIT_EMPTY, 3.0, None),
    ("adv_tail", TAIL_BATCH_WAIT, LoadModel(arrivals=POISSON, rate=6.0), None),
    ("adv_cap", BATCH_CAP, 3.0, None),
    ("adv_cache", MODEL_CACHE, 5.0, ModelIds(count=20)),
    ("adv_cold", CALLER_QUEUE, 2.0, None),
    ("adv_target", NOT_AT_TARGET, None, None),
    ("adv_slow", TIMEOUTS, None, None),     # the console's own load (below)
    (HEALTHY, None, 5.0, None),
]
# Applied from the panel: {application: (rule, knob, suggested value)}.
APPLY = {"adv_limit": (REPLICA_LIMIT, "max_ongoing_requests", 2),
         "adv_full": (BATCHES_FULL, "user_config.max_batch_size", 4)}


@pytest.fixture(scope="module")
def advisor_apps(ray_cluster, cluster_client):
    """Every scenario's application, deployed in one read–modify–write; adv_target never
    gets its second replica (that is its point), the others run. Removed afterwards."""
    client = cluster_client
    resources = cluster_resources(client, client.serve_details())
    # Two replicas that each reserve 60 % of the free memory: one is placed, one waits.
    memory = int(0.6 * (resources.free.get("memory") or resources.total["memory"]))
    apps = [
        batched(client, "adv_limit", 1, batch_ms=200, max_batch_size=1),
        # Computing on the event loop, as the batched demo does: with an await in the
        # batch, @serve.batch cuts the next batches during it (batches of 1, never full).
        batched(client, "adv_full", 1000, batch_ms=400, max_batch_size=2,
                batch_wait_timeout_s=0.05, block=True),
        batched(client, "adv_wait", batch_ms=10, max_batch_size=32, batch_wait_timeout_s=0.3),
        batched(client, "adv_tail", batch_ms=10, max_batch_size=2, batch_wait_timeout_s=0.5),
        batched(client, "adv_cap", 4, batch_ms=20, max_batch_size=16,
                batch_wait_timeout_s=0.1),
        probe(client, "adv_cache", {"load_ms": 30}, "advisor_probe:build_cache",
              "CacheProbe", args={"max_num_models_per_replica": 1}, num_replicas=1),
        probe(client, "adv_cold", {"batch_ms": 20}, "advisor_probe:build_batched",
              # 30 s: the rule wants the queue held 10 s in ≥ 4 samples, and on 2 busy
              # cores this module's metrics page came every 4-10 s (a 15 s start was
              # seen, or not, by luck).
              args={"init_s": 30}, max_ongoing_requests=16,
              autoscaling_config={"min_replicas": 0, "initial_replicas": 0,
                                  "max_replicas": 1, "target_ongoing_requests": 2,
                                  "downscale_delay_s": 600}),
        probe(client, "adv_target", {"batch_ms": 20}, max_ongoing_requests=16,
              ray_actor_options={"num_cpus": 0, "memory": memory},
              autoscaling_config={"min_replicas": 2, "max_replicas": 3,
                                  "target_ongoing_requests": 2}),
        batched(client, "adv_slow", 1000, batch_ms=5000, max_batch_size=1),
        batched(client, HEALTHY, batch_ms=20, max_batch_size=8, batch_wait_timeout_s=0.01),
    ]
    names = {a["name"] for a in apps}
    put_applications(client, apps, http_options_if_new={
        "host": "127.0.0.1", "port": ray_cluster.serve_http_port})
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                status = client.serve_status()
            except AnswerTimeout:
                # The dashboard busy placing ten deployments on 2 loaded cores (a clean
                # clone's parallel pass: no answer within 10 s once): the wait goes on,
                # within the same deadline.
                assert time.monotonic() < deadline, "the dashboard did not answer for 240 s"
                time.sleep(1)
                continue
            states = {n: (status.application(n).status if status.application(n) else None)
                      for n in names}
            if all(s == "RUNNING" for n, s in states.items() if n != "adv_target"):
                break
            assert time.monotonic() < deadline, f"not running after 240 s: {states}"
            time.sleep(1)
        yield f"http://127.0.0.1:{status.http_port}"
    finally:
        remove_apps(client, names)


def test_each_symptom_shows_its_hint_a_healthy_deployment_none_and_apply_changes_the_cluster(
        advisor_apps, connected_window, qtbot, cluster_client):
    win = connected_window
    session = win.model.session
    base = advisor_apps
    qtbot.waitUntil(lambda: win.model.recording.path is not None, timeout=10_000)
    win.menus.advisor_action.trigger()  # View → Advisor
    assert win.advisor_dock.isVisible()

    # Every hint ever shown, as the panel got it (some symptoms pass: a cold start).
    shown: dict[tuple[tuple[str, str], str], object] = {}
    win.model.advisor.hints_changed.connect(
        lambda hints: shown.update({(h.key, h.rule): h for h in hints}))

    started = time.monotonic()
    gens: dict[str, LoadGenerator] = {}
    for app, _rule, load, model_ids in SCENARIOS:
        if load is None:
            continue
        target = LoadTarget(url=f"{base}/{app}", method="GET", model_ids=model_ids)
        if isinstance(load, LoadModel):
            gens[app] = LoadGenerator(target, model=load)
            gens[app].start()
        else:
            gens[app] = LoadGenerator(target)
            gens[app].start(load)
    # The timeouts are seen by the console's own load (its errors by kind).
    session.load.start(LoadTarget(url=f"{base}/adv_slow", method="GET"), 3.0)
    win.load_panel.set_running(True)

    expected = {(app, rule) for app, rule, _, _ in SCENARIOS if rule}
    found: dict[tuple[str, str], float] = {}
    clicked: list[str] = []

    def applied_line(app: str) -> bool:
        return any(e.message.startswith(f"advisor: applied to {app}/")
                   for e in win.event_log.entries())

    try:
        deadline = time.monotonic() + 240
        while True:
            for h in win.advisor_panel.hints():
                app = h.key[0]
                if (app, h.rule) in expected and (app, h.rule) not in found:
                    found[(app, h.rule)] = time.monotonic() - started
                    if app in gens and app not in APPLY:
                        gens.pop(app).stop()  # seen: its queue need not grow further
                    if app == "adv_slow":
                        session.load.stop()
                # One Apply at a time, the next once the first is applied: two applies
                # to two deployments at once can lose one (each is a read–modify–write
                # of the whole Serve config; seen in this test, see the report of
                # issue 13).
                if app in APPLY and app not in clicked and h.rule == APPLY[app][0] \
                        and (not clicked or applied_line(clicked[-1])):
                    assert (h.knob, h.suggested) == APPLY[app][1:], h
                    row = win.advisor_panel.row(h.id)
                    assert row.apply_button.isEnabled(), h
                    qtbot.mouseClick(row.apply_button, Qt.MouseButton.LeftButton)
                    clicked.append(app)
                    if app in gens:
                        # Applied: its backlog need not grow further (a replica whose
                        # event loop a backlog keeps busy takes its reconfigure late).
                        gens.pop(app).stop()
            for (key, rule) in shown:
                if (key[0], rule) in expected and (key[0], rule) not in found:
                    found[(key[0], rule)] = time.monotonic() - started
            if (expected <= set(found) and len(clicked) == len(APPLY)) \
                    or time.monotonic() > deadline:
                break
            qtbot.wait(1000)
        missing = expected - set(found)
        figure("advisor: hints first seen after load start (s): " + ", ".join(
            f"{rule} {t:.0f}" for (_app, rule), t in sorted(found.items(),
                                                            key=lambda x: x[1])))
        assert not missing, _why_missing(session, missing) + (
            f"hints not seen within 240 s: {sorted(missing)}; seen: {sorted(found)}; "
            "shown now: " + " | ".join(h.line() for h in win.advisor_panel.hints()))

        # The healthy deployment, under load all along (≥ 30 s), never got a hint.
        assert time.monotonic() - started > 30
        assert not [h for (key, _), h in shown.items() if key[0] == HEALTHY], \
            [h.line() for (key, _), h in shown.items() if key[0] == HEALTHY]

        # Apply changed the knobs on the cluster, through the tuning path.
        def on_cluster() -> dict:
            status = cluster_client.serve_status()
            return {
                "adv_limit": status.deployment("adv_limit", "Probe").config.get(
                    "max_ongoing_requests"),
                "adv_full": (status.deployment("adv_full", "Probe").config.get("user_config")
                             or {}).get("max_batch_size"),
            }
        assert sorted(clicked) == sorted(APPLY), clicked
        want = {app: value for app, (_, _, value) in APPLY.items()}
        deadline = time.monotonic() + 120  # the tuning path's own limit
        while on_cluster() != want:
            assert time.monotonic() < deadline, (
                f"cluster runs {on_cluster()}, want {want}; event log: "
                + " | ".join(e.plain() for e in win.event_log.entries()[-12:]))
            qtbot.wait(500)
        qtbot.waitUntil(lambda: all(
            any(m.startswith(f"advisor: applied to {app}/Probe") for m in
                [e.message for e in win.event_log.entries()]) for app in APPLY),
            timeout=30_000)
        messages = [e.message for e in win.event_log.entries()]
        for app, rule in expected:
            assert any(m.startswith(f"advisor: {app}/") for m in messages), (app, rule)
        # The change's marker on the plots, as a slider's (named with its deployment
        # when another one is shown).
        assert any(label.endswith("max_ongoing_requests=2") for _, label in win.plots.markers())
        for app in APPLY:
            row = next((win.advisor_panel.row(h.id) for h in win.advisor_panel.hints()
                        if h.key[0] == app and h.rule in (REPLICA_LIMIT, BATCHES_FULL)), None)
            assert row is None or row.state in ("applied", ""), row.state
    finally:
        for g in gens.values():
            g.stop()
        session.load.stop()

    # Recorded as knob changes asked for by the advisor.
    path = win.model.recording.path
    win.model.recording.stop()
    changes = {(k.app, k.path): k for k in open_session(path).knob_changes}
    for app, (_, knob, value) in APPLY.items():
        k = changes[(app, knob)]
        assert (k.new, k.source, k.state) == (value, "advisor", "applied"), k


def _why_missing(session, missing) -> str:
    """The last 15 s of what the rules read, for each deployment whose hint was missing."""
    from backend.tuning.advisor import SERIES_USED

    lines = []
    now = time.time()
    for app, _rule in sorted(missing):
        status = session.status
        a = status.application(app) if status else None
        for d in (a.deployments if a else ()):
            parts = []
            for name in SERIES_USED:
                _, v = session.store.snapshot(d.key, name, since=now - 15)
                if len(v):
                    parts.append(f"{name}={[round(float(x), 1) for x in v]}")
            lines.append(f"{app}/{d.name} ({d.status}, {d.running_replicas} running): "
                         + "; ".join(parts))
    return "\n".join(lines) + "\n"
