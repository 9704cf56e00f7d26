"""Pack `demo_apps` as a Ray package and name it the way Ray's job client does.

The zip holds the `demo_apps/` folder itself, so a Serve config that lists its URI under
`runtime_env.py_modules` can import `demo_apps.batched:app` on any node.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

# Fixed timestamp: the same sources give the same bytes, hence the same URI, so a
# package already on the cluster is not uploaded again.
_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Package:
    uri: str
    data: bytes


def demo_apps_dir() -> Path:
    # find_spec locates the package without importing it (it would pull in torch).
    spec = importlib.util.find_spec("demo_apps")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("The demo_apps package is not installed with the console.")
    return Path(list(spec.submodule_search_locations)[0])


def build_package(src: Path | None = None) -> Package:
    src = Path(src or demo_apps_dir())
    files = sorted(
        p for p in src.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            arcname = f"{src.name}/{path.relative_to(src).as_posix()}"
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    data = buf.getvalue()
    digest = hashlib.sha1(data).hexdigest()
    return Package(uri=f"gcs://_ray_pkg_{digest}.zip", data=data)
