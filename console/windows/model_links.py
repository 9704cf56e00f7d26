"""A view's connections to the model's signals (psygnal), cut when the view's Qt object
is destroyed — what Qt did on its own for its signals' connections to a QObject's slots.

psygnal holds a bound method weakly, so a view freed by Python drops out by itself; but
a view whose Qt object Qt has already deleted may still be alive in Python for a while
(until the collector runs), and a slot of it called then would touch a deleted widget.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable

from PySide6.QtCore import QObject


class ModelLinks:
    def __init__(self, owner: QObject) -> None:
        """Connections cut when *owner* is destroyed (or at `cut()`)."""
        self._links: list[tuple[Any, Callable[[], Callable | None]]] = []
        owner.destroyed.connect(self.cut)

    def connect(self, signal: Any, slot: Callable) -> None:
        """*signal* (a psygnal signal of the model) calls *slot* until the owner is gone.
        *slot*: a bound method (held weakly), never a lambda over the view."""
        # A Qt method (built in) has no signature psygnal could read: it is given every
        # argument, as Qt would.
        signal.connect(slot, check_nargs=not inspect.isbuiltin(slot))
        # A Python method is held weakly here too; anything else (a Qt method) strongly,
        # until the owner goes.
        ref: Callable[[], Callable | None] = (
            weakref.WeakMethod(slot) if inspect.ismethod(slot) else _strong(slot))
        self._links.append((signal, ref))

    def cut(self, *_: Any) -> None:
        links, self._links = self._links, []
        for signal, ref in links:
            slot = ref()
            if slot is not None:
                signal.disconnect(slot, missing_ok=True)


def _strong(slot: Callable) -> Callable[[], Callable]:
    return lambda: slot
