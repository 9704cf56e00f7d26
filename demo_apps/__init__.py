"""Ray Serve applications the console deploys to a cluster (run on the cluster, not in the console).

Packaged by the console as a `py_modules` package and uploaded through the dashboard,
so the same code reaches a local or a remote cluster. Only ray, torch, numpy and
starlette/fastapi may be imported here.
"""
