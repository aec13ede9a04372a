"""Mininet's ``mininet.term``: a terminal on a node.

:func:`makeTerm` opens an ``xterm`` (or the ``term`` asked for: ``xterm`` or
``gterm``) running a shell inside the node, as Mininet does; the terminal is a process
of the node's, ended with it. Without an X display (``DISPLAY`` unset) or without the
terminal program, it raises an error that says so and what to do instead, where
Mininet would print a warning and return nothing usable. Mininet's ``screen``-based
alternative (``term='screen'``) is not provided: use the CLI (``h1 bash`` is not
interactive there either) or ``ip netns exec`` with the namespace ``fidelnet`` names.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from fidelnet.errors import UnsupportedError

__all__ = ["cleanUpScreens", "makeTerm", "makeTerms", "runX11", "tunnelX11"]

_PROGRAMS = {"xterm": ["xterm", "-title"], "gterm": ["gnome-terminal", "--title"]}


def tunnelX11(node: Any, display: str | None = None) -> tuple[str, None]:
    """The display a node's X programs use: the host's (nodes share its /tmp)."""
    del node
    shown = display or os.environ.get("DISPLAY")
    if not shown:
        raise UnsupportedError(
            "an X display (DISPLAY is not set)", "a terminal on a node", "use the CLI"
        )
    return shown, None


def makeTerm(
    node: Any,
    title: str = "Node",
    term: str = "xterm",
    display: str | None = None,
    cmd: str = "bash",
) -> list[Any]:
    """Open terminal ``term`` running ``cmd`` in ``node``; returns [its process]."""
    if term not in _PROGRAMS:
        raise UnsupportedError(
            f"terminal {term!r}", "makeTerm", f"use one of {', '.join(_PROGRAMS)}"
        )
    shown, _ = tunnelX11(node, display)
    argv = _PROGRAMS[term]
    if shutil.which(argv[0]) is None:
        raise UnsupportedError(f"{argv[0]} (Debian: apt-get install {argv[0]})", "makeTerm")
    full = [*argv, f"{title}: {node.name}", "-e", *cmd.split()]
    env = dict(os.environ, DISPLAY=shown)
    return [node.popen(full, env=env)]


def runX11(node: Any, cmd: str) -> list[Any]:
    """Run X program ``cmd`` in ``node`` on the host's display."""
    shown, _ = tunnelX11(node)
    return [node.popen(cmd.split(), env=dict(os.environ, DISPLAY=shown))]


def makeTerms(nodes: list[Any], title: str = "Node", term: str = "xterm") -> list[Any]:
    """A terminal on each node."""
    return [p for node in nodes for p in makeTerm(node, title, term)]


def cleanUpScreens() -> None:
    """Nothing to clean: fidelnet starts no ``screen`` sessions."""
