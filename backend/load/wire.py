"""What a cluster load worker sends its driver, as plain Python values.

The workers' code travels by value (`ray.cloudpickle.register_pickle_by_value(backend)`,
backend/load/ray_driver.py): a remote cluster does not have the console's code. So an
instance of one of our dataclasses (a second's SecondStats, the run's RunSummary) is
pickled there *with its class's definition*: a poll's delta was ~22 kB instead of ~1.2 kB
and took ~1–3 ms to pickle instead of 0.03 ms, twice a second, holding the worker's GIL
while its engine thread waited to send and read (the merged p99 read ~5–10 % above the
console's own generator's). `plain` turns the delta into builtins (each dataclass a
tagged tuple of its fields), pickled by name and cheap; `rebuilt` makes the dataclasses
again on the driver's side, where the classes are importable.
"""

from __future__ import annotations

import dataclasses

from backend.load import load_model

_TAG = "\x00dataclass"  # (tag, class name, field values…): no user value starts so


def plain(value):
    """*value* with every dataclass instance in it (in dicts, tuples, lists) replaced by
    (_TAG, its class's name, *its fields' values), recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (_TAG, type(value).__name__,
                *(plain(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


_CLASSES = {name: cls for name, cls in vars(load_model).items()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls)}


def rebuilt(value):
    """The inverse of `plain`: the dataclasses of backend.load.load_model made again. A
    class it does not know is an error (the two sides run different code)."""
    if isinstance(value, tuple):
        if len(value) >= 2 and value[0] == _TAG:
            cls = _CLASSES.get(value[1])
            if cls is None:
                raise ValueError(f"a load worker sent a {value[1]!r}, which this console "
                                 f"does not know (is it running other code?)")
            return cls(*(rebuilt(v) for v in value[2:]))
        return tuple(rebuilt(v) for v in value)
    if isinstance(value, dict):
        return {k: rebuilt(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rebuilt(v) for v in value]
    return value
