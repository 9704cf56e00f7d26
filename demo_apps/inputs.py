"""What a request to the classifier demos (multiplexed, combined, versions) carries: a row
of FEATURES numbers, sent or made from a seed. No torch: the ingresses and routers that
read requests need none (demo_apps/adapters.py and classifier.py are the models)."""

from __future__ import annotations

import numpy as np

FEATURES = 256
CLASSES = 10


def features_from_seed(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(FEATURES).astype(np.float32)


def row_from_body(body) -> tuple[np.ndarray | None, str]:
    """The input row of a request body, or (None, reason)."""
    if not isinstance(body, dict):
        body = {}
    if "features" in body:
        row = np.asarray(body["features"], dtype=np.float32)
        if row.shape != (FEATURES,):
            return None, f"'features' must be {FEATURES} numbers, got shape {row.shape}"
        return row, ""
    if "seed" in body:
        try:
            return features_from_seed(int(body["seed"])), ""
        except (TypeError, ValueError):
            return None, "'seed' must be an integer"
    return None, f"send {{'features': [{FEATURES} floats]}} or {{'seed': int}}"


async def row_from_request(request) -> tuple[np.ndarray | None, str]:
    """The input row of an HTTP request's JSON body, or (None, reason); a body that is
    not JSON reads as an empty one (and gets row_from_body's reason)."""
    try:
        body = await request.json()
    except ValueError:
        body = {}
    return row_from_body(body)
