"""The compatibility database: which one is used, how it is read and reset, evidence grades,
the observations overlay."""
