"""The one C extension (the rest is pyproject.toml): a node's metrics page cut to the kept
families and split at its values (backend/metrics/_page_scan.c; exposition.py and
value_split.py hold the Python it is tested against). Optional: where it cannot be
compiled (no C compiler, no Python headers) the package installs without it, and the
same cut and split run in Python."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("backend.metrics._page_scan",
                             ["backend/metrics/_page_scan.c"],
                             extra_compile_args=["-O2"], optional=True)])
