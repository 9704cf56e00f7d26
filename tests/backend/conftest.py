"""The backend tests' own real cluster (tests/cluster_fixtures.py)."""

from tests.cluster_fixtures import (  # noqa: F401  (fixtures, found by name)
    batched_demo, cluster_client, load_on, prometheus_url, ray_cluster, tuning_app)
