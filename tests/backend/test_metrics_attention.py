"""Watch cost that follows attention (backend/metrics/attention.py): the real
DirectScrapeSource over HTTP, against three nodes' pages whose counters grow at known
rates, read off the wall clock at each request (a replica that serves a steady load).
Rates are checked within 8 %: a page is read some milliseconds before its poll's time
(more on a loaded machine); a window that missed its series' last reading reads 40 % high.

Node 0 hosts deployment A's replica, node 1 B's, node 2 C's, nodes 3 and 4 none; every
node has a handle that queues one request for A (a caller-side gauge: only a full poll
sees them all)."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from backend.metrics import exposition as ex
from backend.metrics.direct import DirectScrapeSource

APP = "app"
RATES = {"A": 12.0, "B": 7.0, "C": 3.0}   # requests/s of each deployment's replica
NODE_OF = {"A": 0, "B": 1, "C": 2}
NODES = 5
A, B, C = ((APP, d) for d in "ABC")


class _Node(http.server.BaseHTTPRequestHandler):
    t0 = 0.0

    def do_GET(self):  # noqa: N802
        node = int(self.path.rsplit("/", 1)[-1])
        now = time.time()
        lines = [f"# TYPE {ex.REQUESTS}_total counter"]
        for dep, rate in RATES.items():
            if NODE_OF[dep] == node:
                lines.append(f'{ex.REQUESTS}_total{{application="{APP}",deployment="{dep}",'
                             f'replica="{APP}#{dep}#r{node}",route="/"}} '
                             f"{rate * (now - self.t0):.3f}")
        lines += [f"# TYPE {ex.QUEUED} gauge",
                  f'{ex.QUEUED}{{application="{APP}",deployment="A",handle="h{node}"}} 1.0']
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def source():
    handler = type("H", (_Node,), {"t0": time.time() - 100.0})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/metrics/"
    src = DirectScrapeSource(lambda: [base + str(i) for i in range(NODES)], window_s=5.0)
    try:
        yield src
    finally:
        src.close()
        srv.shutdown()
        srv.server_close()


def _polls(src: DirectScrapeSource, n: int) -> list[tuple[float, dict, bool]]:
    """*n* polls a second apart: (time, values, whether it read every page)."""
    out = []
    for _ in range(n):
        start = time.monotonic()
        t, values = src.poll()
        out.append((t, values, src.last_poll_full))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    return out


def _warm(src: DirectScrapeSource) -> None:
    """Every page read twice: the window holds a rate for every deployment."""
    _polls(src, 2)


def test_the_watched_deployment_gets_a_point_every_second_the_rest_every_few(source):
    source.set_attention([A])
    _warm(source)
    polls = _polls(source, 12)
    assert all(A in v for _, v, _ in polls)
    with_b = [t for t, v, _ in polls if B in v]
    assert with_b == [t for t, _, full in polls if full]
    assert 2 <= len(with_b) <= 3
    assert min(b - a for a, b in zip(with_b, with_b[1:])) > 4.0
    # The watched deployment's queue is its callers' (a handle on every node): a watch
    # poll reads one node, so it leaves the figure to the full polls, never a part sum.
    assert [v[A].get("queued_requests") for _, v, full in polls if not full] == \
        [None] * (len(polls) - len(with_b))
    assert all(v[A]["queued_requests"] == NODES for _, v, full in polls if full)


def test_rates_stay_right_across_the_slower_polls(source):
    source.set_attention([A])
    _warm(source)
    polls = _polls(source, 11)
    a_rates = [v[A]["requests_per_s"] for _, v, _ in polls]
    b_rates = [v[B]["requests_per_s"] for _, v, _ in polls if B in v]
    c_rates = [v[C]["requests_per_s"] for _, v, _ in polls if C in v]
    assert a_rates == pytest.approx([RATES["A"]] * len(a_rates), rel=0.08)
    assert len(b_rates) >= 2
    assert b_rates == pytest.approx([RATES["B"]] * len(b_rates), rel=0.08)
    assert c_rates == pytest.approx([RATES["C"]] * len(c_rates), rel=0.08)


def test_a_deployment_that_becomes_watched_gets_its_rate_at_the_next_poll(source):
    source.set_attention([A])
    _warm(source)
    # Up to a full poll, then one more second: B was last read at that full poll.
    polls = _polls(source, 7)
    while not polls[-1][2]:
        polls = _polls(source, 1)
    _polls(source, 1)
    source.set_attention([A, B])
    (t, values, full), = _polls(source, 1)
    assert not full
    assert values[B]["requests_per_s"] == pytest.approx(RATES["B"], rel=0.08)
    assert C not in values
    later = _polls(source, 3)
    assert all(B in v for _, v, _ in later)


def test_without_attention_every_deployment_every_poll(source):
    _warm(source)
    polls = _polls(source, 3)
    assert all(full and {A, B, C} <= set(v) for _, v, full in polls)
