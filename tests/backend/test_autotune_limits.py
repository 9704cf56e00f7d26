"""The auto-tuner says what kept it from configs it wanted to try, as something to do."""

from __future__ import annotations

from backend.tuning.autotune_run import TuneReport, TuneRequest, TuneRun
from backend.tuning.autotune_search import (BATCH_WAIT, MAX_BATCH_SIZE, MAX_ONGOING, Objective,
                                            TuneOutcome)
from console.model.autotune import finish_text

VALUES = {MAX_BATCH_SIZE: 3, BATCH_WAIT: 0.02, MAX_ONGOING: 7}


def _run(knobs) -> TuneRun:
    return TuneRun(None, TuneRequest("other", "Sleepy", Objective(100), knobs=knobs))


def test_batch_sizes_cut_by_max_ongoing_requests_name_the_knob_to_add():
    run = _run((MAX_BATCH_SIZE, BATCH_WAIT))
    assert run._invalid(VALUES, {MAX_BATCH_SIZE: 4}) is None
    assert run._invalid(VALUES, {MAX_BATCH_SIZE: 7}) is None
    for mbs in (8, 16, 32, 16):
        assert run._invalid(VALUES, {MAX_BATCH_SIZE: mbs}).startswith("batches could never fill")
    assert run.limits() == (
        "max_batch_size above 7 needs max_ongoing_requests ≥ 32 (it is 7); add "
        "max_ongoing_requests to the knobs to search those batch sizes.",)
    # Two batches at once halve what one may hold.
    run = _run((MAX_BATCH_SIZE,))
    values = {**VALUES, "user_config.max_concurrent_batches": 2}
    assert run._invalid(values, {MAX_BATCH_SIZE: 4}) is not None
    assert run.limits()[0].startswith("max_batch_size above 3 needs max_ongoing_requests ≥ 8")


def test_no_limit_when_max_ongoing_requests_is_searched_too():
    run = _run((MAX_BATCH_SIZE, MAX_ONGOING))
    assert run._invalid(VALUES, {MAX_BATCH_SIZE: 16}) is not None  # that pair is skipped…
    assert run.limits() == ()  # …but the search reaches it by raising max_ongoing_requests


def test_the_limit_reaches_the_json_and_the_panel_text():
    run = _run((MAX_BATCH_SIZE,))
    run._invalid(VALUES, {MAX_BATCH_SIZE: 16})
    report = TuneReport(run.request, TuneOutcome(dict(VALUES), [], None, 12.0, "budget"),
                        "start", dict(VALUES), True, limits=run.limits())
    assert report.summary()["limits"] == list(run.limits())
    assert "Limited: max_batch_size above 7 needs max_ongoing_requests ≥ 16" in \
        finish_text(report)
