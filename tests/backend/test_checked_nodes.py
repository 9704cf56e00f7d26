"""Which nodes a deploy's Python-environment probe must ask (backend.preflight.env_probe
.CheckedNodes): all at a session's first deploy, none again while the same nodes are
alive, and again once a node has joined — per cluster session and runtime_env."""

from __future__ import annotations

from backend.preflight.env_probe import CheckedNodes


def test_a_node_that_joins_is_probed_at_the_next_deploy():
    memo = CheckedNodes()
    assert memo.unchecked("s1", None, ["head"]) == ["head"]
    memo.remember("s1", None, ["head"])
    assert memo.unchecked("s1", None, ["head"]) == []
    # A worker joins: the next deploy probes (the probe asks every alive node).
    assert memo.unchecked("s1", None, ["head", "worker"]) == ["worker"]
    memo.remember("s1", None, ["head", "worker"])
    assert memo.unchecked("s1", None, ["head", "worker"]) == []
    # One leaves: nothing new to ask.
    assert memo.unchecked("s1", None, ["head"]) == []


def test_each_session_and_runtime_env_is_checked_on_its_own():
    memo = CheckedNodes()
    memo.remember("s1", {"pip": ["numpy"]}, ["head"])
    assert memo.unchecked("s1", {"pip": ["numpy"]}, ["head"]) == []
    # The same env written in another key order is the same env.
    memo.remember("s1", {"env_vars": {"A": "1", "B": "2"}}, ["head"])
    assert memo.unchecked("s1", {"env_vars": {"B": "2", "A": "1"}}, ["head"]) == []
    assert memo.unchecked("s1", None, ["head"]) == ["head"]
    assert memo.unchecked("s2", {"pip": ["numpy"]}, ["head"]) == ["head"]


def test_a_cluster_that_lists_no_node_is_still_probed_once():
    memo = CheckedNodes()
    assert memo.unchecked("s1", None, []) != []
    memo.remember("s1", None, [])
    assert memo.unchecked("s1", None, []) == []
