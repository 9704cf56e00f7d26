"""What the multiplexed demos share at their HTTP edge: the request's input row, the
model-id header check, and the cache size from the application builder's args."""

from __future__ import annotations

import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from demo_apps.inputs import row_from_request

DEFAULT_MAX_MODELS = 4
MISSING_MODEL_ID = "name the model in the 'serve_multiplexed_model_id' header"


async def read_multiplexed_request(request: Request
                                   ) -> tuple[str, np.ndarray | None, JSONResponse | None]:
    """(model id, input row, None) — or a 400 response saying what is wrong."""
    model_id = serve.get_multiplexed_model_id()
    if not model_id:
        return "", None, JSONResponse({"error": MISSING_MODEL_ID}, status_code=400)
    row, error = await row_from_request(request)
    if row is None:
        return model_id, None, JSONResponse({"error": error}, status_code=400)
    return model_id, row, None


def cache_size_from_args(args: dict | None) -> int:
    """`args.max_num_models_per_replica`: Ray fixes it when the method is decorated, so
    it reaches the deployment through the application builder."""
    size = int(dict(args or {}).get("max_num_models_per_replica", DEFAULT_MAX_MODELS))
    if size < 1:
        raise ValueError(f"max_num_models_per_replica must be >= 1, got {size}")
    return size
