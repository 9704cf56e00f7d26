"""The connection state machine on its own: back-off while the cluster does not answer,
and "same cluster session" vs "new session" when it answers again."""

from __future__ import annotations

import time

from console.model.connection import BACKOFF_S, CONNECTED_POLL_S, ConnectionMonitor, ConnectionState


def _connected(qtbot, session_name: str = "session_A") -> tuple[ConnectionMonitor, list]:
    m = ConnectionMonitor()
    states: list[tuple[ConnectionState, str]] = []
    m.state_changed.connect(lambda s, text: states.append((s, text)))
    m.connecting("Connecting…")
    m.connected(session_name, "Connected")
    return m, states


def test_back_off_grows_then_holds_at_five_seconds(qtbot):
    m, states = _connected(qtbot)
    delays = [m.poll_failed("refused") for _ in range(8)]
    assert delays == [1.0, 1.0, 2.0, 3.0, 5.0, 5.0, 5.0, 5.0]
    assert tuple(delays[:len(BACKOFF_S)]) == BACKOFF_S
    assert m.state == ConnectionState.LOST and not m.usable
    # The user's sentence says since when, the next retry and the reason.
    assert m.message.startswith("Disconnected since ") and "retrying in 5 s" in m.message
    assert m.message.endswith("refused")
    lost_since = m.lost_since
    m.retrying()
    assert m.state == ConnectionState.RECONNECTING and "reconnecting…" in m.message
    m.poll_failed("refused")
    assert m.lost_since == lost_since  # the outage's start is kept across retries
    # Answering again resets the back-off: the next outage starts at 1 s.
    assert m.poll_ok("session_A") == CONNECTED_POLL_S
    assert m.state == ConnectionState.CONNECTED and m.usable and m.lost_since is None
    assert m.poll_failed("timeout") == 1.0


def _outage(m: ConnectionMonitor, error: str, answers_as: str | None) -> list:
    """One failed poll, then one that answers as *answers_as*; what `resumed` said."""
    resumed: list = []
    m.resumed.connect(lambda same, old, new: resumed.append((same, old, new)))
    m.poll_failed(error)
    m.poll_ok(answers_as)
    return resumed


def test_same_session_on_reconnect(qtbot):
    m, states = _connected(qtbot, "session_A")
    resumed = _outage(m, "timed out", "session_A")
    assert resumed == [(True, "session_A", "session_A")]
    assert "the same cluster session" in m.message and m.message.startswith("Reconnected after")
    assert states[-1][0] == ConnectionState.CONNECTED


def test_new_session_on_reconnect_says_the_head_was_restarted(qtbot):
    m, _ = _connected(qtbot, "session_A")
    resumed = _outage(m, "refused", "session_B")
    assert resumed == [(False, "session_A", "session_B")]
    assert "a new cluster session (session_B): the head was restarted" in m.message
    assert m.session_name == "session_B"


def test_an_unknown_session_name_counts_as_the_same(qtbot):
    """A dashboard that does not say its session (older Ray) is not taken for a restart."""
    m, _ = _connected(qtbot, "session_A")
    resumed = _outage(m, "refused", "")
    assert [same for same, _, _ in resumed] == [True] and m.session_name == "session_A"


def test_failures_before_connecting_or_after_closing_change_nothing(qtbot):
    m = ConnectionMonitor()
    assert m.poll_failed("refused") == CONNECTED_POLL_S
    assert m.state == ConnectionState.CLOSED and m.lost_since is None
    m.connecting("Connecting…")
    assert m.poll_failed("refused") == CONNECTED_POLL_S
    assert m.state == ConnectionState.CONNECTING
    m.connected("s", "Connected")
    m.poll_failed("refused")
    m.closed()
    assert m.state == ConnectionState.CLOSED and m.lost_since is None
    # A poll that answers while connected keeps the state and does not emit resumed.
    m.connected("s", "Connected")
    resumed = []
    m.resumed.connect(lambda *a: resumed.append(a))
    assert m.poll_ok(None) == CONNECTED_POLL_S and resumed == []


def test_one_timed_out_poll_is_asked_again_before_the_cluster_counts_as_lost(qtbot):
    """A dashboard busy for a moment is not a lost cluster: the first poll without an
    answer in time is asked again soon, the connection stays usable meanwhile (changes
    are not refused); a second one in a row is an outage, dated from the first. A refused
    connection (a stopped head) is one at once."""
    from console.model.connection import TIMEOUT_RETRY_S

    m, states = _connected(qtbot)
    assert m.poll_failed("no answer in 2 s", timed_out=True) == TIMEOUT_RETRY_S
    assert m.state == ConnectionState.CONNECTED and m.usable and m.asking_again
    assert m.lost_since is None and states[-1][0] == ConnectionState.CONNECTED
    # Answered: nothing happened, and the next timeout gets the same grace.
    m.poll_ok(None)
    assert not m.asking_again
    assert m.poll_failed("no answer in 2 s", timed_out=True) == TIMEOUT_RETRY_S
    first = time.time()
    time.sleep(0.01)
    assert m.poll_failed("no answer in 2 s", timed_out=True) == BACKOFF_S[0]
    assert m.state == ConnectionState.LOST and not m.usable and not m.asking_again
    assert m.lost_since <= first and m.message.endswith("no answer in 2 s")
    # While lost, timeouts back off as any failure does.
    assert m.poll_failed("no answer in 2 s", timed_out=True) == BACKOFF_S[1]
    # A refused connection while connected: lost at once.
    m2, _ = _connected(qtbot)
    assert m2.poll_failed("refused") == BACKOFF_S[0] and m2.state == ConnectionState.LOST
