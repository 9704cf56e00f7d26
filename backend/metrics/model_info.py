"""What a demo replica says about its model (the batched demo's `GET` on its route): plain
data for the views, parsed from the replica's JSON. No network here (backend/metrics/demo_info.py
fetches it), so widgets may import it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelInfo:
    """One replica's model: what it is, where it computes, and what a batch costs there
    (timed by the replica at its start)."""

    app: str
    deployment: str
    name: str  # e.g. "MLP 8×4096"
    kind: str  # "mlp" | "transformer"
    device: str  # "cpu" | "cuda"
    params: int
    dtype: str = ""
    weights_mb: float | None = None
    threads: int | None = None  # CPU intra-op threads
    ms_per_batch: tuple[tuple[int, float], ...] = ()  # ((1, 23.2), (16, 25.0))
    replica: str | None = None  # the replica that answered

    def summary(self) -> str:
        """One line for a tree row: 'cpu · 135M params · 1: 23 ms, 16: 25 ms'."""
        parts = [self.device, f"{count_text(self.params)} params"]
        if self.ms_per_batch:
            parts.append(", ".join(f"{n}: {_ms(ms)} ms" for n, ms in self.ms_per_batch))
        return " · ".join(parts)

    def details(self) -> str:
        """Several lines for a tooltip."""
        lines = [f"Model: {self.name} ({self.kind}), {self.params:,} parameters"
                 + (f" in {self.dtype}" if self.dtype else "")
                 + (f", {self.weights_mb:g} MB of weights" if self.weights_mb else "")]
        where = f"Computes on {self.device}"
        if self.threads:
            where += f" with {self.threads} thread{'s' if self.threads != 1 else ''}"
        lines.append(where)
        if self.ms_per_batch:
            lines.append("Time per batch, measured by the replica at its start: "
                         + ", ".join(f"{n} → {ms:.1f} ms" for n, ms in self.ms_per_batch))
            (n1, t1), (nk, tk) = self.ms_per_batch[0], self.ms_per_batch[-1]
            if nk > n1 and t1 > 0 and tk > 0:
                gain = (nk / tk) / (n1 / t1)
                lines.append(f"A batch of {nk} gives {gain:.1f}× the throughput of "
                             f"{'single requests' if n1 == 1 else f'batches of {n1}'}.")
        if self.replica:
            lines.append(f"(as replica {self.replica} reported it)")
        return "\n".join(lines)


def parse_model_info(app: str, data: Any, deployment: str | None = None) -> ModelInfo:
    """A ModelInfo from the replica's answer ({"model": {...}, "replica": …,
    "deployment": …}); ValueError when it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise ValueError("the answer has no 'model' object")
    m = data["model"]
    dep = data.get("deployment") if isinstance(data.get("deployment"), str) else deployment
    if not dep:
        raise ValueError("the answer does not name its deployment")
    for key in ("name", "device"):
        if not isinstance(m.get(key), str) or not m[key]:
            raise ValueError(f"'model.{key}' is missing")
    params = m.get("params")
    if isinstance(params, bool) or not isinstance(params, int) or params < 0:
        raise ValueError("'model.params' is not a count")
    batches = []
    for key, value in m.items():
        if key.startswith("ms_batch_") and key[9:].isdigit():
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError(f"'model.{key}' is not a duration")
            batches.append((int(key[9:]), float(value)))
    weights = m.get("weights_mb")
    threads = m.get("threads")
    replica = data.get("replica")
    return ModelInfo(
        app=app, deployment=dep, name=m["name"], kind=str(m.get("kind") or ""),
        device=m["device"], params=params, dtype=str(m.get("dtype") or ""),
        weights_mb=float(weights) if isinstance(weights, (int, float))
        and not isinstance(weights, bool) else None,
        threads=threads if isinstance(threads, int) and not isinstance(threads, bool)
        else None,
        ms_per_batch=tuple(sorted(batches)),
        replica=replica if isinstance(replica, str) else None)


def count_text(n: int) -> str:
    if n >= 10**9:
        return f"{n / 1e9:.1f}B"
    if n >= 10**6:
        return f"{n / 1e6:.0f}M"
    if n >= 10**3:
        return f"{n / 1e3:.0f}k"
    return str(n)


def _ms(ms: float) -> str:
    return f"{ms:.0f}" if ms >= 10 else f"{ms:.1f}"
