"""The LLM plot group appears only for a deployment that streams tokens (the generate demo,
or a Ray Serve LLM app with vLLM's metrics: KV-cache and inter-token curves only where
reported), and a knob's marker comes on its plots as on every other."""

from __future__ import annotations

import pytest

from backend.metrics.series import SeriesStore
from widgets.plots.live_plots import PLOTS, LivePlots
from tests.support.plot_reading import legend_names

BATCHED = ("batched", "BatchedGenerator")
GEN = ("generate", "Generate")
VLLM = ("llm", "LLMServer:qwen")
T0 = 1_700_000_000.0
LLM_PLOTS = ["LLM: time to first token", "LLM: time per output token", "LLM: output tokens",
             "LLM: running vs waiting", "LLM: slot and KV-cache use"]


def legend(plots: LivePlots, title: str) -> list[str]:
    return legend_names(plots.plots()[title])


@pytest.fixture
def store() -> SeriesStore:
    s = SeriesStore()
    for i in range(30):
        s.add(T0 + i, {
            BATCHED: {"requests_per_s": 50.0, "batch_size": 4.0},
            GEN: {"requests_per_s": 3.0, "llm_ttft_p50_ms": 80.0 + i,
                  "llm_ttft_p99_ms": 300.0, "llm_ms_per_token": 9.0,
                  "llm_output_tokens_per_s": 1500.0, "llm_running_seqs": 14.0,
                  "llm_waiting_seqs": 2.0, "llm_slots": 16.0, "llm_slot_use": 0.875},
            VLLM: {"requests_per_s": 2.0, "llm_ttft_p50_ms": 120.0, "llm_itl_p50_ms": 25.0,
                   "llm_itl_p99_ms": 60.0, "llm_output_tokens_per_s": 900.0,
                   "llm_running_seqs": 30.0, "llm_waiting_seqs": 0.0,
                   "llm_kv_cache_use": 0.6},
        })
    return s


@pytest.fixture
def plots(qtbot, store) -> LivePlots:
    w = LivePlots()
    qtbot.addWidget(w)
    w.resize(800, 1200)
    w.set_store(store)
    return w


def test_llm_plots_are_optional():
    titles = [p.title for p in PLOTS]
    assert set(LLM_PLOTS) <= set(titles)
    assert all(p.optional for p in PLOTS if p.title in LLM_PLOTS)


def test_a_deployment_that_streams_no_tokens_gets_no_llm_plots(plots):
    plots.set_key(BATCHED)
    plots.refresh(T0 + 29)
    assert not set(LLM_PLOTS) & set(plots.visible_plots())


def test_generate_demo_shows_the_llm_group_with_its_curves(plots):
    plots.set_key(GEN)
    plots.refresh(T0 + 29)
    assert [t for t in plots.visible_plots() if t.startswith("LLM")] == LLM_PLOTS
    _, y = plots.curves()["llm_ttft_p50_ms"].getData()
    assert y[-1] == pytest.approx(109.0)
    assert legend(plots, "LLM: running vs waiting") == ["running", "waiting", "slots"]
    assert legend(plots, "LLM: slot and KV-cache use") == ["slot use"]
    assert legend(plots, "LLM: time per output token") == ["time per token (mean)"]


def test_vllm_app_shows_kv_cache_and_inter_token_curves(plots):
    plots.set_key(VLLM)
    plots.refresh(T0 + 29)
    assert legend(plots, "LLM: slot and KV-cache use") == ["KV-cache use"]
    assert legend(plots, "LLM: time per output token") == ["inter-token p50",
                                                                  "inter-token p99"]


def test_a_knob_marker_comes_on_the_llm_plots(plots):
    plots.set_key(GEN)
    plots.show()
    plots.set_window(60.0)
    plots.refresh(T0 + 29)
    plots.add_marker(T0 + 20, "max_num_seqs 16 → 32")
    for title in LLM_PLOTS:
        lines = [i.value() for i in plots.plots()[title].items
                 if i.__class__.__name__ == "InfiniteLine"]
        assert lines == [T0 + 20], title
