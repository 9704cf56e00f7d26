"""Cut a node's Prometheus page down to the Serve families the console plots (and the
node GPU gauges, backend/metrics/gpu.py), then parse.

A Ray node's metrics page is ~1 MB of text (Ray core, gRPC, tasks, every Serve internal
histogram), and only a few dozen kB of it answer the console's questions. Parsing all of
it with prometheus_client costs tens of milliseconds a second on a 2-core machine, so the
page is first cut line by line with C-level string operations (`str.split`,
`str.startswith` with a tuple, `str.find`), and only what is left is parsed.
benchmarks/scrape.py measures this against a full prometheus_client parse, side by side.

Names below are what Ray 2.60 exports (checked against a live page and
ray/serve/_private/{replica,router,request_ingress_metrics,deployment_state,
autoscaling_state}.py, ray/serve/{batching,multiplex}.py): Ray prefixes `ray_`, counters
get `_total`.

Parsing the filtered lines: prometheus_client's parser walks label text character by
character (~60 µs per 300-character Ray sample line: ~17 ms for the ~260 samples kept from
a 0.85 MB page), so `parse_samples` is a small line parser for exactly the text-format
sample syntax (`name{l="v",...} value [timestamp]`, escaped `\\ \" \n` in values,
`+Inf`/`NaN`), ~10x faster (plain `str.split` on Ray's escape-free label text, a
regex for anything else). `parse` (prometheus_client) stays as the reference: the
tests check both agree sample for sample on real Ray pages.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from prometheus_client.parser import text_string_to_metric_families

from backend.metrics import gpu
from backend.metrics import vllm_metrics as vllm
# The C extension, or None (not built, or SERVE_CONSOLE_NO_C_EXT: value_split decides).
from backend.metrics.value_split import page_scan

# Replica side (labels: application, deployment, replica, + WorkerId/NodeAddress/...).
REQUESTS = "ray_serve_deployment_request_counter"            # counter, + route
ERRORS = "ray_serve_deployment_error_counter"                # counter, + route, exception_type
PROCESSING_LATENCY = "ray_serve_deployment_processing_latency_ms"  # histogram, + route
REPLICA_ONGOING = "ray_serve_replica_processing_queries"     # gauge, per replica
BATCH_SIZE = "ray_serve_actual_batch_size"                   # histogram, + function_name
BATCH_WAIT = "ray_serve_batch_wait_time_ms"                  # histogram, + function_name
BATCH_UTILIZATION = "ray_serve_batch_utilization_percent"    # histogram, + function_name
BATCH_QUEUE = "ray_serve_batch_queue_length"                 # gauge, + function_name
MUX_GET_MODEL = "ray_serve_multiplexed_get_model_requests_counter"  # counter
MUX_LOADS = "ray_serve_multiplexed_models_load_counter"      # counter
MUX_MODELS = "ray_serve_num_multiplexed_models"              # gauge, per replica
MUX_UNLOADS = "ray_serve_multiplexed_models_unload_counter"  # counter
MUX_LOAD_LATENCY = "ray_serve_multiplexed_model_load_latency_ms"  # histogram
# 1 per (replica, model_id) the replica holds; Ray sets it to 0 when it evicts the model.
MUX_REGISTERED = "ray_serve_registered_multiplexed_model_id"  # gauge, + model_id
# The streaming demo's own metrics (demo_apps/streaming.py, via ray.serve.metrics, so
# they carry application/deployment/replica labels like Serve's).
PIPELINE_CHUNKS = "ray_serve_pipeline_chunks"                 # counter, + stage
PIPELINE_TTFO = "ray_serve_pipeline_ttfo_ms"                  # histogram, + mode
PIPELINE_TOTAL = "ray_serve_pipeline_total_ms"                # histogram, + mode
# The generate demo's scheduler (demo_apps/generate.py, via ray.serve.metrics; + scheduler).
LLM_RUNNING = "ray_serve_llm_running_seqs"                    # gauge
LLM_WAITING = "ray_serve_llm_waiting_seqs"                    # gauge
LLM_SLOTS = "ray_serve_llm_slots"                             # gauge: the running limit
LLM_SLOT_USE = "ray_serve_llm_slot_use"                       # gauge: running / slots
LLM_OUTPUT_TOKENS = "ray_serve_llm_output_tokens"             # counter
LLM_TTFT = "ray_serve_llm_ttft_ms"                            # histogram
# vLLM's engine metrics as Ray Serve LLM exports them (no application or deployment
# label: backend/metrics/vllm_metrics.py says how they are tied to a deployment).
# Caller side (router in the proxy or in a calling replica; labels: application,
# deployment, handle, actor_id).
QUEUED = "ray_serve_deployment_queued_queries"               # gauge
# Controller side (labels: application, deployment; + replica when Ray's
# high-cardinality controller tags are on, which is the 2.60 default).
REPLICA_HEALTHY = "ray_serve_deployment_replica_healthy"     # gauge, 1 per healthy replica
TARGET_REPLICAS = "ray_serve_autoscaling_target_replicas"    # gauge
# The autoscaler's own gauges (ray/serve/_private/autoscaling_state.py, labels application
# and deployment only): set once per decision, so only for deployments with autoscaling.
AUTOSCALING_DESIRED = "ray_serve_autoscaling_desired_replicas"      # gauge
AUTOSCALING_TOTAL_REQUESTS = "ray_serve_autoscaling_total_requests"  # gauge
AUTOSCALING_TARGET_ONGOING = "ray_serve_autoscaling_target_ongoing_requests"  # gauge
# How late the autoscaler's inputs reach the controller (its metrics health; Ray's
# controller.py records each report's age on arrival), by application and deployment.
AUTOSCALER_REPLICA_DELAY = "ray_serve_autoscaling_replica_metrics_delay_ms"  # histogram
AUTOSCALER_HANDLE_DELAY = "ray_serve_autoscaling_handle_metrics_delay_ms"    # histogram
# Proxy side (labels: application, route, method, status_code / error_code; no deployment).
HTTP_REQUESTS = "ray_serve_num_http_requests"                # counter, + status_code
HTTP_ERRORS = "ray_serve_num_http_error_requests"            # counter, + error_code
HTTP_LATENCY = "ray_serve_http_request_latency_ms"           # histogram

COUNTERS = frozenset({REQUESTS, ERRORS, MUX_GET_MODEL, MUX_LOADS, MUX_UNLOADS,
                      HTTP_REQUESTS, HTTP_ERRORS, PIPELINE_CHUNKS, LLM_OUTPUT_TOKENS}
                     ) | vllm.COUNTERS
HISTOGRAMS = frozenset({PROCESSING_LATENCY, BATCH_SIZE, BATCH_WAIT, BATCH_UTILIZATION,
                        HTTP_LATENCY, MUX_LOAD_LATENCY, PIPELINE_TTFO, PIPELINE_TOTAL,
                        AUTOSCALER_REPLICA_DELAY, AUTOSCALER_HANDLE_DELAY, LLM_TTFT}
                       ) | vllm.HISTOGRAMS
#: The autoscaler's metrics delays (present once some deployment autoscales and reports).
AUTOSCALER_DELAY_FAMILIES: frozenset[str] = frozenset({AUTOSCALER_REPLICA_DELAY,
                                                       AUTOSCALER_HANDLE_DELAY})
GAUGES = frozenset({REPLICA_ONGOING, BATCH_QUEUE, MUX_MODELS, MUX_REGISTERED, QUEUED,
                    REPLICA_HEALTHY, TARGET_REPLICAS, AUTOSCALING_DESIRED,
                    AUTOSCALING_TOTAL_REQUESTS, AUTOSCALING_TARGET_ONGOING, LLM_RUNNING,
                    LLM_WAITING, LLM_SLOTS, LLM_SLOT_USE}) | vllm.GAUGES

#: Family names as they appear after `# TYPE` (counters carry `_total` there). The
#: node GPU gauges (backend/metrics/gpu.py) are per node, not per deployment: only pages
#: of nodes with a GPU have them.
NEEDED_FAMILIES: frozenset[str] = frozenset(
    {c + "_total" for c in COUNTERS} | HISTOGRAMS | GAUGES | gpu.FAMILIES
)


@functools.lru_cache(maxsize=16)
def _sample_names(families: frozenset[str]) -> frozenset[str]:
    names = set(families)
    for f in families:
        names.update((f + "_bucket", f + "_sum", f + "_count", f + "_created"))
    return frozenset(names)


_COMMENT_PREFIXES = ("# HELP ", "# TYPE ")


@dataclass(frozen=True)
class _Syntax:
    """The text format's marks as str or as bytes, so one walk serves both."""

    nl: str | bytes
    comment: str | bytes        # a comment line's start after a newline
    prefixes: tuple             # "# HELP ", "# TYPE "
    hash: str | bytes
    brace: str | bytes
    space: str | bytes
    after_name: tuple           # what may follow a family's name on its own lines
    after_type: tuple           # what may follow a family's name on its "# TYPE" line
    key: type                   # a slice as a set's key (a bytearray's slice: bytes)


_STR = _Syntax("\n", "\n# ", _COMMENT_PREFIXES, "#", "{", " ", ("{", " ", "_", ""),
               (" ", "\n", ""), str)
_BYTES = _Syntax(b"\n", b"\n# ", tuple(p.encode() for p in _COMMENT_PREFIXES), b"#", b"{",
                 b" ", (b"{", b" ", b"_", b""), (b" ", b"\n", b""), bytes)


@functools.lru_cache(maxsize=16)
def _as_bytes(families: frozenset[str]) -> tuple[frozenset[bytes], frozenset[bytes],
                                                   tuple[bytes, ...]]:
    """The families, their sample names and line starts as bytes (prefilter on bytes)."""
    return (frozenset(f.encode() for f in families),
            frozenset(n.encode() for n in _sample_names(families)),
            tuple(p.encode() for p in _line_starts(families)))


def prefilter(text: str | bytes, families: frozenset[str] = NEEDED_FAMILIES) -> str | bytes:
    """Keep only the sample, `# HELP` and `# TYPE` lines of `families`.

    Exact by name: `ray_serve_batch_wait_time_ms` keeps its `_bucket`/`_sum`/`_count`
    lines but not a hypothetical `ray_serve_batch_wait_time_ms_max`.

    The text format keeps a family's lines together after its `# HELP`/`# TYPE` lines,
    so the page is walked from comment to comment (C-level `find`): a block headed by a
    wanted family whose last line is one of its samples (so every line is: a family's
    lines come together) is kept whole (an empty line inside it too, which readers
    skip; a Ray page has none); other blocks headed by a
    wanted family are checked line by line (`_filter_lines`), and blocks of other
    families are skipped. A Ray page has ~170 families and needs ~30. Lines before the
    first comment, and blocks headed by any other comment, are checked line by line.

    Works on the page's bytes (as fetched: decoding a whole page costs more than this
    walk) as on text, and returns the same type; a bytearray (as libdeflate inflates)
    is read as it is, without a copy, and gives bytes.

    Bytes are cut in C where the extension was built (`_page_scan.keep_lines`: every
    line checked, as prefilter_by_line; 50 fleet pages 6.7 ms against 20.9 ms for this
    walk, 2026-12-03), text and machines without it by the walk (`prefilter_walk`), as
    is everything where SERVE_CONSOLE_NO_C_EXT turned it off (value_split decides).
    """
    if page_scan is not None and isinstance(text, (bytes, bytearray)):
        wanted, samples, starts = _as_bytes(families)
        return page_scan.keep_lines(text, starts, wanted, samples)
    return prefilter_walk(text, families)


def prefilter_walk(text: str | bytes, families: frozenset[str] = NEEDED_FAMILIES
                   ) -> str | bytes:
    """prefilter's walk from comment to comment, in Python (see prefilter)."""
    if isinstance(text, (bytes, bytearray)):
        syn = _BYTES
        wanted, samples, starts = _as_bytes(families)
    else:
        syn = _STR
        wanted, samples, starts = families, _sample_names(families), _line_starts(families)
    nl = syn.nl
    help_, type_ = syn.prefixes
    find, size = text.find, len(text)
    kept: list = []
    pos = 0 if text.startswith(syn.hash + syn.space) else _next_comment(text, 0, syn)
    if pos != 0:
        _filter_lines(text[:pos if pos >= 0 else size], wanted, samples, starts, kept)
    while pos >= 0:
        start = pos + 1 if text[pos:pos + 1] == nl else pos
        if text.startswith(syn.prefixes, start):
            name_end = find(syn.space, start + 7)
            line_end = find(nl, start)
            if line_end < 0:
                line_end = size
            if name_end < 0 or name_end > line_end:
                name_end = line_end
            family = text[start + 7:name_end]
            after = line_end + 1 + len(type_) + len(family)  # behind the name on a TYPE line
            if (text.startswith(help_, start)
                    and text.startswith(type_ + family, line_end + 1)
                    and text[after:after + 1] in syn.after_type):
                # The family's "# TYPE" line right behind its "# HELP" line (as every
                # family of a Ray page has them): one block, one step of the walk.
                type_end = find(nl, line_end + 1)
                line_end = type_end if type_end >= 0 else size
            pos = _next_comment(text, line_end, syn) if line_end < size else -1
            end = pos if pos >= 0 else size
            if syn.key(family) not in wanted:
                if _only_its_own(text, line_end, end, family, syn):
                    continue
            elif _ends_with_its_own(text, line_end, end, samples, syn):
                kept.append(text[start:end].rstrip(nl))
                continue
        else:
            pos = _next_comment(text, start, syn)
            end = pos if pos >= 0 else size
        _filter_lines(text[start:end], wanted, samples, starts, kept)
    kept.append(text[:0])
    return nl.join(kept)


def _next_comment(text, start: int, syn: _Syntax) -> int:
    """The position of the next newline followed by "# " at or after *start*, or -1.
    Found from the `#`s (a C-level memchr; a node page has a few hundred, against
    thousands of newlines, which make a search for the three characters ~20x slower)."""
    find, hash_, nl, space = text.find, syn.hash, syn.nl, syn.space
    pos = find(hash_, start + 1)
    while pos > 0:
        if text[pos - 1:pos] == nl and text[pos + 1:pos + 2] == space:
            return pos - 1
        pos = find(hash_, pos + 1)
    return -1


def _last_line(text, header_end: int, end: int, syn: _Syntax) -> tuple[int, int]:
    """(start, end) of the last non-empty line of text[header_end:end]; start <=
    header_end when there is none after the header line."""
    last_end = end
    while last_end > header_end and text[last_end - 1:last_end] == syn.nl:
        last_end -= 1
    return text.rfind(syn.nl, header_end, last_end) + 1, last_end


def _ends_with_its_own(text, header_end: int, end: int, samples, syn: _Syntax) -> bool:
    """Whether the block text[header_end:end] after a wanted family's comment line has
    no sample line or ends with a sample of a wanted name: the family's lines come
    together, so then every line of the block is the family's."""
    last_start, last_end = _last_line(text, header_end, end, syn)
    if last_start <= header_end:
        return True
    name_end = text.find(syn.brace, last_start, last_end)
    if name_end < 0:
        name_end = text.find(syn.space, last_start, last_end)
    return name_end > last_start and syn.key(text[last_start:name_end]) in samples


def _only_its_own(text, header_end: int, end: int, family, syn: _Syntax) -> bool:
    """Whether the block text[header_end:end] after a family's comment line holds only
    that family's lines. A family's lines come together, so its last line tells: one of
    another name there is an untyped family (no comment lines of its own) that follows,
    which the block's line-by-line check must see."""
    last_start, _ = _last_line(text, header_end, end, syn)
    if last_start <= header_end:
        return True  # no line after the comment
    if not text.startswith(family, last_start):
        return False
    after = text[last_start + len(family):last_start + len(family) + 1]
    return after in syn.after_name


def prefilter_by_line(text: str, families: frozenset[str] = NEEDED_FAMILIES) -> str:
    """prefilter's result from every line of the page checked one by one (the
    reference prefilter is tested against, and what it did before 2026-11-27)."""
    kept: list[str] = []
    _filter_lines(text, families, _sample_names(families), _line_starts(families), kept)
    kept.append("")
    return "\n".join(kept)


@functools.lru_cache(maxsize=16)
def _line_starts(families: frozenset[str]) -> tuple[str, ...]:
    prefixes = _group_prefixes(families)
    return tuple(p for c in prefixes for p in (c, "# HELP " + c, "# TYPE " + c))


def _filter_lines(text: str, families: frozenset[str], samples: frozenset[str],
                  starts: tuple[str, ...], kept: list[str]) -> None:
    """Append to *kept* the lines of *text* that prefilter keeps. Cost is one `split`
    and one C-level `startswith` per line; only lines that share a common prefix of the
    wanted names (`ray_serve_`, `ray_node_g`) are looked at in Python."""
    syn = _BYTES if isinstance(text, (bytes, bytearray)) else _STR
    key = syn.key
    append = kept.append
    for line in text.split(syn.nl):
        if not line.startswith(starts):
            continue
        if line[:1] == syn.hash:
            # "# TYPE name type" / "# HELP name text"
            end = line.find(syn.space, 7)
            if key(line[7:end] if end >= 0 else line[7:]) in families:
                append(line)
            continue
        end = line.find(syn.brace)
        if end < 0:
            end = line.find(syn.space)
        if key(line[:end]) in samples:
            append(line)


def _group_prefixes(names: frozenset[str]) -> tuple[str, ...]:
    """The common prefix of each group of names that share their first two words
    (`ray_serve_…`, `ray_node_g…`): one prefix for all would be `ray_`, and every line
    of the page would then be looked at in Python."""
    groups: dict[str, set[str]] = {}
    for n in names:
        groups.setdefault("_".join(n.split("_", 2)[:2]), set()).add(n)
    return tuple(sorted(_common_prefix(frozenset(g)) for g in groups.values()))


def _common_prefix(names: frozenset[str]) -> str:
    items = sorted(names)
    if not items:
        return ""
    a, b = items[0], items[-1]
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


@dataclass(frozen=True, slots=True)
class Sample:
    name: str            # the sample's own name: ..._total, ..._bucket, ..._sum, or the gauge
    labels: Mapping      # label name -> value (includes `le` on buckets); read-only
    value: float


def parse(filtered_text: str) -> dict[str, tuple[str, list[Sample]]]:
    """Parse (already filtered) exposition text: family name -> (type, samples).

    Family names are as prometheus_client reports them: counters without `_total`.
    """
    out: dict[str, tuple[str, list[Sample]]] = {}
    for fam in text_string_to_metric_families(filtered_text):
        samples = [Sample(s.name, s.labels, s.value) for s in fam.samples
                   if not s.name.endswith("_created")]
        prev = out.get(fam.name)
        if prev:
            prev[1].extend(samples)
        else:
            out[fam.name] = (fam.type, samples)
    return out


_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_UNESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPES = {"n": "\n", "\\": "\\", '"': '"'}


def _unescape(value: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: _UNESCAPES.get(m.group(1), "\\" + m.group(1)), value)


def _parse_labels(body: str) -> dict[str, str]:
    body = body.rstrip().rstrip(",")
    if "\\" not in body and body.endswith('"'):
        # Without backslashes a `"` can only be a delimiter (quotes inside values must
        # be escaped), so splitting on `",` is exact; Ray's pages always take this path.
        try:
            labels = dict(p.split('="', 1) for p in body[:-1].split('",'))
        except ValueError:
            labels = None
        if labels is not None and all(k.isidentifier() for k in labels):
            return labels
    return {k: (_unescape(v) if "\\" in v else v) for k, v in _LABEL_RE.findall(body)}


# Label sets seen before, by their text: a node's page repeats the same label sets poll
# after poll (only the values change), and parsing them was half of a poll's CPU at
# fleet size (benchmarks/fleet_scale.py). Read-only views, since every sample with that
# text shares one. Emptied when full: a 1,000-replica fleet has ~70,000 label sets.
_LABELS_SEEN: dict[str, Mapping[str, str]] = {}
LABELS_SEEN_MAX = 400_000


def _labels(body: str) -> Mapping[str, str]:
    labels = _LABELS_SEEN.get(body)
    if labels is None:
        labels = MappingProxyType(_parse_labels(body))
        if len(_LABELS_SEEN) >= LABELS_SEEN_MAX:
            _LABELS_SEEN.clear()
        _LABELS_SEEN[body] = labels
    return labels


def parse_samples(filtered_text: str) -> list[Sample]:
    """Sample lines of (already filtered) exposition text, in order; comments skipped.

    Sample names are the exposition's own (`..._total`, `..._bucket`, ...); types are
    known from the family tables above, so `# TYPE` lines are not needed.
    Raises ValueError on a malformed sample line.
    """
    out: list[Sample] = []
    append = out.append
    for line in filtered_text.split("\n"):
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            if close < brace:
                raise ValueError(f"malformed sample line: {line[:200]!r}")
            name = line[:brace].rstrip()
            labels = _labels(line[brace + 1:close])
            rest = line[close + 1:].split()
        else:
            parts = line.split()
            name, rest, labels = parts[0], parts[1:], {}
        if not rest:
            raise ValueError(f"sample line without a value: {line[:200]!r}")
        append(Sample(name, labels, float(rest[0])))
    return out
