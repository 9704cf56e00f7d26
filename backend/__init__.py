"""Everything that is not a view: plain Python, no Qt (enforced by import-linter)."""
