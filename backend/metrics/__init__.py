"""Metrics: named series computed from a cluster's exposition (direct scrape) or Prometheus."""
