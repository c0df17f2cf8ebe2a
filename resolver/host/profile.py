"""The host profile's old home: the record lives in ``core/hostprofile.py`` (the decision layer
reads it and must not import host/); these names stay importable from here."""

from resolver.core.hostprofile import *  # noqa: F403
from resolver.core.hostprofile import __all__ as __all__
