"""One connection to one cluster, and everything that runs against it.

The Session owns the cluster client, the embedded local cluster (when it started one),
the pollers, the metrics store and the load generator. All network work runs on its
TaskRunners; results come back as signals (psygnal) on the GUI thread.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from psygnal import Signal

from backend.cluster.addresses import default_ray_client_url
from backend.cluster.client import ClusterClient
from backend.cluster.diagnose import ConnectionSpec, diagnose
from backend.cluster.local import LocalCluster
from backend.errors import AnswerTimeout, ConsoleError, RefusedError
from backend.metrics.scrape_process import ProcessScrapeSource
from backend.metrics.prometheus import PrometheusSource, build_queries, queries_for
from backend.metrics.series import SeriesStore
from backend.model import ServeStatus
from backend.cluster.ray_versions import ray_version_warning
from backend.metrics.ray_exports import unfed_summary
from backend.scaling.explain import replica_counts
from backend.scaling.replica_watch import ReplicaWatcher, poll_replica_events
from backend.tuning.knobs import KnobSet, knobs_for, load_knob_metadata, values_of
from console.model.connection import (ConnectionInfo, ConnectionMonitor,  # noqa: F401 (re-exported)
                                      read_token_file)
from console.model.deploys import DeployController
from console.model.gpus import GpuWatch
from console.model.load_control import LoadControl
from console.model.manual_tuning import TuningController
from console.model.model_info import ModelInfoWatch
from console.model.operations import Operations
from console.model.scaling import ScalingWatch
from console.model.tasks import Poller, TaskRunner, user_message
from console.model import gui_calls

log = logging.getLogger(__name__)

STATUS_INTERVAL_MS = 1000
METRICS_INTERVAL_MS = 1000
# A status poll that takes longer than this counts as "not answering": with 1 s polls the
# banner shows within ~3 s even when the dashboard hangs instead of refusing.
STATUS_TIMEOUT_S = 2.0
# What quitting may spend stopping the local cluster (SIGTERM, then SIGKILL of its group).
LOCAL_STOP_S = 2.5


class Session:
    """One connection to one cluster. Its parts, each named for its job:

    * `connection` — the connection's lifecycle (ConnectionMonitor state machine),
    * `deploys` — demos and config files onto the cluster (DeployController),
    * `load` — the load generator (LoadControl),
    * `model_info` — what demo replicas say about their models (ModelInfoWatch),
    * `scaling` — the autoscaler's decisions and why a deployment is short of its
      target (ScalingWatch),
    * `tuning` — knob changes (TuningController),
    * `operations` — what is in flight, each cancellable; quitting cancels them all.
    """

    connecting = Signal(str)          # progress text while connecting
    connected = Signal(object)        # ConnectionInfo
    # Connected, pollers about to start (ConnectionInfo): whoever must see every sample
    # of the connection (the recorder) starts here.
    connection_opened = Signal(object)
    connect_failed = Signal(str)
    disconnected = Signal()
    status_changed = Signal(object)   # ServeStatus
    status_failed = Signal(str)
    event = Signal(str, str)          # message, level ("info", "warning", "error")
    metrics_state = Signal(str)       # "" when fine, else why metrics are missing
    diagnose_step = Signal(object)        # backend.cluster.diagnose.Step
    # The model ids each multiplexed deployment's replicas hold changed:
    # {(app, deployment): {replica: [model ids]}} (see held_models).
    held_models_changed = Signal(object)
    # The local cluster this console started has died: (exit code text, log tail).
    local_cluster_died = Signal(str, str)
    # A restarted head lost the applications this console had deployed: their names.
    redeploy_offered = Signal(object)
    # A replica died or its replacement runs (backend.scaling.replica_watch.ReplicaEvent).
    replica_event = Signal(object)
    # Per-source metrics trouble: [backend.metrics.health.SourceProblem] ([] when fine).
    metrics_problems = Signal(object)

    def __init__(self) -> None:
        # Separate pools: a long deploy never delays a status or metrics poll.
        self._poll_runner = TaskRunner("poll", max_workers=2)
        self.action_runner = TaskRunner("action", max_workers=3)
        self.store = SeriesStore(thin=True)
        #: Per-replica series (backend.metrics.series.REPLICA_SERIES), keyed by
        #: (app, deployment, replica id): the per-replica view reads them.
        self.replica_store = SeriesStore(thin=True)
        self.client: ClusterClient | None = None
        self.info: ConnectionInfo | None = None
        self.status: ServeStatus | None = None
        self._local: LocalCluster | None = None
        self._local_reported_dead = False
        self._source: ProcessScrapeSource | PrometheusSource | None = None
        self._status_poller: Poller | None = None
        self._metrics_poller: Poller | None = None
        self._connect_generation = 0
        self._knob_metadata = load_knob_metadata()
        self.operations = Operations()
        # The parts' event sink: a deploy's preflight says things from a worker thread.
        self._event_any_thread = gui_calls.on_gui(self.event.emit)
        self.connection = ConnectionMonitor()
        self.connection.resumed.connect(self._on_connection_resumed)
        self.deploys = DeployController(
            client=lambda: self.client, local_cluster=lambda: self._local,
            connection=self.connection, operations=self.operations,
            runner=self.action_runner, event=self._event_any_thread,
            apply_status=self.apply_status)
        self.load = LoadControl(status=lambda: self.status, info=lambda: self.info,
                                client=lambda: self.client, event=self._event_any_thread)
        # After `load`: it asks the demos through the Serve address `load` works out.
        self.model_info = ModelInfoWatch(client=lambda: self.client,
                                         serve_http_base=self.load.serve_http_base,
                                         runner=self.action_runner)
        self.status_changed.connect(self.model_info.on_status)
        self.disconnected.connect(self.model_info.on_disconnected)
        # Applies wait for the cluster to report the change; their own pool keeps them
        # from queueing behind a deploy.
        self._tuning_runner = TaskRunner("tuning", max_workers=2)
        self.tuning = TuningController(self._tuning_runner, self.client_if_usable,
                                       self.knob_values, self.latest_p99,
                                       operations=self.operations)
        self.tuning.notice.connect(self.event)
        self._metrics_error: str | None = None
        self._metrics_poll_failed = False  # the last metrics poll raised
        self._metrics_problems: list = []
        # The source whose slow report interval the event log was told of.
        self._source_told_slow = None
        # (source, {"full"/"watch": the report time its values were last stored at;
        # None: as of polls}).
        self._metrics_as_of: tuple = (None, {})
        # The deployments in view (console/model/attention.py), for the metrics source:
        # None polls everything every second (no view says what it shows).
        self._attention: frozenset | None = None
        # Replica deaths from successive statuses (+ the GCS's actor table); replaced
        # on every connect and on a restarted head. Used only on the status poll thread.
        self._watcher = ReplicaWatcher()
        #: {(app, deployment): {replica: model ids}} as of the newest metrics poll.
        self.held_models: dict = {}
        #: The nodes' GPUs (series, device names) and the replicas' GPU shares.
        self.gpus = GpuWatch()
        self.scaling = ScalingWatch(client=self.client_if_usable, status=lambda: self.status,
                                    event=self._event_any_thread)
        #: Applications to offer for redeploy once a restarted local cluster is up.
        self._redeploy_after_connect: list[str] | None = None

    def client_if_usable(self) -> ClusterClient | None:
        return self.client if self.connection.usable else None

    # -- connecting -------------------------------------------------------------------
    @property
    def local_cluster(self) -> LocalCluster | None:
        return self._local

    def connect_local(self, num_cpus: int | None = None) -> None:
        """Start an embedded Ray head and connect to it exactly like a remote one."""
        self.disconnect()
        generation = self._begin_connect("Starting a local Ray cluster…")
        cluster = LocalCluster(num_cpus=num_cpus)
        self._local = cluster
        self._local_reported_dead = False
        cancel = self.operations.root

        def work():
            cluster.start(progress=gui_calls.relay(self._connect_progress), cancel=cancel)
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
                client.url, True, version.get("ray_version", "?"), cluster.token,
                ray_client_url=f"ray://{cluster.host}:{cluster.client_port}"),
                version.get("session_name", ""))

        self.action_runner.submit(work, on_done=done,
                                  on_error=lambda e: self._on_connect_error(generation, e))

    def connect_remote(self, url: str, token: str | None = None, *,
                       token_file: str | None = None, prometheus_url: str | None = None,
                       verify: bool | str = True, serve_http_url: str | None = None,
                       ray_client_url: str | None = None) -> None:
        self.disconnect()
        generation = self._begin_connect(f"Connecting to {url}…")

        def work():
            tok = token or read_token_file(token_file)
            client = ClusterClient(url, tok, verify=verify)  # validates the address itself
            version = client.check()
            if prometheus_url:
                gui_calls.post(functools.partial(
                    self._connect_progress, f"Checking Prometheus at {prometheus_url}…"))
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
                token_file=token_file if not token else None, verify=verify,
                ray_client_url=ray_client_url or default_ray_client_url(client.url)),
                version.get("session_name", ""))

        self.action_runner.submit(work, on_done=done,
                                  on_error=lambda e: self._on_connect_error(generation, e))

    def restart_local(self) -> None:
        """Start a new local cluster in place of one that died; offer to redeploy what
        this console had deployed on the old one."""
        lost = list(self.deploys.deployed)
        num_cpus = self._local.num_cpus if self._local is not None else None
        self.connect_local(num_cpus=num_cpus)
        if lost:
            self._redeploy_after_connect = lost

    def retry_now(self) -> None:
        """Ask the cluster again now instead of at the end of the back-off."""
        if self._status_poller is not None:
            self._status_poller.poll_now()

    def cancel_connect(self) -> None:
        self._connect_generation += 1
        self.connection.closed()
        self._stop_local_async()

    def _begin_connect(self, text: str) -> int:
        self._connect_generation += 1
        self.connection.connecting(text)
        self.connecting.emit(text)
        return self._connect_generation

    def _connect_progress(self, text: str) -> None:
        """What connecting is doing now: the connection's message, and `connecting`."""
        self.connection.progress(text)
        self.connecting.emit(text)

    def _on_connect_error(self, generation: int, error: BaseException) -> None:
        if generation != self._connect_generation:
            return
        self._stop_local_async()
        self.connection.closed()
        self.connect_failed.emit(user_message(error))

    def _on_connected(self, client: ClusterClient, info: ConnectionInfo,
                      session_name: str) -> None:
        self.client = client
        self.info = info
        self.store.clear()
        self.replica_store.clear()
        self.gpus.clear()
        self._watcher = ReplicaWatcher()
        self.connection_opened.emit(info)
        self._source = self._make_source("prometheus" if info.prometheus_url else "direct")
        self._metrics_poll_failed = False
        self._status_poller = Poller(self._poll_runner, self._poll_status,
                                     STATUS_INTERVAL_MS, self._on_status_result,
                                     self._on_status_error,
                                     on_start=self.connection.retrying)
        self._metrics_poller = Poller(self._poll_runner, self._poll_metrics,
                                      METRICS_INTERVAL_MS, self._on_metrics_result,
                                      self._on_metrics_error)
        self._status_poller.start()
        self._metrics_poller.start()
        self.scaling.start()
        self.connection.connected(session_name, f"Connected: {info.describe()}")
        self.event.emit(f"Connected to {info.describe()}.", "info")
        warning = ray_version_warning(info.ray_version)
        if warning:
            self.event.emit(warning, "warning")
        unfed = unfed_summary(info.ray_version)
        if unfed:
            self.event.emit(unfed, "info")
        self.connected.emit(info)
        lost, self._redeploy_after_connect = self._redeploy_after_connect, None
        if lost:
            self.redeploy_offered.emit(lost)

    # -- metrics source ---------------------------------------------------------------------
    @property
    def metrics_source(self) -> str:
        """"direct" or "prometheus" — what the plots are computed from now."""
        return "prometheus" if isinstance(self._source, PrometheusSource) else "direct"

    def _make_source(self, kind: str):
        client, info = self.client, self.info
        if kind == "prometheus" and info is not None and info.prometheus_url:
            return PrometheusSource(info.prometheus_url, window_s=10.0, verify=client.verify)
        # The direct scrape runs in a child process: its Python never holds this
        # process's GIL against the GUI thread (backend/metrics/scrape_process.py).
        source = ProcessScrapeSource(client.metrics_targets, window_s=5.0)
        source.set_attention(self._attention)
        return source

    def set_attention(self, keys) -> None:
        """The deployments in view, polled every second; the rest every few seconds
        (backend/metrics/attention.py). None: every deployment every second."""
        self._attention = None if keys is None else frozenset(keys)
        source = self._source
        if source is not None:
            source.set_attention(self._attention)

    def set_metrics_source(self, kind: str) -> None:
        """Switch between the direct scrape and Prometheus for this session."""
        if self.client is None or kind == self.metrics_source:
            return
        if kind == "prometheus" and not (self.info and self.info.prometheus_url):
            self.event.emit("No Prometheus URL was given for this connection.", "warning")
            return
        self._replace_source(kind)
        self.event.emit(f"Metrics now from {self.describe_metrics_source()}.", "info")
        self.metrics_state.emit(self._metrics_error or "")

    def _replace_source(self, kind: str) -> None:
        if self._metrics_problems:
            self._metrics_problems = []
            self.metrics_problems.emit([])
        old, self._source = self._source, self._make_source(kind)
        if old is not None:
            old.close()  # never waits: a pool shut down, or a child's pipes closed

    @property
    def metrics_error(self) -> str:
        """Why the newest metrics poll failed as a whole ("" when it did not)."""
        return self._metrics_error or ""

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
            return diagnose(full, report=gui_calls.relay(self.diagnose_step.emit))

        self.diagnose_step.connect(on_step)

        def finished(result):
            self.diagnose_step.disconnect(on_step)
            on_done(result if isinstance(result, list) else [])

        self.action_runner.submit(work, on_done=finished, on_error=finished)

    def disconnect(self) -> None:
        """Stop everything that runs against the cluster; stop the cluster we started."""
        self._connect_generation += 1
        # Waits on this cluster (deploys, applies) end now; what they changed stays.
        for op in self.operations.pending():
            op.token.cancel("disconnected from the cluster")
        for poller in (self._status_poller, self._metrics_poller):
            if poller is not None:
                poller.stop()
        self._status_poller = self._metrics_poller = None
        self.scaling.stop()
        self.load.stop()
        self.load.release()
        if self._source is not None:
            # Here, not on a worker (a queued task is cancelled at shutdown, which would
            # leave the scrape's child to the end of this process): it never waits.
            source, self._source = self._source, None
            source.close()
        was_connected = self.client is not None
        if self.held_models:
            self.held_models = {}
            self.held_models_changed.emit({})
        self.client = None
        self.info = None
        self.status = None
        self._stop_local_async()
        self.connection.closed()
        if was_connected:
            self.disconnected.emit()

    def _stop_local_async(self) -> None:
        local, self._local = self._local, None
        if local is not None:
            # Stopping takes seconds; never on the GUI thread.
            self.action_runner.submit(local.stop)

    def shutdown(self) -> None:
        """At exit (the window is already closed): cancel every wait, stop the load and
        the pollers, and stop the local cluster this console started — bounded, so that
        quitting takes seconds whatever is in flight. Worker threads still blocked on a
        network call are abandoned (the process exits without joining them)."""
        self.operations.cancel_all("the console is quitting")
        local, self._local = self._local, None
        self.disconnect()
        self._poll_runner.shutdown(wait=False)
        self._tuning_runner.shutdown(wait=False)
        self.scaling.shutdown()
        self.action_runner.shutdown(wait=False)
        if local is not None:
            local.stop(timeout_s=LOCAL_STOP_S)

    # -- polling ----------------------------------------------------------------------
    def _poll_status(self):
        """On a poll thread: the Serve status, plus the cluster's session name while the
        connection is lost (to tell a restarted head from the same one)."""
        client = self.client
        if client is None:
            raise ConsoleError("Not connected.")
        session_name = None
        if self.connection.awaiting_session_check:
            session_name = client.version(timeout_s=STATUS_TIMEOUT_S).get("session_name", "")
            if session_name != self.connection.session_name:
                self._watcher = ReplicaWatcher()  # a restarted head: nothing "died"
        status, events = poll_replica_events(client, self._watcher, STATUS_TIMEOUT_S)
        # Target / running / starting replicas (and min/max with autoscaling) from the
        # status, at the status's own time: the Replicas plot, with or without metrics.
        self.store.add(status.fetched_at, {
            d.key: replica_counts(d).series()
            for a in status.applications for d in a.deployments})
        return status, session_name, events

    def _poll_metrics(self):
        source = self._source
        if source is None or not self.connection.usable:
            # While the cluster does not answer the plots stop advancing (no fake zeros).
            return None, None, None, None, None
        t, values = source.poll()
        # Pages that change once per report (a cluster on Ray's 10 s default): the values
        # are as of the newest report, stored at its time, once — so the plots' ages
        # say how old the data is, not the poll. A source that follows attention
        # (backend/metrics/attention.py) answers full polls and watch polls (the watched
        # deployments only), each stored once per report on its own.
        as_of = source.data_time()
        full = getattr(source, "last_poll_full", True)
        if self._metrics_as_of[0] is not source:
            self._metrics_as_of = (source, {})
        stored = self._metrics_as_of[1]
        last = stored.get("full" if full else "watch")
        if as_of is None or last is None or as_of > last:
            at = t if as_of is None else as_of
            replicas = source.replica_values()
            watched = stored.get("watch")
            if full and as_of is not None and watched is not None and as_of <= watched:
                # The watched deployments have this report already (a watch poll's).
                seen = self._attention or frozenset()
                values = {k: v for k, v in values.items() if k not in seen}
                replicas = {k: v for k, v in replicas.items() if k[:2] not in seen}
            self.store.add(at, values)  # the store is thread-safe; widgets read snapshots
            self.replica_store.add(at, replicas)
            stored["full" if full else "watch"] = as_of
        # Read here, on the poll thread: the source's lock is held during a poll, and the
        # GUI thread must never wait on it.
        gpus = self.gpus.collect(source, t, self.client, self.status)
        return (source.last_error, source.all_held_models(), source.problems(), gpus,
                source.slow_reports_s())

    def _on_status_result(self, result) -> None:
        status, session_name, events = result
        delay = self.connection.poll_ok(session_name)
        self._set_status_interval(delay)
        self.apply_status(status)
        for e in events:
            self.event.emit(f"{e.app}/{e.deployment}: {e.message}",
                            "warning" if e.kind == "died" else "info")
            self.replica_event.emit(e)

    def apply_status(self, status: ServeStatus) -> None:
        """A fresh Serve status (from a poll or a finished deploy) for every view."""
        self.status = status
        self.gpus.set_status(status)
        self.status_changed.emit(status)

    def _set_status_interval(self, delay_s: float) -> None:
        if self._status_poller is not None:
            self._status_poller.set_interval_ms(int(delay_s * 1000))

    def _on_status_error(self, error: BaseException) -> None:
        text = user_message(error)
        if isinstance(error, RefusedError):
            # It answered before: the address was right, the head is what went away.
            text = (f"The Ray head at {self.client.url if self.client else 'the address'} "
                    f"stopped answering ({error.cause}): it was stopped, or is "
                    "restarting.")
        local = self._local
        if local is not None and not local.running:
            # Say what happened, not what it does to the next request ("refused").
            code = local.exit_code_text()
            text = f"The local Ray cluster has stopped ({code})."
            if not self._local_reported_dead:
                self._local_reported_dead = True
                tail = local.log_tail(12)
                self.event.emit(f"{text} The last lines of its log:\n{tail}", "error")
                self.local_cluster_died.emit(code, tail)
        first = self.connection.lost_since is None
        delay = self.connection.poll_failed(text, timed_out=isinstance(error, AnswerTimeout))
        self._set_status_interval(delay)
        if self.connection.asking_again:
            return  # one timed-out poll: asked again before anything counts as lost
        if self._metrics_problems:
            # A whole cluster gone is not a metrics problem of each of its nodes.
            self._metrics_problems = []
            self.metrics_problems.emit([])
        if first and self.connection.lost_since is not None:  # said once per outage
            self.event.emit(f"Cluster not answering: {text}", "error")
        self.status_failed.emit(text)

    def _on_connection_resumed(self, same: bool, old: str, new: str) -> None:
        self.event.emit(self.connection.message + ".", "info" if same else "warning")
        if same:
            return
        # A restarted head: new metrics ports and counters, no Serve applications.
        self._replace_source(self.metrics_source)
        lost = list(self.deploys.deployed)
        if lost:
            self.event.emit("The restarted cluster lost what this console had deployed: "
                            f"{', '.join(lost)}.", "warning")
            self.redeploy_offered.emit(lost)

    def _on_metrics_result(self, result) -> None:
        last_error, held, problems, gpus, slow_reports_s = result
        if slow_reports_s is not None and self._source_told_slow is not self._source:
            self._source_told_slow = self._source
            self.event.emit(
                f"The cluster's metrics pages change every {slow_reports_s:.0f} s (Ray's "
                "metrics report interval; RAY_metrics_report_interval_ms on its nodes): "
                "rates and latencies are taken over whole reports and move once per "
                "report.", "info")
        if gpus is not None:
            self.gpus.apply(gpus)
        if held is not None and held != self.held_models:
            self.held_models = held
            self.held_models_changed.emit(held)
        if problems is not None and problems != self._metrics_problems \
                and self.connection.usable:
            self._report_problems(problems)
        if self.connection.usable:
            self._on_metrics_state(last_error)

    def _report_problems(self, problems: list) -> None:
        """Say once per source when it starts and stops failing."""
        old = {p.where for p in self._metrics_problems}
        new = {p.where for p in problems}
        for p in problems:
            if p.where not in old:
                self.event.emit(f"Metrics: {p.where} — {p.message}", "warning")
        for where in sorted(old - new):
            self.event.emit(f"Metrics: {where} answers again.", "info")
        self._metrics_problems = list(problems)
        self.metrics_problems.emit(list(problems))

    def _on_metrics_state(self, last_error: str | None, poll_failed: bool = False) -> None:
        """The metrics label's state. Per-source trouble reaches the event log through
        _report_problems; a poll that failed as a whole (*poll_failed*) is said there
        too, and so is the next poll that did not."""
        if poll_failed and last_error != self._metrics_error:
            self.event.emit(f"Metrics: {last_error}", "warning")
        elif not poll_failed and self._metrics_poll_failed:
            self.event.emit("Metrics: polling works again.", "info")
        self._metrics_poll_failed = poll_failed
        if last_error != self._metrics_error:
            self._metrics_error = last_error
            self.metrics_state.emit(last_error or "")

    def _on_metrics_error(self, error: BaseException) -> None:
        self._on_metrics_state(user_message(error), poll_failed=True)

    # -- tuning -------------------------------------------------------------------------------
    def knob_set(self, app: str, deployment: str, status=None) -> KnobSet | None:
        """A deployment's knobs as of *status* (default: the newest status)."""
        status = self.status if status is None else status
        if status is None:
            return None
        return knobs_for(status, app, deployment, self._knob_metadata)

    def knob_values(self, app: str, deployment: str) -> dict:
        ks = self.knob_set(app, deployment)
        return values_of(ks) if ks else {}

    def latest_p99(self, app: str, deployment: str) -> float | None:
        _, values = self.store.snapshot((app, deployment), "latency_p99_ms")
        return float(values[-1]) if len(values) else None
