"""Mininet-layer mistakes answered as Mininet users expect (issue 14, item 3): an
unknown node is still a KeyError, but one that names it and the nodes there are; a
link to something that is not a node, or a link index that does not exist, is a
ValidationError naming the field. (Standalone OVS bridges: with a NullController, an
OVSSwitch in fail mode secure forwards nothing, as under Mininet.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fidelnet.compat.net import Mininet
from fidelnet.compat.node import NullController, OVSBridge
from fidelnet.compat.topo import SingleSwitchTopo
from fidelnet.errors import FidelnetError, UnknownNodeError, ValidationError

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]


def test_unknown_nodes_links_and_indexes_are_named() -> None:
    net = Mininet(topo=SingleSwitchTopo(2), switch=OVSBridge, controller=NullController)
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


def test_tests_and_link_status_name_what_is_wrong(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from fidelnet.compat.cli import CLI

    net = Mininet(topo=SingleSwitchTopo(2), switch=OVSBridge, controller=NullController)
    net.start()
    try:
        with pytest.raises(UnknownNodeError, match="no node 'h9'"):
            net.ping(["h1", "h9"])
        with pytest.raises(ValidationError, match="not a node of this network"):
            net.ping([net["h1"], object()])
        with pytest.raises(ValidationError, match="ping.hosts: must be a list of nodes"):
            net.ping("h1")
        with pytest.raises(ValidationError, match="iperf.l4Type"):
            net.iperf(["h1", "h2"], l4Type="SCTP")
        assert net.ping(["h1", "h2"]) == 0.0  # names work where nodes do
        capsys.readouterr()
        net.configLinkStatus("h1", "h9", "down")
        net.configLinkStatus("h1", "s1", "sideways")
        err = capsys.readouterr().err
        assert "dst not in network: h9 (nodes: c0, h1, h2, s1)" in err
        assert "link status must be 'up' or 'down', not 'sideways'" in err
        # The CLI prints fidelnet's errors and goes on.
        script = tmp_path / "cmds"
        script.write_text("iperfudp 10M h1 h9\nlink h1 s9 down\npy net.ping(['h1', 'h7'])\n")
        CLI(net, script=str(script))
        out = capsys.readouterr()
        assert "node 'h9' not in network" in out.err
        assert "src not in network" not in out.err and "dst not in network: s9" in out.err
        assert "no node 'h7' in the network" in out.out + out.err
        assert net.pingAll() == 0.0
    finally:
        net.stop()
