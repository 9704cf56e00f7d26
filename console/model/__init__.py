"""The console's application model and its parts: the live session and everything that runs
against it. No QtWidgets here (import-linter and tests/console/test_headless_run.py
check it)."""
