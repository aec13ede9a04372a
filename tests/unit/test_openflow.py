"""OpenFlow controllers and switch options: their checks before anything is built, the
scenario fields, the relay that carries switch connections across namespaces (here
between two loopback ports of this namespace), and the connection state read from
ovs-vswitchd's log."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from fidelnet.cli.mn import parse
from fidelnet.compat.node import DefaultController, NullController, OVSSwitch
from fidelnet.kernel.ovs import OvsDaemons
from fidelnet.kernel.relay import Relay
from fidelnet.scenario import loads
from fidelnet.topology import ControllerSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import OpenFlowSpec
from fidelnet.topology.validate import problems


def ovs_topo(**switch: Any) -> TopologySpec:
    t = TopologySpec(datapath="ovs")
    t.add_node(NodeSpec("s1", kind="switch", **switch))
    t.add_node(NodeSpec("h1"))
    return t


def errors(t: TopologySpec) -> list[str]:
    return [str(e) for e in problems(t)]


def test_remote_controllers_are_checked_by_address_and_place() -> None:
    t = ovs_topo()
    t.controllers = [
        ControllerSpec("c0"),
        ControllerSpec("c1", "remote", 6653),  # the host's loopback, c0's port: c0 itself
        ControllerSpec("c2", "remote", 6700, ip="10.0.0.1", node="h1"),
        ControllerSpec("c3", "remote", 6653, ip="fe80::1"),
    ]
    assert errors(t) == []
    t.controllers = [
        ControllerSpec("c0", ip="127.0.0.1"),  # a ref controller has no address
        ControllerSpec("c1", "remote", ip="10.0.0.300"),
        ControllerSpec("c2", "remote", node="h9"),
        ControllerSpec("c3", "remote", node="h1", netns="/run/netns/x"),
        ControllerSpec("c4", "remote", netns="relative"),
    ]
    got = errors(t)
    assert any(e.startswith("controllers[0].ip: only a remote controller") for e in got), got
    assert any(e.startswith("controllers[1].ip: must be an IPv4 or IPv6 address") for e in got)
    assert any(e.startswith("controllers[2].node: unknown node") and "h1" in e for e in got)
    assert any(e.startswith("controllers[3].netns: give node or netns") for e in got)
    assert any(e.startswith("controllers[4].netns: must be a namespace's path") for e in got)
    assert ControllerSpec("c2", "remote", 6700, ip="10.0.0.1", node="h1").address == (
        "10.0.0.1:6700 in h1"
    )


def test_openflow_options_are_checked() -> None:
    t = ovs_topo(openflow=OpenFlowSpec(protocols=("OpenFlow13",), dpid="00:00:00:01"))
    t.controllers = [ControllerSpec("c0")]
    assert errors(t) == []
    t = ovs_topo(
        openflow=OpenFlowSpec(
            protocols=("OpenFlow13", "OpenFlow16"),
            fail_mode="open",  # type: ignore[arg-type]
            dpid="xyz",
            controllers=("c9",),
        )
    )
    got = errors(t)
    assert any(
        e.startswith("nodes.s1.openflow.protocols: unknown OpenFlow version (got 'OpenFlow16'")
        and "OpenFlow10" in e
        for e in got
    ), got
    assert any(e.startswith("nodes.s1.openflow.fail_mode: unknown fail mode") for e in got)
    assert any(e.startswith("nodes.s1.openflow.dpid: must be 1 to 16 hex digits") for e in got)
    assert any(e.startswith("nodes.s1.openflow.controllers: unknown controller") for e in got)
    # Two switches with one datapath id; OpenFlow options on a Linux bridge.
    t = ovs_topo(openflow=OpenFlowSpec(dpid="1"))
    t.add_node(NodeSpec("s2", kind="switch", openflow=OpenFlowSpec(dpid="0001")))
    t.add_node(NodeSpec("s3", kind="switch", datapath="bridge", openflow=OpenFlowSpec()))
    got = errors(t)
    assert any(e.startswith("nodes.s2.openflow.dpid: s1 has the same datapath id") for e in got)
    assert any(e.startswith("nodes.s3.openflow: only switches on the ovs datapath") for e in got)


def test_scenario_remote_controllers_and_openflow_options() -> None:
    spec = loads(
        "name: of\n"
        "topology:\n"
        "  builder: {linear: 2}\n"
        "  datapath: ovs\n"
        "  controllers:\n"
        "    - {name: c0}\n"
        "    - {name: app, kind: remote, ip: 10.0.0.1, port: 6700, node: h1}\n"
        "  nodes:\n"
        "    s9: {kind: switch, openflow: {protocols: [OpenFlow13], fail_mode: standalone,"
        " dpid: '0a', controllers: [app]}}\n"
    ).topology_spec()
    assert [(c.name, c.kind, c.ip, c.port, c.node) for c in spec.controllers] == [
        ("c0", "ref", None, 6653, None),
        ("app", "remote", "10.0.0.1", 6700, "h1"),
    ]
    assert spec.nodes["s9"].openflow == OpenFlowSpec(("OpenFlow13",), "standalone", "0a", ("app",))
    with pytest.raises(Exception) as err:
        loads(
            "name: of\ntopology:\n  datapath: ovs\n  builder: {linear: 2}\n"
            "  nodes:\n    s9: {kind: switch, openflow: {protocols: [OpenFlow9]}}\n"
        )
    assert "protocols" in str(err.value) and "OpenFlow13" in str(err.value)


def test_mn_switch_without_controller_gets_the_default_one() -> None:
    # As with mn: an OpenFlow switch gets the default controller; the default learning
    # switch, Linux bridges and standalone OVS bridges need none.
    setup = parse(["--switch", "ovs,protocols=OpenFlow13"])
    assert setup.controllers == [DefaultController]
    assert issubclass(setup.switch, OVSSwitch)
    assert parse(["--switch", "ovsbr"]).controllers == [NullController]
    assert parse([]).controllers == [NullController]


# -- the relay ----------------------------------------------------------------------------


def _echo_server() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_relay_copies_both_ways_and_passes_half_closes_on() -> None:
    srv, port = _echo_server()
    relay = Relay(None, 0, None, "127.0.0.1", port)
    relay.start()
    try:
        payload = os.urandom(3_000_000)  # more than the socket buffers hold
        with socket.create_connection(("127.0.0.1", relay.port)) as client:

            def send() -> None:
                client.sendall(payload)
                client.shutdown(socket.SHUT_WR)  # the server sees EOF, echoes the rest

            sender = threading.Thread(target=send)
            sender.start()
            got = bytearray()
            while data := client.recv(65536):
                got += data
            sender.join()
        assert bytes(got) == payload
        assert relay.accepted == 1 and relay.refused == 0
    finally:
        relay.stop()
        srv.close()


def test_relay_closes_the_switch_side_when_the_controller_refuses() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    relay = Relay(None, 0, None, "127.0.0.1", closed_port, name="relay-c9")
    relay.start()
    try:
        with socket.create_connection(("127.0.0.1", relay.port)) as client:
            client.settimeout(5)
            assert client.recv(10) == b""  # closed: the switch retries on its own
        assert relay.refused == 1
        busy = Relay(None, relay.port, None, "127.0.0.1", closed_port, name="relay-c8")
        with pytest.raises(Exception, match=r"relay-c8: cannot listen on 127\.0\.0\.1:\d+"):
            busy.start()
    finally:
        relay.stop()


# -- connection state from ovs-vswitchd's log ---------------------------------------------


def test_controller_connections_follow_the_rconn_log(tmp_path: Path) -> None:
    daemons = OvsDaemons("abcdef", None, lambda *a, **k: None, lambda *a, **k: None)
    daemons.dir = str(tmp_path)
    log = tmp_path / "ovs-vswitchd.log"
    assert daemons.controller_connections() == {}  # no log yet
    log.write_text(
        "2026-11-26T20:49:19.766Z|00052|rconn|INFO|s2<->tcp:127.0.0.1:6653: connecting...\n"
        "2026-11-26T20:49:19.766Z|00053|connmgr|INFO|s2: added primary controller\n"
        "2026-11-26T20:49:19.766Z|00055|rconn|INFO|s2<->tcp:127.0.0.1:6653: connected\n"
        "2026-11-26T20:49:19.767Z|00056|rconn|INFO|s1<->tcp:127.0.0.1:6700: connecting...\n"
        "2026-11-26T20:49:20.767Z|00057|connmgr|INFO|s2<->tcp:127.0.0.1:6653: 2 flow_mods"
    )  # the last line is not complete yet
    assert daemons.controller_connections() == {
        ("s2", "tcp:127.0.0.1:6653"): True,
        ("s1", "tcp:127.0.0.1:6700"): False,
    }
    with log.open("a") as f:
        f.write(
            " 10 s ago (2 adds)\n"
            "2026-11-26T20:49:21.000Z|00058|rconn|INFO|s1<->tcp:127.0.0.1:6700: connected\n"
            "2026-11-26T20:49:22.000Z|00059|rconn|INFO|s2<->tcp:127.0.0.1:6653: "
            "connection closed by peer\n"
        )
    assert daemons.controller_connections() == {
        ("s2", "tcp:127.0.0.1:6653"): False,
        ("s1", "tcp:127.0.0.1:6700"): True,
    }


def test_in_band_reconnect_and_datapath_type_are_checked_and_reach_the_spec() -> None:
    good = OpenFlowSpec(in_band=True, reconnect_ms=2000, datapath_type="user")
    assert errors(ovs_topo(openflow=good)) == []
    bad = OpenFlowSpec(
        in_band="yes",  # type: ignore[arg-type]
        reconnect_ms=500,
        datapath_type="dpdk",  # type: ignore[arg-type]
    )
    got = errors(ovs_topo(openflow=bad))
    assert any(e.startswith("nodes.s1.openflow.in_band: must be true or false") for e in got)
    assert any(
        e.startswith("nodes.s1.openflow.reconnect_ms: must be milliseconds, 1000..3600000")
        for e in got
    ), got
    assert any(
        e.startswith("nodes.s1.openflow.datapath_type: unknown Open vSwitch datapath")
        and "kernel" in e
        and "user" in e
        for e in got
    ), got
    spec = loads(
        "name: of\ntopology:\n  datapath: ovs\n  builder: {linear: 2}\n  nodes:\n"
        "    s9: {kind: switch, openflow: {in_band: true, reconnect_ms: 1500,"
        " datapath_type: user}}\n"
    ).topology_spec()
    of = spec.nodes["s9"].openflow
    assert of is not None and (of.in_band, of.reconnect_ms, of.datapath_type) == (
        True, 1500, "user"
    )  # fmt: skip
    with pytest.raises(Exception, match="reconnect_ms"):
        loads(
            "name: of\ntopology:\n  datapath: ovs\n  builder: {linear: 2}\n  nodes:\n"
            "    s9: {kind: switch, openflow: {reconnect_ms: 10}}\n"
        )


def test_mininet_ovs_options_become_openflow_options() -> None:
    from fidelnet.compat._switch import _backoff_ms

    assert (_backoff_ms(1000), _backoff_ms(200), _backoff_ms(0), _backoff_ms(None)) == (
        1000, 1000, None, None
    )  # fmt: skip
