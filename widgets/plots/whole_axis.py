"""A y axis for counts (replicas): ticks on whole numbers only.

pyqtgraph spaces ticks by the range alone, so a plot of one replica, ranged 0 to 1.25,
reads "0, 0.5, 1.0" — half a replica. `WholeNumberAxis` keeps pyqtgraph's spacing where
it is a whole number (a range of 0 to 40 still ticks every 10) and ticks every 1
where pyqtgraph would tick finer; its labels then have no decimals ("0", "1")."""

from __future__ import annotations

import pyqtgraph as pg


class WholeNumberAxis(pg.AxisItem):
    """An AxisItem whose tick levels are whole numbers apart (see the module docstring)."""

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        levels = super().tickSpacing(minVal, maxVal, size)
        if self._tickSpacing is not None:  # set by hand (setTickSpacing): as asked
            return levels
        whole = [(spacing, offset) for spacing, offset in levels if spacing >= 1.0]
        return whole or [(1.0, 0.0)]
