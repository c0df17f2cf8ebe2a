"""One module per `gpuresolve` subcommand, imported lazily by resolver.cli."""

__all__: list[str] = []  # a namespace: import its modules
