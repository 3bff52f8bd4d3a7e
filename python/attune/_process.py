"""What the packages that leave files behind for a process ask about that process."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
