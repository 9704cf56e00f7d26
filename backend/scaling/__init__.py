"""Scaling made explainable: replicas against target and why, replica deaths and
replacements, the per-replica table's rows."""
