"""Errors of attune.frames. Every failure of splitting or reading a split is a ``SplitError``."""

from __future__ import annotations

from attune import Error


class SplitError(Error):
    """Bad input to split, a split that would not shrink the data, or a damaged split directory."""
