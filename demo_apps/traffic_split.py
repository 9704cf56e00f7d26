"""Which version serves a request: the router convention's pick, with no Ray in it (the
router deployment uses it; unit tests call it directly).

Weights are shares by version name (any non-negative numbers; they need not sum to 100).
The versions are laid out on [0, 1) in name order, each over its share. A request without
a session key draws a uniform number; one with a key uses a number fixed by the key (its
SHA-256), so a key lands on the same version for as long as the weights stay the same.
When a version's share grows, only keys next to its interval move, and they move to it:
during a rollout a session that reached the new version stays there.
"""

from __future__ import annotations

import hashlib
import random
from typing import Mapping

SHARD_KEY_HEADER = "x-serve-shard-key"  # seed 003's header for session affinity


def check_weights(weights: object, versions: set[str]) -> dict[str, float]:
    """The weights as {version: share}, or ValueError saying what is wrong."""
    if not isinstance(weights, Mapping) or not weights:
        raise ValueError("'weights' must map version names to shares, e.g. "
                         "{'ModelV1': 90, 'ModelV2': 10}")
    out: dict[str, float] = {}
    for name, share in weights.items():
        if name not in versions:
            raise ValueError(f"'weights' names {name!r}, which is not a version of this "
                             f"router (versions: {', '.join(sorted(versions))})")
        try:
            value = float(share)
        except (TypeError, ValueError):
            raise ValueError(f"the share of {name!r} must be a number, got {share!r}") from None
        if not value >= 0 or value == float("inf"):
            raise ValueError(f"the share of {name!r} must be a finite number ≥ 0, got {share!r}")
        out[name] = value
    if sum(out.values()) <= 0:
        raise ValueError("at least one version needs a share above 0")
    return out


def key_point(key: str) -> float:
    """A number in [0, 1) fixed by *key*."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def pick(weights: Mapping[str, float], key: str | None = None,
         rng: random.Random | None = None) -> str:
    """The version for one request (weights as `check_weights` returns them)."""
    total = sum(weights.values())
    point = key_point(key) if key else (rng or random).random()
    edge = 0.0
    chosen = None
    for name in sorted(weights):
        share = weights[name]
        if share <= 0:
            continue
        chosen = name
        edge += share / total
        if point < edge:
            return name
    return chosen  # rounding at the top edge
