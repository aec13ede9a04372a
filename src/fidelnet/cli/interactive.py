"""The interactive ``mininet>`` prompt of ``fidelnet mn`` (no ``--test``, no script).

:func:`run_cli` runs Mininet's command line (``fidelnet.compat.cli.CLI``) on a
network until ``exit``, ``quit`` or end of input; ^C interrupts the command
running in a node, not the prompt. With standard input that is not a terminal
(a pipe, ``/dev/null``), commands are read from it and the prompt ends at its end.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["run_cli"]


def run_cli(net: Any) -> None:
    """Run the CLI on ``net`` (a ``fidelnet.compat.net.Mininet``) until the user exits."""
    from fidelnet.compat.cli import CLI

    CLI(net, stdin=sys.stdin)
