"""Plain status data: which application a request path reaches."""

from __future__ import annotations

from backend.model import ApplicationInfo, ServeStatus


def test_application_for_path_takes_the_longest_matching_route_prefix():
    status = ServeStatus(applications=(
        ApplicationInfo("root", "RUNNING", route_prefix="/"),
        ApplicationInfo("mux", "RUNNING", route_prefix="/multiplexed"),
        ApplicationInfo("mux2", "RUNNING", route_prefix="/multiplexed/v2"),
        ApplicationInfo("code", "RUNNING", route_prefix=None),  # no HTTP route
    ))
    assert status.application_for_path("/multiplexed") == "mux"
    assert status.application_for_path("/multiplexed/") == "mux"
    assert status.application_for_path("/multiplexed/v2/x") == "mux2"
    # A prefix matches whole path segments only, as Serve's proxy does.
    assert status.application_for_path("/multiplexedX") == "root"
    assert status.application_for_path("/") == "root"
    assert ServeStatus(applications=status.applications[1:]).application_for_path("/x") is None
