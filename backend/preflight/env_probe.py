"""Can the cluster's Python import an application's code: a short job through the
dashboard (`POST /api/jobs/`) that tries each module and prints what it found.

Ray schedules the job's JobSupervisor actor with num_cpus=0 on the head node
(`JobManager.submit_job`, ray/dashboard/modules/job/job_manager.py), so the probe runs on a
cluster whose every CPU is taken. On a cluster of more than one node the job then asks
every other alive node the same, with a 0-CPU task pinned to it (the job's runtime_env
applies there too): a replica can land on any node, and a node set up apart from the
head (another image, a package missing) fails its replicas while the head's Python
looks fine. A node that does not answer within NODE_WAIT_S is said as not checked.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from backend.cancel import CancelToken
from backend.cluster.client import ClusterClient
from backend.errors import ConsoleError
from backend.preflight.common import PreflightError
from backend.preflight.common import error_line as _error_line
from backend.preflight.common import names as _names

_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PROBE_MARK = "SERVE_CONSOLE_PROBE "
_TERMINAL_JOB = ("SUCCEEDED", "FAILED", "STOPPED")
NODE_WAIT_S = 30  # the other nodes' answers, once the job runs (a runtime_env's pip
                  # install on each node can take longer: then "not checked")
HEAD = "the head node"

# -- the cluster's Python -----------------------------------------------------------------

@dataclass(frozen=True)
class EnvProbe:
    missing: tuple[str, ...]              # cannot be imported (absent or broken)
    errors: dict[str, str]                # module → import error, for those not simply absent
    python: str                           # the interpreter the probe ran in (head node)
    python_version: str
    ray_version: str | None
    seconds: float                        # submit → result
    node_id: str | None = None
    #: The other alive nodes' answers, by node id: {"ip", "python", "missing", "errors"},
    #: or {"error": why it was not checked}. Empty on a one-node cluster.
    nodes: dict = field(default_factory=dict)
    #: What the head's Python lacks, when other nodes answered too (else `missing`).
    head_missing: tuple[str, ...] | None = None

    def missing_where(self) -> dict[str, tuple[str, ...]]:
        """Module → the nodes that cannot import it (HEAD, or "node IP (id…)")."""
        out: dict[str, list[str]] = {m: [HEAD] for m in self.missing_on_head}
        for nid, answer in self.nodes.items():
            for m in answer.get("missing") or ():
                out.setdefault(m, []).append(node_label(nid, answer.get("ip")))
        return {m: tuple(where) for m, where in out.items()}

    def unchecked(self) -> dict[str, str]:
        """The nodes whose Python could not be checked: label → why."""
        return {node_label(nid, a.get("ip")): str(a["error"])
                for nid, a in self.nodes.items() if a.get("error")}

    @property
    def missing_on_head(self) -> tuple[str, ...]:
        return self.head_missing if self.head_missing is not None else self.missing


def node_label(node_id: str, ip: str | None) -> str:
    return f"node {ip or '?'} ({node_id[:8]})"


# The job's shell runs `python` from the head node's PATH, which need not be the Python
# Ray's workers run (a Ray installed in a virtualenv and started by its full path: the
# console's own local cluster is one). The JobSupervisor that starts the shell is a Ray
# worker: a runtime_env with pip/uv/conda activates its env (VIRTUAL_ENV/CONDA_PREFIX set,
# its python first on PATH); otherwise the worker is what the raylet's
# --python_worker_command names, and the raylet is the supervisor's parent.
# The raylet also names its own cluster's GCS (--gcs-address), which the probe's driver
# joins (SERVE_CONSOLE_PROBE_GCS): Ray's JobSupervisor sets the driver's RAY_ADDRESS from
# the cluster started last on this machine (its ray_current_cluster file), not from its
# own, and on a machine running two clusters the driver knocked on the other one's GCS.
_FROM_RAYLET = (
    'PY=$(command -v python || command -v python3 || echo python); GCS=; '
    'if [ -r /proc/$PPID/status ]; then '
    "RL=$(awk '/^PPid:/{print $2}' /proc/$PPID/status); "
    "ARGS=$(tr '\\000' '\\n' < /proc/$RL/cmdline 2>/dev/null); "
    "GCS=$(printf '%s\\n' \"$ARGS\" | sed -n 's/^--gcs-address=//p' | head -n 1); "
    'if [ -z "${VIRTUAL_ENV:-}${CONDA_PREFIX:-}" ]; then '
    "W=$(printf '%s\\n' \"$ARGS\" | sed -n 's/^--python_worker_command=\\([^ ]*\\).*/\\1/p'); "
    'if [ -n "$W" ] && [ -x "$W" ]; then PY=$W; fi; fi; fi; '
    'export SERVE_CONSOLE_PROBE_GCS="$GCS"; '
)

_PROBE_CODE = """\
import importlib, importlib.metadata as md, json, sys
def try_imports(mods):
    import importlib, sys
    out = {"python": sys.executable, "missing": [], "errors": {}}
    for m in mods:
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:
            out["missing"].append(m)
            if e.name and not (m == e.name or m.startswith(e.name + ".")):
                out["errors"][m] = "%s: %s" % (type(e).__name__, e)
        except BaseException as e:
            out["missing"].append(m)
            out["errors"][m] = "%s: %s" % (type(e).__name__, e)
    return out
def why(e):
    # The exception's first line, and the last lines of its cause (ray.init's
    # ConnectionError says only "Failed to connect"; its cause says why).
    text = ("%s: %s" % (type(e).__name__, e)).splitlines()[0]
    if e.__cause__ is not None:
        lines = [l for l in str(e.__cause__).splitlines() if l.strip()]
        text += " (%s: %s)" % (type(e.__cause__).__name__, " | ".join(lines[-3:]))
    return text[:1500]
r = try_imports(MODULES)
r["version"] = sys.version.split()[0]
try:
    r["ray"] = md.version("ray")
except Exception:
    r["ray"] = None
if NODES:
    r["nodes"] = {}
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        import os
        ray.init(address=os.environ.get("SERVE_CONSOLE_PROBE_GCS") or None,
                 logging_level="ERROR", log_to_driver=False)
        here = ray.get_runtime_context().get_node_id()
        def on_node(mods):
            import ray
            out = try_imports(mods)
            try:
                out["ip"] = ray.util.get_node_ip_address()
            except Exception:
                out["ip"] = None
            return out
        task = ray.remote(num_cpus=0, max_retries=0)(on_node)
        refs = {n: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            n, soft=False)).remote(MODULES) for n in NODES if n != here}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=WAIT_S)
        for n, ref in refs.items():
            if ref not in ready:
                r["nodes"][n] = {"error": "no answer within %d s" % WAIT_S}
                continue
            try:
                r["nodes"][n] = ray.get(ref)
            except Exception as e:
                r["nodes"][n] = {"error": why(e)}
    except BaseException as e:
        r["nodes_error"] = why(e)
print(MARK + json.dumps(r), flush=True)
"""


def probe_entrypoint(modules: Iterable[str], nodes: Iterable[str] = ()) -> str:
    """The job's shell command: pick the workers' Python, import *modules*, ask each of
    *nodes* (node ids; the job's own node is skipped) the same, print one marked JSON
    line."""
    mods = list(modules)
    bad = [m for m in mods if not isinstance(m, str) or not _MODULE_RE.match(m)]
    if bad:
        raise ValueError(f"Not module names: {', '.join(map(repr, bad))}")
    ids = [n for n in nodes if isinstance(n, str) and re.fullmatch(r"[0-9a-fA-F]+", n)]
    code = (f"MODULES = {json.dumps(mods)}\nMARK = {json.dumps(_PROBE_MARK)}\n"
            f"NODES = {json.dumps(ids)}\nWAIT_S = {NODE_WAIT_S}\n" + _PROBE_CODE)
    return _FROM_RAYLET + 'exec "$PY" -c ' + shlex.quote(code)


class CheckedNodes:
    """The nodes whose Python a probe found fit, per cluster session and runtime_env: a
    deploy probes again only when an alive node has not been checked (one that joined
    since), so a node added to a running cluster is never taken on the others' word."""

    def __init__(self) -> None:
        self._ok: dict[tuple[str, str], set[str]] = {}

    @staticmethod
    def _key(session: str | None, runtime_env: dict[str, Any] | None) -> tuple[str, str]:
        return (session or "", json.dumps(runtime_env or {}, sort_keys=True))

    def unchecked(self, session: str | None, runtime_env: dict[str, Any] | None,
                  alive: list[str]) -> list[str]:
        """Of *alive* (node ids), those not yet checked; every node when none has been
        (also when the dashboard could not list them: *alive* empty)."""
        checked = self._ok.get(self._key(session, runtime_env))
        if checked is None:
            return list(alive) or ["?"]
        return [n for n in alive if n not in checked]

    def remember(self, session: str | None, runtime_env: dict[str, Any] | None,
                 alive: list[str]) -> None:
        """The probe found the Python of *alive* fit."""
        self._ok.setdefault(self._key(session, runtime_env), set()).update(alive)


def alive_nodes(client: ClusterClient) -> dict[str, str | None]:
    """{node id: its address} of the nodes whose raylet is alive, as the dashboard
    lists them ({} when it cannot say)."""
    try:
        summary = client.node_summary()
    except ConsoleError:
        return {}
    return {r["nodeId"]: r.get("nodeManagerAddress")
            for r in ((n.get("raylet") or {}) for n in summary)
            if r.get("state", "ALIVE") == "ALIVE" and isinstance(r.get("nodeId"), str)}


def probe_python_env(client: ClusterClient, modules: list[str],
                     runtime_env: dict[str, Any] | None, cancel: CancelToken,
                     timeout_s: float = 60.0, poll_s: float = 0.25,
                     nodes: list[str] | None = None) -> EnvProbe:
    """Run the import probe as a Ray job with *runtime_env* (the application's: its pip
    packages are installed for the probe as for the replicas) and return what it found.

    *nodes*: the alive nodes' ids (read from the dashboard when None); with more than
    one, every node is asked (the module's docstring).

    Raises Cancelled (the job is stopped and deleted), PreflightError on a timeout, a
    runtime_env that cannot be set up, or a probe that did not run in Ray's Python."""
    addresses: dict[str, str | None] = {}
    if nodes is None:
        addresses = alive_nodes(client)
        nodes = list(addresses)
    entry = probe_entrypoint(modules, nodes if len(nodes) > 1 else ())
    started = time.monotonic()
    cancel.check()
    sid = client.submit_job(entry, runtime_env=runtime_env or None,
                            submission_id=f"serve-console-probe-{secrets.token_hex(4)}",
                            metadata={"serve-console": "python-env probe"})
    info: dict[str, Any] = {}
    try:
        deadline = started + timeout_s
        while True:
            info = client.job_info(sid)
            if info.get("status") in _TERMINAL_JOB:
                break
            if time.monotonic() > deadline:
                raise PreflightError(
                    f"The Python-environment probe did not finish within {timeout_s:.0f} s "
                    f"(job {sid}: {info.get('status')}; {info.get('message') or ''}). "
                    "A runtime_env with pip packages can take minutes to install.")
            cancel.sleep(poll_s)
        logs = client.job_logs(sid)
    except BaseException:
        _discard_job(client, sid, stop=True)
        raise
    seconds = time.monotonic() - started
    _discard_job(client, sid, stop=False)
    result = _probe_result(logs)
    if result is None:
        kind = info.get("error_type") or ""
        msg = (info.get("message") or "").strip()
        if kind == "RUNTIME_ENV_SETUP_FAILURE" or "runtime_env" in msg.lower():
            raise PreflightError(f"The application's runtime_env cannot be set up on the "
                                 f"cluster: {_error_line(msg)}")
        raise PreflightError(
            f"The Python-environment probe failed ({info.get('status')}): "
            f"{_error_line(msg) or _error_line(logs)}")
    if not result.get("ray"):
        raise PreflightError(
            f"The probe ran in {result.get('python')}, a Python without Ray: not the one "
            "the cluster's workers run, so it cannot tell what the replicas can import.")
    head_missing = tuple(result.get("missing") or ())
    answers = {str(k): dict(v) for k, v in (result.get("nodes") or {}).items()
               if isinstance(v, dict)}
    for nid, a in answers.items():  # named as the dashboard lists the node
        a["ip"] = addresses.get(nid) or a.get("ip")
    if result.get("nodes_error"):
        answers = {n: {"error": f"the probe could not reach it "
                                f"({result['nodes_error']})", "ip": addresses.get(n)}
                   for n in nodes if n != info.get("driver_node_id")}
    errors = dict(result.get("errors") or {})
    for a in answers.values():
        for m, e in (a.get("errors") or {}).items():
            errors.setdefault(m, e)
    on_nodes = {m for a in answers.values() for m in (a.get("missing") or ())}
    missing = tuple(m for m in modules if m in head_missing or m in on_nodes)
    return EnvProbe(missing=missing, errors=errors,
                    python=str(result.get("python")),
                    python_version=str(result.get("version")),
                    ray_version=result.get("ray"), seconds=seconds,
                    node_id=info.get("driver_node_id"), nodes=answers,
                    head_missing=head_missing if answers else None)


def missing_modules_message(missing: list[str], app_name: str,
                            where: dict[str, tuple[str, ...]] | None = None,
                            nodes: int = 1) -> str:
    """What to do about modules the cluster lacks, in one paragraph; *where* (module →
    the nodes lacking it, EnvProbe.missing_where) names the nodes when not all of the
    cluster's *nodes* lack them."""
    if not missing:
        return ""
    pkgs = sorted({_pip_name(m) for m in missing})
    names = _names(missing, quote=False)
    on = ""
    if where and nodes > 1:
        lacking = sorted({n for m in missing for n in where.get(m, ())},
                         key=lambda n: (n != HEAD, n))
        if len(lacking) < nodes:
            on = f" on {', '.join(lacking)} ({len(lacking)} of {nodes} nodes)"
    return (f"'{app_name}' cannot start: the cluster's Python lacks {names}{on}. Install "
            f"{'it' if len(pkgs) == 1 else 'them'} on every node "
            f"(pip install {' '.join(pkgs)}), or add {'it' if len(pkgs) == 1 else 'them'} "
            f"to the application's runtime_env: {{'pip': {pkgs!r}}}.")


# Import names whose pip package is named differently (the common ones).
_PIP_NAMES = {"cv2": "opencv-python", "PIL": "pillow", "sklearn": "scikit-learn",
              "yaml": "pyyaml", "skimage": "scikit-image", "bs4": "beautifulsoup4"}


def _pip_name(module: str) -> str:
    top = module.split(".")[0]
    return _PIP_NAMES.get(top, top)


def _discard_job(client: ClusterClient, sid: str, stop: bool) -> None:
    """Stop (if asked) and, on a daemon thread, delete the probe job, best effort.

    Not at once: Ray deletes only an ended job, a stopped one takes up to ~2 s to end,
    and Ray 2.60's job monitor (JobManager._monitor_job_internal, a 1 s loop) writes
    FAILED "Job supervisor actor died" over a job deleted before it noticed the
    supervisor exit — the deleted job comes back. So: wait for the end, let the monitor
    settle, delete, and delete again if it came back."""
    if stop:
        try:
            client.stop_job(sid)
        except ConsoleError:
            pass
    threading.Thread(target=_delete_when_ended, args=(client, sid), daemon=True,
                     name=f"delete {sid}").start()


def _delete_when_ended(client: ClusterClient, sid: str, within_s: float = 30.0,
                       settle_s: float = 3.0) -> None:
    deadline = time.monotonic() + within_s
    try:
        while (client.job_info(sid).get("status") or "") not in _TERMINAL_JOB:
            if time.monotonic() > deadline:
                return
            time.sleep(0.25)
        for _ in range(3):
            time.sleep(settle_s)
            client.delete_job(sid)
            time.sleep(settle_s)
            client.job_info(sid)      # ApiError 404: gone for good
    except ConsoleError:
        pass


def _probe_result(logs: str) -> dict[str, Any] | None:
    for line in reversed(logs.splitlines()):
        if line.startswith(_PROBE_MARK):
            try:
                return json.loads(line[len(_PROBE_MARK):])
            except ValueError:
                return None
    return None
