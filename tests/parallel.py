"""How test.sh's second pass shares the suite between pytest-xdist workers.

test.sh's first pass runs the *light* tests (`is_light`: no Ray cluster, cluster
Prometheus or load generator of their own; widgets, logic, stub servers) on two workers
at a lower priority, beside the timing tests: those use about a quarter of one core for
~90 s (wall-clock runs at modest rates), so the light tests come off the CPU-bound pass.

A *work unit* runs whole, in a row, on one worker:

- the tests of a package that use the package's real cluster (tests/cluster_fixtures.py),
  by module, in as many units as keep each near UNIT_TARGET_S: each unit gets a head of
  its own (a package-scoped fixture lives per worker), so a long package does not make
  the run's critical path;
- each module's other tests: its own head if it starts one, its module-scoped fixtures
  set up once.

Units go out longest first, so the last to finish is a short one. How long a test takes
comes from tests/durations.json (a clean-clone run's `--durations=0`, refreshed with
`python -m tests.parallel LOG`); a test not in it counts DEFAULT_S. The file decides only
the order and the split, never whether a test runs.

The workers collect and know each test's fixtures; the controller, which schedules, sees
only test ids. So each worker writes {test id: unit} to a file the controller named
(UNITS_ENV) and the scheduler reads it once every worker has collected. (pytest-xdist's
own `--dist loadgroup` marks a group by appending it to the test id, which pytest 9 no
longer lets a plugin change.)
"""

from __future__ import annotations

import collections
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

UNITS_ENV = "SERVE_CONSOLE_TEST_UNITS"
DURATIONS = Path(__file__).with_name("durations.json")
DEFAULT_S = 0.5
CLUSTER_START_S = 30.0   # a head and the batched demo on it (tests/cluster_fixtures.py)
# A package's cluster tests split into units of about this long, each with a head of its
# own. 300 s split both packages in two (~215 s each by the clean clone of 2026-11-28):
# two more heads and batched demos to start (~30 s of a worker, ~20 CPU-s each) where
# the longest units then ran were own-cluster modules anyway (demo views 169 s). At 450 s
# each package is one unit (~400 s), which still packs two workers evenly.
UNIT_TARGET_S = 450.0


LIGHT_MARK = "light"
# What a light test must not use: a Ray cluster (every cluster fixture of
# tests/cluster_fixtures.py stands on ray_cluster) ...
_HEAVY_FIXTURES = frozenset({"ray_cluster"})
# ... nor start a head, Prometheus or a load generator of its own, which its module's
# text names. (Small processes are fine: a console run against a stub, the simulated
# fleet, a recording killed mid-way, a Prometheus scraping a stub page; they use a
# fraction of a core for seconds.)
_HEAVY_WORDS = ("own_cluster", "LocalCluster", "ray.init", "ClusterLoad", "start_prometheus",
                "LoadGenerator")
_MODULE_HEAVY: dict[str, bool] = {}


def is_light(item) -> bool:
    """Whether *item* is a light test: not timing or quiet, no Ray cluster among its
    fixtures, and its module starts no head, Prometheus or load (`_HEAVY_WORDS`)."""
    if item.get_closest_marker("timing") or item.get_closest_marker("quiet"):
        return False
    if _HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return False
    path = str(getattr(item, "path", "") or "")
    if path not in _MODULE_HEAVY:
        try:
            text = Path(path).read_text()
        except OSError:
            text = _HEAVY_WORDS[0]
        _MODULE_HEAVY[path] = any(w in text for w in _HEAVY_WORDS)
    return not _MODULE_HEAVY[path]


def _uses_package_cluster(item) -> bool:
    defs = item._fixtureinfo.name2fixturedefs.get("ray_cluster")
    return bool(defs and defs[-1].scope == "package")


def _seconds() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def work_units(items) -> tuple[dict, dict]:
    """({item: unit name}, {unit name: estimated seconds}) for the collected *items*."""
    seconds = _seconds()
    est = {item: seconds.get(item.nodeid, DEFAULT_S) for item in items}
    module = {item: item.nodeid.split("::", 1)[0] for item in items}
    units: dict = {}
    cluster_modules: dict[str, collections.Counter] = collections.defaultdict(
        collections.Counter)
    for item in items:
        if _uses_package_cluster(item):
            cluster_modules[os.path.dirname(module[item])][module[item]] += est[item]
        else:
            units[item] = module[item]
    part: dict[str, str] = {}
    for package, modules in cluster_modules.items():
        k = max(1, math.ceil(sum(modules.values()) / UNIT_TARGET_S))
        load = [0.0] * k
        for mod, s in sorted(modules.items(), key=lambda kv: (-kv[1], kv[0])):
            j = min(range(k), key=lambda j: load[j])
            load[j] += s
            part[mod] = f"{package} cluster {j + 1}/{k}"
    for item in items:
        if item not in units:
            units[item] = part[module[item]]
    total: collections.Counter = collections.Counter()
    for item in items:
        total[units[item]] += est[item]
    for unit in total:
        if " cluster " in unit:
            total[unit] += CLUSTER_START_S
    return units, dict(total)


def order_and_publish(items) -> None:
    """On a worker: sort *items* longest unit first (stable within a unit) and write
    their units for the controller's scheduler."""
    units, total = work_units(items)
    index = {item: n for n, item in enumerate(items)}
    items.sort(key=lambda i: (-total[units[i]], units[i], index[i]))
    path = os.environ[UNITS_ENV]
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        json.dump({item.nodeid: units[item] for item in items}, f)
    os.replace(tmp, path)


def new_units_file() -> str:
    """On the controller, before the workers start: the file they write to."""
    fd, path = tempfile.mkstemp(prefix="serve-console-units-", suffix=".json")
    os.close(fd)
    return path


def make_scheduler(config, log):
    """pytest-xdist's LoadScopeScheduling with our units as its scopes."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        units: dict | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                with open(os.environ[UNITS_ENV]) as f:
                    self.units = json.load(f)
            return self.units.get(nodeid, nodeid)

    return UnitScheduling(config, log)


def durations_from_log(text: str) -> dict[str, float]:
    """{test id: setup + call + teardown seconds} from pytest's `--durations=0` output."""
    got: collections.Counter = collections.Counter()
    for m in re.finditer(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)", text, re.M):
        got[m.group(2)] += float(m.group(1))
    return {k: round(v, 1) for k, v in sorted(got.items()) if v >= DEFAULT_S}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.parallel PYTEST_LOG  (a run with --durations=0)")
    found = durations_from_log(Path(sys.argv[1]).read_text())
    if not found:
        sys.exit(f"{sys.argv[1]}: no --durations=0 lines in it")
    DURATIONS.write_text(json.dumps(found, indent=0, sort_keys=True) + "\n")
    print(f"{DURATIONS}: {len(found)} tests")
