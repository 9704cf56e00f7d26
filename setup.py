"""The one C extension (the rest is pyproject.toml): a node page's kept text split at its
values (backend/metrics/value_split.py). Optional: where it cannot be compiled (no C
compiler, no Python headers) the package installs without it and the same split runs
as a regex."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("backend.metrics._value_scan",
                             ["backend/metrics/_value_scan.c"],
                             extra_compile_args=["-O2"], optional=True)])
