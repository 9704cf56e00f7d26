"""What the simulated fleet's metrics pages are made of, taken from a node page recorded
from a real Ray 2.60 head (tests/backend/data/ray_node_metrics_t0.txt.gz): the families'
`# HELP`/`# TYPE` lines and order, each histogram's bucket bounds, the lines every node
has whatever it runs (raylet, GCS, the Serve proxy's internals), and per kind of worker —
a batched replica, a multiplexed replica, the proxy, the controller — the sample lines it
exports, as (family, sample name, labels) to be re-labelled for each simulated worker.
The head's own lines (GCS, controller, cluster gauges) go on the head's page only.

The families the console reads (backend/metrics/exposition.py, NEEDED_FAMILIES) are the
*dynamic* lines, whose values the simulator computes; every other family is *static*
text kept as recorded, so a page is as long as a real one."""

from __future__ import annotations

import gzip
import re
from collections import defaultdict
from pathlib import Path

from backend.metrics import exposition as ex

RECORDED = Path(__file__).resolve().parents[1] / "backend" / "data" / "ray_node_metrics_t0.txt.gz"
RECORDED_NODE_IP = "192.0.2.2"
#: Lines only a head node's page has: the GCS's, the cluster-wide gauges, the controller's.
_HEAD_ONLY = re.compile(r'Component="gcs(_server)?"|^ray_cluster_')
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_WORKER = re.compile(r'WorkerId="([^"]+)"')
_SESSION = re.compile(r'SessionName="([^"]+)"')

Line = tuple[str, str, dict[str, str]]           # (family, sample name, labels)
StaticLine = tuple[str, str, dict[str, str], str]  # … and the recorded value text


def parse_line(line: str) -> tuple[str, dict[str, str], str]:
    m = _SAMPLE.match(line)
    if not m:
        raise ValueError(f"not a sample line: {line[:120]!r}")
    return m.group(1), dict(_LABEL.findall(m.group(2) or "")), m.group(3)


def render(name: str, labels: dict[str, str]) -> str:
    """A sample line up to its value, labels sorted as Ray writes them."""
    if not labels:
        return name
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


class Recording:
    """The recorded page, cut into the parts a simulated node page is built from."""

    def __init__(self, path: Path = RECORDED) -> None:
        with gzip.open(path, "rt") as f:
            text = f.read()
        self.session_name = _SESSION.search(text).group(1)
        #: family -> its "# HELP" and "# TYPE" lines; families in page order.
        self.comments: dict[str, list[str]] = defaultdict(list)
        by_family: dict[str, list[str]] = defaultdict(list)
        for line in text.split("\n"):
            if line.startswith(("# HELP ", "# TYPE ")):
                self.comments[line.split(" ", 3)[2]].append(line)
            elif line and line[0] != "#":
                by_family[self.family(line.split("{", 1)[0].split(" ", 1)[0])].append(line)
        self.order = list(dict.fromkeys([*self.comments, *by_family]))
        self.bounds = {f: [parse_line(s)[1]["le"] for s in by_family[f] if "_bucket" in s]
                       for f in ex.HISTOGRAMS if f in by_family}
        for f, les in self.bounds.items():  # one series' bounds, in order
            self.bounds[f] = list(dict.fromkeys(les))
        roles = self._roles(by_family)
        (self.node_static, self.head_static, replica_static, replica_dynamic,
         proxy_dynamic, controller_dynamic) = self._split(by_family, roles)
        batch = tuple(f for f in self.order if f.startswith("ray_serve_batch"))
        self.replica_static: dict[str, list[StaticLine]] = {
            "batched": replica_static["batched"],
            "multiplexed": replica_static["multiplexed"],
            "plain": [s for s in replica_static["batched"] if not s[0].startswith(batch)]}
        self.replica_dynamic: dict[str, list[Line]] = {
            "batched": replica_dynamic["batched"],
            "multiplexed": replica_dynamic["multiplexed"],
            "plain": [s for s in replica_dynamic["batched"]
                      if s[0] not in (ex.BATCH_SIZE, ex.BATCH_WAIT, ex.BATCH_UTILIZATION,
                                      ex.BATCH_QUEUE)]}
        # The proxy's lines for one application (the first it served), 200s and 500s.
        app = next(s[2]["application"] for s in proxy_dynamic
                   if s[0] == ex.HTTP_REQUESTS + "_total")
        self.proxy_dynamic = [s for s in proxy_dynamic if s[2].get("application") == app
                              and not (s[0] == ex.HTTP_LATENCY
                                       and s[2].get("status_code") != "200")]
        self.queued = next(s for s in self.proxy_dynamic if s[0] == ex.QUEUED)
        self.proxy_dynamic.remove(self.queued)
        self.healthy = next(s for s in controller_dynamic if s[0] == ex.REPLICA_HEALTHY)
        self.target = next(s for s in controller_dynamic if s[0] == ex.TARGET_REPLICAS)

    def family(self, sample_name: str) -> str:
        if sample_name in self.comments:
            return sample_name
        for suffix in ("_bucket", "_sum", "_count"):
            base = sample_name[:-len(suffix)]
            if sample_name.endswith(suffix) and base in self.comments:
                return base
        return sample_name

    @staticmethod
    def _roles(by_family: dict[str, list[str]]) -> dict[str, str]:
        """WorkerId -> "batched" / "multiplexed" / "proxy" / "controller"."""
        def workers(family: str) -> set[str]:
            return {_WORKER.search(s).group(1) for s in by_family.get(family, [])}
        roles = {}
        for w in workers(ex.REPLICA_ONGOING):
            roles[w] = "multiplexed" if w in workers(ex.MUX_MODELS) else "batched"
        # One replica of each kind is the template; the others' lines are left out.
        chosen = {}
        for w, kind in sorted(roles.items()):
            chosen.setdefault(kind, w)
        roles = {w: (k if chosen[k] == w else "other replica") for w, k in roles.items()}
        roles.update({w: "proxy" for w in workers(ex.HTTP_REQUESTS + "_total")})
        roles.update({w: "controller" for w in workers(ex.REPLICA_HEALTHY)})
        return roles

    def _split(self, by_family: dict[str, list[str]], roles: dict[str, str]):
        node_static: dict[str, list[str]] = defaultdict(list)
        head_static: dict[str, list[str]] = defaultdict(list)
        replica_static: dict[str, list[StaticLine]] = defaultdict(list)
        replica_dynamic: dict[str, list[Line]] = defaultdict(list)
        proxy_dynamic: list[Line] = []
        controller_dynamic: list[Line] = []
        for family in self.order:
            needed = family in ex.NEEDED_FAMILIES
            for line in by_family.get(family, []):
                w = _WORKER.search(line)
                role = roles.get(w.group(1), "") if w else ""
                if role == "other replica":
                    continue
                if role in ("batched", "multiplexed"):
                    name, labels, value = parse_line(line)
                    if needed:
                        replica_dynamic[role].append((family, name, labels))
                    else:
                        replica_static[role].append((family, name, labels, value))
                elif needed and role == "proxy":
                    proxy_dynamic.append((family, *parse_line(line)[:2]))
                elif needed and role == "controller":
                    controller_dynamic.append((family, *parse_line(line)[:2]))
                elif not needed:
                    head = role == "controller" or _HEAD_ONLY.search(line)
                    (head_static if head else node_static)[family].append(line)
        return (node_static, head_static, replica_static, replica_dynamic,
                proxy_dynamic, controller_dynamic)
