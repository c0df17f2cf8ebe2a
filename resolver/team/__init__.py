"""Team environments: a spec for a fleet, one solve for all of it, the lock files for it.

``spec`` loads and validates a team spec (`environments/<name>.yaml`; its docstring is the schema),
``fleet`` solves one build set (or one per group) for every target, and ``lock`` writes the team's
files. Fleets are read from where they live: a Kubernetes node list, a Slurm node list, a folder of
detect files. ``kubernetes`` reads `kubectl get nodes -o json` (through ``jsonstream``, bounded;
or ``-o yaml``) and ``slurm`` reads `scontrol show node --oneliner` into machine shapes, ``shapes``
groups machines by shape, ``expand`` turns a spec entry into one fleet target per shape, and
``whatif`` says which driver upgrade would unlock a newer torch release fleet-wide. A cluster lock
also writes what verifies each node group where it runs (``fleet_files``), and ``fleet_report``
judges what the nodes answered.
"""

__all__: list[str] = []  # a namespace: import its modules
