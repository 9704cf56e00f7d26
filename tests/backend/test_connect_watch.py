"""A Ray Client connect that stalls is noticed and the driver replaced by a fresh process
(backend/load/connect_watch.py); connects made close together all connect."""

from __future__ import annotations

import socket
import threading
import time

from backend.child import spawn_child
from backend.load.connect_watch import STALL_TRIES, resume_args
from backend.load.driver_spare import DRIVER_MODULE, SAID_READY, SpareDriver
from backend.load.load_model import ClusterAccess


class SilentServer:
    """A TCP port that accepts connections and never says a word: a Ray Client proxy
    whose server for this client never comes up, as the client sees it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_stalled_connect_restarts_the_driver_with_what_it_was_doing(monkeypatch):
    monkeypatch.setenv("SERVE_CONSOLE_CONNECT_STALL_S", "1")
    server = SilentServer()
    spawned = spawn_child(DRIVER_MODULE)
    pid = spawned.proc.pid
    try:
        access = ClusterAccess(f"ray://127.0.0.1:{server.port}", "http://127.0.0.1:9")
        spawned.ctl.send(("connect", access))
        warnings = []
        deadline = time.monotonic() + 90
        while len(warnings) < STALL_TRIES and time.monotonic() < deadline:
            if spawned.out.poll(0.5):
                msg = spawned.out.recv()
                if msg[0] == "event" and "has not answered" in msg[2]:
                    warnings.append(msg[2])
        assert len(warnings) == STALL_TRIES, warnings
        for i, text in enumerate(warnings, 1):
            assert f"connect to {access.ray_address} has not answered in 1 s" in text, text
            assert f"restart {i} of {STALL_TRIES}" in text, text
        # The same process, on the same pipes, re-executed: the console's handle on it
        # still works, and each image connected anew (its own connections).
        assert spawned.proc.poll() is None and spawned.proc.pid == pid
        assert len(server.accepted) >= STALL_TRIES + 1
    finally:
        spawned.close()
        server.close()
    assert spawned.proc.wait(timeout=10) is not None  # closing its pipes still ends it


def test_the_resumed_message_round_trips():
    import base64
    import pickle

    msg = ("connect", ClusterAccess("ray://h:1", "http://h:2", "tok"))
    payload = base64.b64encode(pickle.dumps(msg)).decode()
    assert resume_args(["--resume", payload, "2"]) == (msg, 2)
    assert resume_args([]) == (None, 0)


def test_connects_made_close_together_all_connect(ray_cluster):
    """Three drivers connect to one head at once (the head's client proxy starts a server
    for each): every one connects, and says what the wait was while it lasted."""
    access = ClusterAccess(f"ray://127.0.0.1:{ray_cluster.client_port}",
                           ray_cluster.dashboard_url, ray_cluster.token)
    spares = [SpareDriver() for _ in range(3)]
    started = time.monotonic()
    try:
        for spare in spares:
            spare.prepare(access)
        took: dict[int, float] = {}
        deadline = started + 60
        while len(took) < len(spares) and time.monotonic() < deadline:
            for i, spare in enumerate(spares):
                if i not in took and spare.ready():
                    took[i] = time.monotonic() - started
            time.sleep(0.05)
        assert len(took) == len(spares), f"connected: {took}"
        said = []  # each driver's events: a restart's warning, then connected (info)
        for spare in spares:
            taken = spare.take(access)
            assert taken is not None and taken.ready
            said.append(taken.heard)  # up to its ready message: ready() read them
            taken.spawned.close()
        print(f"connects made together took {sorted(round(t, 1) for t in took.values())} s;"
              f" events {said}")
        assert all(events and events[-1][:2] == (SAID_READY, "info")
                   and "in advance in" in events[-1][2] for events in said), said
        # What came before is what the user is told while waiting: a slow connect, or
        # a stalled one restarted (how long connects took is cluster_load.py's figure).
        assert all(e[1] == "warning" and e[2].startswith("Ray Client's connect to ")
                   for events in said for e in events[:-1]), said
    finally:
        for spare in spares:
            spare.close()
