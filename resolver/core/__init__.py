"""Layer 0: what every other layer may use and that imports nothing of gpuresolve above it.

``errors`` (one exception root, one exit code per concept), ``versions`` (release and CUDA
version values), ``platforms`` (a platform's marker values, wheel tags, conda subdir, Docker and
Kubernetes names; the Python version value type).
"""

__all__: list[str] = []  # a namespace: import its modules
