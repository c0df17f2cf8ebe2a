"""Flows (layer 5): each job run on plain, typed values, returning an outcome.

A flow gathers what a job needs from the layers below (probes, files, the database), hands the
decision layer plain values and returns what was decided; it never prints or touches Click. The
commands (layer 6) keep the options, the exit codes and the output.
"""

__all__: list[str] = []
