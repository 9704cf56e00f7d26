"""test.sh's split of the suite between xdist workers (tests/parallel.py): which tests
run together, in what order, and the durations it reads from a pytest log."""

from __future__ import annotations

from types import SimpleNamespace

from tests import parallel


class Item:
    """What tests/parallel.py reads of a pytest item: its id and, where it uses one, the
    scope of its ray_cluster fixture."""

    def __init__(self, nodeid: str, cluster: str | None = None):
        self.nodeid = nodeid
        defs = {"ray_cluster": [SimpleNamespace(scope=cluster)]} if cluster else {}
        self._fixtureinfo = SimpleNamespace(name2fixturedefs=defs)


item = Item


def test_a_packages_cluster_tests_split_by_module_and_the_rest_stay_with_their_module(
        monkeypatch):
    seconds = {"tests/p/test_a.py::t1": 250.0, "tests/p/test_b.py::t1": 200.0,
               "tests/p/test_c.py::t1": 100.0, "tests/p/test_a.py::t2": 40.0}
    monkeypatch.setattr(parallel, "_seconds", lambda: seconds)
    items = [item("tests/p/test_a.py::t1", "package"), item("tests/p/test_a.py::t2"),
             item("tests/p/test_b.py::t1", "package"), item("tests/p/test_c.py::t1", "package"),
             item("tests/p/test_d.py::t1", "module"), item("tests/p/test_d.py::t2", "module")]
    units, total = parallel.work_units(items)
    # 550 s of cluster tests: two units near UNIT_TARGET_S, a module never split.
    a, a_rest, b, c, d1, d2 = (units[i] for i in items)
    assert a != b and c == b and {a, b} == {"tests/p cluster 1/2", "tests/p cluster 2/2"}
    assert a_rest == "tests/p/test_a.py" and d1 == d2 == "tests/p/test_d.py"
    assert total[a] == 250 + parallel.CLUSTER_START_S
    assert total[b] == 300 + parallel.CLUSTER_START_S
    assert total["tests/p/test_d.py"] == 2 * parallel.DEFAULT_S


def test_items_go_out_longest_unit_first_in_their_own_order(monkeypatch, tmp_path):
    seconds = {"tests/p/test_a.py::t1": 5.0, "tests/p/test_b.py::t1": 50.0,
               "tests/p/test_b.py::t2": 1.0}
    monkeypatch.setattr(parallel, "_seconds", lambda: seconds)
    monkeypatch.setenv(parallel.UNITS_ENV, str(tmp_path / "units.json"))
    items = [item("tests/p/test_a.py::t1"), item("tests/p/test_b.py::t1"),
             item("tests/p/test_b.py::t2")]
    parallel.order_and_publish(items)
    assert [i.nodeid for i in items] == ["tests/p/test_b.py::t1", "tests/p/test_b.py::t2",
                                         "tests/p/test_a.py::t1"]
    assert (tmp_path / "units.json").read_text().count("tests/p/test_b.py\"") == 2


def test_durations_are_summed_per_test_from_a_pytest_log():
    log = ("== slowest durations ==\n"
           "12.50s setup    tests/x/test_a.py::t1\n"
           "3.00s call     tests/x/test_a.py::t1\n"
           "0.20s teardown tests/x/test_a.py::t1\n"
           "0.10s call     tests/x/test_b.py::t1\n")
    assert parallel.durations_from_log(log) == {"tests/x/test_a.py::t1": 15.7}


class Marked(Item):
    """An item with marks, fixtures and a module file, as is_light reads them."""

    def __init__(self, path, marks=(), fixtures=()):
        super().__init__(f"{path.name}::t")
        self.path, self._marks, self.fixturenames = path, set(marks), list(fixtures)

    def get_closest_marker(self, name):
        return name if name in self._marks else None


def test_light_means_no_cluster_prometheus_or_load_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "_MODULE_HEAVY", {})
    plain = tmp_path / "test_plain.py"
    plain.write_text("import subprocess\ndef test_t(): pass\n")  # a small process is fine
    heavy = {w: tmp_path / f"test_{n}.py" for n, w in enumerate(parallel._HEAVY_WORDS)}
    for word, path in heavy.items():
        path.write_text(f"from x import {word}\n")
    assert parallel.is_light(Marked(plain))
    assert not any(parallel.is_light(Marked(p)) for p in heavy.values())
    assert not parallel.is_light(Marked(plain, fixtures=["ray_cluster"]))
    assert not parallel.is_light(Marked(plain, marks=["timing"]))
    assert not parallel.is_light(Marked(plain, marks=["quiet"]))
