"""The full set of packages a lock pins, from a real resolver run: uv's ``pip compile`` for the
pip closure (with the target's wheel tags and the dists' metadata), py-rattler's solve in a
child process for the conda closure."""

__all__: list[str] = []  # a namespace: import its modules
