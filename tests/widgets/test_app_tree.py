"""AppTree shows Serve's state and keeps the user's place across polls."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QTreeWidgetItem

from backend.model import ApplicationInfo, DeploymentInfo, ReplicaInfo, ServeStatus
from backend.metrics.model_info import ModelInfo
from widgets.theme import status_color
from widgets.app_tree import (
    COL_MESSAGE,
    COL_NAME,
    COL_REPLICAS,
    COL_STATUS,
    MODEL_ROW_PREFIX,
    NOTE_ROW_PREFIX,
    PLACEHOLDER_TEXT,
    READ_ONLY_NOTE,
    AppTree,
)


# The rows as the user sees them: found by the text in their first column.

def top_names(tree: AppTree) -> list[str]:
    return [tree.topLevelItem(i).text(COL_NAME) for i in range(tree.topLevelItemCount())]


def app_row(tree: AppTree, app: str) -> QTreeWidgetItem | None:
    """The application's top-level row (named "app" or "app  (deployed from code…)")."""
    return next((tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
                 if tree.topLevelItem(i).text(COL_NAME).split("  ")[0] == app), None)


def replica_row(tree: AppTree, app: str, deployment: str,
                replica_id: str) -> QTreeWidgetItem | None:
    dep = tree.deployment_item(app, deployment)
    return next((dep.child(i) for i in range(dep.childCount())
                 if dep.child(i).text(COL_NAME) == replica_id), None)


def row_under(tree: AppTree, app: str, deployment: str,
              prefix: str) -> QTreeWidgetItem | None:
    """The row starting with *prefix* among those right below the deployment's row (its
    model row "↳ …", then its note row "⚠ …"); None if there is none."""
    dep = tree.deployment_item(app, deployment)
    parent = dep.parent() if dep is not None else None
    if parent is None:
        return None
    for i in range(parent.indexOfChild(dep) + 1, parent.childCount()):
        row = parent.child(i)
        if not row.text(COL_NAME).startswith((MODEL_ROW_PREFIX, NOTE_ROW_PREFIX)):
            return None  # the next deployment
        if row.text(COL_NAME).startswith(prefix):
            return row
    return None


def model_row(tree: AppTree, app: str, deployment: str) -> QTreeWidgetItem | None:
    return row_under(tree, app, deployment, MODEL_ROW_PREFIX)


def note_row(tree: AppTree, app: str, deployment: str) -> QTreeWidgetItem | None:
    return row_under(tree, app, deployment, NOTE_ROW_PREFIX)


def replicas(n: int, state: str = "RUNNING") -> tuple[ReplicaInfo, ...]:
    return tuple(ReplicaInfo(f"r{i}", state, node_ip="10.0.0.1", pid=100 + i) for i in range(n))


def status(running: int = 1, target: int = 1, model_status: str = "HEALTHY",
           model_message: str = "", with_code_app: bool = False) -> ServeStatus:
    apps = [ApplicationInfo(
        "batched", "RUNNING", route_prefix="/batched", deployed_config={"name": "batched"},
        deployments=(
            DeploymentInfo("batched", "Ingress", "HEALTHY", replicas=replicas(1),
                           target_num_replicas=1),
            DeploymentInfo("batched", "Model", model_status, message=model_message,
                           replicas=replicas(running), target_num_replicas=target),
        ))]
    if with_code_app:
        apps.append(ApplicationInfo(
            "scripted", "RUNNING", deployed_config=None,
            deployments=(DeploymentInfo("scripted", "F", "HEALTHY", replicas=replicas(1),
                                        target_num_replicas=1),)))
    return ServeStatus(applications=tuple(apps), serve_running=True)


@pytest.fixture
def tree(qtbot) -> AppTree:
    t = AppTree()
    qtbot.addWidget(t)
    return t


def test_placeholder_until_there_are_applications(tree):
    assert tree.topLevelItemCount() == 1
    assert tree.topLevelItem(0).text(COL_NAME) == PLACEHOLDER_TEXT
    tree.set_status(status())
    assert top_names(tree) == ["batched"]  # the placeholder is gone
    tree.set_status(ServeStatus())
    assert tree.topLevelItem(0).text(COL_NAME) == PLACEHOLDER_TEXT
    assert tree.selected_key() is None


def test_update_in_place_keeps_selection_and_expansion(qtbot, tree):
    tree.set_status(status(running=1, target=2))
    model = tree.deployment_item("batched", "Model")
    assert model.text(COL_REPLICAS) == "1/2"
    with qtbot.waitSignal(tree.deployment_selected) as sig:
        tree.setCurrentItem(model)
    assert sig.args == ["batched", "Model"]
    model.setExpanded(True)
    app_row(tree, "batched").setExpanded(False)

    # The next poll: a replica started. No new selection signal, same item, same state.
    with qtbot.assertNotEmitted(tree.deployment_selected), \
            qtbot.assertNotEmitted(tree.selection_cleared):
        tree.set_status(status(running=2, target=2))
    assert tree.deployment_item("batched", "Model") is model
    assert model.text(COL_REPLICAS) == "2/2"
    assert model.isSelected() and tree.selected_key() == ("batched", "Model")
    assert model.isExpanded() and not app_row(tree, "batched").isExpanded()
    assert model.childCount() == 2
    assert model.child(1).text(COL_NAME) == "r1"
    assert "10.0.0.1" in model.child(1).text(COL_MESSAGE)

    tree.set_status(status(running=1, target=1))
    assert model.childCount() == 1 and model.text(COL_REPLICAS) == "1/1"


def test_failed_deployment_is_red_with_its_message(tree):
    msg = "Traceback (most recent call last):\n  ...\nRuntimeError: CUDA out of memory"
    tree.set_status(status(model_status="DEPLOY_FAILED", model_message=msg, running=0))
    model = tree.deployment_item("batched", "Model")
    assert model.text(COL_STATUS) == "DEPLOY_FAILED"
    assert model.foreground(COL_STATUS).color() == QColor(status_color("failed"))
    assert "RuntimeError: CUDA out of memory" in model.text(COL_MESSAGE)
    assert msg in model.toolTip(COL_NAME) and msg in model.toolTip(COL_MESSAGE)
    ingress = tree.deployment_item("batched", "Ingress")
    assert ingress.foreground(COL_STATUS).color() == QColor(status_color("healthy"))
    # Recovery clears the message and the colour.
    tree.set_status(status(model_status="UPDATING"))
    assert model.text(COL_MESSAGE) == ""
    assert model.foreground(COL_STATUS).color() == QColor(status_color("pending"))


def test_code_deployed_application_is_marked_read_only(tree):
    tree.set_status(status(with_code_app=True))
    assert READ_ONLY_NOTE in app_row(tree, "scripted").text(COL_NAME)
    assert READ_ONLY_NOTE not in app_row(tree, "batched").text(COL_NAME)


def test_selecting_app_or_replica_selects_a_deployment(qtbot, tree):
    tree.set_status(status(running=2, target=2))
    with qtbot.waitSignal(tree.deployment_selected) as sig:
        tree.setCurrentItem(app_row(tree, "batched"))
    assert sig.args == ["batched", "Ingress"]  # the first deployment
    with qtbot.waitSignal(tree.deployment_selected) as sig:
        tree.setCurrentItem(replica_row(tree, "batched", "Model", "r1"))
    assert sig.args == ["batched", "Model"]
    assert tree.selected_key() == ("batched", "Model")


def test_selected_deployment_disappearing_clears_selection(qtbot, tree):
    tree.set_status(status(with_code_app=True))
    assert tree.select_key("scripted", "F")
    with qtbot.waitSignal(tree.selection_cleared):
        tree.set_status(status())
    assert tree.selected_key() is None
    assert app_row(tree, "scripted") is None


def model_info(**changes) -> ModelInfo:
    fields = dict(app="batched", deployment="Model", name="MLP 8×4096", kind="mlp",
                  device="cpu", params=135_344_138, dtype="bfloat16", weights_mb=258,
                  threads=1, ms_per_batch=((1, 23.17), (16, 25.04)), replica="abc123")
    fields.update(changes)
    return ModelInfo(**fields)


def test_model_figures_show_in_a_row_under_the_deployment(tree):
    tree.set_status(status())
    app, model = app_row(tree, "batched"), tree.deployment_item("batched", "Model")
    assert model_row(tree, "batched", "Model") is None
    tree.set_model_info({("batched", "Model"): model_info()})
    # Visible without hovering, the moment they arrive (no poll needed): a row right
    # under the deployment, across all columns (the tree's panel is narrow)…
    row = model_row(tree, "batched", "Model")
    assert row is not None and row.isFirstColumnSpanned()
    assert app.indexOfChild(row) == app.indexOfChild(model) + 1
    assert row.text(COL_NAME) == "↳ cpu · 135M params · 1: 23 ms, 16: 25 ms"
    assert not row.flags() & Qt.ItemFlag.ItemIsSelectable  # about the row above it
    assert tree.deployment_item("batched", "Ingress").text(COL_MESSAGE) == ""
    assert model_row(tree, "batched", "Ingress") is None
    # …and more in the tooltips: the model, its weights, threads, the batching gain.
    for tip in (row.toolTip(COL_NAME), model.toolTip(COL_MESSAGE)):
        assert "MLP 8×4096" in tip and "135,344,138 parameters in bfloat16" in tip
        assert "1 thread" in tip and "16 → 25.0 ms" in tip
        assert "14.8× the throughput" in tip  # (16 / 25.04) / (1 / 23.17)
    # Selecting the application still selects its first deployment.
    tree.setCurrentItem(app)
    assert tree.selected_key() == ("batched", "Ingress")
    # The row survives the next poll, and follows new figures (a new replica's).
    tree.set_status(status())
    assert model_row(tree, "batched", "Model") is row
    tree.set_model_info({("batched", "Model"): model_info(
        device="cuda", params=151_206_922, ms_per_batch=((1, 4.2), (16, 4.9)))})
    assert row.text(COL_NAME) == "↳ cuda · 151M params · 1: 4.2 ms, 16: 4.9 ms"


def test_model_row_beside_serve_messages_and_gone_with_its_deployment(tree):
    tree.set_model_info({("batched", "Model"): model_info()})  # before the row exists
    tree.set_status(status(model_status="UNHEALTHY", model_message="replica crashed"))
    model = tree.deployment_item("batched", "Model")
    assert model.text(COL_MESSAGE) == "replica crashed"  # Serve's word in its column
    assert model_row(tree, "batched", "Model").text(COL_NAME).startswith("↳ cpu · 135M")
    assert "135,344,138 parameters" in model.toolTip(COL_NAME)
    tree.set_model_info({})
    assert model_row(tree, "batched", "Model") is None
    assert "parameters" not in model.toolTip(COL_NAME)
    tree.set_model_info({("batched", "Model"): model_info()})
    tree.set_status(ServeStatus())  # the application is gone: so is the row
    assert model_row(tree, "batched", "Model") is None
    assert tree.topLevelItem(0).text(COL_NAME) == PLACEHOLDER_TEXT


def scaling_status(note_replicas: tuple[ReplicaInfo, ...], target: int = 3,
                   status_word: str = "UPSCALING") -> ServeStatus:
    dep = DeploymentInfo("scaled", "S", status_word, replicas=note_replicas,
                         target_num_replicas=target,
                         config={"autoscaling_config": {"min_replicas": 1, "max_replicas": 4}})
    return ServeStatus(applications=(ApplicationInfo(
        "scaled", "RUNNING", route_prefix="/scaled", deployed_config={"name": "scaled"},
        deployments=(dep,)),), serve_running=True)


def test_starting_replicas_and_scaling_state_in_the_row(qtbot):
    tree = AppTree()
    qtbot.addWidget(tree)
    reps = (ReplicaInfo("a", "RUNNING", "10.0.0.1", 1), ReplicaInfo("b", "STARTING"),
            ReplicaInfo("c", "STARTING"))
    tree.set_status(scaling_status(reps))
    item = tree.deployment_item("scaled", "S")
    assert item.text(COL_REPLICAS) == "1/3 +2"
    tip = item.toolTip(COL_NAME)
    assert "1/3 replicas running, 2 starting" in tip
    assert "Scaling: UPSCALING · autoscaling between 1 and 4 replicas" in tip
    tree.set_status(scaling_status(reps[:1], target=1, status_word="HEALTHY"))
    assert item.text(COL_REPLICAS) == "1/1"
    assert "Scaling: STABLE" in item.toolTip(COL_NAME)


def test_why_not_at_target_shows_in_a_row_of_its_own(qtbot):
    tree = AppTree()
    qtbot.addWidget(tree)
    reps = (ReplicaInfo("a", "RUNNING", "10.0.0.1", 1), ReplicaInfo("b", "STARTING"))
    tree.set_status(scaling_status(reps, target=2))
    assert note_row(tree, "scaled", "S") is None
    why = "1 of 2 replicas waiting for resources (3 s): each needs {CPU: 8}; free now: {CPU: 2}"
    tree.set_scaling_notes({("scaled", "S"): why})
    row = note_row(tree, "scaled", "S")
    assert row is not None and row.text(COL_NAME) == "⚠ " + why
    # Right under its deployment, spanning the columns, never selectable.
    item = tree.deployment_item("scaled", "S")
    parent = item.parent()
    assert parent.indexOfChild(row) == parent.indexOfChild(item) + 1
    assert row.isFirstColumnSpanned()
    assert not (row.flags() & Qt.ItemFlag.ItemIsSelectable)
    assert item.text(COL_MESSAGE) == why and "Not at target: " + why in item.toolTip(COL_NAME)
    # Survives polls; goes when the deployment reaches its target.
    tree.set_status(scaling_status(reps, target=2))
    assert note_row(tree, "scaled", "S") is row
    tree.set_scaling_notes({})
    assert note_row(tree, "scaled", "S") is None and parent.indexOfChild(row) == -1


def test_autoscaler_metrics_health_in_the_row(qtbot):
    tree = AppTree()
    qtbot.addWidget(tree)
    reps = (ReplicaInfo("a", "RUNNING", "10.0.0.1", 1),)
    tree.set_status(scaling_status(reps, target=1, status_word="HEALTHY"))
    tree.set_metrics_health({("scaled", "S"): 42.0})
    item = tree.deployment_item("scaled", "S")
    assert "Autoscaler metrics: p99 42 ms from report to controller (healthy)" in \
        item.toolTip(COL_NAME)
    assert note_row(tree, "scaled", "S") is None
    tree.set_metrics_health({("scaled", "S"): 3200.0})
    row = note_row(tree, "scaled", "S")
    assert row is not None and "metrics arrive 3.2 s late (p99)" in row.text(COL_NAME)
    assert "(late)" in item.toolTip(COL_NAME)
    tree.set_metrics_health({})
    assert note_row(tree, "scaled", "S") is None


def _shown(tree: AppTree) -> set[str]:
    """The application and deployment rows not hidden, as "app" and "app/deployment"."""
    out = set()
    for i in range(tree.topLevelItemCount()):
        top = tree.topLevelItem(i)
        if top.isHidden():
            continue
        app = top.text(COL_NAME).split("  ")[0]
        out.add(app)
        for j in range(top.childCount()):
            child = top.child(j)
            if not child.isHidden() and tree.deployment_item(app, child.text(COL_NAME)):
                out.add(f"{app}/{child.text(COL_NAME)}")
    return out


def test_the_filter_shows_matching_deployments_with_their_application(tree):
    tree.set_status(status(with_code_app=True))
    everything = _shown(tree)
    assert everything == {"batched", "batched/Ingress", "batched/Model", "scripted",
                          "scripted/F"}
    tree.set_filter("mod")  # a deployment's name, any case: it and its application
    assert _shown(tree) == {"batched", "batched/Model"}
    tree.set_filter("SCRIPT")  # an application's name: it with all its deployments
    assert _shown(tree) == {"scripted", "scripted/F"}
    tree.set_filter("nothing like it")
    assert _shown(tree) == set()
    tree.set_filter("  ")
    assert _shown(tree) == everything


def test_the_filter_matches_status_and_holds_across_updates(tree):
    tree.set_status(status(running=0, target=1, model_status="UNHEALTHY",
                           with_code_app=True))
    tree.set_filter("unhealthy")
    assert _shown(tree) == {"batched", "batched/Model"}
    # The next poll: the deployment recovered, a new application arrived that matches.
    recovered = status(with_code_app=True)
    apps = recovered.applications + (ApplicationInfo(
        "other", "RUNNING", deployed_config={"name": "other"},
        deployments=(DeploymentInfo("other", "Sick", "UNHEALTHY", replicas=replicas(0),
                                    target_num_replicas=1),)),)
    tree.set_status(ServeStatus(applications=apps, serve_running=True))
    assert _shown(tree) == {"other", "other/Sick"}


def test_an_unchanged_deployment_is_not_revisited_but_a_new_theme_restyles_it(tree,
                                                                              monkeypatch):
    from widgets import theme

    visited: list[tuple] = []
    real = AppTree._update_replica

    def counting(self, parent, dep, rep):
        visited.append((dep.name, rep.replica_id))
        real(self, parent, dep, rep)

    monkeypatch.setattr(AppTree, "_update_replica", counting)
    tree.set_status(status(running=2, target=2, model_status="UNHEALTHY",
                           model_message="boom"))
    assert len(visited) == 3          # Ingress r0, Model r0 and r1
    visited.clear()
    tree.set_status(status(running=2, target=2, model_status="UNHEALTHY",
                           model_message="boom"))
    assert visited == []              # the same snapshot: no row visited
    tree.set_status(status(running=3, target=2, model_status="UNHEALTHY",
                           model_message="boom"))
    assert {d for d, _ in visited} == {"Model"}   # only the deployment that changed
    model = tree.deployment_item("batched", "Model")
    before = theme.current()
    other = theme.LIGHT_THEME if before is theme.DARK_THEME else theme.DARK_THEME
    theme.apply_theme(other)
    try:
        assert other.status["failed"].lower() != before.status["failed"].lower()
        tree.set_status(status(running=3, target=2, model_status="UNHEALTHY",
                               model_message="boom"))
        assert QColor(model.foreground(COL_STATUS).color()).name().lower() == \
            QColor(status_color("failed")).name().lower()
        assert QColor(model.foreground(COL_MESSAGE).color()).name().lower() == \
            QColor(status_color("failed")).name().lower()
    finally:
        theme.apply_theme(before)
