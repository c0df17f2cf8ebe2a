"""One module per `gpuresolve` subcommand, imported lazily by resolver.cli."""
