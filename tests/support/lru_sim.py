"""What an LRU model cache would hit for a request sequence: the reference the multiplexed
demo's observed hit rate is compared with (benchmarks/multiplex_hit_rate.py).

`simulate` replays model ids through `replicas` LRU caches of `cache_size` each, routed
the way Ray Serve's multiplexed routing prefers (ray/serve/_private/request_router):
a replica that holds the model if any, else the one with the fewest models loaded
(ties: the lowest index, where Ray picks at random). With one replica it is exactly
Ray's per-replica LRU (ray/serve/multiplex.py: an OrderedDict, move_to_end on a hit,
popitem(last=False) when full).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class LruResult:
    requests: int
    hits: int
    loads: int
    evictions: int

    @property
    def hit_rate(self) -> float:
        return self.hits / self.requests if self.requests else 0.0


def simulate(model_ids: Iterable[str], cache_size: int, replicas: int = 1) -> LruResult:
    if cache_size < 1 or replicas < 1:
        raise ValueError("cache_size and replicas must be >= 1")
    caches: list[OrderedDict[str, None]] = [OrderedDict() for _ in range(replicas)]
    n = hits = loads = evictions = 0
    for model_id in model_ids:
        n += 1
        holder = next((c for c in caches if model_id in c), None)
        if holder is not None:
            holder.move_to_end(model_id)
            hits += 1
            continue
        cache = min(caches, key=len)
        if len(cache) >= cache_size:
            cache.popitem(last=False)
            evictions += 1
        cache[model_id] = None
        loads += 1
    return LruResult(n, hits, loads, evictions)


def zipf_sequence(ids: Sequence[str], weights: Sequence[float], n: int,
                  seed: int = 0) -> list[str]:
    """n model ids drawn with the given weights (e.g. catalog ModelIds.weights())."""
    return random.Random(seed).choices(list(ids), weights=list(weights), k=n)
