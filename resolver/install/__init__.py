"""`gpuresolve install`: apply a decision (or a lock) to an environment, then verify it.

``env`` inspects the target interpreter and finds the installers on this host; ``plan`` is pure
(wanted pins + the environment's inventory -> what to remove and the exact commands); ``run``
executes the commands, streaming the installer's output.
"""

__all__: list[str] = []  # a namespace: import its modules
