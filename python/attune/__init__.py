"""Attune: a storage stack that learns its data, its workload and its devices."""

from attune._native import __version__


class Error(Exception):
    """Base class of every error Attune raises."""


__all__ = ["Error", "__version__"]
