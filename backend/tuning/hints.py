"""The advisor's hints: the rules' ids and the guides' words behind each (`ADVICE`, the
hint's tooltip; `TITLES`), one piece of advice (`Hint`), and which hints are on show
(`HintBoard`: a hint appears the first time its rule fires and goes only after the rule
stayed silent for `CLEAR_S`, so hints do not flicker). The rules that make hints are in
advisor.py. Plain Python, no Qt, no network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from backend.metrics.series import DeploymentKey

#: A shown hint goes once its rule has been silent this long.
CLEAR_S = 10.0

WARNING, INFO = "warning", "info"

# Rule ids, in the order hints are listed (and in which one wins when two rules suggest
# the same knob of one deployment).
CALLER_QUEUE = "caller_queue"
REPLICA_LIMIT = "replica_limit"
BATCH_CAP = "batch_cap"
BATCHES_FULL = "batches_full"
BATCH_WAIT_EMPTY = "batch_wait_empty"
TAIL_BATCH_WAIT = "tail_batch_wait"
MODEL_CACHE = "model_cache"
NOT_AT_TARGET = "not_at_target"
TIMEOUTS = "timeouts"
LLM_SLOTS = "llm_slots"
LLM_WAITING = "llm_waiting"
RULES = (NOT_AT_TARGET, TIMEOUTS, CALLER_QUEUE, REPLICA_LIMIT, BATCH_CAP, BATCHES_FULL,
         BATCH_WAIT_EMPTY, TAIL_BATCH_WAIT, LLM_SLOTS, LLM_WAITING, MODEL_CACHE)

# The guides' words behind each rule (the hint's tooltip, before the knob's own help).
ADVICE = {
    CALLER_QUEUE:
        "Performance guide, high-latency checklist: requests waiting for a replica "
        "(serve_deployment_queued_queries) while the replicas have room are not held back "
        "by max_ongoing_requests. With no replica running it is a cold start: set "
        "min_replicas ≥ 1 for latency-sensitive services. Otherwise the router cannot hand "
        "requests out fast enough — a CPU-bound proxy, or replicas that answer the "
        "router late (a handler that blocks its event loop: use async def and await); "
        "more replicas spread the work.",
    REPLICA_LIMIT:
        "Troubleshooting guide: if max_ongoing_requests is too low, requests queue at the "
        "router — queue building up → add replicas or increase max_ongoing_requests. Too "
        "high and replicas may run out of memory or show high latency; with autoscaling "
        "keep it about 2–3× target_ongoing_requests.",
    BATCHES_FULL:
        "Batching tips: start small and double max_batch_size (2 → 4 → 8 …, powers of two) "
        "until throughput gains flatten, watching latency and memory; keep it ≤ "
        "max_ongoing_requests.",
    BATCH_WAIT_EMPTY:
        "Batching tips: set batch_wait_timeout_s from the latency SLO minus the compute "
        "time (SLO 150 ms, compute 100 ms → much less than 50 ms). Lower: lower latency, "
        "smaller batches; higher: bigger batches, more latency.",
    TAIL_BATCH_WAIT:
        "Common issues: high tail latency (P99 ≫ P50). Here the requests at the tail are "
        "the ones that waited out batch_wait_timeout_s for a batch that did not fill: a "
        "shorter wait cuts the tail at little cost in batch size.",
    BATCH_CAP:
        "A replica never holds more than max_ongoing_requests requests, "
        "so with max_batch_size × max_concurrent_batches above it a batch can never fill "
        "and each waits out batch_wait_timeout_s. Ray's rule: max_ongoing_requests ≥ "
        "max_batch_size × max_concurrent_batches (max_concurrent_batches is a @serve.batch "
        "argument; taken from user_config where the app reports it, else 1).",
    MODEL_CACHE:
        "Multiplexing: each replica keeps the max_num_models_per_replica most recently "
        "used models (LRU); a miss loads the model first. A cache too small for the "
        "models in use thrashes: a larger cache (more memory per replica) or more "
        "replicas (more caches, model-aware routing) raise the hit rate.",
    NOT_AT_TARGET:
        "Troubleshooting guide: replicas that cannot be scheduled wait for resources "
        "(Ray warns after 30 s); the autoscaler's target is then never reached. Give "
        "them room (free resources, add nodes, lower the replica's resources), or ask "
        "for a replica count the cluster can place.",
    TIMEOUTS:
        "Troubleshooting guide: timeout errors (HTTP 408) → increase request_timeout_s "
        "or optimize the handler; slow requests block the requests waiting behind them. "
        "request_timeout_s is the cluster's http_options, applied only when Serve "
        "starts, so this console shows it read-only.",
}

ADVICE[LLM_SLOTS] = (
    "Continuous batching decodes every running sequence in one step: while a step costs "
    "little more for more rows, more slots (max_num_seqs) give more output tokens/s; once "
    "its cost grows with the rows, more slots only make each sequence's tokens slower "
    "(inter-token latency) at the same tokens/s. Fewer slots then keep the tokens fast; "
    "replicas add throughput.")
ADVICE[LLM_WAITING] = (
    "A request that finds every slot taken waits for a sequence to end before its "
    "prefill, and its time to first token grows with that wait. More slots (max_num_seqs) "
    "take it at once while a decode step has room for more rows; else more replicas. With "
    "request-level batching a request waits for the whole running batch to end, even with "
    "slots free: continuous batching gives a finished sequence's slot away at the next step.")

TITLES = {
    CALLER_QUEUE: "Requests queue at the caller, replicas have room",
    REPLICA_LIMIT: "Replicas at max_ongoing_requests, queue not draining",
    BATCHES_FULL: "Batches always full, requests waiting",
    BATCH_WAIT_EMPTY: "Batches nearly empty, latency is the batch wait",
    TAIL_BATCH_WAIT: "p99 ≫ p50: the tail waits for the batch timer",
    BATCH_CAP: "Batches can never fill (max_ongoing_requests too low)",
    MODEL_CACHE: "Model cache misses: hit rate low, loads high",
    NOT_AT_TARGET: "Replicas short of their target",
    TIMEOUTS: "Requests time out",
    LLM_SLOTS: "Tokens slow down with more running sequences",
    LLM_WAITING: "Sequences wait for a slot, time to first token grows",
}


def show_value(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float):
        return f"{v:g}"
    return "unset" if v is None else str(v)


@dataclass(frozen=True)
class Hint:
    """One piece of advice about one deployment."""

    id: str                 # "rule:app/deployment" — the same while the symptom lasts
    rule: str
    key: DeploymentKey
    title: str
    symptom: str            # what was seen, with the numbers
    knob: str = ""          # knob path (backend/tuning/knobs.py); "" when no knob here fixes it
    knob_label: str = ""
    current: Any = None
    suggested: Any = None
    severity: str = WARNING
    advice: str = ""        # the guides' advice, then the knob's own help
    applies: str = ""       # "live" / "rolls replicas" (the knob's), "" without a knob
    blocked: str = ""       # why it cannot be applied from here ("" when it can)

    @property
    def applicable(self) -> bool:
        return bool(self.knob) and self.suggested is not None and not self.blocked

    def change_text(self) -> str:
        """'max_batch_size 4 → 8' (or what to do when no knob can be moved here)."""
        if not self.knob:
            return "no knob here"
        return f"{self.knob_label or self.knob} {show_value(self.current)} → {show_value(self.suggested)}"

    def line(self) -> str:
        """The hint in one line (the event log, scripted runs)."""
        app, dep = self.key
        what = self.change_text() if self.knob else "no knob to move here"
        return f"{app}/{dep}: {self.title} — {self.symptom} Suggest: {what}."


@dataclass(frozen=True)
class BoardChange:
    appeared: tuple[Hint, ...] = ()
    cleared: tuple[Hint, ...] = ()
    shown: tuple[Hint, ...] = ()


class HintBoard:
    """The hints on show. A hint appears the first time its rule fires (the rules already
    ask for a symptom held over their window) and stays, with the newest numbers, until
    its rule has been silent for *clear_s*; a deployment that is gone takes its hints
    along at once."""

    def __init__(self, clear_s: float = CLEAR_S) -> None:
        self._clear_s = clear_s
        self._shown: dict[str, Hint] = {}
        self._last_seen: dict[str, float] = {}

    @property
    def shown(self) -> tuple[Hint, ...]:
        return tuple(self._shown.values())

    def get(self, hint_id: str) -> Hint | None:
        return self._shown.get(hint_id)

    def update(self, hints: Iterable[Hint], now: float,
               keys: Iterable[DeploymentKey] | None = None) -> BoardChange:
        """*hints*: what the rules say now; *keys*: the deployments that exist (None: do
        not drop any for being gone)."""
        appeared = []
        fired = set()
        for h in hints:
            fired.add(h.id)
            if h.id not in self._shown:
                appeared.append(h)
            self._shown[h.id] = h
            self._last_seen[h.id] = now
        alive = set(keys) if keys is not None else None
        cleared = []
        for hid, h in list(self._shown.items()):
            gone = alive is not None and h.key not in alive
            if hid not in fired and (gone or now - self._last_seen[hid] >= self._clear_s):
                cleared.append(self._shown.pop(hid))
                self._last_seen.pop(hid, None)
        order = {r: i for i, r in enumerate(RULES)}
        ordered = sorted(self._shown.values(),
                         key=lambda h: (h.severity != WARNING, h.key, order.get(h.rule, 99)))
        self._shown = {h.id: h for h in ordered}
        return BoardChange(tuple(appeared), tuple(cleared), tuple(ordered))

    def clear(self) -> BoardChange:
        cleared = tuple(self._shown.values())
        self._shown.clear()
        self._last_seen.clear()
        return BoardChange(cleared=cleared)
