"""Observations: facts read from the binaries themselves, kept as their own layer.

- ``store``: the observations YAML (format in data/SCHEMA.md, "observations.yaml"): wheels read
  by file name and sha256 under ``observations:``, and builds seen running by ``gpuresolve
  verify`` under ``runtime:``; validated on load, merged, written atomically.
- ``compare``: an observation against the curated database (data/torch.yaml): contradictions.
- ``readwheels``: ``db update --read-wheels``: read one wheel per build not yet observed.
- ``confirm``: ``suggest/lock --confirm``: read the selected build's wheel before answering.
- ``runtime``: what ``verify`` saw, as a machine-independent observation.

The curated files are never edited here: a contradiction is reported and recorded next to the
observation, and the loader layers observations over the curated facts.
"""

__all__: list[str] = []  # a namespace: import its modules
