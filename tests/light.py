"""Which test modules are *light*: they start no Ray head, no console or other process,
no Prometheus, and use none of the shared cluster's fixtures — widgets, models, parsers,
local HTTP fakes.

test.sh runs the light tests in a process of their own at a lower CPU priority beside the
parallel pass. That pass is mostly Ray heads starting, deploying and serving, whose CPU
comes in bursts: between them a 2-core machine stood idle about a quarter of the time
(2026-11-28: 1,380 CPU-seconds in 946 s). The light tests fill those gaps instead of
taking turns with the heads on the two workers.

A module is classified by its source: one that names any of HEAVY is not light. A
module wrongly found light would still run and pass, only at the lower priority; a light
one wrongly found heavy runs on the workers as before.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

HEAVY = (
    # the shared cluster's fixtures (tests/cluster_fixtures.py, tests/console/conftest.py)
    "ray_cluster", "cluster_client", "batched_demo", "tuning_app", "load_on",
    "connected_window", "prometheus_url",
    # a head, a Prometheus or another process of its own
    "own_cluster", "LocalCluster", "ray.init", "ray start", "start_prometheus",
    "console.app", "serve-console", "subprocess", "Popen", "multiprocessing",
)


@lru_cache(maxsize=None)
def module_is_light(path: str) -> bool:
    try:
        source = Path(path).read_text()
    except OSError:
        return False
    return not any(word in source for word in HEAVY)
