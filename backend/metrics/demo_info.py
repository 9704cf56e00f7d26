"""Ask a running demo application about its model: `GET` on its route through the Serve
proxy (the batched demo answers with the model it chose for its device and what a batch
costs there). Blocking; the console calls it on a worker thread."""

from __future__ import annotations

import requests

from backend.errors import ConsoleError
from backend.metrics.model_info import ModelInfo, parse_model_info


def fetch_model_info(url: str, app: str, *, timeout_s: float = 5.0,
                     verify: bool | str = True) -> ModelInfo:
    """The model figures application *app* answers at *url* (its route on the Serve
    proxy). Raises ConsoleError with the reason when there are none."""
    try:
        r = requests.get(url, timeout=timeout_s, verify=verify,
                         headers={"Accept": "application/json"})
    except requests.Timeout:
        raise ConsoleError(f"{app}: no model figures within {timeout_s:g} s "
                           f"(GET {url}).") from None
    except requests.RequestException as e:
        raise ConsoleError(f"{app}: cannot ask for its model figures (GET {url}): "
                           f"{type(e).__name__}.") from None
    if r.status_code != 200:
        raise ConsoleError(f"{app}: GET {url} answered HTTP {r.status_code}, not model "
                           "figures.")
    try:
        return parse_model_info(app, r.json())
    except ValueError as e:
        raise ConsoleError(f"{app}: GET {url} gave no model figures ({e}).") from None
