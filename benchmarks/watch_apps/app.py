"""Two deployments, as a small user application has them: an ingress that hands each
request to a model. Both are trivial and ask for no CPU (0-CPU replicas), so that 26 of
these applications (52 replicas) fit on a small head; what the benchmark measures is the
console watching them, not their work.

Uploaded as its own package by benchmarks/watch_real_head.py."""

from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Model:
    def __call__(self, text: str) -> str:
        return text.upper()


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Ingress:
    def __init__(self, model) -> None:
        self._model = model

    async def __call__(self, request) -> str:
        return await self._model.remote(request.query_params.get("text", "ok"))


app = Ingress.bind(Model.bind())
