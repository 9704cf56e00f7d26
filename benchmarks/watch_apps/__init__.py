"""A small user application for benchmarks/watch_real_head.py (not part of the demos)."""
