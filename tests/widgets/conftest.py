"""Widget tests run headless: Qt's offscreen platform unless the caller chose another; each
starts in the dark theme (a console test before may have left another: the theme is the
application's), so what a test reads of colours does not depend on the order."""

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def _dark_theme():
    from widgets.theme import DARK_THEME, apply_theme, current

    # Only when another theme was left: applying restyles every top-level widget there is.
    if current() is not DARK_THEME:
        apply_theme(DARK_THEME)
    yield
