"""The file formats a lock is written in, each rendered from a decision (and, where it pins a
closure, from ``writers.closure``): requirements.txt, environment.yml, virtual-packages.yml,
conda-lock.yml, pylock.toml, uv's pyproject, the Dockerfile, the report and the cluster report."""

__all__: list[str] = []  # a namespace: import its modules
