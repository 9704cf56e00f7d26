"""The LRU simulator the multiplexed benchmark compares Ray's cache with."""

from backend.deploy.catalog import ModelIds
from tests.support.lru_sim import simulate, zipf_sequence


def test_seed_example_cache_of_two_evicts_the_least_recently_used():
    r = simulate(["v1", "v2", "v3", "v3", "v1"], cache_size=2)
    # v1, v2, v3 load (v3 evicts v1); v3 hits; v1 loads again (evicting v2).
    assert (r.loads, r.hits, r.evictions) == (4, 1, 2)


def test_recency_not_insertion_order_decides():
    # v1 is used again before v3 arrives, so v2 is the one evicted and v1 still hits.
    r = simulate(["v1", "v2", "v1", "v3", "v1"], cache_size=2)
    assert (r.loads, r.hits) == (3, 2)


def test_replicas_split_models_by_fewest_loaded():
    r = simulate(["a", "b", "c", "d", "a", "b", "c", "d"], cache_size=2, replicas=2)
    assert r.hits == 4 and r.evictions == 0


def test_zipf_hit_rate_grows_with_the_cache():
    hint = ModelIds(count=100, s=1.1)
    seq = zipf_sequence(hint.ids(), hint.weights(), 5000, seed=1)
    assert seq == zipf_sequence(hint.ids(), hint.weights(), 5000, seed=1)
    rates = [simulate(seq, k).hit_rate for k in (1, 4, 16, 100)]
    assert rates == sorted(rates) and rates[0] > 0.05 and rates[-1] > 0.97
