"""Mininet's cluster edition (``mininet.examples.cluster``: ``MininetCluster``,
``RemoteHost``, ``RemoteLink``, ``--cluster``) is not supported: it runs nodes on other
machines over ssh, and fidelnet runs a network on one machine, where it can own and
clean up everything the network makes. Importing it raises an error that says so and
what to do instead."""

from __future__ import annotations

from fidelnet.errors import FidelnetError

__all__ = ["refuse"]

ALTERNATIVE = (
    "run one fidelnet network per machine, or the whole topology on one larger "
    "machine (fidelnet builds 10,000 nodes: docs/scale.md)"
)


def refuse(module: str) -> None:
    raise FidelnetError(
        f"{module}: Mininet's cluster edition (nodes on other machines over ssh) is "
        f"not supported: fidelnet runs a network on one machine; {ALTERNATIVE}"
    )
