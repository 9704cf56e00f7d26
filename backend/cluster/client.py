"""The one way the console talks to a Ray cluster: the dashboard's REST API.

Local and remote clusters go through this same class (docs/ARCHITECTURE.md, "The one path").
Every method blocks on the network, so it is only ever called from worker threads.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from typing import Any, Iterable
from urllib.parse import quote, urlsplit

import requests

from backend.cluster.addresses import address_problem, token_problem
from backend.cluster.answers import (SERVE_PATH, check_serve_details, checked_summary,
                                     death_from_state_api, deaths_from_logical, json_copy,
                                     not_ray, parse_serve_status, steady_part)
from backend.cluster.http_session import EnvOnceSession
from backend.errors import AnswerTimeout, ApiError, AuthError, ConnectError, RefusedError
from backend.metrics.discovery import metrics_targets_from_summary
from backend.metrics.gpu_shares import ProcessGpu, process_gpus_from_logical
from backend.model import ServeStatus
from backend.scaling.replica_watch import ActorDeath
from backend.text import clip

# The dashboard's log API (ray/dashboard/modules/state/state_head.py: list_logs, get_logs).
LOGS_PATH = "/api/v0/logs"
# Actor ids per /logical/actors query: 200 ids of 32 hex digits (and escaped commas) make
# a request line of ~7.1 kB, under the 8,190 bytes the dashboard's server accepts (~230
# would not be); fewer requests a poll at 1,000 replicas.
LOGICAL_ACTORS_PER_REQUEST = 200
LOG_FILE_PATH = "/api/v0/logs/file"
# The Serve controller writes logs/serve/controller_<pid>.log on its node; the same folder
# holds controller_build_<app>_<pid>.log (an app's import), which is not its log.
CONTROLLER_LOG_GLOB = "serve/controller_*.log"
_CONTROLLER_LOG_RE = re.compile(r"(?:^|/)serve/controller_(\d+)\.log$")
# The dashboard redacts runtime_env secrets for requests that look like a browser's; a
# read-modify-write must see the real values or it would write the masks back.
USER_AGENT = "serve-console/0.1 (python-requests)"


def normalize_url(url: str) -> str:
    """Validate a dashboard address and return it without a trailing slash.

    Raises ConnectError with a message that says what is wrong.
    """
    text = (url or "").strip()
    if not text:
        raise ConnectError("Enter the dashboard address, e.g. http://head-node:8265.")
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        if "port" in str(e).lower():
            raise ConnectError(f"'{url}' has an invalid port (1–65535).") from None
        raise ConnectError(f"'{url}' is not a valid address: {e}.") from None
    if parts.scheme not in ("http", "https"):
        raise ConnectError(
            f"'{url}' uses '{parts.scheme}://'; the Ray dashboard speaks http:// or https://."
        )
    if not parts.hostname:
        raise ConnectError(f"'{url}' has no host name.")
    if port is not None and not 0 < port < 65536:
        raise ConnectError(f"'{url}' has an invalid port (1–65535).")
    problem = address_problem(text, parts.hostname)
    if problem:
        raise ConnectError(f"'{clip(url, 120)}' is not a valid address: {problem}.")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


_CONFIG_LOCKS: dict[str, "threading.RLock"] = {}
_CONFIG_LOCKS_GUARD = threading.Lock()


class ClusterClient:
    """Blocking client of one cluster's dashboard. Thread-safe for concurrent calls."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 5.0,
                 verify: bool | str = True) -> None:
        self.url = normalize_url(url)
        self.token = token or None
        if self.token and token_problem(self.token):
            raise AuthError(f"The token cannot be sent: {token_problem(self.token)}.")
        if isinstance(verify, str) and not os.path.isfile(verify):
            raise ConnectError(f"The CA bundle {verify} does not exist (or is not a file): "
                               "give the path of a PEM file, or turn verification off.")
        self.timeout_s = timeout_s
        self.verify = verify
        self._session = EnvOnceSession()
        self._session.verify = verify
        self._session.headers["User-Agent"] = USER_AGENT
        # The newest answer of GET SERVE_PATH: (bytes, checked details, the status parsed
        # from them or None), replaced as a whole (calls may come from several threads).
        self._serve_cache: tuple[bytes, dict[str, Any], ServeStatus | None] | None = None
        # Set once a dashboard answers 404 to /logical/actors (dead_replica_actors).
        self._no_logical_actors = False
        # (node id, log file) of the Serve controller as the newest Serve details named
        # it (controller_info); a restarted controller writes a new file, and the status
        # poll sees that first. And the file controller_log last read.
        self._controller_noted: tuple[str, str] | None = None
        self._controller_log_file: tuple[str, str] | None = None
        if self.token:
            self._session.headers.update(self.auth_headers)

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    # -- low level -------------------------------------------------------------------
    def _request(self, method: str, path: str, timeout_s: float | None = None,
                 **kwargs) -> requests.Response:
        try:
            r = self._session.request(method, self.url + path,
                                      timeout=timeout_s or self.timeout_s, **kwargs)
        except requests.exceptions.SSLError as e:
            raise ConnectError(
                f"TLS error talking to {self.url}: {_reason(e)}. Check the certificate "
                "or the CA bundle."
            ) from None
        except requests.exceptions.ConnectTimeout:
            raise AnswerTimeout(
                f"{self.host} did not answer within {timeout_s or self.timeout_s:.0f} s "
                "(timeout). Is the address right and the port open?"
            ) from None
        except requests.exceptions.ReadTimeout:
            raise AnswerTimeout(
                f"{self.url} accepted the connection but did not answer within "
                f"{timeout_s or self.timeout_s:.0f} s (timeout)."
            ) from None
        except requests.exceptions.ConnectionError as e:
            reason = _reason(e)
            if "refused" in reason.lower():
                raise RefusedError(
                    f"Connection refused by {self.url}: nothing is listening there. "
                    "Is the Ray head running, and is 8265 (or your --dashboard-port) the "
                    "right port?"
                ) from None
            if "name or service not known" in reason.lower() or "resolve" in reason.lower():
                raise ConnectError(f"Unknown host '{self.host}'.") from None
            if "reset" in reason.lower() or "aborted" in reason.lower():
                raise RefusedError(f"Cannot reach {self.url}: the connection was reset "
                                   f"({reason}).", "connection reset") from None
            raise ConnectError(f"Cannot reach {self.url}: {reason}.") from None
        except (requests.RequestException, ValueError, OSError) as e:
            # Whatever else the address or the answer does wrong (an invalid URL or
            # header, a broken chunked answer): a message, never a traceback.
            raise ConnectError(f"Talking to {self.url} failed: {_reason(e)}.") from None
        if r.status_code == 401:
            raise AuthError(
                "The cluster requires a token (token authentication is on): enter it, "
                "or set RAY_AUTH_TOKEN."
            )
        if r.status_code == 403:
            raise AuthError("The cluster rejected the token: it is not this cluster's token.")
        return r

    def _json(self, method: str, path: str, **kwargs) -> Any:
        return self._decode(self._request(method, path, **kwargs), method, path)

    def _decode(self, r: requests.Response, method: str, path: str) -> Any:
        if not r.ok:
            raise ApiError(
                f"{method} {path} failed with HTTP {r.status_code}: {r.text[:500]}",
                r.status_code, r.text,
            )
        try:
            return r.json()
        except ValueError:
            raise ConnectError(
                f"{self.url}{path} did not answer with JSON: this is not a Ray dashboard."
            ) from None

    # -- cluster ---------------------------------------------------------------------
    def version(self, timeout_s: float | None = None) -> dict[str, Any]:
        """`/api/version`; raises ConnectError when the server is not a Ray dashboard."""
        r = self._request("GET", "/api/version", timeout_s=timeout_s)
        if r.status_code == 404:
            raise ConnectError(
                f"{self.url} answered, but it is not a Ray dashboard (no /api/version)."
            )
        try:
            data = r.json()
        except ValueError:
            data = None
        if not r.ok or not isinstance(data, dict) or \
                not isinstance(data.get("ray_version"), str):
            raise ConnectError(
                f"{self.url} answered (HTTP {r.status_code}), but it is not a Ray dashboard."
            )
        return data

    def check(self, timeout_s: float | None = None,
              details_timeout_s: float = 20.0) -> dict[str, Any]:
        """Version plus an authenticated call: what "connect" means. Returns the version.

        The version answers fast from any live dashboard, so *timeout_s* (default: the
        client's) tells a wrong address quickly. Serve's details may then take longer: on
        a head that has just started on a busy machine the first call took over 5 s (a
        clean-clone CI run), and a dashboard that has answered is alive, only slow."""
        info = self.version(timeout_s)
        # /api/version is open even with token auth on; this call proves the token.
        self.serve_details(max(details_timeout_s, timeout_s or self.timeout_s))
        return info

    def node_summary(self, timeout_s: float | None = None) -> list[dict[str, Any]]:
        return checked_summary(self._json("GET", "/nodes?view=summary", timeout_s=timeout_s),
                                self.url)

    def metrics_targets(self) -> list[str]:
        """`http://ip:port/metrics` of every alive node."""
        nodes = checked_summary(self._json("GET", "/nodes?view=summary"), self.url)
        return metrics_targets_from_summary({"data": {"summary": nodes}})

    def cluster_gpus(self, wait_s: float = 20.0) -> float:
        """GPUs of the alive nodes.

        For the first seconds after a head starts (about 5 s here) the dashboard lists no
        node at all; that means "not known yet", not "no GPU", so ask again until a node
        is listed or *wait_s* has passed. (Without this a demo deployed right after
        `serve-console --demo …` on a GPU machine asked for no GPU.)"""
        deadline = time.monotonic() + wait_s
        while True:
            alive = [(n.get("raylet") or {}) for n in self.node_summary()]
            alive = [r for r in alive if r.get("state", "ALIVE") == "ALIVE"]
            if alive or time.monotonic() >= deadline:
                return sum(float((r.get("resourcesTotal") or {}).get("GPU", 0)) for r in alive)
            time.sleep(0.5)

    # -- serve -----------------------------------------------------------------------
    def serve_details(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Serve's details, checked (check_serve_details): the caller's own copy, which
        it may change (a read–modify–write does)."""
        return json_copy(self._serve_answer(timeout_s)[1])

    def serve_status(self, timeout_s: float | None = None) -> ServeStatus:
        """The console's view of Serve's details, as of now. Decoding, checking and
        parsing them cost ~15 ms a poll at 1,000 replicas; an answer equal to the
        previous one (a steady cluster, poll after poll) reuses that work."""
        body, details, status = self._serve_answer(timeout_s)
        now = time.time()
        if status is None:
            status = parse_serve_status(details, now, checked=True)
            cached = self._serve_cache
            if cached is not None and cached[1] is details:
                self._serve_cache = (body, details, status)
            return status
        return dataclasses.replace(status, fetched_at=now)

    def _serve_answer(self, timeout_s: float | None
                      ) -> tuple[bytes, dict[str, Any], ServeStatus | None]:
        """(the answer's bytes but its controller health figures, its details, the
        status parsed from them earlier or None). The details are kept for the next
        call, which gets them again if the answer is the same byte for byte but for
        those figures (steady_part): never to be changed (serve_details copies)."""
        r = self._request("GET", SERVE_PATH, timeout_s=timeout_s)
        cached = self._serve_cache
        steady = steady_part(r.content) if r.ok else b""
        if r.ok and cached is not None and steady == cached[0]:
            self._note_controller(cached[1])  # noted afresh, as a new answer would be
            return cached
        details = check_serve_details(self._decode(r, "GET", SERVE_PATH), self.url)
        self._note_controller(details)
        self._serve_cache = (steady, details, None)
        return steady, details, None

    def dead_replica_actors(self, actor_ids: Iterable[str], limit: int = 500
                            ) -> list[ActorDeath]:
        """Those of *actor_ids* (Serve replicas' actors) that the GCS reports DEAD.

        The GCS marks an actor dead as soon as its worker process exits, seconds before
        Serve's controller notices at its next health check (backend/scaling/replica_watch.py).
        Asks the dashboard's actor table (`/logical/actors?ids=…`, what the dashboard's
        own pages use: only these actors, with exit detail and end time); a dashboard
        without that route gets the state API instead (dead_serve_actors). At most
        *limit* ids are asked about."""
        ids = list(dict.fromkeys(a for a in actor_ids if a))[:max(0, limit)]
        if not ids:
            return []
        if not self._no_logical_actors:
            try:
                # An answer without "DEAD" anywhere names no dead actor: it is not decoded
                # (a steady fleet's answers, ~0.7 ms of CPU per 200 actors).
                return [death for r in self._logical_answers(ids)
                        if not (r.ok and b"DEAD" not in r.content)
                        for death in deaths_from_logical(
                            self._decode(r, "GET", "/logical/actors"))]
            except ApiError as e:
                if e.status not in (404, 405):
                    raise
                self._no_logical_actors = True
        return self.dead_serve_actors(limit, only=set(ids))

    def replica_process_gpus(self, actor_ids: Iterable[str], limit: int = 200,
                             timeout_s: float | None = None
                             ) -> dict[str, tuple[ProcessGpu, ...]]:
        """{actor id: the GPUs its process uses} for those of *actor_ids* whose process
        has a CUDA context on a GPU (NVML, via `/logical/actors?ids=…`; see
        backend/metrics/gpu_shares.py). {} on a dashboard without that route."""
        ids = list(dict.fromkeys(a for a in actor_ids if a))[:max(0, limit)]
        if not ids or self._no_logical_actors:
            return {}
        try:
            pages = self._logical_actors(ids, timeout_s)
        except ApiError as e:
            if e.status not in (404, 405):
                raise
            self._no_logical_actors = True
            return {}
        out: dict[str, tuple[ProcessGpu, ...]] = {}
        for data in pages:
            out.update(process_gpus_from_logical(data))
        return out

    def _logical_actors(self, ids: list[str], timeout_s: float | None = None) -> list[Any]:
        """`/logical/actors?ids=…` for *ids*, LOGICAL_ACTORS_PER_REQUEST at a time: the
        dashboard's server refuses a request line over 8,190 bytes (HTTP 400), which
        ~230 actor ids in one query already exceed. One answer per request."""
        return [self._decode(r, "GET", "/logical/actors")
                for r in self._logical_answers(ids, timeout_s)]

    def _logical_answers(self, ids: list[str], timeout_s: float | None = None
                         ) -> list[requests.Response]:
        """_logical_actors' answers as they came, not yet decoded."""
        # The query written out, each id quoted and the commas between them as they are
        # (allowed in a query): as params, requests escaped every comma and urllib3 then
        # re-checked the ~7 kB line character by character in Python (~4 ms a request
        # at 200 ids, most of a steady status poll's CPU at 1,000 replicas). A hex id
        # needs no quoting (nor a call to quote: ~1 µs each), so the line has no "%" for
        # urllib3 to look at.
        return [self._request("GET", "/logical/actors?ids=" + ",".join(
                    a if a.isalnum() and a.isascii() else quote(a, safe="")
                    for a in ids[i:i + LOGICAL_ACTORS_PER_REQUEST])
                    + "&nocache=1", timeout_s=timeout_s)
                for i in range(0, len(ids), LOGICAL_ACTORS_PER_REQUEST)]

    def dead_serve_actors(self, limit: int = 500, only: set[str] | None = None
                          ) -> list[ActorDeath]:
        """DEAD actors of Serve replicas from the state API (`GET /api/v0/actors`, the
        GCS's dead actors of the "serve" namespace), at most *limit* of them (the API
        truncates in actor-id order, not by recency); only the ids in *only* if given.
        No end time (the state API has none): the watcher uses the poll's time."""
        params = [("filter_keys", "state"), ("filter_predicates", "="),
                  ("filter_values", "DEAD"),
                  ("filter_keys", "ray_namespace"), ("filter_predicates", "="),
                  ("filter_values", "serve"),
                  ("detail", "true"), ("limit", str(max(1, limit)))]
        data = self._json("GET", "/api/v0/actors", params=params)
        rows = _dig(data, "data", "result", "result")
        rows = rows if isinstance(rows, list) else []
        return [d for d in map(death_from_state_api, rows)
                if d is not None and (only is None or d.actor_id in only)]

    @property
    def config_lock(self) -> "threading.RLock":
        """Held around every read–modify–write of the Serve config (read the details,
        change one application or deployment, PUT the whole back): two at once — a
        slider on one deployment and the advisor's Apply on another — would each write
        back the other's old value, and one change would be lost. One lock per dashboard
        URL in this process, shared by every client of that cluster."""
        with _CONFIG_LOCKS_GUARD:
            return _CONFIG_LOCKS.setdefault(self.url, threading.RLock())

    def put_serve_config(self, config: dict[str, Any]) -> None:
        r = self._request("PUT", SERVE_PATH, json=config, timeout_s=max(self.timeout_s, 30))
        if not r.ok:
            raise ApiError(
                f"The cluster refused the Serve config (HTTP {r.status_code}): "
                f"{_first_line(r.text)}", r.status_code, r.text,
            )

    # -- packages --------------------------------------------------------------------
    def package_exists(self, uri: str) -> bool:
        r = self._request("GET", _package_path(uri))
        if r.status_code == 404:
            return False
        if not r.ok:
            raise ApiError(f"Checking package {uri} failed: HTTP {r.status_code}",
                           r.status_code, r.text)
        return True

    def upload_package(self, uri: str, data: bytes) -> None:
        r = self._request("PUT", _package_path(uri), data=data, timeout_s=120)
        if not r.ok:
            raise ApiError(f"Uploading package {uri} failed: HTTP {r.status_code}: "
                           f"{_first_line(r.text)}", r.status_code, r.text)

    # -- resources and jobs (deploy pre-flight) ---------------------------------------
    def cluster_status(self, timeout_s: float | None = None) -> dict[str, Any]:
        """`/api/cluster_status`'s `clusterStatus` (the head's monitor writes it every
        ~5 s; `loadMetricsReport.usage` = {resource: [used, total]}); {} when absent.
        The dashboard camel-cases the keys (`object_store_memory` → `objectStoreMemory`,
        `my_res` → `myRes`)."""
        status = _dig(self._json("GET", "/api/cluster_status", timeout_s=timeout_s),
                      "data", "clusterStatus")
        return status if isinstance(status, dict) else {}

    # -- the Serve controller's log ----------------------------------------------------
    def controller_log(self, lines: int = 200, timeout_s: float | None = None) -> str:
        """The last *lines* lines of the Serve controller's log, through the dashboard's
        log API (the console reads no file itself, so this works for a remote cluster).

        Where the log is: Serve's details name it (`controller_info.node_id` and
        `.log_file_path`, e.g. "/serve/controller_8817.log"); a Ray that leaves the path
        out gets the newest `serve/controller_<pid>.log` that `GET /api/v0/logs?node_id=…
        &glob=serve/controller_*.log` lists (answer: {"data": {"result": {category:
        [file, …]}}}). The tail is `GET /api/v0/logs/file?node_id=…&filename=…&lines=N`,
        plain text streamed as it is in the file (ray/dashboard/modules/state/
        state_head.py: get_logs; a missing file is HTTP 500 "A file is not found at: …").
        The place is kept; a restarted controller (new file, which the next Serve status
        names) or a file that is gone makes it look again.

        Raises ApiError where the dashboard has no log API or refuses it (a cluster may
        not allow it: the caller then does without), ConnectError as every call does."""
        n = max(1, int(lines))
        where = self._controller_log_where(timeout_s, fresh=False)
        try:
            text = self._read_log_file(where, n, timeout_s)
            if not text.strip():
                # The controller writes its log from its first second: nothing at all is
                # a file that is gone as much as a "not found" is (Ray 2.60's log API
                # answered a missing file with an empty 200 in a CI run).
                raise _LogFileGone(f"{where[1]}: empty answer")
            return text
        except _LogFileGone:
            where = self._controller_log_where(timeout_s, fresh=True)
            try:
                return self._read_log_file(where, n, timeout_s)
            except _LogFileGone as e:
                raise ApiError(f"The Serve controller's log {where[1]} is not on its node "
                               f"({clip(str(e), 200)}).", 500, str(e)) from None

    def _note_controller(self, details: dict[str, Any]) -> None:
        info = details.get("controller_info")
        node = _dig(details, "controller_info", "node_id")
        path = _dig(details, "controller_info", "log_file_path")
        if isinstance(info, dict) and isinstance(node, str) and node:
            self._controller_noted = (node, path.lstrip("/")
                                      if isinstance(path, str) and path else "")

    def _controller_log_where(self, timeout_s: float | None, fresh: bool) -> tuple[str, str]:
        """(node id, file name) of the controller's log."""
        noted = self._controller_noted
        cached = self._controller_log_file
        if not fresh and cached is not None and (noted is None or noted[0] == cached[0]
                                                 and noted[1] in ("", cached[1])):
            return cached
        if fresh or noted is None:
            self.serve_details(timeout_s)
            noted = self._controller_noted
        if noted is None:
            raise ApiError("Serve is not running on this cluster (no controller), so there "
                           "is no controller log to read.")
        node, name = noted
        if not name:
            name = self._newest_controller_log(node, timeout_s)
        self._controller_log_file = (node, name)
        return node, name

    def _newest_controller_log(self, node: str, timeout_s: float | None) -> str:
        data = self._logs_json(LOGS_PATH, timeout_s,
                               params={"node_id": node, "glob": CONTROLLER_LOG_GLOB})
        found = _dig(data, "data", "result")
        names = [f for files in (found.values() if isinstance(found, dict) else ())
                 if isinstance(files, list) for f in files
                 if isinstance(f, str) and _CONTROLLER_LOG_RE.search(f)]
        if not names:
            raise ApiError("The dashboard lists no Serve controller log "
                           f"({CONTROLLER_LOG_GLOB}) on the controller's node.")
        # Without Serve's word for it: the highest pid, the newest unless pids wrapped.
        return max(names, key=lambda f: int(_CONTROLLER_LOG_RE.search(f).group(1)))

    def _read_log_file(self, where: tuple[str, str], lines: int,
                       timeout_s: float | None) -> str:
        node, name = where
        params = {"node_id": node, "filename": name, "lines": str(lines),
                  "filter_ansi_code": "true"}
        r = self._log_request(LOG_FILE_PATH, timeout_s, params)
        if r.status_code == 500 and "not found" in r.text.lower():
            raise _LogFileGone(_first_line(r.text))
        if not r.ok:
            raise _log_api_error(r)
        # text/plain without a charset: requests would guess Latin-1; Ray writes UTF-8.
        return r.content.decode("utf-8", errors="replace")

    def _logs_json(self, path: str, timeout_s: float | None, params: dict) -> Any:
        r = self._log_request(path, timeout_s, params)
        if not r.ok:
            raise _log_api_error(r)
        try:
            data = r.json()
        except ValueError:
            raise ApiError(f"{path} did not answer with JSON: is this a Ray 2.x "
                           "dashboard?", r.status_code, r.text) from None
        if isinstance(data, dict) and data.get("result") is False:
            raise ApiError(f"The dashboard's log API failed: {clip(str(data.get('msg')), 300)}",
                           r.status_code, r.text)
        return data

    def _log_request(self, path: str, timeout_s: float | None,
                     params: dict) -> requests.Response:
        try:
            return self._request("GET", path, timeout_s=timeout_s, params=params)
        except AuthError:
            # The status answered with this token a moment ago: what refuses is the log
            # API (a proxy in front of the dashboard may block it), not the token.
            raise ApiError("The dashboard refused to show the Serve controller's log (HTTP "
                           "401/403): the log API is not allowed for this connection.",
                           403) from None

    def submit_job(self, entrypoint: str, *, runtime_env: dict[str, Any] | None = None,
                   submission_id: str | None = None,
                   metadata: dict[str, str] | None = None) -> str:
        """`POST /api/jobs/`; returns the submission id. No entrypoint resources: Ray
        then runs the driver on the head node with 0 CPUs."""
        body: dict[str, Any] = {"entrypoint": entrypoint}
        if runtime_env:
            body["runtime_env"] = runtime_env
        if submission_id:
            body["submission_id"] = submission_id
        if metadata:
            body["metadata"] = metadata
        r = self._request("POST", "/api/jobs/", json=body, timeout_s=max(self.timeout_s, 30))
        if not r.ok:
            raise ApiError(f"The cluster refused the job (HTTP {r.status_code}): "
                           f"{_first_line(r.text)}", r.status_code, r.text)
        try:
            sid = _dig(r.json(), "submission_id")
        except ValueError:
            sid = None
        if not isinstance(sid, str) or not sid:
            raise ApiError("The dashboard accepted the job but named no submission id: is "
                           "this a Ray 2.x dashboard?", r.status_code, r.text)
        return sid

    def job_info(self, submission_id: str) -> dict[str, Any]:
        """`GET /api/jobs/{id}`: status, message, error_type, driver_node_id, …"""
        info = self._json("GET", f"/api/jobs/{submission_id}")
        if not isinstance(info, dict):
            raise not_ray("The dashboard", "a job's status", "the answer", info, "an object")
        return info

    def job_logs(self, submission_id: str) -> str:
        logs = _dig(self._json("GET", f"/api/jobs/{submission_id}/logs"), "logs")
        return logs if isinstance(logs, str) else ""

    def stop_job(self, submission_id: str) -> bool:
        return bool(_dig(self._json("POST", f"/api/jobs/{submission_id}/stop"), "stopped"))

    def delete_job(self, submission_id: str) -> bool:
        """Forget a finished job (Ray refuses to delete one that has not ended)."""
        return bool(_dig(self._json("DELETE", f"/api/jobs/{submission_id}"), "deleted"))


class _LogFileGone(Exception):
    """The log API says the file is not there (HTTP 500 "A file is not found at: …")."""


def _log_api_error(r: requests.Response) -> ApiError:
    if r.status_code in (404, 405):
        return ApiError(f"This dashboard has no log API (GET {urlsplit(r.url).path} answered "
                        f"HTTP {r.status_code}), so the Serve controller's log cannot be "
                        "read.", r.status_code, r.text)
    if r.status_code == 429:
        return ApiError("The dashboard's log API is busy (HTTP 429: too many calls at "
                        "once); try again.", r.status_code, r.text)
    return ApiError(f"Reading the Serve controller's log failed with HTTP {r.status_code}: "
                    f"{_first_line(r.text)}", r.status_code, r.text)


def _dig(data: Any, *keys: str) -> Any:
    """data[k1][k2]… or None where an answer lacks a level or is not an object there
    (a dashboard answering garbage must give "nothing", not an AttributeError)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _package_path(uri: str) -> str:
    protocol, _, name = uri.partition("://")
    return f"/api/packages/{protocol}/{name}"


def _reason(e: Exception) -> str:
    text = str(e)
    for marker in ("Errno", "Failed to establish a new connection:"):
        if marker in text:
            text = text[text.index(marker):]
    return text.rstrip(")'\"")


def _first_line(text: str) -> str:
    """The useful part of a dashboard error body, in one line."""
    lines = [ln.strip() for ln in text.strip().splitlines()
             if ln.strip() and not ln.strip().startswith("For further information")]
    if not lines:
        return "(no message)"
    if "validation error" in text:
        # pydantic: "N validation errors for X", then (field path, reason) pairs.
        start = next((i for i, ln in enumerate(lines) if "validation error" in ln), 0)
        return " ".join(lines[start:start + 7])[:600]
    # Serve's other errors end with the useful line (a traceback's last line).
    return lines[-1][:500]
