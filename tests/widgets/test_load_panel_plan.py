"""LoadPanel's request editor, load models, client plots and run summary."""

from __future__ import annotations

import csv
from dataclasses import replace
import json
import time

import pytest
from PySide6.QtGui import QGuiApplication, QTextDocument
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
)

from backend.load.load_model import (
    LoadModel,
    LoadStats,
    LoadTarget,
    ModelIds,
    Profile,
    RunSummary,
    SecondStats,
    demo_target,
)
from widgets.load_panel import LoadPanel


@pytest.fixture
def panel(qtbot) -> LoadPanel:
    w = LoadPanel()
    qtbot.addWidget(w)
    return w


def child(panel: LoadPanel, kind, name: str):
    """The panel's control of that type and object name (the Request tab's included)."""
    widget = panel.findChild(kind, name)
    assert widget is not None, name
    return widget


def running(panel: LoadPanel) -> bool:
    """Whether the Start/Stop button shows a run going (it offers Stop)."""
    return "Stop" in panel.start_button().text()


def request_error(panel: LoadPanel) -> str:
    return child(panel, QLabel, "requestError").text()


def test_start_emits_the_edited_request_and_model(qtbot, panel):
    panel.set_request(LoadTarget(url="http://127.0.0.1:8000/mux", method="POST",
                                 body='{"x": {seq}}',
                                 headers=(("Content-Type", "application/json"),
                                          ("X-Trace", "1")),
                                 model_ids=ModelIds(count=7, distribution="zipf", s=1.3),
                                 stream=True))
    panel.set_rate(120.0)
    with qtbot.waitSignal(panel.plan_requested) as sig, \
            qtbot.assertNotEmitted(panel.start_requested):  # one start, not two
        panel.start_button().click()
    plan = sig.args[0]
    t = plan.target
    assert t.url == "http://127.0.0.1:8000/mux" and t.method == "POST"
    assert t.headers == (("Content-Type", "application/json"), ("X-Trace", "1"))
    assert t.body == '{"x": {seq}}' and t.stream
    assert t.model_ids == ModelIds(count=7, distribution="zipf", s=1.3)
    assert plan.model == LoadModel(mode="open", arrivals="constant", rate=120.0, users=8,
                                   think_time_s=0.0, profile=Profile("constant", period_s=10,
                                                                     spike_s=2))
    assert running(panel)
    # Open or closed loop is fixed while running.
    assert not child(panel, QComboBox, "loadModel").isEnabled()


def test_a_bad_request_is_refused_with_the_reason(qtbot, panel):
    panel.set_request(LoadTarget(url="http://127.0.0.1:8000/x"))
    headers = child(panel, QPlainTextEdit, "headers")
    headers.setPlainText("no colon here")
    with qtbot.assertNotEmitted(panel.plan_requested, wait=100), \
            qtbot.assertNotEmitted(panel.start_requested, wait=100):
        panel.start_button().click()
    assert "header line 1" in request_error(panel)
    assert not running(panel)
    headers.setPlainText("")
    child(panel, QLineEdit, "url").setText("ftp://nope")
    panel.start_button().click()
    assert "http://" in request_error(panel) and not running(panel)


def test_without_a_request_only_the_rate_is_sent(qtbot, panel):
    # Older wiring: the console supplies the target itself.
    with qtbot.assertNotEmitted(panel.plan_requested, wait=100):
        with qtbot.waitSignal(panel.start_requested):
            panel.start_button().click()


def test_closed_loop_users_change_while_running_once_with_the_last_value(qtbot, panel):
    panel.set_request(LoadTarget(url="http://127.0.0.1:8000/x"))
    child(panel, QComboBox, "loadModel").setCurrentIndex(2)
    users = child(panel, QSpinBox, "users")
    assert users.isVisibleTo(panel) and not child(panel, QDoubleSpinBox, "rate").isVisibleTo(panel)
    users.setValue(4)
    with qtbot.waitSignal(panel.plan_requested) as sig:
        panel.start_button().click()
    assert sig.args[0].model.mode == "closed" and sig.args[0].model.users == 4
    received = []
    panel.model_changed.connect(received.append)
    for n in (5, 9, 16):
        users.setValue(n)
        QApplication.processEvents()  # no pause: a loaded machine can stretch any wait
    qtbot.wait(400)
    assert [m.users for m in received] == [16]


def test_profile_fields_follow_the_kind(panel):
    profile = child(panel, QComboBox, "profile")
    factor = child(panel, QDoubleSpinBox, "spikeFactor")
    amplitude = child(panel, QDoubleSpinBox, "sineAmplitude")
    profile.setCurrentText("spike")
    assert factor.isVisibleTo(panel) and not amplitude.isVisibleTo(panel)
    factor.setValue(4)
    child(panel, QDoubleSpinBox, "profilePeriod").setValue(6)
    p = panel.profile()
    assert p.kind == "spike" and p.factor == 4 and p.period_s == 6
    profile.setCurrentText("sine")
    assert amplitude.isVisibleTo(panel) and not factor.isVisibleTo(panel)
    model = LoadModel(mode="open", arrivals="poisson", rate=33, profile=Profile("ramp", 20))
    panel.set_load_model(model)
    assert panel.load_model() == model


def test_presets_fill_the_editor_and_keep_user_edits(panel):
    presets = [("batched demo", demo_target("batched", "http://h:8000/batched")),
               ("multiplexed demo", demo_target("multiplexed", "http://h:8000/mux"))]
    panel.set_target_presets(presets)
    assert panel.request().body == '{"features": {features:256}}'
    child(panel, QPlainTextEdit, "body").setPlainText('{"seed": 1}')  # the user's edit
    panel.set_target_presets(presets)  # a status refresh with the same targets
    assert panel.request().body == '{"seed": 1}'
    panel.set_target_presets(presets, select="multiplexed demo")
    t = panel.request()
    assert t.url == "http://h:8000/mux" and t.model_ids.distribution == "zipf"
    # The user picks another preset; refreshes with the same selection leave it alone.
    preset = child(panel, QComboBox, "preset")
    preset.setCurrentIndex(0)
    preset.activated.emit(0)
    assert panel.request().url == "http://h:8000/batched"
    panel.set_target_presets(presets, select="multiplexed demo")
    assert panel.request().url == "http://h:8000/batched"
    # A new application appears: the list grows, the editor stays.
    panel.set_target_presets(presets + [("other /o", LoadTarget(url="http://h:8000/o"))],
                             select="multiplexed demo")
    assert panel.request().url == "http://h:8000/batched" and preset.count() == 3
    # The preset being edited goes away: the editor follows the selection.
    panel.set_target_presets(presets[1:], select="multiplexed demo")
    assert panel.request().url == "http://h:8000/mux"


def _data(curve):
    # The data set on the curve (getData() is clipped to a hidden widget's stale view).
    return list(curve.xData), list(curve.yData)


def _sec(t, offered, ok, errors=(), p50=10.0):
    return SecondStats(t=t, level=50, offered=offered, completed=ok + sum(n for _, n in errors),
                       ok=ok, errors=errors, in_flight=3, p50_ms=p50, p90_ms=p50 * 2,
                       p99_ms=p50 * 4, p999_ms=p50 * 5)


def test_stats_draw_client_plots_with_errors_by_kind(panel):
    history = (_sec(0, 50, 50), _sec(1, 50, 45, (("HTTP 503", 5),)),
               _sec(2, 50, 40, (("HTTP 503", 2), ("timeout", 8))))
    stats = LoadStats(running=True, target_rps=50, sent=150, ok=135, errors=15, in_flight=3,
                      achieved_rps=45, p50_ms=10, p99_ms=40, last_error="timeout",
                      offered_rps=50, p90_ms=20, p999_ms=50, timeouts=8,
                      errors_by_kind=(("HTTP 503", 7), ("timeout", 8)), history=history)
    panel.set_load_stats(stats)
    plots = panel.client_plots()
    x, y = _data(plots.curve("achieved"))
    assert list(x) == [0, 1, 2] and list(y) == [50, 50, 50]  # completions incl. errors
    assert list(_data(plots.curve("errors:HTTP 503"))[1]) == [0, 5, 2]
    assert list(_data(plots.curve("errors:timeout"))[1]) == [0, 0, 8]
    assert list(_data(plots.curve("p99"))[1]) == [40, 40, 40]
    doc = QTextDocument()
    doc.setHtml(child(panel, QLabel, "stats").text())
    text = doc.toPlainText()
    assert "errors 15 (HTTP 503 7, timeout 8)" in text and "p99.9 50.0 ms" in text
    errors = plots.plot("errors")
    assert len(errors.listDataItems()) == 2 and "timeout" in errors.titleLabel.text
    plots.clear()
    # The error kinds' curves go, and so do their names in the plot's title.
    assert errors.listDataItems() == [] and "timeout" not in errors.titleLabel.text


def test_live_run_is_plotted_and_summary_copied_and_saved(qtbot, panel, tmp_path):
    from backend.load.generator import LoadGenerator
    from tests.support.reference_server import ReferenceServer

    with ReferenceServer() as url:
        gen = LoadGenerator(LoadTarget(url=f"{url}/sleep/20"))
        gen.start(40)
        try:
            deadline = time.monotonic() + 6
            while len(gen.stats().history) < 3 and time.monotonic() < deadline:
                qtbot.wait(100)
                panel.set_load_stats(gen.stats())
        finally:
            gen.stop()
        panel.set_load_stats(gen.stats())
    x, offered = _data(panel.client_plots().curve("offered"))
    assert len(x) >= 3 and all(abs(o - 40) <= 2 for o in offered[:3]), offered
    p50 = _data(panel.client_plots().curve("p50"))[1]
    assert all(20 <= v < 60 for v in p50), p50
    panel.copy_summary()
    assert "latency p99 ms" in QGuiApplication.clipboard().text()
    rows = dict(csv.reader(panel.save_summary(tmp_path / "s.csv").read_text().splitlines()))
    assert int(rows["ok"]) == gen.summary().ok > 100
    doc = json.loads(panel.save_summary(tmp_path / "s.json").read_text())
    assert doc["summary"]["latency_ms"]["p50"] >= 20 and len(doc["seconds"]) >= 3


def test_console_wiring_recipe_drives_a_real_generator(qtbot, panel):
    """The wiring the console uses (plan_requested → new generator, model_changed →
    apply_model, stop_requested → stop, stats → set_load_stats), against a real server."""
    from backend.load.generator import LoadGenerator
    from tests.support.reference_server import ReferenceServer

    gens: list[LoadGenerator] = []

    def on_plan(plan):
        gens.append(LoadGenerator(plan.target, model=plan.model))
        gens[-1].start()

    panel.plan_requested.connect(on_plan)
    panel.model_changed.connect(lambda model: gens[-1].apply_model(model))
    panel.stop_requested.connect(lambda: gens[-1].stop())
    with ReferenceServer() as url:
        panel.set_target_presets([("fast", LoadTarget(url=f"{url}/fast", method="GET"))])
        panel.set_rate(20)
        panel.start_button().click()
        assert len(gens) == 1 and gens[0].running
        # Second 0 counted on the generator's own clock (its process starts late on a
        # busy machine): once it is closed, the change lands during second 1.
        qtbot.waitUntil(lambda: len(gens[0].stats().history) >= 1, timeout=10_000)
        panel.set_rate(100)  # applied after the 200 ms debounce, during second 1
        qtbot.waitUntil(lambda: len(gens[0].stats().history) >= 4, timeout=8000)
        panel.set_load_stats(gens[0].stats())
        panel.start_button().click()
    assert not gens[0].running
    h = gens[0].stats().history
    assert abs(h[0].offered - 20) <= 2 and abs(h[3].offered - 100) <= 10, h
    assert "changed while running" in panel.summary().model


def test_catalog_model_ids_survive_the_editor(panel):
    from backend.deploy.catalog import load_catalog

    demo = load_catalog()["multiplexed"]
    panel.set_request(demo_target("multiplexed", "http://h/mux", hint=demo.load))
    ids = panel.request().model_ids
    assert (ids.prefix, ids.first, ids.count) == ("tenant-", 0, demo.load.model_ids.count)
    child(panel, QSpinBox, "modelIdCount").setValue(5)
    assert panel.request().model_ids.count == 5 and panel.request().model_ids.first == 0


def test_an_openai_load_shows_ttft_itl_and_tokens(panel):
    history = tuple(replace(_sec(t, 4, 4), ttft_p50_ms=150.0, ttft_p99_ms=170.0,
                            itl_p50_ms=40.0, itl_p99_ms=45.0, tokens_out=32)
                    for t in range(6))
    summary = RunSummary(target="t", model="m", started_at="s", duration_s=6.0, sent=24,
                         ok=24, errors=0, errors_by_kind=(), timeouts=0, offered_rps=4,
                         achieved_rps=4, latency_ms=(("p50", 430.0),),
                         ttft_ms=(("p50", 151.2), ("p99", 171.0)),
                         itl_ms=(("p50", 40.1), ("p99", 44.9)), tokens_out=192)
    stats = LoadStats(running=True, target_rps=4, sent=24, ok=24, errors=0, in_flight=2,
                      achieved_rps=4, p50_ms=430, p99_ms=440, last_error=None,
                      history=history, summary=summary)
    panel.set_load_stats(stats)
    doc = QTextDocument()
    doc.setHtml(child(panel, QLabel, "stats").text())
    text = doc.toPlainText()
    assert ("OpenAI streaming: TTFT p50 151 ms · p99 171 ms · ITL p50 40.1 ms · p99 44.9 ms"
            " · 32.0 output tokens/s") in text
    # A plain HTTP load's line has none of it.
    panel.set_load_stats(replace(stats, summary=replace(summary, ttft_ms=(), itl_ms=())))
    assert "TTFT" not in child(panel, QLabel, "stats").text()


def test_an_openai_preset_keeps_its_kind_through_edits(panel):
    from backend.load.openai_load import OpenAILoad

    openai = LoadTarget(url="http://h:8000/generate/v1/completions",
                        openai=OpenAILoad(model="tiny"))
    plain = LoadTarget(url="http://h:8000/batched", body='{"seed": {seq}}')
    panel.set_target_presets([("generate demo", openai), ("batched demo", plain)],
                             select="generate demo")
    assert panel.request().openai == OpenAILoad(model="tiny")
    child(panel, QLineEdit, "url").setText("http://h:9000/v1/completions")
    assert panel.request().openai == OpenAILoad(model="tiny")
    assert "streamed completions of tiny" in child(panel, QLabel, "target").text()
    panel.set_target_presets([("generate demo", openai), ("batched demo", plain)],
                             select="batched demo")
    assert panel.request().openai is None
