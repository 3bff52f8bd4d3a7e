"""Attune: a storage stack that learns its data, its workload and its devices."""

from attune._native import __version__

__all__ = ["__version__"]
