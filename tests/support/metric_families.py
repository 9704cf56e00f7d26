"""Groups of metric families that some pages lack, for the tests that read recorded pages."""

from __future__ import annotations

from backend.metrics import exposition as ex
from backend.metrics import vllm_metrics as vllm

#: Families present only while some deployment autoscales (the recorded test pages
#: predate them; tests/backend/test_metrics_replicas.py checks them on a live page).
AUTOSCALING_FAMILIES: frozenset[str] = frozenset({ex.AUTOSCALING_DESIRED,
                                                  ex.AUTOSCALING_TOTAL_REQUESTS,
                                                  ex.AUTOSCALING_TARGET_ONGOING})

#: The streaming demo's families (absent from pages of clusters that do not run it).
PIPELINE_FAMILIES: frozenset[str] = frozenset({ex.PIPELINE_CHUNKS + "_total", ex.PIPELINE_TTFO,
                                               ex.PIPELINE_TOTAL})

#: The LLM view's families (the generate demo's and vLLM's): only a replica that streams
#: tokens has them (counters without `_total`, as in exposition.COUNTERS).
LLM_FAMILIES: frozenset[str] = frozenset({ex.LLM_RUNNING, ex.LLM_WAITING, ex.LLM_SLOTS,
                                          ex.LLM_SLOT_USE, ex.LLM_OUTPUT_TOKENS, ex.LLM_TTFT}
                                         ) | vllm.FAMILIES
