"""Load from a cluster that runs another Ray: said when the user chooses it and when a
start is asked for, and nothing is started (Ray Client needs the same Ray both sides)."""

from __future__ import annotations

from backend.cluster.client import ClusterClient
from backend.load.load_model import ClusterLoad, LoadModel, LoadPlan, LoadTarget
from backend.preflight.ray_client_match import local_ray_version, ray_client_mismatch
from console.model.connection import ConnectionInfo
from console.model.load_control import LoadControl


def test_the_versions_are_compared_exactly():
    assert ray_client_mismatch("2.60.0", "2.60.0") is None
    text = ray_client_mismatch("2.50.1", "2.60.0")
    assert "the cluster runs Ray 2.50.1, this console's load driver Ray 2.60.0" in text
    assert "Source: this machine" in text
    assert ray_client_mismatch("2.60.1", "2.60.0") is not None  # Ray Client's rule: exact
    assert ray_client_mismatch(None, "2.60.0") is None  # unknown: Ray Client says it
    assert ray_client_mismatch("?", "2.60.0") is None
    assert local_ray_version()  # the console's environment has Ray for its driver


def _control(ray_version: str, logged: list) -> LoadControl:
    info = ConnectionInfo("http://127.0.0.1:9", False, ray_version,
                          ray_client_url="ray://127.0.0.1:9")
    client = ClusterClient("http://127.0.0.1:9")
    return LoadControl(status=lambda: None, info=lambda: info, client=lambda: client,
                       event=lambda text, level="info": logged.append((level, text)))


def test_a_cluster_of_another_ray_gets_no_driver_and_no_load(qtbot):
    logged: list = []
    other = "2.50.1" if local_ray_version() != "2.50.1" else "2.60.0"
    control = _control(other, logged)
    control.keep_driver_ready(True)
    assert control.spare.pid is None  # no driver started to fail connecting
    assert logged and logged[-1][0] == "warning" and f"Ray {other}" in logged[-1][1]
    plan = LoadPlan(target=LoadTarget(url="http://127.0.0.1:9/", method="GET", body="",
                                      headers=()),
                    model=LoadModel(rate=5), source=ClusterLoad(workers=1))
    control.start_plan(plan)
    assert not control.running
    assert logged[-1][0] == "warning" and logged[-1][1].endswith("Nothing was started.")


def test_the_same_ray_keeps_a_driver_ready(qtbot):
    logged: list = []
    control = _control(local_ray_version(), logged)
    control.keep_driver_ready(True)
    try:
        assert control.spare.pid is not None
        assert not any(level == "warning" for level, _ in logged)
    finally:
        control.release()
