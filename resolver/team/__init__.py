"""Team specs: what a fleet should run (`environments/<name>.yaml`), read and expanded.

``spec`` loads and validates a team spec (its docstring is the schema) and ``expand`` turns a spec
entry that stands for many machines (`kubernetes: FILE`, `slurm: FILE`, `detect: DIR/`) into one
fleet target per machine shape. The fleets themselves (node lists read, what verifies them where
they run, what they answered) live in ``resolver.fleet``; the team lock is ``flows/team.py``.
"""

__all__: list[str] = []  # a namespace: import its modules
