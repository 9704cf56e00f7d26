"""Changing a running deployment: the knobs, applying a manual change, the advisor's rules,
and the auto-tuner's search and run."""
