"""What the user looks at, for the metrics scrape (backend/metrics/attention.py): the
deployments in view are polled every second, the rest every few seconds.

The set is the union of named parts, each (app, deployment) pairs, plain data:

* "selected" — the model's selection (ConsoleModel.select sets it);
* "plotted"  — what the plots show (the window: the plot stack's key);
* "worst"    — the worst-first table's top rows, while it shows (its dock);
* "filter"   — the tree filter's matching deployments, while a filter is typed.

Each change that alters the union goes to the session (Session.set_attention), which
hands it to the metrics source with its next poll. Plain Python, any thread that owns
the model (the GUI thread in the console).
"""

from __future__ import annotations

from typing import Callable, Iterable

#: The worst-first table's rows counted as in view (the top of the ranking).
WORST_TOP_ROWS = 10
#: At most this many filter matches are in view (a filter that matches most of a
#: big cluster reads every page at every poll anyway: attention.WATCH_MAX_SHARE).
FILTER_MAX = 50

Key = tuple[str, str]


class Attention:
    """The deployments in view, by part; *apply* gets the union when it changes."""

    def __init__(self, apply: Callable[[frozenset[Key]], None]) -> None:
        self._apply = apply
        self._parts: dict[str, frozenset[Key]] = {}
        self.keys: frozenset[Key] = frozenset()

    def set_part(self, name: str, keys: Iterable[Key] | None) -> None:
        """The deployments part *name* shows now (None or empty: none)."""
        part = frozenset((str(a), str(d)) for a, d in (keys or ()) if d)
        if self._parts.get(name, frozenset()) == part:
            return
        self._parts[name] = part
        union = frozenset().union(*self._parts.values())
        if union != self.keys:
            self.keys = union
            self._apply(union)

    def part(self, name: str) -> frozenset[Key]:
        return self._parts.get(name, frozenset())
