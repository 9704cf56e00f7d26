"""The traffic router convention, seen from the console: which application splits its
traffic between versions, and the shares the user sets (no I/O; `backend.tuning.apply` sends
them).

An application follows the convention when one of its deployments (the router) has a
`user_config.weights` mapping two or more names of the application's other deployments
(the versions) to non-negative numbers; `user_config.session_affinity` (a bool) is
optional. The console shows weights as percentages that sum to 100 and writes them back
as percentages (README "Making your own app splittable").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

WEIGHTS = "user_config.weights"
AFFINITY = "user_config.session_affinity"
SHARD_KEY_HEADER = "X-Serve-Shard-Key"
VERSION_HEADER = "x-serve-version"
SHARE_DIGITS = 1  # shares are percentages with one decimal


@dataclass(frozen=True)
class TrafficRouter:
    app: str
    router: str                      # the router deployment
    shares: dict[str, float]         # version (deployment) → % of traffic, sum 100
    session_affinity: bool | None    # None: the router's user_config does not say

    @property
    def versions(self) -> list[str]:
        return sorted(self.shares)


def _numbers(weights: Any) -> dict[str, float] | None:
    if not isinstance(weights, Mapping) or len(weights) < 2:
        return None
    out = {}
    for name, value in weights.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if not value >= 0 or value == float("inf"):
            return None
        out[str(name)] = float(value)
    return out if sum(out.values()) > 0 else None


def routers_of(status, app: str) -> list[TrafficRouter]:
    """The deployments of *app* that follow the convention (usually one)."""
    info = status.application(app) if status is not None else None
    if info is None:
        return []
    names = {d.name for d in info.deployments}
    found = []
    for dep in info.deployments:
        user_config = (dep.config or {}).get("user_config")
        if not isinstance(user_config, dict):
            continue
        weights = _numbers(user_config.get("weights"))
        if weights is None or not set(weights) <= names - {dep.name}:
            continue
        affinity = user_config.get("session_affinity")
        found.append(TrafficRouter(app, dep.name, as_percent(weights),
                                   affinity if isinstance(affinity, bool) else None))
    return found


def router_of(status, app: str) -> TrafficRouter | None:
    routers = routers_of(status, app)
    return routers[0] if routers else None


def splittable_apps(status) -> list[str]:
    if status is None:
        return []
    return [a.name for a in status.applications if routers_of(status, a.name)]


def as_percent(weights: Mapping[str, float]) -> dict[str, float]:
    """Shares that sum to 100 (one decimal; the rounding goes to the largest share)."""
    total = sum(weights.values())
    if total <= 0:
        raise ValueError("at least one version needs a share above 0")
    out = {n: round(100.0 * w / total, SHARE_DIGITS) for n, w in weights.items()}
    drift = round(100.0 - sum(out.values()), SHARE_DIGITS)
    if drift:
        top = max(sorted(out), key=lambda n: out[n])
        out[top] = round(out[top] + drift, SHARE_DIGITS)
    return out


def set_share(shares: Mapping[str, float], version: str, percent: float) -> dict[str, float]:
    """*version* at *percent* (clamped to 0…100); the others share the rest in the
    proportions they had (equally when they all had 0). The result sums to 100."""
    if version not in shares:
        raise KeyError(f"{version!r} is not one of the versions {sorted(shares)}")
    percent = min(100.0, max(0.0, float(percent)))
    others = [n for n in shares if n != version]
    rest = 100.0 - percent
    had = sum(shares[n] for n in others)
    out = {version: percent}
    for n in others:
        out[n] = rest * (shares[n] / had if had > 0 else 1.0 / len(others))
    if percent == 100.0:
        return {n: (100.0 if n == version else 0.0) for n in shares}
    return _fix_sum(out, keep=version)


def _fix_sum(shares: dict[str, float], keep: str) -> dict[str, float]:
    out = {n: round(v, SHARE_DIGITS) for n, v in shares.items()}
    drift = round(100.0 - sum(out.values()), SHARE_DIGITS)
    if drift:
        others = [n for n in sorted(out) if n != keep] or [keep]
        top = max(others, key=lambda n: out[n])
        out[top] = round(out[top] + drift, SHARE_DIGITS)
    return out


def two_way(shares: Mapping[str, float], new: str, percent: float,
            old: str | None = None) -> dict[str, float]:
    """A rollout step: *new* at *percent*, *old* (the version holding most of the rest
    when not named) the remainder, every other version as it was scaled into what is
    left. With two versions this is simply new = percent, old = 100 − percent."""
    if old is None:
        old = max((n for n in sorted(shares) if n != new), key=lambda n: shares[n])
    fixed = {n: v for n, v in shares.items() if n not in (new, old)}
    room = 100.0 - sum(fixed.values())
    percent = min(max(0.0, percent), 100.0)
    if percent > room:  # the others give way, in proportion
        scale = (100.0 - percent) / sum(fixed.values()) if fixed else 0.0
        fixed = {n: v * scale for n, v in fixed.items()}
        room = percent
    out = {**fixed, new: percent, old: room - percent}
    return _fix_sum(out, keep=new)


def weights_change(shares: Mapping[str, float]) -> dict[str, Any]:
    """The knob change that sets these shares (for backend.tuning.apply.apply_changes)."""
    total = sum(shares.values())
    if abs(total - 100.0) > 0.05:
        raise ValueError(f"the shares must sum to 100 %, not {total:g} %")
    if any(v < 0 for v in shares.values()):
        raise ValueError("a share cannot be negative")
    return {WEIGHTS: {n: (int(v) if float(v).is_integer() else v)
                      for n, v in sorted(shares.items())}}
