"""The compatibility database on disk: which one is used, how it is read, how it is reset."""
