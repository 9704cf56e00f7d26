"""Every number the simulated fleet's metrics pages show at a moment, as one flat vector:
a pure function of the seed, the replicas (and when each started) and the time.

Per deployment, drawn from the seed: a request rate per replica that swings ±50 % on a
sine of period 60–240 s; latencies from two modes (fast, and a slow one 3–8× longer)
whose mix moves on the same period, so the quantiles move; an error share; for batched
deployments a batch size, wait and utilization; for multiplexed ones a miss rate. Each
replica's counters are the closed-form integrals of those rates since it started, so
they only rise, buckets are cumulative, +Inf equals the count. Counts are whole numbers
as Ray writes them (`699.0`).

Slots: `slot(key, row, column)` names where one sample's value sits in the vector; keys
of REPLICA_KEYS have a row per running replica, DEPLOYMENT_KEYS per deployment, APP_KEYS
per application; the `*_b` keys a column per bucket bound."""

from __future__ import annotations

import math
import random

import numpy as np

from backend.metrics import exposition as ex
from tests.support.fleet_state import Fleet, Replica

RATE_SWING = 0.5     # rate = r0 (1 + RATE_SWING sin(wt + phase))
SLOW_SHARE = 0.15    # share of the slow mode = SLOW_SHARE + SLOW_SWING sin(wt + phase2)
SLOW_SWING = 0.10
SHAPE = 4.0          # log-logistic shape of each latency mode
MEAN_OVER_MEDIAN = (math.pi / SHAPE) / math.sin(math.pi / SHAPE)
MAX_BATCH = 16.0     # no batch larger (the batched deployments' max_batch_size)

REPLICA_KEYS = ("req", "err", "lat_b", "lat_sum", "ongoing", "bs_b", "bs_sum", "bs_count",
                "bw_b", "bw_sum", "bu_b", "bu_sum", "bq", "mux_get", "mux_load",
                "mux_unload", "mux_models", "ml_b", "ml_sum")
DEPLOYMENT_KEYS = ("target", "queued")
APP_KEYS = ("http_ok", "http_err", "http_b", "http_sum")
#: Histogram keys -> the family whose recorded bounds give their columns.
BUCKETS = {"lat_b": ex.PROCESSING_LATENCY, "bs_b": ex.BATCH_SIZE, "bw_b": ex.BATCH_WAIT,
           "bu_b": ex.BATCH_UTILIZATION, "ml_b": ex.MUX_LOAD_LATENCY,
           "http_b": ex.HTTP_LATENCY}


def _cdf(bounds: list[float], median: np.ndarray, shape: float, top: float = math.inf
         ) -> np.ndarray:
    """Log-logistic CDF at each finite bound (rows: medians); 1 at +Inf and from *top*."""
    b = np.array([x for x in bounds], dtype=float)
    finite = np.where(np.isinf(b), 1.0, b)
    f = 1.0 / (1.0 + (median[:, None] / finite[None, :]) ** shape)
    f[:, np.isinf(b) | (b >= top)] = 1.0
    return f


class Values:
    """The numbers of one layout (the replicas running, the deployments, the apps)."""

    def __init__(self, fleet: Fleet, running: list[Replica], bounds: dict[str, list[str]],
                 nodes: int) -> None:
        deps = fleet.deployments()
        self.apps = list(fleet.apps)
        self.deployments = [(d.app, d.name) for d in deps]
        self._targets = [d for d in deps]
        self.nodes = nodes
        dep_index = {key: k for k, key in enumerate(self.deployments)}
        D = len(deps)
        p = {name: np.empty(D) for name in ("r0", "om", "ph", "ps", "m1", "m2", "err",
                                              "bmean", "wait", "util", "miss", "load")}
        for k, d in enumerate(deps):
            rng = random.Random(f"{fleet.seed}:{d.app}:{d.name}")
            p["r0"][k] = rng.uniform(2.0, 40.0)
            p["om"][k] = 2 * math.pi / rng.uniform(60.0, 240.0)
            p["ph"][k] = rng.uniform(0, 2 * math.pi)
            p["ps"][k] = rng.uniform(0, 2 * math.pi)
            p["m1"][k] = rng.uniform(3.0, 60.0)
            p["m2"][k] = p["m1"][k] * rng.uniform(3.0, 8.0)
            p["err"][k] = rng.uniform(0.0005, 0.01)
            p["bmean"][k] = rng.uniform(2.0, 10.0)
            p["wait"][k] = rng.uniform(1.0, 10.0)
            p["util"][k] = rng.uniform(30.0, 90.0)
            p["miss"][k] = rng.uniform(0.1, 0.4)
            p["load"][k] = rng.uniform(20.0, 200.0)
        self.p = p
        self.bounds = {key: [float(x) for x in bounds[fam]] for key, fam in BUCKETS.items()}
        self.F1 = _cdf(self.bounds["lat_b"], p["m1"], SHAPE)
        self.F2 = _cdf(self.bounds["lat_b"], p["m2"], SHAPE)
        self.FB = _cdf(self.bounds["bs_b"], p["bmean"], 3.0, top=MAX_BATCH)
        self.FW = _cdf(self.bounds["bw_b"], p["wait"], 3.0)
        self.FU = _cdf(self.bounds["bu_b"], p["util"], 6.0, top=100.0)
        self.FL = _cdf(self.bounds["ml_b"], p["load"], 3.0)
        self.FH1 = _cdf(self.bounds["http_b"], p["m1"] + 1.0, SHAPE)
        self.FH2 = _cdf(self.bounds["http_b"], p["m2"] + 1.0, SHAPE)
        self.d = np.array([dep_index[(r.app, r.deployment)] for r in running], dtype=int)
        self.jitter = np.array([random.Random(r.replica_id).uniform(0.8, 1.2) for r in running])
        self.t0 = np.array([r.start_time_s for r in running], dtype=float)
        ingress = {a.name: dep_index[(a.name, next(iter(a.deployments)))]
                   for a in fleet.apps.values() if a.deployments}
        self.ingress = np.array([ingress.get(a, -1) for a in self.apps], dtype=int)
        self.app_of_replica = np.array(
            [self.apps.index(r.app) if dep_index[(r.app, r.deployment)] == ingress.get(r.app)
             else -1 for r in running], dtype=int)
        rows = {**{k: len(running) for k in REPLICA_KEYS}, **{k: D for k in DEPLOYMENT_KEYS},
                **{k: len(self.apps) for k in APP_KEYS}, "one": 1}
        self._cols = {k: len(self.bounds[k]) if k in BUCKETS else 1 for k in rows}
        self._offset, n = {}, 0
        for k in (*REPLICA_KEYS, *DEPLOYMENT_KEYS, *APP_KEYS, "one"):
            self._offset[k] = n
            n += rows[k] * self._cols[k]
        self.size = n

    def slot(self, key: str, row: int = 0, column: int = 0) -> int:
        return self._offset[key] + row * self._cols[key] + column

    def column(self, key: str, le: str) -> int:
        return self.bounds[key].index(float(le))

    def _integrals(self, t: float | np.ndarray, r0, om, ph, ps):
        """(requests, slow-mode requests) from 0 to *t* at the swinging rates."""
        A, W, B = RATE_SWING, SLOW_SHARE, SLOW_SWING
        x, y = om * t + ph, om * t + ps
        j0 = r0 * (t - A * np.cos(x) / om)
        j1 = r0 * (W * t - W * A * np.cos(x) / om - B * np.cos(y) / om
                   + A * B * (0.5 * t * np.cos(ph - ps) - np.sin(x + y) / (4 * om)))
        return j0, j1

    def at(self, t: float) -> np.ndarray:
        p, d = self.p, self.d
        r0, om, ph, ps = p["r0"][d] * self.jitter, p["om"][d], p["ph"][d], p["ps"][d]
        j0, j1 = self._integrals(t, r0, om, ph, ps)
        s0, s1 = self._integrals(self.t0, r0, om, ph, ps)
        n = np.maximum(j0 - s0, 0.0)
        slow = np.clip(j1 - s1, 0.0, n)
        fast = n - slow
        out: dict[str, np.ndarray] = {"req": n, "err": n * p["err"][d]}
        lat = fast[:, None] * self.F1[d] + slow[:, None] * self.F2[d]
        lat[:, -1] = n
        out["lat_b"] = np.minimum(lat, n[:, None])
        mean1, mean2 = p["m1"][d] * MEAN_OVER_MEDIAN, p["m2"][d] * MEAN_OVER_MEDIAN
        out["lat_sum"] = fast * mean1 + slow * mean2
        rate = r0 * (1 + RATE_SWING * np.sin(om * t + ph))
        share = SLOW_SHARE + SLOW_SWING * np.sin(om * t + ps)
        out["ongoing"] = np.rint(rate * ((1 - share) * mean1 + share * mean2) / 1000.0)
        batches = n / p["bmean"][d]
        for key, F in (("bs_b", self.FB), ("bw_b", self.FW), ("bu_b", self.FU)):
            b = batches[:, None] * F[d]
            b[:, -1] = batches
            out[key] = b
        out["bs_sum"], out["bs_count"] = n, batches
        out["bw_sum"] = batches * p["wait"][d]
        out["bu_sum"] = batches * p["util"][d]
        out["bq"] = np.rint(np.maximum(0.0, 3 * np.sin(om * t + ps) - 1))
        loads = n * p["miss"][d]
        out["mux_get"], out["mux_load"] = n, loads
        out["mux_unload"] = np.maximum(loads - 3, 0.0)
        out["mux_models"] = np.full(len(d), 3.0)
        ml = loads[:, None] * self.FL[d]
        ml[:, -1] = loads
        out["ml_b"], out["ml_sum"] = ml, loads * p["load"][d]
        dom, dph = p["om"], p["ph"]
        out["target"] = np.array([float(x.target()) for x in self._targets])
        out["queued"] = np.rint(np.maximum(0.0, 3 * np.sin(dom * t + dph) - 1.5))
        out.update(self._http(n, fast, slow, out["err"]))
        out["one"] = np.ones(1)
        v = np.concatenate([out[k].ravel() for k in self._offset])
        return np.floor(v)

    def _http(self, n, fast, slow, err) -> dict[str, np.ndarray]:
        """Each node's proxy: its share (1/nodes) of each app's ingress traffic."""
        A = len(self.apps)
        mask = self.app_of_replica >= 0
        apps = self.app_of_replica[mask]

        def per_app(x):
            return np.bincount(apps, weights=x[mask], minlength=A) / self.nodes
        total, errors = per_app(n), per_app(err)
        ok = np.maximum(total - errors, 0.0)
        k = np.maximum(self.ingress, 0)
        share = np.divide(ok, total, out=np.zeros(A), where=total > 0)
        b = (per_app(fast) * share)[:, None] * self.FH1[k] + \
            (per_app(slow) * share)[:, None] * self.FH2[k]
        b[:, -1] = ok
        b = np.minimum(b, ok[:, None])
        mean1 = (self.p["m1"][k] + 1.0) * MEAN_OVER_MEDIAN
        mean2 = (self.p["m2"][k] + 1.0) * MEAN_OVER_MEDIAN
        return {"http_ok": ok, "http_err": errors, "http_b": b,
                "http_sum": (per_app(fast) * mean1 + per_app(slow) * mean2) * share}
