"""Mininet's ``mininet.moduledeps``: :func:`pathCheck` and :func:`moduleDeps`.

fidelnet loads no kernel modules. :func:`pathCheck` only checks that the named
programs are on PATH and raises a clear error naming the missing ones.
"""

from __future__ import annotations

import shutil
from typing import Any

from fidelnet.errors import NodeError
from fidelnet.kernel import procfs

__all__ = ["TUN", "lsmod", "moduleDeps", "pathCheck"]

TUN = "tun"


def lsmod() -> str:
    """The loaded kernel modules (``/proc/modules``)."""
    return procfs.loaded_modules()


def moduleDeps(subtract: Any = None, add: Any = None) -> None:
    """Mininet loads and unloads kernel modules here; fidelnet changes none."""
    del subtract, add


def pathCheck(*args: str, **kwargs: Any) -> None:
    """Raise when a program in ``args`` is not on PATH (``moduleName`` names the
    package that provides it)."""
    module = kwargs.get("moduleName", "it")
    missing = [a for a in args if shutil.which(a) is None]
    if missing:
        raise NodeError(
            f"cannot find required executable(s) {', '.join(missing)}; "
            f"please make sure that {module} is installed and on your PATH"
        )
