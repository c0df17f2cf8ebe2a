"""Reading lock files back as pins: ``lockfile.read`` picks the reader (``requirements`` with
pip's rules, ``conda`` for environment.yml and conda-lock.yml, ``pylock`` for PEP 751); all of
them produce the ``pins`` model."""

__all__: list[str] = []  # a namespace: import its modules
