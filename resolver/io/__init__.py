"""Layer 1, input and output: the HTTP client, zip over range reads, bounded readers, atomic writes.

Imports only from the core layer below it; every layer above reads and writes through it.
"""
