"""The console's application model: what the console knows and decides, with no widget.

`ConsoleModel` owns the live Session (connection, deploys, load, manual tuning, scaling,
metrics), the advisor, the session recording, the auto-tuner and traffic management
(these two made on first use), and the console's policies:

* the event log (every line the user sees, recorded, printable with --log-events),
* which deployment is selected, and the markers on its time axis (knob changes, replica
  deaths, scaling decisions, notes), each also recorded,
* where load goes (the selected demo's own request, else the selected application's
  route, else the first application with a route),
* what the shown deployment's knobs warn about, its replicas' rows, the model cache,
  and how fresh the autoscaler's metrics are,
* the questions that need a person (a deploy or knob change that does not fit): asked
  through `question` while a view is there to answer, answered "go ahead" otherwise.

Windows are views of it, built from it and nothing else (`MainWindow(model)`): each
dock or panel is handed the part it shows (`connection`, `deploys`, `load`, `gpus`,
`model_info`, `scaling`, `store`, `replica_store`, `knobs`, `advisor`, `recording`), shows
what it says and calls its methods. Whoever has a Session makes the model first,
`ConsoleModel(session, catalog, settings)`. Scripted runs (console/app.py), benchmarks
and tests drive it directly, with or without a window.
It imports no QtWidgets (tests/test_architecture.py checks that).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from psygnal import Signal

from backend.deploy.catalog import Demo
from backend.events import LogEntry, level_of
from backend.load.load_model import ClusterLoad, LoadModel, LoadPlan, LoadTarget
from backend.load.targets import app_target
from backend.model import ServeStatus
from backend.recording.recorder import Marker
from backend.scaling.explain import ScalingDecision
from backend.scaling.replica_table import build_rows, latest_from_store
from backend.tuning.knobs import check_values, values_of
from console.model.advisor import Advisor
from console.model.attention import Attention
from console.model.knob_model import KnobModel
from console.model.live_session import Session
from console.model.session_recording import SessionRecording
from console.settings import Settings

NO_LOAD_TARGET = "No application with an HTTP route to send load to"
MAX_EVENTS = 1000
# The autoscaler's metrics delay counts as current for this long after its last sample.
METRICS_HEALTH_FRESH_S = 15.0

Key = tuple[str, str]


class ConsoleModel:
    #: A line of the event log (backend.events.LogEntry).
    event_added = Signal(object)
    #: A marker on the time axis: (t, short label, detail, kind, (app, deployment) or None).
    marker_added = Signal(float, str, str, str, object)
    #: The selected deployment changed: (app, deployment) or None.
    selection_changed = Signal(object)
    #: The knobs of the selected deployment warn about these (list of messages).
    knob_warnings = Signal(object)
    #: Load was started (True: running) or stopped by the model.
    load_running = Signal(bool)
    #: The rate a start asked for (the load panel shows it before anything is sent).
    load_rate = Signal(float)
    #: Where load comes from changed: None (this machine) or a ClusterLoad.
    load_source_changed = Signal(object)
    #: Requests per model id of the newest load run changed (the model cache view).
    model_cache_changed = Signal()
    #: A question for a person: (kind "deploy" or "tuning", operation id, message).
    #: Answer with answer(kind, op_id, go). Asked only while `interactive` is True.
    question = Signal(str, int, str)

    def __init__(self, session: Session, catalog: dict[str, Demo], settings: Settings) -> None:
        """The model around *session* (a new `Session()`, or one already connected): the
        one way to get a model, and through it a window (`MainWindow(model)`)."""
        #: The live session: the connection, the cluster's status and the metrics source.
        self.session = session
        self.catalog = catalog
        self.settings = settings
        # The session's parts, each what a view shows (its dock or panel is handed it):
        # made once with the session, so the same objects for the model's life.
        self.connection = session.connection      # the connection's state machine
        self.deploys = session.deploys            # demos and config files (Deploy menu)
        self.load = session.load                  # the load generator (Load dock)
        self.gpus = session.gpus                  # the GPU view
        self.model_info = session.model_info      # what demo replicas say of their models
        self.scaling = session.scaling            # the autoscaler's decisions (tree notes)
        self.store = session.store                # the deployments' series (live plots)
        self.replica_store = session.replica_store  # per-replica series (per-replica view)
        #: False for scripted runs: nothing waits for a person (questions go ahead).
        self.interactive = True
        #: True once quitting began: no more questions.
        self.closing = False
        self.events: deque[LogEntry] = deque(maxlen=MAX_EVENTS)
        self.selected: Key | None = None
        #: The deployments in view, for the metrics scrape (console/model/attention.py):
        #: the selection is one part, the window's views the others.
        self.attention = Attention(session.set_attention)
        session.set_attention(frozenset())  # nothing in view yet: every few seconds
        # Requests per model id of the newest load run (the model cache view's bars).
        self.model_ids_sent: dict[str, int] = {}
        #: Where a plain start sends load from: None (this machine) or a ClusterLoad.
        self.load_source: ClusterLoad | None = settings.load_source()
        #: Every knob's state (the one owner): the knob panel's rows are bound to it.
        self.knobs = KnobModel(session.tuning, session.knob_set)
        # Every session is recorded (Session → Sessions… opens them again).
        self.recording = SessionRecording(session)
        self.advisor = Advisor(session, in_view=lambda: self.attention.keys)
        # Made on first use (Tune → Auto-tune…, Traffic…): the console starts without them.
        self._autotune = None
        self._traffic = None
        self._wire()

    def _wire(self) -> None:
        s = self.session
        s.event.connect(self.log)
        s.replica_event.connect(self._on_replica_event)
        s.scaling.decided.connect(self._on_scaling_decided)
        s.tuning.applied.connect(self._on_tuning_applied)
        s.tuning.failed.connect(self._on_tuning_failed)
        s.tuning.findings.connect(self._on_tuning_findings)
        s.tuning.fit_problem.connect(self._on_tuning_fit_problem)
        s.deploys.fit_problem.connect(self._on_deploys_fit_problem)
        s.load.stats.connect(self._on_load_stats)
        s.load.ended.connect(self._on_load_ended)
        s.held_models_changed.connect(self._on_session_held_models_changed)
        s.status_changed.connect(self._on_status_changed)
        s.connected.connect(self._on_session_connected)
        # Bound methods, never lambdas, for the session's signals: psygnal holds a bound
        # method weakly, a lambda strongly (it would keep this model alive as long as the
        # session).

    def _on_load_ended(self) -> None:
        self.load_running.emit(False)

    def _on_session_held_models_changed(self, _held) -> None:
        self.model_cache_changed.emit()

    def _on_session_connected(self, _info) -> None:
        self.session.load.keep_driver_ready(self.load_source is not None, self.load_source)

    # -- the event log --------------------------------------------------------------------
    def log(self, message: str, level: str = "info", t: float | None = None) -> LogEntry:
        """A line of the event log (level "info", "warning" or "error"); recorded."""
        entry = LogEntry(time.time() if t is None else t, level_of(level), str(message))
        self.events.append(entry)
        self.recording.log_event(entry.t, entry.level, entry.message)
        self.event_added.emit(entry)
        return entry

    # -- selection and markers ------------------------------------------------------------
    def select(self, key: Key | None) -> None:
        """Show (app, deployment), or nothing."""
        key = tuple(key) if key is not None else None
        if key == self.selected:
            return
        self.selected = key
        self.attention.set_part("selected", [key] if key is not None else [])
        self.selection_changed.emit(key)
        self.knob_warnings.emit(self.warnings_for_selected())
        self.model_cache_changed.emit()

    def is_shown(self, app: str, deployment: str) -> bool:
        return self.selected == (app, deployment)

    def _where(self, app: str, deployment: str) -> str:
        """A marker's prefix: empty on the deployment it is about, else its name."""
        return "" if self.is_shown(app, deployment) else f"{app}/{deployment}: "

    def add_marker(self, t: float, label: str, detail: str = "", kind: str = "change",
                   key: Key | None = None) -> None:
        app, dep = key if key is not None else (None, None)
        self.recording.marker(Marker(t, label, detail, kind, app, dep))
        self.marker_added.emit(t, label, detail, kind, key)

    def add_note(self, text: str, t: float | None = None) -> None:
        """A user's note at *t* (now): a marker, an event-log line, a recorded note."""
        text = text.strip()
        if not text:
            return
        t = time.time() if t is None else t
        self.add_marker(t, f"✎ {text[:40]}", text, kind="note", key=self.selected)
        self.recording.note(t, text)
        self.log(f"Note: {text}", "info", t)

    def _on_replica_event(self, event) -> None:
        """A replica died or was replaced: a marker at the moment it happened."""
        short = event.replica_id.split("#")[-1]
        text = (f"replica {short} died" if event.kind == "died"
                else f"replacement {short} running after {event.after_s:.1f} s"
                if event.after_s is not None else f"replacement {short} running")
        self.add_marker(event.t, self._where(event.app, event.deployment) + text,
                        kind="replica", key=(event.app, event.deployment))

    def _on_scaling_decided(self, d: ScalingDecision) -> None:
        """An autoscaling (or num_replicas) decision: a marker at the moment Ray took it,
        short on the plot, with Ray's reason as its detail (the event log has the line)."""
        self.add_marker(d.t, f"{self._where(d.app, d.deployment)}{d.direction} {d.old} → "
                        f"{d.new}", d.reason, kind="scaling", key=(d.app, d.deployment))

    # -- deploys ----------------------------------------------------------------------------
    def deploy_demo(self, demo: Demo) -> str:
        """Deploy *demo*; "" when it started, else why not (also in the event log when
        the cluster is not answering)."""
        s = self.session
        if s.client is None:
            return "Connect to a cluster first (Cluster → Connect…)."
        if not s.connection.usable:
            self.log(f"Not deploying {demo.title}: the cluster is not answering.", "warning")
            return "The cluster is not answering."
        s.deploys.deploy(demo)
        return ""

    def cancel_deploy(self) -> str | None:
        """Stop waiting for the selected application's pending deploy (else the newest's)
        and put back what it changed; the application's name, or None when no deploy is
        pending."""
        pending = self.deploys.pending_apps()
        if not pending:
            return None
        key = self.selected
        name = key[0] if key is not None and key[0] in pending else pending[-1]
        self.log(f"Cancelling the deploy of '{name}'…", "warning")
        self.deploys.cancel(name)
        return name

    def _on_deploys_fit_problem(self, op_id: int, what: str, message: str) -> None:
        self._ask("deploy", op_id, message)

    def _on_tuning_fit_problem(self, op_id: int, app: str, deployment: str,
                               message: str) -> None:
        self._ask("tuning", op_id, message)

    def _ask(self, kind: str, op_id: int, message: str) -> None:
        if (not self.interactive or self.closing
                or not len(self.question)):
            # Scripted runs go ahead (the event log says so); --exit-after then reports
            # a deploy still waiting for room as pending.
            self.answer(kind, op_id, True)
            return
        self.question.emit(kind, op_id, message)

    def answer(self, kind: str, op_id: int, go: bool) -> None:
        """The answer to `question`: go ahead anyway, or cancel (nothing is changed)."""
        part = self.session.deploys if kind == "deploy" else self.session.tuning
        part.confirm(op_id, go)

    # -- knobs -------------------------------------------------------------------------------
    def request_change(self, app: str, deployment: str, path: str, value: Any,
                       settled: bool) -> None:
        """A knob moved (by hand); *settled*: the user let go of it (send now)."""
        self.session.tuning.request(app, deployment, path, value, immediate=settled)

    def knob_set_for_selected(self):
        return self.session.knob_set(*self.selected) if self.selected else None

    def knobs_for_selected(self):
        """The selected deployment's knob states (backend.tuning.knob_state.
        DeploymentKnobs), or None."""
        return self.knobs.deployment(*self.selected) if self.selected else None

    def warnings_for_selected(self) -> list[str]:
        knob_set = self.knob_set_for_selected()
        if knob_set is None:
            return []
        findings = check_values(values_of(knob_set), self.session.latest_p99(*self.selected))
        return [f.message for f in findings]

    def _on_tuning_applied(self, app, deployment, changes, t) -> None:
        text = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in changes.items())
        self.add_marker(t, self._where(app, deployment) + text, key=(app, deployment))
        self.log(f"Applied to {app}/{deployment}: {text}", "info", t)
        if self.is_shown(app, deployment):
            self.knob_warnings.emit(self.warnings_for_selected())

    def _on_tuning_failed(self, app, deployment, changes, reason) -> None:
        text = ", ".join(f"{p.split('.')[-1]}={v}" for p, v in changes.items())
        self.log(f"Change to {app}/{deployment} ({text}) failed: {reason}", "error")

    def _on_tuning_findings(self, app, deployment, findings) -> None:
        for f in findings:
            self.log(f"{app}/{deployment}: {f.message}",
                     "error" if f.severity == "error" else "warning")
        if self.is_shown(app, deployment):
            self.knob_warnings.emit([f.message for f in findings])

    # -- status ------------------------------------------------------------------------------
    def _on_status_changed(self, status: ServeStatus) -> None:
        if self.selected is None and status.applications:
            # Show something useful without a click: the first deployment.
            app = status.applications[0]
            if app.deployments:
                self.select((app.name, app.deployments[0].name))
        self.knobs.cluster_reports(self.selected)

    def metrics_health(self, status: ServeStatus) -> dict:
        """The autoscaler's metrics delay of each autoscaling deployment, if fresh."""
        now, health = time.time(), {}
        for a in status.applications:
            for d in a.deployments:
                newest = self.session.store.latest(d.key, "autoscaler_metrics_delay_p99_ms")
                if newest is not None and now - newest[0] <= METRICS_HEALTH_FRESH_S \
                        and d.config.get("autoscaling_config"):
                    health[d.key] = newest[1]
        return health

    def replica_rows(self) -> list | None:
        """The selected deployment's replica rows; None when nothing is selected or the
        cluster does not know it."""
        key, status = self.selected, self.session.status
        dep = status.deployment(*key) if key is not None and status is not None else None
        if dep is None:
            return None
        latest = latest_from_store(self.session.replica_store, key)
        return build_rows(dep, latest, self.session.held_models.get(key))

    def model_cache(self) -> tuple[dict | None, dict | None]:
        """(which model ids the selected deployment's replicas hold, the model ids the
        load sends when that load goes to the same application)."""
        key = self.selected
        if key is None:
            return None, None
        requested = self.model_ids_sent if self.session.load.app == key[0] else None
        return self.session.held_models.get(key), requested

    # -- load ----------------------------------------------------------------------------------
    def _on_load_stats(self, stats) -> None:
        if stats.model_ids_sent or self.model_ids_sent:
            self.model_ids_sent = dict(stats.model_ids_sent)
            self.model_cache_changed.emit()

    def selected_demo(self) -> Demo | None:
        key, status = self.selected, self.session.status
        if key is None or status is None:
            # Nothing selected yet: the first deployed demo is the natural target.
            for demo in self.catalog.values():
                if status is not None and status.application(demo.app_name):
                    return demo
            return None
        return next((d for d in self.catalog.values() if d.app_name == key[0]), None)

    def app_presets(self) -> list[tuple[str, str, LoadTarget]]:
        """(application, label, request) for every application with an HTTP route: a
        bundled demo's own payload, else GET on the route (backend.load.targets)."""
        status, base = self.session.status, self.session.load.serve_http_base()
        if status is None or base is None:
            return []
        presets = []
        for app in status.applications:
            demo = next((d for d in self.catalog.values() if d.app_name == app.name), None)
            target = self.session.load.target_for(demo) if demo is not None else None
            if target is not None:
                presets.append((app.name, f"{demo.title} ({app.name})", target))
                continue
            target = app_target(status, base, app.name)  # GET on its route
            if target is not None:
                presets.append((app.name, f"{app.name} {app.route_prefix}", target))
        return presets

    def load_target(self) -> tuple[LoadTarget | None, list[tuple[str, str, LoadTarget]]]:
        """Where a plain start sends load: the selected demo's own request, else the
        selected application's route, else the first application with a route (demos
        first); and every preset."""
        presets = self.app_presets()
        demo = self.selected_demo()
        target = self.session.load.target_for(demo) if demo else None
        if target is not None:
            return target, presets
        key = self.selected
        chosen = next((t for app, _, t in presets if key is not None and app == key[0]),
                      None)
        return chosen or (presets[0][2] if presets else None), presets

    def start_load(self, rps: float) -> bool:
        """Send open-loop load at *rps* to the selected application (a demo with its own
        request; any other application with GET on its route). False when there is
        nothing to send it to."""
        target, _ = self.load_target()
        if target is None:
            self.log(f"{NO_LOAD_TARGET}.", "warning")
            self.load_running.emit(False)
            return False
        self.settings.set_load_rps(rps)
        self.load_rate.emit(rps)  # before running: shows the rate, sends nothing
        if self.load_source is not None:
            self.session.load.start_plan(LoadPlan(target, LoadModel(rate=rps),
                                                  self.load_source))
        else:
            self.session.load.start(target, rps)
        self.load_running.emit(self.session.load.running)
        return True

    def start_plan(self, plan: LoadPlan) -> None:
        self.settings.set_load_rps(plan.model.rate)
        if plan.source != self.load_source:
            self.set_load_source(plan.source)
        self.session.load.start_plan(plan)
        self.load_running.emit(self.session.load.running)

    def set_load_source(self, source: ClusterLoad | None, persist: bool = True) -> None:
        """Where load comes from next time it starts: None (this machine) or workers on
        the cluster. *persist*: remembered for the next console (not for --load-from-
        cluster, which is this run's only)."""
        self.load_source = source
        if persist:
            self.settings.set_load_source(source)
        self.session.load.keep_driver_ready(source is not None, source)
        self.load_source_changed.emit(source)

    def set_rate(self, rps: float) -> None:
        self.settings.set_load_rps(rps)
        self.session.load.set_rate(rps)

    def stop_load(self) -> None:
        self.session.load.stop()
        self.load_running.emit(False)

    # -- auto-tune and traffic (made on first use) -------------------------------------------
    @property
    def autotune(self):
        """The auto-tuner (console.model.autotune.AutoTuneController)."""
        if self._autotune is None:
            from console.model.autotune import AutoTuneController
            s = self.session
            self._autotune = AutoTuneController(
                client=s.client_if_usable, info=lambda: s.info, knob_values=s.knob_values,
                store=s.store, tuning=s.tuning, runner=s.action_runner, event=self.log,
                demos=self.catalog.values())
        return self._autotune

    @property
    def traffic(self):
        """Traffic management (console.model.traffic.TrafficController)."""
        if self._traffic is None:
            from console.model.traffic import TrafficController
            s = self.session
            self._traffic = TrafficController(
                client=s.client_if_usable, status=lambda: s.status, store=s.store,
                tuning=s.tuning, event=self.log)
            s.status_changed.connect(self._traffic.refresh)
            s.load.stats.connect(self._traffic.on_load_stats)
            self._traffic.refresh()
        return self._traffic

    # -- the end -----------------------------------------------------------------------------
    def close(self) -> None:
        """Quitting: no more questions; a running auto-tune or rollout puts the starting
        config back first (bounded wait: never leave a trial's config on the cluster); the
        advisor stops, and what the recording has queued reaches its file (the session's
        stores let go of it)."""
        self.closing = True
        for part in (self._autotune, self._traffic):
            if part is not None:
                part.shutdown()
        self.advisor.stop()
        self.recording.detach()
