"""--demo's load goes to the demo, also on a cluster that runs other applications and
when the deploy finishes before the status poll lists the demo (found against a Ray
2.50 head with a user's apps: the load went to the user's first application)."""

from __future__ import annotations

from backend.deploy.catalog import load_catalog
from backend.model import ApplicationInfo, DeploymentInfo, ServeStatus
from console.app import ScriptedRun, parse_args


class _Signal:
    def __init__(self) -> None:
        self.slots = []

    def connect(self, slot) -> None:
        self.slots.append(slot)

    def disconnect(self, slot) -> None:
        self.slots.remove(slot)

    def emit(self, *args) -> None:
        for slot in list(self.slots):
            slot(*args)


class _Session:
    def __init__(self, status) -> None:
        self.status = status
        self.status_changed = _Signal()


class _Model:
    """What ScriptedRun calls on the console's model; start_load records what the
    selection was when the load started (ConsoleModel.load_target follows it)."""

    def __init__(self, status) -> None:
        self.session, self.catalog, self.interactive = _Session(status), load_catalog(), True
        self.selected, self.loads = None, []

    def select(self, key) -> None:
        self.selected = tuple(key)

    def start_load(self, rps) -> bool:
        self.loads.append((self.selected, rps))
        return True


def _status(*apps: tuple[str, str]) -> ServeStatus:
    return ServeStatus(applications=tuple(
        ApplicationInfo(name=a, status="RUNNING", route_prefix=f"/{a}",
                        deployments=(DeploymentInfo(app=a, name=d, status="HEALTHY"),))
        for a, d in apps), serve_running=True)


def test_the_load_waits_for_the_poll_that_lists_the_demo():
    user = ("echo", "Scaler")
    model = _Model(_status(user))  # the last poll: the user's app, not yet the demo
    run = ScriptedRun(model, parse_args(["--address", "http://h:8265", "--no-window",
                                         "--demo", "batched", "--rps", "7"]))
    run._on_deploy_finished(True, "batched", "RUNNING")
    assert model.loads == []  # not to the user's app
    model.session.status = _status(user)
    model.session.status_changed.emit(model.session.status)
    assert model.loads == []
    model.session.status = _status(user, ("batched", "BatchedGenerator"))
    model.session.status_changed.emit(model.session.status)
    assert model.loads == [(("batched", "BatchedGenerator"), 7.0)]
    model.session.status_changed.emit(model.session.status)  # once only
    assert len(model.loads) == 1 and model.session.status_changed.slots == []


def test_the_demo_is_selected_when_the_poll_already_lists_it():
    model = _Model(_status(("echo", "Scaler"), ("batched", "BatchedGenerator")))
    run = ScriptedRun(model, parse_args(["--address", "http://h:8265", "--no-window",
                                         "--demo", "batched"]))
    run._on_deploy_finished(True, "batched", "RUNNING")
    demo_rps = load_catalog()["batched"].load.default_rps
    assert model.loads == [(("batched", "BatchedGenerator"), demo_rps)]


def test_a_demo_whose_load_is_openai_prints_token_lines(qapp):
    """--demo NAME of a catalog entry whose load kind is openai: the demo's own load
    (demo_target: streamed completions) and, with --log-events, the TTFT/ITL lines."""
    from dataclasses import replace

    from backend.deploy.catalog import LoadHint
    from console.cli.openai_run import TokenReport

    model = _Model(_status(("generate", "Generate")))
    model.load = type("Load", (), {"stats": _Signal()})()
    demo = replace(model.catalog["batched"], key="generate",
                   application={**model.catalog["batched"].application, "name": "generate"},
                   load=LoadHint(kind="openai", path="/v1/completions", default_rps=2,
                                 openai={"model": "m", "output_tokens": 16}))
    model.catalog = {**model.catalog, "generate": demo}
    run = ScriptedRun(model, parse_args(["--address", "http://h:8265", "--no-window",
                                         "--demo", "generate", "--log-events"]))
    run._on_deploy_finished(True, "generate", "deployed")
    assert model.loads == [(("generate", "Generate"), 2)]
    assert isinstance(run.token_report, TokenReport)
    # Without --log-events, nothing prints; an http demo never prints these lines.
    for argv in (["--demo", "generate"], ["--demo", "batched", "--log-events"]):
        model = _Model(_status(("generate", "Generate"), ("batched", "BatchedGenerator")))
        model.catalog = {**model.catalog, "generate": demo}
        run = ScriptedRun(model, parse_args(["--address", "http://h:8265", "--no-window",
                                             *argv]))
        run._on_deploy_finished(True, argv[1], "deployed")
        assert model.loads and run.token_report is None
