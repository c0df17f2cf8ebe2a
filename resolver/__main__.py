"""`python -m resolver` runs the gpuresolve CLI (handy from a checkout)."""

from resolver.start import entry

entry()
