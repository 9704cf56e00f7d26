"""Is the cluster's Ray a version this console is tested with?"""

from __future__ import annotations

import re

from backend.metrics.ray_exports import ray_minor

#: Ray versions (major, minor) this console is tested with, both ends inclusive: the
#: range docs/compatibility.md shows passing every check against a real head of each
#: version (scripts/compat_matrix.sh). Widen it only with a run that proves the new end.
SUPPORTED_RAY = ((2, 50), (2, 60))


def ray_version_warning(version: str | None) -> str | None:
    """None when the cluster's Ray is one this console is tested with, else one line."""
    lo, hi = SUPPORTED_RAY
    tested = (f"{lo[0]}.{lo[1]}.x" if lo == hi
              else f"{lo[0]}.{lo[1]} to {hi[0]}.{hi[1]}")
    mm = ray_minor(version)
    if mm is None:
        return (f"The cluster reports Ray version {version!r}, which is not a version "
                f"number; this console is tested with Ray {tested}.")
    text = re.match(r"^\s*v?\d+\.\d+(?:\.\d+)?", str(version)).group(0).strip()
    if mm < lo:
        return (f"The cluster runs Ray {text}, older than this console is tested with "
                f"({tested}): some views or changes may not work (the dashboard's REST "
                "API differs between versions).")
    if mm > hi:
        return (f"The cluster runs Ray {text}, newer than this console is tested with "
                f"({tested}): most things should work, but the REST API may have changed.")
    return None
