"""Putting applications on a cluster: the demo catalog, packaging, deploying, and read-
modify-write of the Serve config (export and import of config files included)."""
