"""Mininet compatibility: Mininet's Python API, implemented on fidelnet.

Modules mirror Mininet's: :mod:`.net` (``Mininet``), :mod:`.node`, :mod:`.nodelib`,
:mod:`.link`, :mod:`.topo`, :mod:`.topolib`, :mod:`.cli`, :mod:`.log`, :mod:`.util`,
:mod:`.clean`, :mod:`.moduledeps`. The directory returned by :func:`shim_path`
holds a package named ``mininet`` that re-exports them, so ``from mininet.net
import Mininet`` runs on fidelnet when (and only when) that directory is put on
``sys.path``: ``fidelnet mn script.py`` does, or ``PYTHONPATH=$(fidelnet
compat-path)``. Nothing is installed over, or shadows, a real Mininet.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["shim_path"]


def shim_path() -> str:
    """The directory holding the ``mininet`` shim package (put it on sys.path)."""
    return str(Path(__file__).resolve().parent / "shim")
