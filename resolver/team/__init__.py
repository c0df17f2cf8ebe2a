"""Fleets read from where they live: a Kubernetes node list, a folder of detect files.

``kubernetes`` reads `kubectl get nodes -o json` (through ``jsonstream``, bounded) into machine
shapes, ``shapes`` groups machines by shape, ``expand`` turns a spec entry into one fleet target per
shape, and ``whatif`` says which driver upgrade would unlock a newer torch release fleet-wide.
"""
