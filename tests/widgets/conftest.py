"""Widget tests run headless: Qt's offscreen platform unless the caller chose another."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
