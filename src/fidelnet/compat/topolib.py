"""Mininet's ``mininet.topolib``: :class:`TreeTopo`, :func:`TreeNet`, :class:`TorusTopo`.

One deviation: :class:`TorusTopo` asks for ``stp=True`` on its switches. A torus
has loops, and fidelnet's switches are Ethernet bridges; without the spanning
tree protocol the first broadcast would circle forever (Mininet documents that
its torus "WILL NOT WORK" without STP and leaves turning it on to the user).
"""

from __future__ import annotations

from typing import Any

from fidelnet.compat.topo import Topo

__all__ = ["TorusTopo", "TreeNet", "TreeTopo"]


class TreeTopo(Topo):
    """A tree of switches, ``depth`` levels deep with ``fanout`` children each;
    numbered depth first (s1.., h1..)."""

    def build(self, depth: int = 1, fanout: int = 2) -> None:
        self.hostNum = 1
        self.switchNum = 1
        self.addTree(depth, fanout)

    def addTree(self, depth: int, fanout: int) -> str:
        """Add a subtree; returns its root's name."""
        if depth > 0:
            node = self.addSwitch(f"s{self.switchNum}")
            self.switchNum += 1
            for _ in range(fanout):
                child = self.addTree(depth - 1, fanout)
                self.addLink(node, child)
        else:
            node = self.addHost(f"h{self.hostNum}")
            self.hostNum += 1
        return node


def TreeNet(depth: int = 1, fanout: int = 2, **kwargs: Any) -> Any:
    """A Mininet network on a TreeTopo."""
    from fidelnet.compat.net import Mininet

    return Mininet(TreeTopo(depth, fanout), **kwargs)


class TorusTopo(Topo):
    """An x by y torus of switches (x, y >= 3), n hosts on each; switches run STP."""

    def build(self, x: int, y: int, n: int = 1) -> None:
        if x < 3 or y < 3:
            from fidelnet.errors import ValidationError

            raise ValidationError("TorusTopo", "x and y must be at least 3", (x, y))
        switches: dict[tuple[int, int], str] = {}
        for i in range(x):
            for j in range(y):
                loc = f"{i + 1}x{j + 1}"
                dpid = (i + 1) * 256 + (j + 1)
                switch = switches[i, j] = self.addSwitch(f"s{loc}", dpid=f"{dpid:x}", stp=True)
                for k in range(n):
                    host = self.addHost(f"h{loc}" if n == 1 else f"h{loc}x{k + 1}")
                    self.addLink(host, switch)
        for i in range(x):
            for j in range(y):
                self.addLink(switches[i, j], switches[i, (j + 1) % y])
                self.addLink(switches[i, j], switches[(i + 1) % x, j])
