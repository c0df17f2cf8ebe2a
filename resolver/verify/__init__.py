"""Proving a build on the GPU: `gpuresolve verify` (the probe itself runs in
the user's interpreter: resolver/standalone/probe.py)."""

__all__: list[str] = []  # a namespace: import its modules
