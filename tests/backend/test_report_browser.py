"""The HTML report as a browser shows it: rendered by a real engine (Chromium's headless
shell), its DOM read back and a screenshot checked for actual drawing. A report that only
looks right to a regex (an SVG the browser refuses, CSS that hides the plots) fails here.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from backend.recording import export
from backend.recording.reader import open_session
from tests.backend.test_recording_export import APP, DEP, build_session
from tests.support.browser import chrome

#: Where a copy of the screenshot is kept for a person to look at.
SHOT_COPY = os.environ.get("REPORT_SHOT", "/tmp/report_shot.png")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    build_session(str(folder / "s.db"))
    return Path(export.export_html(open_session(str(folder / "s.db")),
                                   str(folder / "report.html")))


def test_dom_has_the_plots_and_tables(report):
    r = chrome("--dump-dom", report.as_uri(), cwd=report.parent)
    dom = r.stdout
    assert "<html" in dom, r.stderr[-2000:]
    svgs = re.findall(r"<svg\b.*?</svg>", dom, re.S)
    assert len(svgs) >= 10  # 6 charts of the batched deployment, 4 of the mux one
    assert all("<polyline" in s or "no data" in s for s in svgs)
    assert sum("<polyline" in s for s in svgs) >= 9
    tables = re.findall(r"<table>.*?</table>", dom, re.S)
    assert len(tables) == 5  # knob changes, comparison, config diff, notes, event log
    assert "user_config.max_batch_size" in tables[0] and "failed" in tables[0]
    assert f"{APP}/{DEP}" in tables[1] and "better" in tables[1]
    # The note's markup stays text: the parsed DOM holds no script element.
    assert "<script" not in dom
    assert "bs 32 &lt;script&gt;alert('x')&lt;/script&gt; &amp; wait" in tables[3]


def _colours(path: Path) -> tuple[float, int]:
    """(share of non-white pixels, distinct saturated colours) of a PNG."""
    from PySide6.QtGui import QImage

    img = QImage(str(path))
    assert not img.isNull(), f"{path} is not an image"
    img = img.convertToFormat(QImage.Format.Format_RGB32)
    w, h = img.width(), img.height()
    inked, colours = 0, set()
    for y in range(0, h, 3):
        for x in range(0, w, 3):
            c = img.pixelColor(x, y)
            r, g, b = c.red(), c.green(), c.blue()
            if min(r, g, b) < 235:
                inked += 1
            if max(r, g, b) - min(r, g, b) > 60:  # a hue, not grey text
                colours.add((r // 32, g // 32, b // 32))
    return inked / ((w // 3 + 1) * (h // 3 + 1)), len(colours)


def test_screenshot_is_drawn(report):
    shot = report.parent / "shot.png"
    r = chrome(f"--screenshot={shot}", "--window-size=1200,3000", report.as_uri(),
                cwd=report.parent)
    assert shot.exists(), r.stderr[-2000:]
    shutil.copyfile(shot, SHOT_COPY)
    inked, colours = _colours(shot)
    assert 0.03 < inked < 0.6, f"{inked:.1%} of the page is drawn ({SHOT_COPY})"
    assert colours >= 6, f"only {colours} colours in the report ({SHOT_COPY})"
