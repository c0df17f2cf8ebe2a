"""The compatibility database behind resolver.catalog: its record types (models), parsing the YAML
(parse), `db check`'s rules (check), GPU-name lookup (gpunames), which database is used (location),
the JSON cache, reset, evidence grades and the observations overlay."""

__all__: list[str] = []  # a namespace: import its modules
