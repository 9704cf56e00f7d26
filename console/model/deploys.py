"""Putting applications on the cluster: demos and config files, with a pre-flight check,
a wait that only the user (or quitting) ends, and Cancel that puts back what was there.

Each deploy runs in two steps on a worker thread:

1. prepare — everything that leaves the cluster untouched: build the application
   configs (upload the demo package), compare what they need with the cluster's free
   resources. When they will not fit, the GUI is asked (`fit_problem`) whether to deploy
   anyway (the replicas then wait for room) or to cancel.
2. apply — one read–modify–write PUT, then wait for RUNNING. Unschedulable replicas are
   a full cluster's normal state: the wait has no deadline, its progress says Ray's
   reason, and `cancel()` ends it and restores what the PUT replaced (or removes what it
   added), touching nothing else.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from psygnal import Signal

from backend.cancel import Cancelled
from backend.cluster.client import ClusterClient
from backend.cluster.local import LocalCluster
from backend.deploy.catalog import Demo
from backend.deploy.config_io import export_application, parse_config, read_config_file
from backend.deploy.deployer import (demo_app_config, put_applications, restore_applications,
                                     wait_for_app)
from backend.errors import ConsoleError
from backend.model import ServeStatus
from backend.preflight.common import PreflightError
from backend.preflight.env_probe import (CheckedNodes, alive_nodes, missing_modules_message,
                                         probe_python_env)
from backend.preflight.fit import check_fit
from console.model.connection import ConnectionMonitor
from console.model.operations import Operation, Operations
from console.model.tasks import TaskRunner, user_message
from console.model import gui_calls

# What the demos import on the cluster (demo_apps/*.py), checked before the first deploy.
DEMO_MODULES = ["torch", "numpy", "starlette"]
USER_CANCEL = "cancelled by the user"


@dataclasses.dataclass
class _Plan:
    """A prepared deploy: the application configs and the pre-flight's verdict."""

    apps: list[dict[str, Any]]
    fits: bool = True
    fit_message: str = ""
    demo: Demo | None = None


class DeployController:
    progress = Signal(str)
    # (ok, application name or file, message)
    finished = Signal(bool, str, str)
    # The plan will not fit: (operation id, what, message). Answer with confirm(id, go).
    fit_problem = Signal(int, str, str)
    config_file_done = Signal(bool, str)  # ok, message (export / import)
    import_started = Signal(str)  # path of a config file about to be applied

    def __init__(self, *, client: Callable[[], ClusterClient | None],
                 local_cluster: Callable[[], LocalCluster | None],
                 connection: ConnectionMonitor, operations: Operations,
                 runner: TaskRunner, event: Callable[[str, str], None],
                 apply_status: Callable[[ServeStatus], None]) -> None:
        """*client* and *local_cluster* are read at each use (a reconnect replaces them);
        *connection* says whether the cluster answers and which cluster session it is;
        *event* takes (message, level) for the event log; *apply_status* hands a status a
        deploy waited for to whoever shows statuses."""
        self._client, self._local = client, local_cluster
        self._connection, self._ops, self._runner = connection, operations, runner
        self._event, self._apply_status = event, apply_status
        self._awaiting: dict[int, tuple[Operation, _Plan]] = {}
        #: What this console put on the current cluster, by application name: a Demo, or
        #: the app config of an imported file. Offered for redeploy after a head restart.
        self.deployed: dict[str, Demo | dict[str, Any]] = {}
        #: Applications deployed although the pre-flight said they do not fit: the
        #: pre-flight's words, shown in their tree rows until Ray says why itself.
        self.waiting_for_room: dict[str, str] = {}
        # (cluster session, runtime_env) whose Python was found to have DEMO_MODULES.
        self._python_ok = CheckedNodes()

    # -- entry points ---------------------------------------------------------------------
    def deploy(self, demo: Demo) -> None:
        if reason := self._unusable():
            self.finished.emit(False, demo.app_name, reason)
            return
        client, local = self._client(), self._local()

        def prepare(op: Operation) -> _Plan:
            app = demo_app_config(client, demo, lambda t: self._progress(op, t))
            self._check_python(client, op, app)
            return self._preflight(client, op, [app], demo=demo)

        http_new = None
        if local is not None:
            # This console started the cluster, so it picks the Serve port (free, not 8000).
            http_new = {"host": "127.0.0.1", "port": local.serve_http_port}
        self._event(f"Deploying demo '{demo.title}'…", "info")
        self._start("deploy", demo.app_name, prepare, http_new)

    def import_config(self, path: str) -> None:
        if reason := self._unusable():
            self.config_file_done.emit(False, reason)
            return
        client = self._client()

        def prepare(op: Operation) -> _Plan:
            doc = parse_config(read_config_file(path), path)
            return self._preflight(client, op, doc["applications"])

        self._event(f"Applying config file {path}…", "info")
        self.import_started.emit(path)
        self._start("import", path, prepare, None)

    def export_config(self, app: str, path: str) -> None:
        client = self._client()
        if client is None:
            self.config_file_done.emit(False, "Not connected to a cluster.")
            return

        def work():
            text = export_application(client.serve_details(), app)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return f"Exported '{app}' to {path}."

        self._runner.submit(work, on_done=self._on_config_file_ok,
                                     on_error=self._on_config_file_error)

    def confirm(self, op_id: int, go: bool) -> None:
        """The user's answer to `fit_problem`: deploy anyway (it will wait) or cancel."""
        entry = self._awaiting.pop(op_id, None)
        if entry is None:
            return
        op, plan = entry
        if go:
            self._event(f"{op.name}: deploying anyway; its replicas will wait until "
                               "the cluster has room (Cancel deploy removes it).", "warning")
            for name in op.meta.get("apps", ()):
                self.waiting_for_room[name] = f"waiting for room: {plan.fit_message}"
            self._apply(op, plan)
        else:
            self._finish(op, False, "Cancelled: nothing was changed on the cluster.")

    def cancel(self, name: str) -> bool:
        """Cancel the deploy (or import) of *name*: stop waiting and put back what the
        console changed. Returns False when nothing of that name is in flight."""
        for op in self._ops.pending():
            if op.kind in ("deploy", "import") and (op.name == name or name in op.meta.get(
                    "apps", ())):
                if op.id in self._awaiting:
                    self.confirm(op.id, False)
                else:
                    op.token.cancel(USER_CANCEL)
                return True
        return False

    def pending_apps(self) -> list[str]:
        """Applications a deploy of this console is still waiting for, oldest first."""
        return [name for op in self._ops.pending() if op.kind in ("deploy", "import")
                for name in op.meta.get("apps", ())]

    # -- the two steps ------------------------------------------------------------------------
    def _unusable(self) -> str:
        """Why nothing may be deployed now ("" when it may)."""
        if self._client() is None:
            return "Not connected to a cluster."
        if not self._connection.usable:
            return "The cluster is not answering; wait until it is back."
        return ""

    def _preflight(self, client, op: Operation, apps: list[dict[str, Any]],
                   demo: Demo | None = None) -> _Plan:
        op.meta["apps"] = [a["name"] for a in apps]
        op.token.check()
        self._progress(op, "Checking that the cluster has room…")
        report = check_fit(client, apps)
        return _Plan(apps=apps, fits=report.fits, fit_message=report.message, demo=demo)

    def _check_python(self, client, op: Operation, app: dict[str, Any]) -> None:
        """Before a demo's first deploy on a cluster session, and again once a node has
        joined since: can the cluster's Python import what the demos need? (A Ray
        without numpy otherwise fails the deploy with a traceback.) A probe that cannot
        decide only warns."""
        env = app.get("runtime_env")
        alive = list(alive_nodes(client))
        if not self._python_ok.unchecked(self._connection.session_name, env, alive):
            return
        self._progress(op, f"Checking that the cluster's Python has "
                           f"{', '.join(DEMO_MODULES)}…")
        try:
            probe = probe_python_env(client, DEMO_MODULES, env, op.token, timeout_s=60)
        except PreflightError as e:
            self._event(f"Could not check the cluster's Python ({e}); deploying "
                               "anyway.", "warning")
            return
        if probe.missing:
            raise ConsoleError(missing_modules_message(
                list(probe.missing), app["name"], probe.missing_where(),
                nodes=1 + len(probe.nodes)))
        for node, why in probe.unchecked().items():
            self._event(f"Could not check the Python of {node} ({why}); deploying "
                        "anyway.", "warning")
        self._python_ok.remember(self._connection.session_name, env, alive)

    def _start(self, kind: str, name: str, prepare: Callable[[Operation], _Plan],
               http_new: dict | None) -> None:
        op = self._ops.start(kind, name, http_new=http_new)
        self._runner.submit(
            prepare, op, on_done=lambda plan: self._on_prepared(op, plan),
            on_error=lambda e: self._on_failed(op, e))

    def _on_prepared(self, op: Operation, plan: _Plan) -> None:
        if op.token.cancelled:
            self._finish(op, False, "Cancelled: nothing was changed on the cluster.")
            return
        if not plan.fits:
            self._event(f"{op.name}: {plan.fit_message}", "warning")
            self._awaiting[op.id] = (op, plan)
            self._ops.progress(op, "waiting for an answer: " + plan.fit_message)
            self.fit_problem.emit(op.id, op.name, plan.fit_message)
            return
        self._apply(op, plan)

    def _apply(self, op: Operation, plan: _Plan) -> None:
        client = self._client()
        if client is None:
            self._finish(op, False, "Not connected to a cluster.")
            return
        for app in plan.apps:
            self.deployed[app["name"]] = plan.demo if plan.demo is not None else app

        def work():
            prior = put_applications(client, plan.apps,
                                     http_options_if_new=op.meta.get("http_new"),
                                     cancel=op.token)
            op.meta["prior"] = prior
            status = None
            for app in plan.apps:
                status = wait_for_app(client, app["name"], timeout_s=None, cancel=op.token,
                                      progress=lambda t: self._progress(op, t))
            return status

        self._runner.submit(work, on_done=lambda st: self._on_applied(op, st),
                                     on_error=lambda e: self._on_failed(op, e))

    def _on_applied(self, op: Operation, status) -> None:
        if status is not None:
            self._apply_status(status)
        names = ", ".join(op.meta.get("apps", ()))
        self._finish(op, True, "RUNNING" if op.kind == "deploy"
                     else f"Applied {op.name}: {names} RUNNING.")

    def _on_failed(self, op: Operation, error: BaseException) -> None:
        cancelled = isinstance(error, Cancelled)
        if (cancelled and "prior" in op.meta and op.token.reason == USER_CANCEL
                and self._client() is not None):
            self._restore(op)
            return
        if "prior" not in op.meta:  # the cluster was not changed
            for name in op.meta.get("apps", ()):
                self.deployed.pop(name, None)
        self._finish(op, False, f"Cancelled ({op.token.reason})." if cancelled
                     else user_message(error))

    def _restore(self, op: Operation) -> None:
        """After Cancel: put back what the deploy replaced, remove what it added."""
        client, prior = self._client(), op.meta["prior"]
        self._progress(op, "Cancelling: restoring the cluster's previous config…")

        def done(names):
            for name in op.meta.get("apps", ()):
                self.deployed.pop(name, None)
            what = ", ".join(f"'{n}' {'restored' if prior.get(n) else 'removed'}"
                             for n in names) or "nothing to undo"
            self._finish(op, False, f"Cancelled: {what}; nothing else was touched.")

        self._runner.submit(restore_applications, client, prior, on_done=done,
                                     on_error=lambda e: self._finish(
                                         op, False, "Cancelled, but restoring the previous "
                                         f"config failed: {user_message(e)}"))

    # -- reporting ------------------------------------------------------------------------------
    def _progress(self, op: Operation, text: str) -> None:
        """From any thread: the newest line of an operation (queued to the GUI)."""
        self._ops.progress(op, text)
        gui_calls.now_or_post(self.progress.emit, text)

    def _finish(self, op: Operation, ok: bool, message: str) -> None:
        self._ops.finish(op)
        for name in op.meta.get("apps", ()):
            self.waiting_for_room.pop(name, None)
        self._awaiting.pop(op.id, None)
        if op.kind == "deploy":
            level = "info" if ok else ("warning" if message.startswith("Cancelled") else
                                       "error")
            text = (f"'{op.name}' is RUNNING." if ok
                    else f"Deploying '{op.name}': {message}" if level == "warning"
                    else f"Deploying '{op.name}' failed: {message}")
            self._event(text, level)
            self.finished.emit(ok, op.name, message)
        elif ok:
            self._on_config_file_ok(message)
        else:
            self._on_config_file_error(ConsoleError(message))

    def _on_config_file_ok(self, message: str) -> None:
        self._event(message, "info")
        self.config_file_done.emit(True, message)

    def _on_config_file_error(self, error: BaseException) -> None:
        text = user_message(error)
        self._event(text, "error")
        self.config_file_done.emit(False, text)

    # -- after a head restart -----------------------------------------------------------------------
    def redeploy(self, names: list[str]) -> None:
        """Deploy again what this console had deployed (a restarted head lost it)."""
        for name in names:
            item = self.deployed.get(name)
            if isinstance(item, Demo):
                self.deploy(item)
            elif isinstance(item, dict):
                self._redeploy_app(item)

    def _redeploy_app(self, app: dict[str, Any]) -> None:
        client = self._client()

        def prepare(op: Operation) -> _Plan:
            return self._preflight(client, op, [app])

        self._start("deploy", app["name"], prepare, None)

