"""Starting fidelnet's instruments in a node (pktgen, iperf3, ping, ip, ethtool).

A node whose programs run on this machine's files starts them with ``popen``; a
container node's image need not have them, so they run in its network namespace
and cgroups with this machine's files instead (``Node.tool_popen``, the same kernel
data path). Nodes of other tools (the benchmark's stock Mininet hosts) have only
``popen``, which is what they get.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

__all__ = ["pexec", "popen"]


def popen(node: Any, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """Start ``argv`` in ``node`` as an instrument."""
    start = getattr(node, "tool_popen", None) or node.popen
    proc: subprocess.Popen[Any] = start(list(argv), **kwargs)
    return proc


def pexec(node: Any, argv: Sequence[str], timeout: float | None = None) -> tuple[str, str, int]:
    """Run ``argv`` in ``node`` as an instrument, to completion: (stdout, stderr, exit code)."""
    p = popen(node, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=timeout)
    return out, err, p.returncode
