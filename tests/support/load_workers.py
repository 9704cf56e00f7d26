"""What the cluster-load tests and benchmark ask from outside the product: which of our
load-worker actors the cluster still has alive (the dashboard's state API, as anyone would
ask), and when the reference server last saw a request (`/seen`)."""

from __future__ import annotations

import time

import requests


def alive_workers(cluster, detail: bool = False) -> list[dict]:
    """Our load-worker actors not yet DEAD on *cluster* (a LocalCluster); with *detail*,
    each also has its `serialized_runtime_env`."""
    headers = {"Authorization": f"Bearer {cluster.token}"} if cluster.token else {}
    params = [("filter_keys", "class_name"), ("filter_predicates", "="),
              ("filter_values", "LoadWorker"), ("filter_keys", "state"),
              ("filter_predicates", "!="), ("filter_values", "DEAD"), ("limit", "100")]
    if detail:
        params.append(("detail", "1"))
    r = requests.get(cluster.dashboard_url + "/api/v0/actors", params=params,
                     headers=headers, timeout=10)
    r.raise_for_status()
    return r.json()["data"]["result"]["result"]


def wait_no_workers(cluster, within_s: float = 30.0) -> float | None:
    """Seconds until none of our workers is alive; None if some still were after
    *within_s*."""
    t0 = time.monotonic()
    while alive_workers(cluster):
        if time.monotonic() - t0 > within_s:
            return None
        time.sleep(0.25)
    return time.monotonic() - t0


def seen(server: str) -> dict:
    """The reference server's {"count", "last"} (tests/support/reference_server.py)."""
    return requests.get(server + "/seen", timeout=5).json()


def quiet_since(server: str, hold_s: float = 2.0, within_s: float = 30.0) -> float:
    """The wall time of the last request once none has come for *hold_s*."""
    deadline = time.monotonic() + within_s
    last = seen(server)
    while time.monotonic() < deadline:
        time.sleep(hold_s)
        now = seen(server)
        if now["count"] == last["count"]:
            return now["last"]
        last = now
    raise AssertionError(f"requests still arriving {within_s:.0f} s later")


def worker_processes(cluster) -> set[int]:
    """The pids of the Ray worker processes alive on *cluster* (idle ones included: the
    dashboard's state API), all on this machine in the tests."""
    return set(worker_jobs(cluster))


def worker_jobs(cluster) -> dict[int, str]:
    """pid → job id of the Ray worker processes alive on *cluster* (idle ones included)."""
    headers = {"Authorization": f"Bearer {cluster.token}"} if cluster.token else {}
    params = [("filter_keys", "is_alive"), ("filter_predicates", "="),
              ("filter_values", "true"), ("filter_keys", "worker_type"),
              ("filter_predicates", "="), ("filter_values", "WORKER"), ("limit", "1000")]
    r = requests.get(cluster.dashboard_url + "/api/v0/workers", params=params,
                     headers=headers, timeout=10)
    r.raise_for_status()
    return {w["pid"]: w.get("job_id") for w in r.json()["data"]["result"]["result"]}
