"""The comparison view renders a Comparison: rows, verdict colours, config diff, overlay."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QTreeWidget

from backend.recording.compare import (CLIENT_FIGURES, SERVER_FIGURES, Comparison,
                                       ConfigChange, Row, TimeRange)
from widgets.compare_view import CompareView
from widgets.theme import status_color


def config_diff(v: CompareView) -> QTreeWidget:
    """The Serve config diff shown below the table."""
    return v.findChild(QTreeWidget, "configDiff")

THROUGHPUT = SERVER_FIGURES[0]
P99 = next(f for f in SERVER_FIGURES if f.key == "latency_p99_ms")


def _comparison() -> Comparison:
    rows = (Row("batched", "Model", THROUGHPUT, 40.0, 80.0),
            Row("batched", "Model", P99, 50.0, 75.0),
            Row("batched", "(client)", CLIENT_FIGURES[0], 39.0, None))
    return Comparison(TimeRange(100, 160, "A"), TimeRange(200, 260, "B"), rows,
                      (ConfigChange("batched/Model", "user_config.max_batch_size", 8, 32),))


def test_rows_changes_and_verdicts(qtbot):
    v = CompareView()
    qtbot.addWidget(v)
    v.set_comparison(_comparison())
    top = v.table().topLevelItem(0)
    assert top.text(0) == "batched/Model"
    throughput, p99 = top.child(0), top.child(1)
    assert [throughput.text(i) for i in (1, 2, 4)] == ["40.0", "80.0", "better"]
    assert "+100 %" in throughput.text(3)
    assert p99.text(4) == "worse"
    assert p99.foreground(4).color().name() == status_color("failed")
    client = v.table().topLevelItem(1).child(0)
    assert client.text(2) == "–" and client.text(4) == ""
    diff = config_diff(v).topLevelItem(0)
    assert [diff.text(i) for i in range(4)] == ["batched/Model", "user_config.max_batch_size",
                                                "8", "32"]
    # The client group is not a deployment to overlay.
    assert v.current_deployment() == ("batched", "Model")


def test_overlay_aligned_at_the_start(qtbot):
    v = CompareView()
    qtbot.addWidget(v)
    v.set_comparison(_comparison())
    t = np.arange(5.0)
    v.set_overlay({"requests_per_s": (t, t * 2, t, t * 3)})
    x, y = v.curve("requests_per_s", "B").getData()
    assert list(x) == list(t) and list(y) == list(t * 3)
    assert v.curve("latency_p99_ms", "A").getData()[0] is None or \
        len(v.curve("latency_p99_ms", "A").getData()[0]) == 0


def test_same_config_says_so(qtbot):
    v = CompareView()
    qtbot.addWidget(v)
    c = _comparison()
    v.set_comparison(Comparison(c.a, c.b, c.rows, ()))
    assert "same" in config_diff(v).topLevelItem(0).text(1)
