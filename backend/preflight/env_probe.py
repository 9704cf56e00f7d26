"""Can the cluster's Python import an application's code: a short job through the
dashboard (`POST /api/jobs/`) that tries each module and prints what it found.

schedules the JobSupervisor actor with num_cpus=0 on the head node
(`JobManager.submit_job`, ray/dashboard/modules/job/job_manager.py), so it runs on a
cluster whose every CPU is taken — and it checks the head node's Python only.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import threading
import time
from dataclasses import dataclass
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


# The job's shell runs `python` from the head node's PATH, which need not be the Python
# Ray's workers run (a Ray installed in a virtualenv and started by its full path: the
# console's own local cluster is one). The JobSupervisor that starts the shell is a Ray
# worker: a runtime_env with pip/uv/conda activates its env (VIRTUAL_ENV/CONDA_PREFIX set,
# its python first on PATH); otherwise the worker is what the raylet's
# --python_worker_command names, and the raylet is the supervisor's parent.
_PICK_PYTHON = (
    'PY=$(command -v python || command -v python3 || echo python); '
    'if [ -z "${VIRTUAL_ENV:-}${CONDA_PREFIX:-}" ] && [ -r /proc/$PPID/status ]; then '
    "RL=$(awk '/^PPid:/{print $2}' /proc/$PPID/status); "
    "W=$(tr '\\000' '\\n' < /proc/$RL/cmdline 2>/dev/null "
    "| sed -n 's/^--python_worker_command=\\([^ ]*\\).*/\\1/p'); "
    'if [ -n "$W" ] && [ -x "$W" ]; then PY=$W; fi; fi; '
)

_PROBE_CODE = """\
import importlib, importlib.metadata as md, json, sys
r = {"python": sys.executable, "version": sys.version.split()[0], "missing": [], "errors": {}}
try:
    r["ray"] = md.version("ray")
except Exception:
    r["ray"] = None
for m in MODULES:
    try:
        importlib.import_module(m)
    except ModuleNotFoundError as e:
        r["missing"].append(m)
        if e.name and not (m == e.name or m.startswith(e.name + ".")):
            r["errors"][m] = "%s: %s" % (type(e).__name__, e)
    except BaseException as e:
        r["missing"].append(m)
        r["errors"][m] = "%s: %s" % (type(e).__name__, e)
print(MARK + json.dumps(r), flush=True)
"""


def probe_entrypoint(modules: Iterable[str]) -> str:
    """The job's shell command: pick the workers' Python, import *modules*, print one
    marked JSON line."""
    mods = list(modules)
    bad = [m for m in mods if not isinstance(m, str) or not _MODULE_RE.match(m)]
    if bad:
        raise ValueError(f"Not module names: {', '.join(map(repr, bad))}")
    code = (f"MODULES = {json.dumps(mods)}\nMARK = {json.dumps(_PROBE_MARK)}\n"
            + _PROBE_CODE)
    return _PICK_PYTHON + 'exec "$PY" -c ' + shlex.quote(code)


def probe_python_env(client: ClusterClient, modules: list[str],
                     runtime_env: dict[str, Any] | None, cancel: CancelToken,
                     timeout_s: float = 60.0, poll_s: float = 0.25) -> EnvProbe:
    """Run the import probe as a Ray job with *runtime_env* (the application's: its pip
    packages are installed for the probe as for the replicas) and return what it found.

    Raises Cancelled (the job is stopped and deleted), PreflightError on a timeout, a
    runtime_env that cannot be set up, or a probe that did not run in Ray's Python."""
    entry = probe_entrypoint(modules)
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
    return EnvProbe(missing=tuple(result.get("missing") or ()),
                    errors=dict(result.get("errors") or {}),
                    python=str(result.get("python")),
                    python_version=str(result.get("version")),
                    ray_version=result.get("ray"), seconds=seconds,
                    node_id=info.get("driver_node_id"))


def check_python_env(client: ClusterClient, modules: list[str],
                     runtime_env: dict[str, Any] | None, cancel: CancelToken,
                     timeout_s: float = 60.0) -> list[str]:
    """The *modules* the cluster's Python (head node, with *runtime_env*) cannot import."""
    if not modules:
        return []
    return list(probe_python_env(client, modules, runtime_env, cancel, timeout_s).missing)


def missing_modules_message(missing: list[str], app_name: str) -> str:
    """What to do about modules the cluster lacks, in one paragraph."""
    if not missing:
        return ""
    pkgs = sorted({_pip_name(m) for m in missing})
    names = _names(missing, quote=False)
    return (f"'{app_name}' cannot start: the cluster's Python lacks {names}. Install "
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
