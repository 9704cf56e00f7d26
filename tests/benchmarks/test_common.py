"""The benchmarks' shared search and summary: a bisection that finds a known limit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from common import Spread, bisect_max_rate  # noqa: E402


@pytest.mark.parametrize("limit,start", [(137.0, 20.0), (7.0, 200.0), (55.0, 55.0),
                                         (1000.0, 3.0)])
def test_bisection_finds_the_limit_to_its_precision(limit, start):
    s = bisect_max_rate(lambda r: (r <= limit, {"rate": r}), start, precision=0.05)
    assert limit / 1.05 <= s.best <= limit
    assert s.best_trial == {"rate": s.best}
    # Bracketing by doubling/halving, then bisecting: a few trials, not a grid.
    assert len(s.trials) <= 14
    assert all(ok == (r <= limit) for r, ok, _ in s.trials)


def test_nothing_sustained_gives_zero():
    s = bisect_max_rate(lambda r: (False, None), 10.0)
    assert s.best == 0.0 and s.best_trial is None and s.trials


def test_spread_is_median_min_max():
    sp = Spread.of([3.4, 2.9, 3.1])
    assert (sp.median, sp.minimum, sp.maximum, sp.n) == (3.1, 2.9, 3.4, 3)
    assert sp.text("{:.1f}", "x") == "3.1x median [2.9x–3.4x], 3 repeats"
    with pytest.raises(ValueError):
        Spread.of([])


def test_machine_load_is_printed_with_the_cores():
    from common import load_text, machine_load

    load = machine_load()
    assert load["cpus"] >= 1 and load["load_1m"] >= 0
    assert load_text(load).startswith("load average ") and f"{load['cpus']} cores" in load_text(load)
    assert "noisy" in load_text(dict(load, load_1m=load["cpus"] + 1.0))


def test_emit_prints_one_json_line_and_saves_it_with_its_provenance(tmp_path, monkeypatch,
                                                                     capsys):
    import json

    import common

    common.emit({"x": 1.5}, name="probe")
    assert json.loads(capsys.readouterr().out) == {"x": 1.5}
    assert not (tmp_path / "probe.jsonl").exists()

    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(common, "SAVE", True)
    common.emit({"x": 2}, name="probe")
    common.emit({"x": 3}, name="probe")
    lines = [json.loads(line) for line in
             (tmp_path / "results" / "probe.jsonl").read_text().splitlines()]
    assert [rec["result"] for rec in lines] == [{"x": 2}, {"x": 3}]  # appended, not replaced
    rec = lines[0]
    assert rec["benchmark"] == "probe" and rec["date"].startswith("20")
    assert rec["machine"]["cores"] >= 1 and rec["machine"]["cpu"]
    assert isinstance(rec["machine"]["gpus"], list)
    assert rec["commit"] and len(rec["commit"].split("+")[0]) == 40
