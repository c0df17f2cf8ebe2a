"""Presentation: every sentence a user reads about a decision, said from its records.

The decision layer (``resolver.solve``, ``resolver.images``) returns data: a reason's kind and
values, coverage, warnings and hints (``solve/findings.py``). ``findings`` says each in English;
``explain`` is ``suggest --explain``. It sits in the effects layer, beside ``render``, so the
writers that put these sentences in files (a lock's header, a team's report) import it as they
import ``render``; it imports nothing of the writers.
"""

__all__: list[str] = []
