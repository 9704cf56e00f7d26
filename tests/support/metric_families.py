"""Groups of metric families that some pages lack, for the tests that read recorded pages."""

from __future__ import annotations

from backend.metrics import exposition as ex

#: Families present only while some deployment autoscales (the recorded test pages
#: predate them; tests/backend/test_metrics_replicas.py checks them on a live page).
AUTOSCALING_FAMILIES: frozenset[str] = frozenset({ex.AUTOSCALING_DESIRED,
                                                  ex.AUTOSCALING_TOTAL_REQUESTS,
                                                  ex.AUTOSCALING_TARGET_ONGOING})

#: The streaming demo's families (absent from pages of clusters that do not run it).
PIPELINE_FAMILIES: frozenset[str] = frozenset({ex.PIPELINE_CHUNKS + "_total", ex.PIPELINE_TTFO,
                                               ex.PIPELINE_TOTAL})
