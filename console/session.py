"""One connection to one cluster, and everything that runs against it.

The Session owns the cluster client, the embedded local cluster (when it started one),
the pollers, the metrics store and the load generator. All network work runs on its
TaskRunners; results come back as Qt signals on the GUI thread.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, QTimer, Signal

from backend.catalog import Demo
from backend.config_io import apply_config, export_application, parse_config
from backend.cluster_client import ClusterClient
from backend.deployer import deploy_demo, wait_for_app
from backend.knobs import KnobSet, knobs_for, load_knob_metadata, values_of
from backend.errors import ConsoleError
from backend.load_model import LoadModel, LoadPlan, demo_target
from backend.loadgen import LoadGenerator, LoadTarget
from backend.local_cluster import LocalCluster
from backend.diagnose import ConnectionSpec, diagnose
from backend.metrics.direct import DirectScrapeSource
from backend.metrics.prometheus import PrometheusSource, build_queries, queries_for
from backend.metrics.series import SeriesStore
from backend.model import ServeStatus
from console.tasks import Poller, TaskRunner, user_message
from console.tuning import TuningController

log = logging.getLogger(__name__)

STATUS_INTERVAL_MS = 1000
METRICS_INTERVAL_MS = 1000
LOAD_STATS_INTERVAL_MS = 500


@dataclass(frozen=True)
class ConnectionInfo:
    url: str
    local: bool
    ray_version: str
    token: str | None = None
    prometheus_url: str | None = None
    serve_http_url: str | None = None
    token_file: str | None = None     # where the token was read from (a path, never the token)
    verify: bool | str = True         # TLS: True, False, or a CA bundle path

    def describe(self) -> str:
        where = "local cluster" if self.local else "remote cluster"
        return f"{where} {self.url} (Ray {self.ray_version})"


def read_token_file(path: str | None) -> str | None:
    """The token in *path* (whitespace stripped), else $RAY_AUTH_TOKEN, else None."""
    if path:
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise ConsoleError(f"Cannot read the token file {path}: {e.strerror}.") from None
        if not token:
            raise ConsoleError(f"The token file {path} is empty.")
        return token
    return os.environ.get("RAY_AUTH_TOKEN") or None


class Session(QObject):
    connecting = Signal(str)          # progress text while connecting
    connected = Signal(object)        # ConnectionInfo
    connect_failed = Signal(str)
    disconnected = Signal()
    status_changed = Signal(object)   # ServeStatus
    status_failed = Signal(str)
    event = Signal(str, str)          # message, level ("info", "warning", "error")
    deploy_progress = Signal(str)
    deploy_finished = Signal(bool, str, str)  # ok, app name, message
    load_stats = Signal(object)       # backend.loadgen.LoadStats
    metrics_state = Signal(str)       # "" when fine, else why metrics are missing
    config_file_done = Signal(bool, str)  # ok, message (export / import)
    diagnose_step = Signal(object)        # backend.diagnose.Step
    # The model ids each multiplexed deployment's replicas hold changed:
    # {(app, deployment): {replica: [model ids]}} (see held_models).
    held_models_changed = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        # Separate pools: a long deploy never delays a status or metrics poll.
        self._poll_runner = TaskRunner("poll", max_workers=2, parent=self)
        self._action_runner = TaskRunner("action", max_workers=2, parent=self)
        self.store = SeriesStore()
        self.client: ClusterClient | None = None
        self.info: ConnectionInfo | None = None
        self.status: ServeStatus | None = None
        self._local: LocalCluster | None = None
        self._source: DirectScrapeSource | None = None
        self._status_poller: Poller | None = None
        self._metrics_poller: Poller | None = None
        self._load: LoadGenerator | None = None
        self._load_timer = QTimer(self)
        self._load_timer.setInterval(LOAD_STATS_INTERVAL_MS)
        self._load_timer.timeout.connect(self._on_load_timer_tick)
        self._connect_generation = 0
        self._knob_metadata = load_knob_metadata()
        # Applies wait for the cluster to report the change; their own pool keeps them
        # from queueing behind a deploy.
        self._tuning_runner = TaskRunner("tuning", max_workers=2, parent=self)
        self.tuning = TuningController(self._tuning_runner, lambda: self.client,
                                       self.knob_values, self.latest_p99, parent=self)
        self._status_error: str | None = None
        self._metrics_error: str | None = None
        #: {(app, deployment): {replica: model ids}} as of the newest metrics poll.
        self.held_models: dict = {}
        #: The application the running (or last) load is sent to, when it is one of the
        #: cluster's routes; None otherwise.
        self.load_app: str | None = None

    # -- connecting -------------------------------------------------------------------
    @property
    def local_cluster(self) -> LocalCluster | None:
        return self._local

    def connect_local(self, num_cpus: int | None = None) -> None:
        """Start an embedded Ray head and connect to it exactly like a remote one."""
        self.disconnect()
        generation = self._begin_connect()
        cluster = LocalCluster(num_cpus=num_cpus)
        self._local = cluster

        def work():
            cluster.start(progress=lambda text: self.connecting.emit(text))
            client = ClusterClient(cluster.dashboard_url, cluster.token)
            # A head that has just started can take seconds to answer its first Serve
            # call on a busy 2-core machine (seen in CI-like runs: > 5 s): a cluster this
            # console started gets longer than a remote one's 5 s.
            version = client.check(timeout_s=30)
            return client, version

        def done(result):
            if generation != self._connect_generation:
                return  # cancelled meanwhile; disconnect() already stopped the cluster
            client, version = result
            self._on_connected(client, ConnectionInfo(
                client.url, True, version.get("ray_version", "?"), cluster.token))

        self.connecting.emit("Starting a local Ray cluster…")
        self._action_runner.submit(work, on_done=done,
                                   on_error=lambda e: self._on_connect_error(generation, e))

    def connect_remote(self, url: str, token: str | None = None, *,
                       token_file: str | None = None, prometheus_url: str | None = None,
                       verify: bool | str = True, serve_http_url: str | None = None) -> None:
        self.disconnect()
        generation = self._begin_connect()

        def work():
            tok = token or read_token_file(token_file)
            client = ClusterClient(url, tok, verify=verify)  # validates the address itself
            version = client.check()
            if prometheus_url:
                self.connecting.emit(f"Checking Prometheus at {prometheus_url}…")
                prom = PrometheusSource(prometheus_url, verify=verify)
                try:
                    prom.check()
                except Exception as e:
                    prom.close()
                    raise ConsoleError(f"Prometheus at {prometheus_url} is not reachable: "
                                       f"{e}") from None
                prom.close()
            return client, version, tok

        def done(result):
            if generation != self._connect_generation:
                return
            client, version, tok = result
            self._on_connected(client, ConnectionInfo(
                client.url, False, version.get("ray_version", "?"), tok,
                prometheus_url=prometheus_url, serve_http_url=serve_http_url,
                token_file=token_file if not token else None, verify=verify))

        self.connecting.emit(f"Connecting to {url}…")
        self._action_runner.submit(work, on_done=done,
                                   on_error=lambda e: self._on_connect_error(generation, e))

    def cancel_connect(self) -> None:
        self._connect_generation += 1
        self._stop_local_async()

    def _begin_connect(self) -> int:
        self._connect_generation += 1
        return self._connect_generation

    def _on_connect_error(self, generation: int, error: BaseException) -> None:
        if generation != self._connect_generation:
            return
        self._stop_local_async()
        self.connect_failed.emit(user_message(error))

    def _on_connected(self, client: ClusterClient, info: ConnectionInfo) -> None:
        self.client = client
        self.info = info
        self.store.clear()
        self._source = self._make_source("prometheus" if info.prometheus_url else "direct")
        self._status_poller = Poller(self._poll_runner, client.serve_status,
                                     STATUS_INTERVAL_MS, self._on_status_result,
                                     self._on_status_error, parent=self)
        self._metrics_poller = Poller(self._poll_runner, self._poll_metrics,
                                      METRICS_INTERVAL_MS, self._on_metrics_result,
                                      self._on_metrics_error, parent=self)
        self._status_poller.start()
        self._metrics_poller.start()
        self.event.emit(f"Connected to {info.describe()}.", "info")
        self.connected.emit(info)

    # -- metrics source ---------------------------------------------------------------------
    @property
    def metrics_source(self) -> str:
        """"direct" or "prometheus" — what the plots are computed from now."""
        return "prometheus" if isinstance(self._source, PrometheusSource) else "direct"

    def _make_source(self, kind: str):
        client, info = self.client, self.info
        if kind == "prometheus" and info is not None and info.prometheus_url:
            return PrometheusSource(info.prometheus_url, window_s=10.0, verify=client.verify)
        return DirectScrapeSource(client.metrics_targets, window_s=5.0)

    def set_metrics_source(self, kind: str) -> None:
        """Switch between the direct scrape and Prometheus for this session."""
        if self.client is None or kind == self.metrics_source:
            return
        if kind == "prometheus" and not (self.info and self.info.prometheus_url):
            self.event.emit("No Prometheus URL was given for this connection.", "warning")
            return
        old, self._source = self._source, self._make_source(kind)
        if old is not None:
            self._action_runner.submit(old.close)
        self.event.emit(f"Metrics now from {self.describe_metrics_source()}.", "info")
        self.metrics_state.emit(self._metrics_error or "")

    def describe_metrics_source(self) -> str:
        if self.metrics_source == "prometheus" and self.info:
            return f"Prometheus {self.info.prometheus_url}"
        return "direct scrape"

    def promql(self, key) -> dict[str, str]:
        """The PromQL behind each plotted series of one deployment (for Grafana)."""
        window = self._source.window_s if self._source is not None else 10.0
        return queries_for(build_queries(window), key)

    def diagnose(self, spec: ConnectionSpec, on_step, on_done,
                 token_file: str | None = None) -> None:
        """Run the step-by-step connection test off the GUI thread."""
        def work():
            full = spec
            if not spec.token:
                full = dataclasses.replace(spec, token=read_token_file(token_file))
            return diagnose(full, report=lambda step: self.diagnose_step.emit(step))

        self.diagnose_step.connect(on_step)

        def finished(result):
            self.diagnose_step.disconnect(on_step)
            on_done(result if isinstance(result, list) else [])

        self._action_runner.submit(work, on_done=finished, on_error=finished)

    def disconnect(self) -> None:
        """Stop everything that runs against the cluster; stop the cluster we started."""
        self._connect_generation += 1
        for poller in (self._status_poller, self._metrics_poller):
            if poller is not None:
                poller.stop()
                poller.deleteLater()
        self._status_poller = self._metrics_poller = None
        self.stop_load()
        if self._source is not None:
            source, self._source = self._source, None
            self._action_runner.submit(source.close)
        was_connected = self.client is not None
        if self.held_models:
            self.held_models = {}
            self.held_models_changed.emit({})
        self.client = None
        self.info = None
        self.status = None
        self._stop_local_async()
        if was_connected:
            self.disconnected.emit()

    def _stop_local_async(self) -> None:
        local, self._local = self._local, None
        if local is not None:
            # Stopping takes seconds; never on the GUI thread.
            self._action_runner.submit(local.stop)

    def shutdown(self) -> None:
        """At exit: disconnect, then wait for the background work (the local cluster's
        stop included) to finish. The window is already closed when this blocks."""
        self.disconnect()
        self._poll_runner.shutdown(wait=False)
        self._tuning_runner.shutdown(wait=False)
        self._action_runner.shutdown(wait=True)

    # -- polling ----------------------------------------------------------------------
    def _poll_metrics(self):
        source = self._source
        if source is None:
            return None, None
        t, values = source.poll()
        self.store.add(t, values)  # the store is thread-safe; widgets read snapshots
        # Read here, on the poll thread: the source's lock is held during a poll, and the
        # GUI thread must never wait on it.
        return source.last_error, source.all_held_models()

    def _on_status_result(self, status: ServeStatus) -> None:
        self.status = status
        if self._status_error is not None:
            self.event.emit("Cluster status is answering again.", "info")
            self._status_error = None
        self.status_changed.emit(status)

    def _on_status_error(self, error: BaseException) -> None:
        text = user_message(error)
        if text != self._status_error:
            self._status_error = text
            self.event.emit(f"Cluster status: {text}", "error")
        self.status_failed.emit(text)

    def _on_metrics_result(self, result) -> None:
        last_error, held = result
        if held is not None and held != self.held_models:
            self.held_models = held
            self.held_models_changed.emit(held)
        self._on_metrics_state(last_error)

    def _on_metrics_state(self, last_error: str | None) -> None:
        if last_error != self._metrics_error:
            had_error, self._metrics_error = self._metrics_error, last_error
            if last_error:
                self.event.emit(f"Metrics: {last_error}", "warning")
            elif had_error:
                self.event.emit("Metrics: scraping every node again.", "info")
            self.metrics_state.emit(last_error or "")

    def _on_metrics_error(self, error: BaseException) -> None:
        self._on_metrics_state(user_message(error))

    # -- deploying ----------------------------------------------------------------------
    def deploy(self, demo: Demo) -> None:
        client = self.client
        if client is None:
            self.deploy_finished.emit(False, demo.app_name, "Not connected to a cluster.")
            return
        http_new = None
        if self._local is not None:
            # This console started the cluster, so it picks the Serve port (free, not 8000).
            http_new = {"host": "127.0.0.1", "port": self._local.serve_http_port}

        def work():
            return deploy_demo(client, demo, http_options_if_new=http_new,
                               progress=lambda text: self.deploy_progress.emit(text))

        self.event.emit(f"Deploying demo '{demo.title}'…", "info")
        self._action_runner.submit(
            work,
            on_done=lambda status: self._on_deploy_done(demo, status),
            on_error=lambda e: self._on_deploy_error(demo, e),
        )

    def _on_deploy_done(self, demo: Demo, status: ServeStatus) -> None:
        self._on_status_result(status)
        self.event.emit(f"'{demo.app_name}' is RUNNING.", "info")
        self.deploy_finished.emit(True, demo.app_name, "RUNNING")

    def _on_deploy_error(self, demo: Demo, error: BaseException) -> None:
        text = user_message(error)
        self.event.emit(f"Deploying '{demo.app_name}' failed: {text}", "error")
        self.deploy_finished.emit(False, demo.app_name, text)

    # -- tuning -------------------------------------------------------------------------------
    def knob_set(self, app: str, deployment: str) -> KnobSet | None:
        if self.status is None:
            return None
        return knobs_for(self.status, app, deployment, self._knob_metadata)

    def knob_values(self, app: str, deployment: str) -> dict:
        ks = self.knob_set(app, deployment)
        return values_of(ks) if ks else {}

    def latest_p99(self, app: str, deployment: str) -> float | None:
        _, values = self.store.snapshot((app, deployment), "latency_p99_ms")
        return float(values[-1]) if len(values) else None

    # -- config files ---------------------------------------------------------------------------
    def export_config(self, app: str, path: str) -> None:
        client = self.client
        if client is None:
            self.config_file_done.emit(False, "Not connected to a cluster.")
            return

        def work():
            text = export_application(client.serve_details(), app)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return f"Exported '{app}' to {path}."

        self._action_runner.submit(work, on_done=self._on_config_file_ok,
                                   on_error=self._on_config_file_error)

    def import_config(self, path: str) -> None:
        client = self.client
        if client is None:
            self.config_file_done.emit(False, "Not connected to a cluster.")
            return

        def work():
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ConsoleError(f"Cannot read {path}: {e.strerror}.") from None
            doc = parse_config(text, path)
            names = apply_config(client, doc)
            for name in names:
                wait_for_app(client, name, progress=lambda t: self.deploy_progress.emit(t),
                             timeout_s=300)
            return f"Applied {path}: {', '.join(names)} RUNNING."

        self.event.emit(f"Applying config file {path}…", "info")
        self._action_runner.submit(work, on_done=self._on_config_file_ok,
                                   on_error=self._on_config_file_error)

    def _on_config_file_ok(self, message: str) -> None:
        self.event.emit(message, "info")
        self.config_file_done.emit(True, message)

    def _on_config_file_error(self, error: BaseException) -> None:
        text = user_message(error)
        self.event.emit(text, "error")
        self.config_file_done.emit(False, text)

    # -- load -------------------------------------------------------------------------------
    def serve_http_base(self) -> str | None:
        """The Serve proxy's address as the cluster reports it (never an assumed 8000)."""
        status, client = self.status, self.client
        if self.info is not None and self.info.serve_http_url:
            return self.info.serve_http_url  # the user said where the proxy is reachable
        if status is None or client is None or not status.http_port:
            return None
        host = status.http_host or client.host
        if host in ("0.0.0.0", "::", ""):
            # Bound on every interface: reach it at the host we reach the dashboard on.
            host = client.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{status.http_port}"

    def load_target_for(self, demo: Demo) -> LoadTarget | None:
        base = self.serve_http_base()
        app = self.status.application(demo.app_name) if self.status else None
        if base is None or app is None or app.route_prefix is None:
            return None
        prefix = "" if app.route_prefix == "/" else app.route_prefix
        # Demo-aware payloads: feature vectors, model ids in the multiplexing header,
        # streamed responses read to the end.
        return demo_target(demo.key, f"{base}{prefix}{demo.load.path}", hint=demo.load)

    def start_load_plan(self, plan: LoadPlan) -> None:
        """Start a load described in full (target, open/closed loop, profile)."""
        self.stop_load()
        self.load_app = self._app_of_url(plan.target.url)
        self._load = LoadGenerator(plan.target, model=plan.model)
        self._load.start()
        self._load_timer.start()
        self.event.emit(f"Load: {plan.model.describe()} → {plan.target.describe()}", "info")

    def set_load_model(self, model: LoadModel) -> None:
        if self._load is None:
            return
        try:
            self._load.apply_model(model)
        except ValueError as e:
            self.event.emit(str(e), "warning")
            return
        self.event.emit(f"Load now: {model.describe()}", "info")

    def start_load(self, target: LoadTarget, rps: float) -> None:
        self.stop_load()
        self.load_app = self._app_of_url(target.url)
        self._load = LoadGenerator(target)
        self._load.start(rps)  # returns at once: the generator has its own thread
        self._load_timer.start()
        self.event.emit(f"Load: {rps:g} requests/s → {target.method} {target.url}", "info")

    def set_load_rate(self, rps: float) -> None:
        if self._load is not None:
            self._load.set_rate(rps)
            self.event.emit(f"Load rate set to {rps:g} requests/s.", "info")

    def stop_load(self) -> None:
        load, self._load = self._load, None
        self._load_timer.stop()
        if load is not None:
            # stop() joins the generator thread (≤ ~1 s): do it off the GUI thread.
            def stop_and_report() -> None:
                load.stop()
                # The whole-run summary reaches the panel after Stop (queued signal).
                self.load_stats.emit(load.stats())

            threading.Thread(target=stop_and_report, name="loadgen-stop", daemon=True).start()
            self.event.emit("Load stopped.", "info")

    def _app_of_url(self, url: str) -> str | None:
        """The application a load URL reaches, when it goes to this cluster's Serve."""
        from urllib.parse import urlsplit

        base, status = self.serve_http_base(), self.status
        if base is None or status is None:
            return None
        parts, ours = urlsplit(url), urlsplit(base)
        if (parts.hostname, parts.port) != (ours.hostname, ours.port):
            return None
        return status.application_for_path(parts.path or "/")

    @property
    def load_running(self) -> bool:
        return self._load is not None

    def _on_load_timer_tick(self) -> None:
        if self._load is not None:
            self.load_stats.emit(self._load.stats())
