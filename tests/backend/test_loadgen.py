"""The simple open-loop generator: offered rate kept, errors counted, stop is prompt."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

from backend.load.generator import LoadGenerator, LoadTarget, offer_for


@pytest.fixture(scope="module")
def echo_server():
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length)
            status = 500 if b'"fail"' in body else 200
            if b'"slow"' in body:
                time.sleep(5)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_open_loop_rate_is_kept(echo_server):
    gen = LoadGenerator(LoadTarget(url=echo_server, body='{"seq": {seq}}'), window_s=3.0)
    gen.start(100)
    try:
        time.sleep(4.0)
        stats = gen.stats()
    finally:
        gen.stop()
    assert stats.errors == 0, stats.last_error
    assert 90 <= stats.achieved_rps <= 110, stats
    # Sending starts once the generator's thread has imported aiohttp (not at start()).
    summary = gen.summary()
    expected = 100 * summary.duration_s
    assert 0.9 * expected <= summary.sent <= 1.1 * expected + 1, summary
    assert stats.p50_ms is not None and stats.p50_ms < stats.p99_ms + 1e-9


def test_errors_are_counted_with_their_reason(echo_server):
    gen = LoadGenerator(LoadTarget(url=echo_server, body='"fail"'))
    gen.start(50)
    try:
        # 1.5 s of the generator's own sending (its process starts late on a busy machine).
        offer_for(gen, 1.5)
        stats = gen.stats()
    finally:
        gen.stop()
    assert stats.ok == 0 and stats.errors > 40, stats
    assert stats.last_error == "HTTP 500"


@pytest.mark.timing  # a wall-clock bar: run before the suite's Ray heads load the machine
def test_stop_cancels_in_flight_requests_within_a_second(echo_server):
    gen = LoadGenerator(LoadTarget(url=echo_server, body='"slow"'))
    gen.start(20)
    # Requests really outstanding, on the generator's own clock (its child process
    # starts late on a busy machine).
    deadline = time.monotonic() + 10
    while gen.stats().in_flight <= 5:
        assert time.monotonic() < deadline, gen.stats()
        time.sleep(0.05)
    t0 = time.monotonic()
    gen.stop()
    assert time.monotonic() - t0 < 1.0
    assert not gen.running
