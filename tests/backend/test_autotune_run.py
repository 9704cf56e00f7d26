"""The auto-tuner on a real cluster, on an application written here (not a bundled demo)
and deployed with Ray's own `serve deploy`, beside another application it must leave
exactly as it was.

The app follows the README's "Making your own app tunable" convention: max_batch_size and
batch_wait_timeout_s in its user_config, applied in reconfigure through the @serve.batch
setters. Each batch costs 40 ms whatever its size (asyncio.sleep: a GPU-like fixed cost),
so one replica sustains about 25 req/s unbatched and several times that batched. `Slow`
is the same at 150 ms a batch (under 7 req/s unbatched): where batching pays at rates that
cost a loaded machine almost no CPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests

from backend.cluster.client import ClusterClient
from backend.cluster.ports import free_ports
from backend.errors import ConsoleError
from backend.tuning.autotune_run import START, TuneRequest, TuneRun
from backend.tuning.autotune_search import MAX_BATCH_SIZE, Objective
from tests.helpers import DashboardProxy, own_cluster

ROOT = Path(__file__).resolve().parents[2]
SERVE = Path(sys.executable).with_name("serve")

APP_CODE = '''
import asyncio

from ray import serve
from starlette.requests import Request


@serve.deployment
class Sleepy:
    def reconfigure(self, user_config: dict) -> None:
        self.predict.set_max_batch_size(int(user_config["max_batch_size"]))
        self.predict.set_batch_wait_timeout_s(float(user_config["batch_wait_timeout_s"]))

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.0)
    async def predict(self, items: list) -> list:
        await asyncio.sleep(0.04)
        return [len(items)] * len(items)

    async def __call__(self, request: Request) -> dict:
        return {"batch": await self.predict(1)}


@serve.deployment
class Slow:
    def reconfigure(self, user_config: dict) -> None:
        self.predict.set_max_batch_size(int(user_config["max_batch_size"]))
        self.predict.set_batch_wait_timeout_s(float(user_config["batch_wait_timeout_s"]))

    @serve.batch(max_batch_size=1, batch_wait_timeout_s=0.0)
    async def predict(self, items: list) -> list:
        await asyncio.sleep(0.15)
        return [len(items)] * len(items)

    async def __call__(self, request: Request) -> dict:
        return {"batch": await self.predict(1)}


@serve.deployment
class Plain:
    """No batching convention: nothing in user_config, no reconfigure."""

    async def __call__(self, request: Request) -> dict:
        return {"plain": True}


app = Sleepy.bind()
plain_app = Plain.bind()
slow_app = Slow.bind()
'''

CONFIG = '''
http_options: {{host: 127.0.0.1, port: {port}}}
applications:
  - name: sleepy
    route_prefix: /sleepy
    import_path: sleepy_app:app
    runtime_env: {{working_dir: "local://{dir}"}}
    deployments:
      - name: Sleepy
        max_ongoing_requests: 64
        ray_actor_options: {{num_cpus: 0.5}}
        user_config: {{max_batch_size: 1, batch_wait_timeout_s: 0.0}}
  - name: other
    route_prefix: /other
    import_path: sleepy_app:app
    runtime_env: {{working_dir: "local://{dir}"}}
    deployments:
      - name: Sleepy
        max_ongoing_requests: 7
        ray_actor_options: {{num_cpus: 0.25}}
        user_config: {{max_batch_size: 3, batch_wait_timeout_s: 0.02}}
  - name: slow
    route_prefix: /slow
    import_path: sleepy_app:slow_app
    runtime_env: {{working_dir: "local://{dir}"}}
    deployments:
      - name: Slow
        max_ongoing_requests: 64
        ray_actor_options: {{num_cpus: 0.25}}
        user_config: {{max_batch_size: 1, batch_wait_timeout_s: 0.0}}
  - name: plain
    route_prefix: /plain
    import_path: sleepy_app:plain_app
    runtime_env: {{working_dir: "local://{dir}"}}
    deployments:
      - name: Plain
        ray_actor_options: {{num_cpus: 0.1}}
'''

START_CONFIG = {"user_config.max_batch_size": 1, "user_config.batch_wait_timeout_s": 0.0,
                "max_ongoing_requests": 64}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An own 2-CPU head with the two applications, deployed by `serve deploy`."""
    app_dir = tmp_path_factory.mktemp("sleepy")
    (app_dir / "sleepy_app.py").write_text(APP_CODE)
    config = app_dir / "config.yaml"
    config.write_text(textwrap.dedent(CONFIG.format(port=free_ports(1)[0], dir=app_dir)))
    with own_cluster(num_cpus=2) as cluster:
        env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=cluster.token or "")
        out = subprocess.run([str(SERVE), "deploy", str(config), "-a", cluster.dashboard_url],
                             env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        client = ClusterClient(cluster.dashboard_url, cluster.token, timeout_s=10)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            status = client.serve_status()
            apps = {a.name: a.status for a in status.applications}
            if apps == {"sleepy": "RUNNING", "other": "RUNNING", "slow": "RUNNING",
                        "plain": "RUNNING"}:
                break
            time.sleep(1)
        assert apps == {"sleepy": "RUNNING", "other": "RUNNING", "slow": "RUNNING",
                        "plain": "RUNNING"}, \
            status.applications
        url = f"http://127.0.0.1:{status.http_port}/sleepy"
        assert requests.get(url, timeout=30).json() == {"batch": 1}
        yield cluster, client, url


def deployed(client: ClusterClient, app: str) -> dict:
    return client.serve_details()["applications"][app]["deployed_app_config"]


def running_values(client: ClusterClient, app: str = "sleepy", name: str = "Sleepy") -> dict:
    cfg = client.serve_status().deployment(app, name).config
    return {"user_config.max_batch_size": cfg["user_config"]["max_batch_size"],
            "user_config.batch_wait_timeout_s": cfg["user_config"]["batch_wait_timeout_s"],
            "max_ongoing_requests": cfg["max_ongoing_requests"]}


def put_back(client: ClusterClient, app: str = "sleepy", name: str = "Sleepy") -> None:
    from backend.tuning.apply import apply_changes
    apply_changes(client, app, name, START_CONFIG)


def cli(cluster, *extra: str, target: str = "sleepy/Sleepy", slo_p99_ms: float = 400,
        trial_requests: int = 60) -> list[str]:
    return [sys.executable, "-m", "console.app", "--address", cluster.dashboard_url,
            "--token", cluster.token, "--autotune", target,
            "--slo-p99-ms", f"{slo_p99_ms:g}",
            "--trial-s", "2", "--trial-requests", str(trial_requests),
            # A coarser bracket than the default 10 %: ~2 trials fewer a config. What
            # these tests check is the CLI's run on a real cluster; the search's
            # precision is tests/backend/test_autotune_search.py's.
            "--precision", "0.25", *extra]


def test_the_cli_finds_a_better_batch_size_and_leaves_it_applied(served):
    cluster, client, url = served
    url = url.replace("/sleepy", "/slow")
    other_before = deployed(client, "other")
    sleepy_before = deployed(client, "sleepy")
    replicas = {r.replica_id for r in client.serve_status().deployment("slow", "Slow").replicas}
    # Both batching knobs: with no batch wait Serve forms a batch of whatever is queued
    # at once (one request, here), so a larger max_batch_size alone changes nothing.
    # One value of each beside the start: this checks the CLI's run on a real cluster (the
    # search's own choices are tests/backend/test_autotune_search.py's).
    # One run, on `Slow`: a batch costs 150 ms, so no batching sustains under 7 req/s.
    # Serve forms a batch every batch wait and runs one at a time, so batching pays only
    # where the wait is at least the cost (a shorter wait makes batches of one that
    # queue; a 50 ms wait on `Sleepy`'s 40 ms barely paid at 31 req/s, and in a parallel
    # pass at load 11 that trial once achieved 14 of 25): with a 200 ms wait (the top of
    # the search's ladder) a batch of 4 sustains about 20 req/s. The batched candidate's
    # first trial, at 1.25 x the start's rate (about 8 req/s), asks for under half that, at a rate whose CPU a loaded 2-core
    # machine still has. The SLO (2 s: the wait, the batch and one ahead of it, with room
    # for a busy machine) is not what the start misses at 1.25 x its rate: its queue grows
    # without end.
    try:
        proc = subprocess.run(
            cli(cluster, "--knobs", "max_batch_size,batch_wait_timeout_s",
                "--range", "max_batch_size=4:4",
                "--range", "batch_wait_timeout_s=0.2:0.2", "--budget-s", "300",
                "--start-rate", "5",
                target="slow/Slow", slo_p99_ms=2000, trial_requests=16),
            cwd=ROOT, capture_output=True, text=True, timeout=420)
        assert proc.returncode == 0, proc.stderr[-4000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        print(proc.stderr[-3000:])
        assert {"best", "best_rps", "p99_ms", "trials", "elapsed_s"} <= result.keys()
        # Batching a fixed 150 ms cost: the best batches, and sustains more than one at a
        # time (by the search's own rule, at least its precision more: 25 %).
        assert result["best"][MAX_BATCH_SIZE] >= 2, result
        assert result["best"]["user_config.batch_wait_timeout_s"] > 0, result
        # Both rates are rounded to 0.1 in the JSON: the bar is checked on the rates
        # before their rounding.
        assert result["best_rps"] + 0.05 >= 1.25 * (result["start_rps"] - 0.05), result
        assert result["p99_ms"] <= 2000
        assert result["restarts"] == 0
        # The cluster runs the best, on the same replica, and the other apps are untouched.
        assert running_values(client, "slow", "Slow")[MAX_BATCH_SIZE] == \
            result["best"][MAX_BATCH_SIZE]
        now = {r.replica_id for r in client.serve_status().deployment("slow", "Slow").replicas}
        assert now == replicas
        assert deployed(client, "other") == other_before
        assert deployed(client, "sleepy") == sleepy_before
        # Progress is printed as it goes: every candidate tried has a line.
        assert proc.stderr.count("trying #") == result["trials"] - sum(
            1 for line in proc.stderr.splitlines() if "skipped (" in line)
        assert requests.get(url, timeout=30).ok
    finally:
        put_back(client, "slow", "Slow")


def test_a_stopped_cli_run_leaves_the_starting_config_when_asked(served):
    cluster, client, _ = served
    other_before = deployed(client, "other")
    proc = subprocess.Popen(cli(cluster, "--knobs", "max_batch_size", "--budget-s", "300",
                                "--on-stop", "start"),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        # Stop it while a trial config (the second candidate) is on the cluster.
        for line in proc.stderr:
            lines.append(line)
            if "trying #2" in line:
                break
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and running_values(client)[MAX_BATCH_SIZE] == 1:
            time.sleep(0.2)
        assert running_values(client)[MAX_BATCH_SIZE] != 1, "".join(lines)[-3000:]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["ended"] == "stopped" and result["left_on"] == START, result
    assert proc.returncode == 1  # stopped on the starting config: nothing better applied
    assert running_values(client) == START_CONFIG
    assert deployed(client, "other") == other_before


def test_losing_the_cluster_mid_run_puts_the_starting_config_back(served):
    cluster, client, _ = served
    gate = DashboardProxy(cluster.dashboard_url)
    other_before = deployed(client, "other")
    try:
        gated = ClusterClient(gate.url, cluster.token, timeout_s=3)
        events = []

        def on_event(kind, payload):
            events.append(kind)
            # The dashboard goes away once the second candidate runs: the next call to
            # it (the next candidate's apply) finds it gone, for 8 s.
            if kind == "measurement" and payload[0].index == 2 and gate.dropped == 0:
                gate.go_down(8.0)

        run = TuneRun(gated, TuneRequest(
            "sleepy", "Sleepy", Objective(slo_p99_ms=400), knobs=(MAX_BATCH_SIZE,),
            ranges={MAX_BATCH_SIZE: (1, 16)}, budget_s=300, trial_seconds=2,
            trial_requests=60, precision=0.25), on_event=on_event)
        report = run.run()
        assert report.outcome.ended.startswith("failed"), report.outcome.ended
        assert report.left_on == START and report.left_ok, report.summary()
        assert gate.dropped > 0
        assert "leaving" in events and "left" in events
        assert running_values(client) == START_CONFIG
        assert deployed(client, "other") == other_before
    finally:
        gate.close()
        put_back(client)


def test_an_app_without_the_batching_convention_is_refused_with_the_reason(served):
    """A deployment with no max_batch_size in its user_config cannot be searched over
    its batching knobs, and the refusal says what the app would need."""
    _cluster, client, _ = served
    run = TuneRun(client, TuneRequest("plain", "Plain", Objective(100)))
    with pytest.raises(ConsoleError) as refused:
        run.prepare()
    text = str(refused.value)
    assert "plain/Plain has no user_config.max_batch_size" in text, text
    assert "reconfigure" in text and "Making your own app tunable" in text, text
    # The same app can still be searched over a knob it has (its replicas' limit).
    TuneRun(client, TuneRequest("plain", "Plain", Objective(100),
                                knobs=("max_ongoing_requests",))).prepare()


def test_a_knob_the_tuner_cannot_search_or_a_missing_app_is_refused(served):
    _cluster, client, _ = served
    run = TuneRun(client, TuneRequest("sleepy", "Sleepy", Objective(100),
                                      knobs=("user_config.max_batch_size", "num_cpus")))
    with pytest.raises(ValueError, match="cannot search 'num_cpus'"):
        run.prepare()
    run = TuneRun(client, TuneRequest("nope", "Sleepy", Objective(100)))
    with pytest.raises(ConsoleError, match="not on the cluster"):
        run.prepare()


def test_the_best_config_exports_as_yaml_that_serve_deploy_takes(served, tmp_path):
    import yaml

    from backend.deploy.config_io import parse_config
    from backend.tuning.autotune_run import config_yaml

    cluster, client, _ = served
    text = config_yaml(client.serve_details(), "sleepy", "Sleepy",
                       {MAX_BATCH_SIZE: 16, "max_ongoing_requests": 32})
    assert "auto-tuner's best config for 'Sleepy'" in text
    doc = yaml.safe_load(text)
    [app] = doc["applications"]
    assert app["name"] == "sleepy"
    [dep] = app["deployments"]
    assert dep["user_config"] == {"max_batch_size": 16, "batch_wait_timeout_s": 0.0}
    assert dep["max_ongoing_requests"] == 32
    assert dep["ray_actor_options"] == {"num_cpus": 0.5}   # the rest as it runs
    parse_config(text)  # what --apply-config / Import config… accept
    # Ray's own schema takes it too (what `serve deploy` validates against).
    from ray.serve.schema import ServeDeploySchema
    ServeDeploySchema.model_validate(doc) if hasattr(ServeDeploySchema, "model_validate") \
        else ServeDeploySchema.parse_obj(doc)
