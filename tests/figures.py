"""Figures measured by tests (fault tests: detection times, exit times), printed at the
end of the session by tests/conftest.py (pytest_terminal_summary), with or without -s."""

from __future__ import annotations

FIGURES: list[str] = []


def figure(text: str) -> None:
    FIGURES.append(text)
