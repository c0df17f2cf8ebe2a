"""Effects that write: one lock's files (``lockfiles``), the output folder (``outputs``), the
formats (``formats/``) and closures (``closure/``), ``--check``, the recorded inputs."""

__all__: list[str] = []  # a namespace: import its modules
