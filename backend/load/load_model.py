"""The load generator's plain data: targets, load models, profiles, stats and run summaries.

No network and no Qt here, so views (widgets/) may import it; the generator that uses it is
`backend.load.generator`. Everything is an immutable dataclass, safe to hand between threads.

Body templates (LoadTarget.body) may contain:
  {seq}          the request's sequence number
  {model_id}     the model id chosen for this request (see ModelIds), or "" without one
  {features:N}   a JSON array of N floats (a feature vector, standard normal, seeded by seq)
  {features}     the same with N = 256 (the batched demo's input width)
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import string
from bisect import bisect_left
from dataclasses import asdict, dataclass, field
from itertools import accumulate

from backend.cluster.addresses import url_problem
from backend.load.openai_load import OpenAILoad, parse_openai_load
from backend.text import clip

MODEL_ID_HEADER = "serve_multiplexed_model_id"
BATCHED_FEATURES = 256
MAX_FEATURES = 100_000  # {features:N}: a request body of ~0.8 MB at most
MAX_BODY_CHARS = 10_000_000

OPEN = "open"
CLOSED = "closed"
CONSTANT = "constant"
POISSON = "poisson"

PROFILE_KINDS = ("constant", "step", "ramp", "spike", "sine")


# ---------------------------------------------------------------------------- targets

@dataclass(frozen=True)
class ModelIds:
    """A model id per request, sent in Serve's `serve_multiplexed_model_id` header.

    Ids are `prefix + first … prefix + (first + count - 1)`. `distribution` is "uniform"
    or "zipf": the id of rank k (1-based) is chosen with probability proportional to
    1 / k**s, so the first id is the hottest.
    """

    count: int = 10
    distribution: str = "uniform"  # or "zipf"
    s: float = 1.0
    prefix: str = "model-"
    header: str = MODEL_ID_HEADER
    first: int = 1  # the demo catalog's ids start at 0 (tenant-0 …)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("model id count must be >= 1")
        if self.distribution not in ("uniform", "zipf"):
            raise ValueError(f"unknown model id distribution {self.distribution!r}")
        if self.distribution == "zipf" and self.s <= 0:
            raise ValueError("Zipf exponent s must be > 0")

    def weights(self) -> list[float]:
        """Probability of each id, in order model-1 … model-N."""
        if self.distribution == "uniform":
            return [1.0 / self.count] * self.count
        raw = [1.0 / (k ** self.s) for k in range(1, self.count + 1)]
        total = sum(raw)
        return [w / total for w in raw]

    def sampler(self, seed: int | None = None):
        """A function () -> model id, drawing from this distribution."""
        rng = random.Random(seed)
        ids = [f"{self.prefix}{k}" for k in range(self.first, self.first + self.count)]
        if self.distribution == "uniform":
            return lambda: ids[rng.randrange(self.count)]
        cum = list(accumulate(self.weights()))
        cum[-1] = 1.0
        return lambda: ids[bisect_left(cum, rng.random())]


@dataclass(frozen=True)
class LoadTarget:
    """Where requests go and what they carry."""

    url: str
    method: str = "POST"
    body: str = ""  # a template: see the module docstring
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    model_ids: ModelIds | None = None
    stream: bool = False  # read the body chunk by chunk; record time to first chunk
    # OpenAI-streaming load (backend/load/openai_load.py): each request a streamed
    # completion built from these settings (body ignored), timed per token.
    openai: OpenAILoad | None = None

    def describe(self) -> str:
        extra = []
        if self.model_ids is not None:
            m = self.model_ids
            extra.append(f"{m.count} model ids, {m.distribution}"
                         + (f" s={m.s:g}" if m.distribution == "zipf" else ""))
        if self.stream:
            extra.append("streamed")
        if self.openai is not None:
            extra.append(self.openai.describe())
        return f"{self.method} {self.url}" + (f" ({'; '.join(extra)})" if extra else "")


def render_body(template: str, seq: int, model_id: str | None = None) -> str:
    """The body of request `seq` from a template (see the module docstring)."""
    if not template:
        return ""
    out = template
    if "{features" in out:
        out = _render_features(out, seq)
    if "{seq}" in out:
        out = out.replace("{seq}", str(seq))
    if "{model_id}" in out:
        out = out.replace("{model_id}", model_id or "")
    return out


def _render_features(text: str, seq: int) -> str:
    rng = random.Random(seq)
    while True:
        i = text.find("{features")
        if i < 0:
            return text
        j = text.find("}", i)
        if j < 0:
            return text
        spec = text[i + 1:j]
        n = BATCHED_FEATURES
        if ":" in spec:
            try:
                n = int(spec.split(":", 1)[1])
            except ValueError:
                raise ValueError(f"bad placeholder {{{spec}}}: expected {{features:N}}, "
                                 "N a whole number") from None
            if not 0 <= n <= MAX_FEATURES:
                raise ValueError(f"bad placeholder {{{spec}}}: N must be from 0 to "
                                 f"{MAX_FEATURES:,}")
        vec = ",".join(f"{rng.gauss(0.0, 1.0):.4f}" for _ in range(n))
        text = f"{text[:i]}[{vec}]{text[j + 1:]}"


def parse_headers(text: str) -> tuple[tuple[str, str], ...]:
    """'Name: value' lines (blank lines ignored) → header pairs; ValueError names a bad line."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"header line {n} is not 'Name: value': {line.strip()!r}")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def format_headers(headers: tuple[tuple[str, str], ...]) -> str:
    return "\n".join(f"{k}: {v}" for k, v in headers)


_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")


def check_target(target: LoadTarget) -> LoadTarget:
    """*target* if the load generator can send it; else ValueError saying what to fix.

    Checks what the user types into the request editor: the URL, the method, the
    headers (names and values HTTP can carry), the model-id prefix, and the body
    template (its placeholders render; with a JSON content type, it renders to JSON).
    """
    problem = url_problem(target.url)
    if problem:
        raise ValueError(f"URL {clip(target.url, 80)!r}: {problem}")
    method = target.method
    if not method or len(method) > 20 or not set(method) <= _TOKEN_CHARS:
        raise ValueError(f"method {clip(method, 80)!r} is not an HTTP method "
                         "(GET, POST, PUT, …)")
    headers = list(target.headers)
    if target.model_ids is not None:
        headers.append((target.model_ids.header,
                        f"{target.model_ids.prefix}{target.model_ids.first}"))
    for name, value in headers:
        if not name or not set(name) <= _TOKEN_CHARS:
            raise ValueError(f"header name {clip(name, 80)!r} has characters a header name "
                             "cannot have (letters, digits and -_.!#$%&'*+^`|~ only)")
        bad = next((c for c in value if (ord(c) < 32 and c != "\t") or ord(c) == 127
                    or ord(c) > 255), None)
        if bad is not None:
            raise ValueError(f"header {name}: the value contains {bad!r}, which an HTTP "
                             "header cannot carry")
    try:
        body = render_body(target.body, 0, "model-0" if target.model_ids else None)
    except ValueError as e:
        raise ValueError(f"body: {e}") from None
    if len(body) > MAX_BODY_CHARS:
        raise ValueError(f"body: {len(body):,} characters per request is too large "
                         f"(at most {MAX_BODY_CHARS:,})")
    content_type = next((v for k, v in target.headers if k.lower() == "content-type"), "")
    if body and "json" in content_type.lower():
        try:
            json.loads(body)
        except ValueError as e:
            msg = getattr(e, "msg", str(e))
            pos = getattr(e, "pos", None)
            where = f" at character {pos + 1}" if pos is not None else ""
            raise ValueError(f"body is not valid JSON once filled in{where} ({msg}), but "
                             f"Content-Type says {content_type!r}: fix the body (text "
                             "placeholders need quotes: \"{model_id}\") or the header"
                             ) from None
    return target


def demo_target(kind: str, url: str, hint=None) -> LoadTarget:
    """The demo-aware request for a bundled demo's endpoint.

    batched: a 256-float feature vector per request; multiplexed: a model id per request
    in the multiplexing header; streaming: the response is read to the end, recording
    time to first chunk. `hint` is the demo catalog's load hint (backend.deploy.catalog.LoadHint:
    method, body, model_ids, stream; duck-typed, so views need not import the catalog):
    where given it decides, except that the batched demo always gets feature vectors.
    """
    if hint is not None and getattr(hint, "kind", "http") == "openai":
        return LoadTarget(url=url, openai=parse_openai_load(getattr(hint, "openai", None)))
    if hint is not None:
        ids = getattr(hint, "model_ids", None)
        body = getattr(hint, "body", "")
        if kind == "batched":
            body = '{"features": {features:%d}}' % BATCHED_FEATURES
        return LoadTarget(
            url=url, method=getattr(hint, "method", "POST") or "POST", body=body,
            headers=(("Content-Type", "application/json"),) if body else (),
            stream=bool(getattr(hint, "stream", False)),
            model_ids=None if ids is None else ModelIds(
                count=ids.count, distribution=ids.distribution, s=ids.s, prefix=ids.prefix,
                header=getattr(ids, "header", MODEL_ID_HEADER), first=0))
    if kind == "batched":
        return LoadTarget(url=url, body='{"features": {features:%d}}' % BATCHED_FEATURES)
    if kind == "multiplexed":
        return LoadTarget(url=url, body='{"seed": {seq}}',
                          model_ids=ModelIds(count=20, distribution="zipf", s=1.0))
    if kind == "streaming":
        return LoadTarget(url=url, body='{"seed": {seq}}', stream=True)
    return LoadTarget(url=url)


# ---------------------------------------------------------------------------- load models

@dataclass(frozen=True)
class Profile:
    """How the load level (requests/s, or users) moves over the run.

    The profile shapes a *level* that the user sets (and may change while it runs):
      constant  level
      step      a staircase up to level: level·min(steps, 1+⌊t/period_s⌋)/steps
      ramp      from start_fraction·level up to level over period_s, then level
      spike     level, and factor·level for spike_s at the start of every period_s
      sine      level·(1 + amplitude·sin(2πt/period_s))
    """

    kind: str = "constant"
    period_s: float = 10.0
    steps: int = 5
    start_fraction: float = 0.0
    factor: float = 3.0
    spike_s: float = 2.0
    amplitude: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in PROFILE_KINDS:
            raise ValueError(f"unknown profile {self.kind!r}; one of {', '.join(PROFILE_KINDS)}")
        if self.period_s <= 0:
            raise ValueError("profile period must be > 0 s")
        if self.steps < 1:
            raise ValueError("step profile needs at least one step")

    def value(self, level: float, t: float) -> float:
        """The load level at `t` seconds into the run."""
        t = max(0.0, t)
        k = self.kind
        if k == "constant":
            v = level
        elif k == "step":
            v = level * min(self.steps, 1 + int(t // self.period_s)) / self.steps
        elif k == "ramp":
            f = min(1.0, t / self.period_s)
            v = level * (self.start_fraction + (1.0 - self.start_fraction) * f)
        elif k == "spike":
            v = level * (self.factor if (t % self.period_s) < self.spike_s else 1.0)
        else:  # sine
            v = level * (1.0 + self.amplitude * math.sin(2 * math.pi * t / self.period_s))
        return max(0.0, v)

    def describe(self) -> str:
        k = self.kind
        if k == "constant":
            return "constant"
        if k == "step":
            return f"step: {self.steps} steps of {self.period_s:g} s"
        if k == "ramp":
            return f"ramp over {self.period_s:g} s from {self.start_fraction:.0%}"
        if k == "spike":
            return f"spike ×{self.factor:g} for {self.spike_s:g} s every {self.period_s:g} s"
        return f"sine ±{self.amplitude:.0%}, period {self.period_s:g} s"


@dataclass(frozen=True)
class LoadModel:
    """Open loop (arrivals at a rate, whatever the server does) or closed loop (N users)."""

    mode: str = OPEN  # or CLOSED
    arrivals: str = CONSTANT  # open loop: evenly spaced or POISSON
    rate: float = 10.0  # open loop: requests/s (the profile's level)
    users: int = 1  # closed loop: concurrent users (the profile's level)
    think_time_s: float = 0.0  # closed loop: pause after each response
    profile: Profile = field(default_factory=Profile)

    def __post_init__(self) -> None:
        if self.mode not in (OPEN, CLOSED):
            raise ValueError(f"unknown load mode {self.mode!r}")
        if self.arrivals not in (CONSTANT, POISSON):
            raise ValueError(f"unknown arrival process {self.arrivals!r}")
        if self.rate < 0 or self.users < 0 or self.think_time_s < 0:
            raise ValueError("rate, users and think time must be >= 0")

    def level(self) -> float:
        return self.rate if self.mode == OPEN else float(self.users)

    def describe(self) -> str:
        if self.mode == OPEN:
            text = f"open loop, {self.arrivals} arrivals at {self.rate:g} req/s"
        else:
            text = f"closed loop, {self.users} users"
            if self.think_time_s:
                text += f", think {self.think_time_s * 1000:g} ms"
        if self.profile.kind != "constant":
            text += f", {self.profile.describe()}"
        return text


@dataclass(frozen=True)
class LoadPlan:
    """What the load panel asks for: a target, a load model, and where the load comes
    from (None: this machine; else workers on the cluster)."""

    target: LoadTarget
    model: LoadModel
    source: "ClusterLoad | None" = None

    def describe(self) -> str:
        """The model, and where the load comes from when that is the cluster."""
        text = self.model.describe()
        return text if self.source is None else f"{text}, from {self.source.describe()}"


# ---------------------------------------------------------------------------- results

VERSION_HEADER = "x-serve-version"  # traffic router convention: who served a response


@dataclass(frozen=True)
class VersionLoad:
    """What the generator saw of one version over its last window (responses whose
    `x-serve-version` header named it): completions/s, errors, p50/p99 of the ok ones."""

    version: str
    rps: float
    ok: int
    errors: int
    p50_ms: float | None
    p99_ms: float | None

    @property
    def error_pct(self) -> float:
        n = self.ok + self.errors
        return 100.0 * self.errors / n if n else 0.0


def version_window(records, end: float, window_s: float) -> tuple[VersionLoad, ...]:
    """VersionLoad per version from {version: [(done, latency s, ok), …] oldest first}
    over the *window_s* seconds before *end* (same clock as done); reads each list from
    its newest end, so the cost is the window's."""
    out = []
    start = end - window_s
    for version in sorted(records):
        ok_lat, errors = [], 0
        for done, latency, ok in reversed(records[version]):  # newest first
            if done < start:
                break
            if done < end:
                if ok:
                    ok_lat.append(latency)
                else:
                    errors += 1
        n = len(ok_lat) + errors
        if not n:
            continue
        ok_lat.sort()

        def pct(q: float) -> float | None:
            if not ok_lat:
                return None
            return 1000.0 * ok_lat[min(len(ok_lat) - 1, int(q * len(ok_lat)))]

        out.append(VersionLoad(version, n / window_s, len(ok_lat), errors, pct(0.50),
                               pct(0.99)))
    return tuple(out)


@dataclass(frozen=True)
class ClusterLoad:
    """Load sent from inside the cluster: *workers* Ray actors, each asking for *cpus* CPUs,
    spread over the nodes or pinned to the node *node* (a Ray node id), each sending at
    the Serve proxy of its own node (*own_proxy*) or at the console's URL."""

    workers: int = 2
    node: str | None = None  # None: spread over the nodes
    cpus: float = 1.0
    own_proxy: bool = True

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("the cluster's load needs at least one worker")
        if self.cpus < 0:
            raise ValueError("a worker's CPU share must be >= 0")

    def describe(self) -> str:
        n = f"{self.workers} worker{'s' if self.workers != 1 else ''}"
        where = f"pinned to node {self.node[:8]}" if self.node else "spread over the nodes"
        return f"the cluster: {n} ({self.cpus:g} CPU each), {where}"


@dataclass(frozen=True)
class ClusterAccess:
    """How the cluster's load driver reaches the cluster: Ray Client's address
    (ray://host:port), the dashboard (the room check) and the auth token, if any."""

    ray_address: str
    dashboard_url: str
    token: str | None = None


@dataclass(frozen=True)
class WorkerState:
    """One load worker as the load panel shows it."""

    index: int
    state: str  # placing, running, died, stopped
    node_id: str | None = None
    node_ip: str | None = None
    url: str | None = None
    via: str | None = None  # "own node's proxy" or "the console's URL"
    offered_rps: float = 0.0  # its share of the rate (open loop)
    achieved_rps: float = 0.0  # completions/s over its last window
    sent: int = 0
    ok: int = 0
    pid: int | None = None  # its process on its node
    error: str | None = None


@dataclass(frozen=True)
class SecondStats:
    """One second of a run (completions binned by the second they completed in)."""

    t: float  # seconds since the run started (start of this second)
    level: float  # what the profile asked for: requests/s (open) or users (closed)
    offered: int  # requests whose intended send time fell in this second
    completed: int  # responses (ok or error) that finished in this second
    ok: int
    errors: tuple[tuple[str, int], ...]  # ("HTTP 503", 4), ("timeout", 1), …
    in_flight: int  # at the end of the second
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    ttfb_p50_ms: float | None = None  # streaming: time to first chunk
    ttfb_p99_ms: float | None = None
    # OpenAI-streaming load: time to first token, inter-token gaps, tokens of the
    # completions that finished in this second.
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def error_count(self) -> int:
        return sum(n for _, n in self.errors)


@dataclass(frozen=True)
class RunSummary:
    """A whole run, from the run's HDR histogram (coordinated-omission corrected in open loop)."""

    target: str
    model: str
    started_at: str  # ISO 8601, local time
    duration_s: float
    sent: int
    ok: int
    errors: int
    errors_by_kind: tuple[tuple[str, int], ...]
    timeouts: int
    offered_rps: float  # sent / duration
    achieved_rps: float  # completions per second over the span they occurred in
    latency_ms: tuple[tuple[str, float], ...]  # ("p50", …), p90, p99, p99.9, max, mean
    ttfb_ms: tuple[tuple[str, float], ...] = ()  # streaming only
    missed: int = 0  # open loop: sends skipped because the generator fell > 1 s behind
    measured_from: str = "intended send time"
    timed: int = 0  # requests whose latency the percentiles are of (the successful ones)
    ttft_ms: tuple[tuple[str, float], ...] = ()  # OpenAI-streaming load only
    itl_ms: tuple[tuple[str, float], ...] = ()
    tokens_in: int = 0
    tokens_out: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["errors_by_kind"] = dict(self.errors_by_kind)
        d["latency_ms"] = dict(self.latency_ms)
        d["ttfb_ms"] = dict(self.ttfb_ms)
        d["ttft_ms"] = dict(self.ttft_ms)
        d["itl_ms"] = dict(self.itl_ms)
        return d

    def rows(self) -> list[tuple[str, str]]:
        """(metric, value) rows: the CSV and the copied text."""
        r = [("target", self.target), ("load model", self.model),
             ("started at", self.started_at), ("duration s", f"{self.duration_s:.2f}"),
             ("sent", str(self.sent)), ("ok", str(self.ok)), ("errors", str(self.errors)),
             ("timeouts", str(self.timeouts)),
             ("offered req/s", f"{self.offered_rps:.2f}"),
             ("achieved req/s", f"{self.achieved_rps:.2f}")]
        r += [(f"errors {k}", str(n)) for k, n in self.errors_by_kind]
        r += [(f"latency {k} ms", f"{v:.3f}") for k, v in self.latency_ms]
        r += [(f"first chunk {k} ms", f"{v:.3f}") for k, v in self.ttfb_ms]
        r += [(f"TTFT {k} ms", f"{v:.3f}") for k, v in self.ttft_ms]
        r += [(f"ITL {k} ms", f"{v:.3f}") for k, v in self.itl_ms]
        if self.ttft_ms:
            r += [("input tokens", str(self.tokens_in)),
                  ("output tokens", str(self.tokens_out))]
        if self.missed:
            r.append(("missed sends", str(self.missed)))
        r.append(("latency measured from", self.measured_from))
        return r

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(("metric", "value"))
        w.writerows(self.rows())
        return buf.getvalue()

    def to_text(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows())


@dataclass(frozen=True)
class LoadStats:
    """A snapshot of a running (or finished) generator; cheap to take from any thread."""

    running: bool
    target_rps: float  # open loop: the level set; closed loop: the achieved rate
    sent: int
    ok: int
    errors: int
    in_flight: int
    achieved_rps: float  # completions/s over the last window
    p50_ms: float | None  # over the last window
    p99_ms: float | None
    last_error: str | None
    mode: str = OPEN
    users: int = 0  # closed loop: users running now
    offered_rps: float = 0.0  # intended sends/s over the last window
    p90_ms: float | None = None
    p999_ms: float | None = None
    timeouts: int = 0
    errors_by_kind: tuple[tuple[str, int], ...] = ()
    # Requests sent so far per model id, for targets that name one (multiplexing).
    model_ids_sent: tuple[tuple[str, int], ...] = ()
    history: tuple[SecondStats, ...] = ()  # every finished second of the run (bounded)
    summary: RunSummary | None = None  # as of the last finished second
    # Per version of a traffic-split target (responses naming it in x-serve-version), over
    # the last window.
    versions: tuple[VersionLoad, ...] = ()

    @classmethod
    def of(cls, running: bool, model: "LoadModel", window: tuple, **counts) -> "LoadStats":
        """From a generator's last-window figures — (achieved/s, offered/s, {percentile:
        ms} or None) — and its counters; one recipe for the thread and process variants."""
        achieved, offered, pcts = window
        pcts = pcts or {}
        return cls(running=running,
                   target_rps=model.rate if model.mode == OPEN else achieved,
                   achieved_rps=achieved, offered_rps=offered, mode=model.mode,
                   p50_ms=pcts.get(50.0), p90_ms=pcts.get(90.0), p99_ms=pcts.get(99.0),
                   p999_ms=pcts.get(99.9), **counts)


def seconds_to_csv(history: tuple[SecondStats, ...] | list[SecondStats]) -> str:
    """The per-second series as CSV (errors as one column per kind)."""
    kinds = sorted({k for s in history for k, _ in s.errors})
    cols = ["t", "level", "offered", "completed", "ok", "in_flight", "p50_ms", "p90_ms",
            "p99_ms", "p999_ms", "ttfb_p50_ms", "ttfb_p99_ms"]
    if any(s.ttft_p50_ms is not None or s.tokens_out for s in history):  # OpenAI load
        cols += ["ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tokens_in",
                 "tokens_out"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols + [f"errors {k}" for k in kinds])
    for s in history:
        d = asdict(s)
        errs = dict(s.errors)
        w.writerow([("" if d[c] is None else d[c]) for c in cols]
                   + [errs.get(k, 0) for k in kinds])
    return buf.getvalue()


__all__ = [
    "BATCHED_FEATURES", "CLOSED", "CONSTANT", "ClusterAccess", "ClusterLoad", "LoadModel",
    "LoadPlan", "LoadStats", "LoadTarget", "MODEL_ID_HEADER", "ModelIds", "OPEN", "OpenAILoad",
    "POISSON",
    "PROFILE_KINDS", "Profile", "RunSummary", "SecondStats", "VERSION_HEADER", "VersionLoad",
    "WorkerState", "check_target", "demo_target", "format_headers", "parse_headers",
    "render_body", "seconds_to_csv", "url_problem", "version_window",
]
