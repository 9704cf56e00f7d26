"""The demo catalog (resources/demos.yaml): Serve config templates plus load hints."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class ModelIds:
    """Which model each request names (serve_multiplexed_model_id header): ids
    `prefix + 0 … prefix + (count-1)`, drawn uniformly or with Zipf weights 1/(rank+1)^s."""

    count: int = 100
    prefix: str = "tenant-"
    distribution: str = "zipf"   # "zipf" | "uniform"
    s: float = 1.1
    header: str = "serve_multiplexed_model_id"

    def ids(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(self.count)]

    def weights(self) -> list[float]:
        if self.distribution == "uniform":
            return [1.0 / self.count] * self.count
        raw = [1.0 / (i + 1) ** self.s for i in range(self.count)]
        total = sum(raw)
        return [w / total for w in raw]


@dataclass(frozen=True)
class LoadHint:
    method: str = "POST"
    path: str = ""
    body: str = ""
    default_rps: float = 20.0
    model_ids: ModelIds | None = None   # multiplexed demos: the header each request sends
    stream: bool = False   # the response streams (read it chunk by chunk: time to first chunk)
    # "http": one request per body above, timed whole (or to its first chunk when it
    # streams). "openai": an OpenAI-compatible route (path: /v1/completions or
    # /v1/chat/completions) loaded with streamed completions, timed per token (TTFT, ITL);
    # `openai` then holds that load's settings (model, prompt and output lengths), read
    # by backend/load.
    kind: str = "http"
    openai: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class Demo:
    key: str
    title: str
    summary: str
    application: dict[str, Any] = field(compare=False, hash=False)
    gpu_deployments: tuple[str, ...] = ()
    # The share of one GPU each replica of a GPU deployment asks for. The demo models are
    # small: whole GPUs per replica would leave a one-GPU workstation unable to place the
    # multiplexed demo's second replica, or two demos side by side.
    gpu_per_replica: float = 0.125
    load: LoadHint = LoadHint()
    # The application answers GET on its route with its model's figures (device,
    # parameters, ms per batch): the console shows them in the app tree.
    model_info: bool = False

    @property
    def import_path(self) -> str:
        return self.application.get("import_path", "")

    @property
    def app_name(self) -> str:
        return self.application["name"]

    def app_config(self, package_uri: str, gpus: float = 0.0) -> dict[str, Any]:
        """The application's Serve config with the package and, on GPU clusters, a share
        of a GPU for each replica of the deployments that compute on one."""
        app = copy.deepcopy(self.application)
        env = app.setdefault("runtime_env", {})
        env.setdefault("py_modules", []).append(package_uri)
        env.setdefault("env_vars", {}).setdefault("OMP_NUM_THREADS", "1")
        if gpus > 0:
            for dep in app.get("deployments", []):
                if dep.get("name") in self.gpu_deployments:
                    dep.setdefault("ray_actor_options", {})["num_gpus"] = self.gpu_per_replica
        return app


def _load_hint(raw: dict[str, Any]) -> LoadHint:
    raw = dict(raw)
    ids = raw.pop("model_ids", None)
    if raw.get("kind", "http") not in ("http", "openai"):
        raise ValueError(f"a demo's load kind is 'http' or 'openai', got {raw['kind']!r}")
    return LoadHint(**raw, model_ids=ModelIds(**ids) if ids else None)


def load_catalog(text: str | None = None) -> dict[str, Demo]:
    if text is None:
        text = resources.files("resources").joinpath("demos.yaml").read_text()
    raw = yaml.safe_load(text) or {}
    gpu_share = float(raw.get("gpu_per_replica", Demo.gpu_per_replica))
    if not 0 < gpu_share <= 1:
        raise ValueError(f"gpu_per_replica must be in (0, 1], got {gpu_share}")
    demos = {}
    for key, d in (raw.get("demos") or {}).items():
        demos[key] = Demo(
            key=key,
            title=d["title"],
            summary=" ".join(str(d.get("summary", "")).split()),
            application=d["application"],
            gpu_deployments=tuple(d.get("gpu_deployments") or ()),
            gpu_per_replica=gpu_share,
            load=_load_hint(d.get("load") or {}),
            model_info=bool(d.get("model_info", False)),
        )
    return demos
