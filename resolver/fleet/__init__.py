"""Fleets: the node lists read from clusters, what verifies them where they run, what they answered.

Node lists: ``kubernetes`` reads `kubectl get nodes -o json` (through ``jsonstream``, bounded;
or ``-o yaml``) and ``slurm`` reads `scontrol show node --oneliner`, each into machine shapes.
Verification where the fleet runs: ``files`` writes what a cluster lock adds beside its locks (the
plan `fleet.yaml`; ``manifests_k8s``: a Kubernetes Job per node group, its selection proven by
``k8s_selector``; ``slurm``: an sbatch script per group). Results: ``results`` reads what the
nodes answered (bounded, validated) and ``report`` judges it (`gpuresolve fleet report`).
A team spec (what a fleet should run) stays in ``resolver.team``.
"""

__all__: list[str] = []  # a namespace: import its modules
