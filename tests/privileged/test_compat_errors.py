"""Mininet-layer mistakes answered as Mininet users expect (issue 14, item 3): an
unknown node is still a KeyError, but one that names it and the nodes there are; a
link to something that is not a node, or a link index that does not exist, is a
ValidationError naming the field."""

from __future__ import annotations

import os

import pytest

from fidelnet.compat.net import Mininet
from fidelnet.compat.node import NullController
from fidelnet.compat.topo import SingleSwitchTopo
from fidelnet.errors import FidelnetError, UnknownNodeError, ValidationError

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]


def test_unknown_nodes_links_and_indexes_are_named() -> None:
    net = Mininet(topo=SingleSwitchTopo(2), controller=NullController)
    net.start()
    try:
        for lookup in (
            lambda: net["h9"],
            lambda: net.get("h1", "h9"),
            lambda: net.getNodeByName("h9"),
            lambda: net.addLink("h1", "h9"),
        ):
            with pytest.raises(KeyError) as err:  # what Mininet scripts catch
                lookup()
            assert isinstance(err.value, UnknownNodeError)
            assert isinstance(err.value, FidelnetError)
            assert str(err.value) == "no node 'h9' in the network (nodes: c0, h1, h2, s1)"
        with pytest.raises(ValidationError, match="addLink"):
            net.addLink(net["h1"], 42)
        h1, h2 = net["h1"], net["h2"]
        with pytest.raises(ValidationError, match="0 link"):
            net.delLinkBetween(h1, h2, index=3)
        assert net.pingAll() == 0.0  # nothing was changed by the refused calls
    finally:
        net.stop()
