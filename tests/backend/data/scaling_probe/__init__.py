"""A light Serve app for the autoscaling and per-replica tests (not part of the demos)."""
