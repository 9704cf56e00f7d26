"""The load generator's plain data: profiles, model-id distributions, body templates."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from backend.load.load_model import (
    LoadModel,
    LoadTarget,
    ModelIds,
    Profile,
    SecondStats,
    demo_target,
    parse_headers,
    render_body,
    seconds_to_csv,
)
from backend.load.generator import LoadGenerator


@pytest.mark.parametrize("profile,t,want", [
    (Profile("constant"), 7.0, 100),
    (Profile("step", period_s=10, steps=4), 0.0, 25),
    (Profile("step", period_s=10, steps=4), 19.9, 50),
    (Profile("step", period_s=10, steps=4), 35.0, 100),
    (Profile("step", period_s=10, steps=4), 500.0, 100),  # stays at the top
    (Profile("ramp", period_s=20), 5.0, 25),
    (Profile("ramp", period_s=20, start_fraction=0.5), 10.0, 75),
    (Profile("ramp", period_s=20), 40.0, 100),
    (Profile("spike", period_s=10, spike_s=2, factor=3), 1.0, 300),
    (Profile("spike", period_s=10, spike_s=2, factor=3), 5.0, 100),
    (Profile("spike", period_s=10, spike_s=2, factor=3), 11.5, 300),
    (Profile("sine", period_s=8, amplitude=0.5), 2.0, 150),
    (Profile("sine", period_s=8, amplitude=0.5), 6.0, 50),
])
def test_profile_shapes(profile, t, want):
    assert profile.value(100, t) == pytest.approx(want)


def test_profiles_refuse_nonsense():
    with pytest.raises(ValueError, match="unknown profile"):
        Profile("square")
    with pytest.raises(ValueError):
        Profile("step", period_s=0)
    with pytest.raises(ValueError):
        LoadModel(mode="half-open")
    with pytest.raises(ValueError):
        LoadModel(rate=-1)


def test_zipf_weights_and_sampler_follow_the_exponent():
    ids = ModelIds(count=4, distribution="zipf", s=1.0)
    w = ids.weights()
    h = sum(1 / k for k in range(1, 5))
    assert w == pytest.approx([1 / h, 1 / (2 * h), 1 / (3 * h), 1 / (4 * h)])
    pick = ids.sampler(seed=1)
    n = 100_000
    c = Counter(pick() for _ in range(n))
    for k in range(1, 5):
        assert c[f"model-{k}"] / n == pytest.approx(w[k - 1], abs=0.006)
    uniform = ModelIds(count=4).sampler(seed=2)
    flat = Counter(uniform() for _ in range(n))
    assert all(abs(v / n - 0.25) < 0.006 for v in flat.values()) and len(flat) == 4


def test_body_templates():
    body = render_body('{"seq": {seq}, "m": "{model_id}", "f": {features:8}}', 42, "model-3")
    doc = json.loads(body)
    assert doc["seq"] == 42 and doc["m"] == "model-3" and len(doc["f"]) == 8
    assert render_body('{"f": {features:8}}', 42) == render_body('{"f": {features:8}}', 42)
    assert render_body('{"f": {features:8}}', 42) != render_body('{"f": {features:8}}', 43)
    batched = json.loads(render_body(demo_target("batched", "http://h/b").body, 1))
    assert len(batched["features"]) == 256 and all(math.isfinite(x) for x in batched["features"])
    with pytest.raises(ValueError, match="features:N"):
        render_body("{features:lots}", 1)


def test_headers_parse_and_say_which_line_is_bad():
    assert parse_headers("A: 1\n\n B : two words \n") == (("A", "1"), ("B", "two words"))
    with pytest.raises(ValueError, match="header line 2"):
        parse_headers("A: 1\nbroken")


def test_demo_targets_are_demo_aware():
    assert demo_target("multiplexed", "http://h/m").model_ids.distribution == "zipf"
    assert demo_target("streaming", "http://h/s").stream
    assert "256 floats" not in demo_target("other", "http://h/o").describe()


def test_per_second_csv_has_a_column_per_error_kind():
    text = seconds_to_csv([
        SecondStats(0.0, 10, 10, 10, 9, (("HTTP 503", 1),), 0, 5.0),
        SecondStats(1.0, 10, 10, 10, 8, (("timeout", 2),), 1),
    ])
    lines = text.splitlines()
    assert lines[0].endswith("errors HTTP 503,errors timeout")
    assert lines[1].endswith(",1,0") and lines[2].endswith(",0,2")


def test_open_and_closed_loop_cannot_swap_while_running():
    gen = LoadGenerator(LoadTarget(url="http://127.0.0.1:9/"), model=LoadModel(rate=0))
    gen.start()
    try:
        with pytest.raises(ValueError, match="restart"):
            gen.apply_model(LoadModel(mode="closed", users=2))
        gen.apply_model(LoadModel(rate=0, arrivals="poisson"))
        assert gen.model.arrivals == "poisson"
    finally:
        gen.stop()


def test_demo_targets_follow_the_catalog_hints():
    from backend.deploy.catalog import load_catalog

    demos = load_catalog()
    batched = demo_target("batched", "http://h/batched", hint=demos["batched"].load)
    assert batched.body == '{"features": {features:256}}' and not batched.stream
    for key, demo in demos.items():
        t = demo_target(key, "http://h/x", hint=demo.load)
        assert t.method == demo.load.method and t.stream == demo.load.stream
        if demo.load.model_ids is not None:
            cat = demo.load.model_ids
            # The same ids with the same weights as the catalog describes.
            pick = t.model_ids.sampler(seed=0)
            drawn = {pick() for _ in range(2000)}
            assert drawn <= set(cat.ids()) and f"{cat.prefix}0" in drawn
            assert t.model_ids.weights() == pytest.approx(cat.weights())
            assert t.model_ids.header == "serve_multiplexed_model_id"
