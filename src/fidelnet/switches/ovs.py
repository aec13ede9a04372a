"""The Open vSwitch datapath: each switch an OVS bridge of the run's own OVS
(:class:`fidelnet.kernel.ovs.OvsDaemons`, started with the first OVS switch).

A bridge without a controller forwards as a learning switch (``fail_mode``
``standalone``: OVS's ``NORMAL`` action); with ``stp`` it runs OVS's STP. A bridge
with controllers (all the topology's :class:`~fidelnet.topology.spec.ControllerSpec`,
or those its :class:`~fidelnet.topology.spec.OpenFlowSpec` names, or those set at run
time by :meth:`OvsDatapath.set_controllers`) gets ``fail_mode`` ``secure`` unless it
asks otherwise (Mininet's default: no forwarding without a controller), and the
network waits until each is connected. ``protocols`` and ``dpid`` go to the
bridge's ``protocols`` and ``other_config:datapath-id``.

Where a controller is: a ``ref`` controller runs in the fabric namespace, next to
``ovs-vswitchd``, and the bridge connects to it directly on the fabric's loopback. A
``remote`` controller listens somewhere else (the host's namespace, a node's): the
bridge connects to a relay (:class:`fidelnet.kernel.relay.Relay`, a thread of this
process) on the fabric's loopback, at the controller's own port when it is free
there, which opens the real connection from the controller's namespace. A remote
controller on the loopback at a ``ref`` controller's port is that controller.

Ports are added with ``ovs-vsctl add-port`` once they are up in the fabric
namespace, and follow their links' carrier by themselves.

Not there yet: a switch stopped with :meth:`set_switch_up` has its bridge's ports
taken down rather than the bridge deleted.
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Any

from fidelnet.errors import KernelError
from fidelnet.kernel import nic, ns
from fidelnet.kernel.ovs import OvsDaemons
from fidelnet.kernel.relay import Relay
from fidelnet.topology.spec import ControllerSpec, OpenFlowSpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch

__all__ = ["OvsDatapath"]


_BATCH = 2000  # ovs-vsctl commands per transaction when a build is synced
REF_MAX_SWITCHES = 16  # ovs-testcontroller's MAX_SWITCHES
REF_EXTRA_PORTS = 16653  # where a ref controller's further processes listen, upwards


def _loopback(ip: str | None) -> bool:
    return ip is None or ipaddress.ip_address(ip).is_loopback


def ref_protocols(switch: Switch) -> tuple[str, ...]:
    """The OpenFlow versions a ``ref`` controller speaks: OpenFlow 1.0 only, like
    Mininet's reference controller, unless an OVS switch of the topology does not speak
    it; then every version those switches name. (With 1.0, a switch whose flows were
    all deleted still sends the next packet to its controller, which scripts such as
    Mininet's mobility.py rely on; from 1.3 a table miss drops it.)"""
    asked = [
        n.openflow.protocols
        for n in switch.net.spec.switches()
        if n.openflow is not None and n.openflow.protocols
    ]
    if all("OpenFlow10" in p for p in asked):
        return ("OpenFlow10",)
    return tuple(sorted({v for p in asked for v in p}))


class OvsDatapath:
    """Switches as bridges of the run's own Open vSwitch."""

    kind = "ovs"

    def __init__(self, run_id: str, record: Callable[..., None], gone: Callable[..., None]) -> None:
        self.run_id = run_id
        self._record = record
        self._gone = gone
        self.daemons: OvsDaemons | None = None
        self._up: dict[str, bool] = {}
        self._targets: dict[str, str] = {}  # remote controller name -> its relay's target
        self._switch_targets: dict[tuple[str, str], str] = {}  # (controller, switch)
        self._ref_shards: dict[str, list[list[int]]] = {}  # ref name -> [[port, switches]]
        self._relays: dict[str, Relay] = {}
        self._assigned: dict[str, tuple[str, ...]] = {}  # switch -> controller names
        self._fabric: str | None = None
        self._pending: list[list[str]] = []  # ovs-vsctl commands the build gathered
        self._synced = False  # the build's commands were run (see _run)

    def ovs(self, switch: Switch) -> OvsDaemons:
        """The run's OVS daemons, started on first use in the switch's namespace."""
        if self.daemons is None:
            daemons = OvsDaemons(self.run_id, switch.netns, self._record, self._gone)
            self.daemons = daemons
            self._fabric = ns.path_of(switch.netns) if switch.netns else None
            daemons.start()
        return self.daemons

    # -- controllers --------------------------------------------------------------

    def target(self, switch: Switch, c: ControllerSpec) -> str:
        """The bridge target (``tcp:127.0.0.1:PORT`` in the fabric) by which ``switch``
        reaches controller ``c``, starting it (``ref``) or its relay (``remote``) on
        first use."""
        key = (c.name, switch.name)
        if key in self._switch_targets:
            return self._switch_targets[key]
        if c.kind == "ref":
            target = self._ref_target(switch, c)
        elif c.name in self._targets:
            target = self._targets[c.name]
        else:
            same = [
                r
                for r in switch.net.spec.controllers
                if r.kind == "ref" and r.port == c.port and r.name != c.name
            ]
            if same and _loopback(c.ip) and c.node is None and c.netns is None:
                target = self.target(switch, same[0])
            else:
                self.ovs(switch)
                target = self._targets[c.name] = f"tcp:127.0.0.1:{self._relay(switch, c)}"
        self._switch_targets[key] = target
        return target

    def _ref_target(self, switch: Switch, c: ControllerSpec) -> str:
        """Open vSwitch's test controller serves at most 16 switches (its
        MAX_SWITCHES): a ``ref`` controller is as many processes as its switches need,
        the first on ``c.port``, each a learning switch per switch as one would be.
        (Mininet's runs one, and tree1024.py's switches past the 16th never
        connect.)"""
        shards = self._ref_shards.setdefault(c.name, [])
        if not shards or shards[-1][1] >= REF_MAX_SWITCHES:
            port = c.port if not shards else self._free_port(switch)
            name = c.name if not shards else f"{c.name}.{len(shards)}"
            self.ovs(switch).start_controller(name, port, ref_protocols(switch))
            shards.append([port, 0])
        shards[-1][1] += 1
        return f"tcp:127.0.0.1:{shards[-1][0]}"

    def _taken_ports(self, switch: Switch) -> set[int]:
        taken = {int(t.rsplit(":", 1)[1]) for t in self._targets.values()}
        taken |= {port for shards in self._ref_shards.values() for port, _ in shards}
        return taken | {r.port for r in switch.net.spec.controllers if r.kind == "ref"}

    def _free_port(self, switch: Switch) -> int:
        """A port of the fabric's loopback no controller or relay of the run uses
        (the fabric is the run's own namespace: nothing else listens there)."""
        taken = self._taken_ports(switch)
        return next(p for p in range(REF_EXTRA_PORTS, 65536) if p not in taken)

    def _relay(self, switch: Switch, c: ControllerSpec) -> int:
        target_ns = c.netns
        if c.node is not None:
            node = switch.net.nodes[c.node]
            target_ns = ns.path_of(node.netns) if node.netns else None
        taken = self._taken_ports(switch)
        last: KernelError | None = None
        for port in ([c.port] if c.port not in taken else []) + [0]:
            relay = Relay(
                self._fabric, port, target_ns, c.ip or "127.0.0.1", c.port, name=f"relay-{c.name}"
            )
            try:
                relay.start()
            except KernelError as exc:
                last = exc
                continue
            self._relays[c.name] = relay
            return relay.port
        assert last is not None
        raise last

    def controllers_of(self, switch: Switch) -> list[ControllerSpec]:
        """The controllers ``switch`` connects to."""
        every = switch.net.spec.controllers
        names = self._assigned.get(switch.name)
        if names is None:
            of = switch.spec.openflow
            names = of.controllers if of is not None else None
        if names is None:
            return list(every)
        by_name = {c.name: c for c in every}
        return [by_name[n] for n in names if n in by_name]

    def targets(self, switch: Switch) -> list[str]:
        """The bridge targets of ``switch``'s controllers (a remote controller that is
        one of the run's own appears once)."""
        return list(dict.fromkeys(self.target(switch, c) for c in self.controllers_of(switch)))

    def set_controllers(self, switch: Switch, names: tuple[str, ...]) -> None:
        """Connect ``switch`` to exactly these controllers from now on (Mininet's
        ``switch.start(controllers)``)."""
        self.sync()
        self._assigned[switch.name] = tuple(names)
        targets = self.targets(switch)
        self.ovs(switch)
        if targets:
            self._run(*_controller_commands(switch, targets))
        else:
            self._run(["del-controller", switch.name])

    def add_switch(self, switch: Switch) -> None:
        self.ovs(switch)  # the run's OVS, started by the first switch
        name = switch.name
        of = switch.spec.openflow or OpenFlowSpec()
        targets = self.targets(switch)
        fail_mode = of.fail_mode or ("secure" if targets else "standalone")
        # No in-band control unless asked (Mininet's default): controllers are
        # reached on the fabric's loopback, never through the switch's own ports.
        extra = [] if of.in_band else ["other_config:disable-in-band=true"]
        if of.protocols:
            extra.append(f"protocols={','.join(of.protocols)}")
        if of.dpid:
            dpid = of.dpid.replace(":", "").rjust(16, "0").lower()
            extra.append(f"other_config:datapath-id={dpid}")
        self._run_now(
            ["add-br", name],
            ["set", "bridge", name, f"datapath_type={self.datapath_type(switch)}",
             f"fail_mode={fail_mode}", f"stp_enable={'true' if switch.spec.stp else 'false'}",
             *extra],
            *(_controller_commands(switch, targets) if targets else []),
        )  # fmt: skip
        self._up[name] = True

    def datapath_type(self, switch: Switch) -> str:
        """The OVS datapath type of ``switch``'s bridge: ``netdev`` where it asks for
        the userspace datapath, else the run's (``system`` where the kernel module is
        loaded, ``netdev`` otherwise)."""
        of = switch.spec.openflow
        if of is not None and of.datapath_type == "user":
            return "netdev"
        return self.ovs(switch).datapath_type

    def _run_now(self, *commands: list[str]) -> None:
        """Run what is gathered, then ``commands`` as their own transaction, waiting
        for ``ovs-vswitchd``; later commands of the build are gathered again. A
        bridge is made this way: made in one transaction with other bridges' ports,
        a bridge sometimes stopped delivering to a port added later (Mininet's
        mobility.py lost a quarter of its pings after moving a host)."""
        self.sync()
        assert self.daemons is not None
        argv: list[str] = []
        for cmd in commands:
            argv += ["--", *cmd]
        self.daemons.vsctl(*argv)
        self._synced = False

    def _run(self, *commands: list[str]) -> None:
        """Run ``ovs-vsctl`` commands: while the network is being built (until the
        first :meth:`sync`), gathered and run later as one transaction, for which
        ``ovs-vswitchd`` reconfigures once (each ``ovs-vsctl`` that waits costs a
        reconfiguration of every bridge: 100 switches took 10 s one by one);
        afterwards at once, waiting until ``ovs-vswitchd`` has applied them."""
        if not self._synced:
            self._pending.extend(commands)
            return
        assert self.daemons is not None
        argv: list[str] = []
        for cmd in commands:
            argv += ["--", *cmd]
        self.daemons.vsctl(*argv)

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        del switch
        return {}

    def add_port(self, switch: Switch, intf: Interface) -> None:
        # The OpenFlow port number is the link's port (s1-eth9 is port 9), as Mininet
        # asks for it; OVS numbers ports in order otherwise.
        request = [f"ofport_request={intf.port}"] if intf.port and intf.port > 0 else []
        self.ovs(switch)
        self._run(
            ["--may-exist", "add-port", switch.name, intf.name],
            *([["set", "Interface", intf.name, *request]] if request else []),
        )

    def sync(self) -> None:
        """Run what the build gathered, in transactions of at most ``_BATCH``
        commands, and wait until ``ovs-vswitchd`` has applied them; from then on every
        change is made at once."""
        pending, self._pending = self._pending, []
        self._synced = True
        if not pending or self.daemons is None:
            return
        for i in range(0, len(pending), _BATCH):
            argv: list[str] = []
            for cmd in pending[i : i + _BATCH]:
                argv += ["--", *cmd]
            self.daemons.vsctl(*argv)

    def link_added(self, switch: Switch, intf: Interface, peer: Interface) -> None:
        """A node that sends into an OVS port computes its own checksums: OVS's
        userspace datapath carries checksum offload through its datapath, but a packet
        that goes to a controller and back (packet-in, packet-out) leaves with the
        checksum the sender left for the hardware to fill in, and the receiver drops
        it (every new TCP connection under a reactive controller took 2 s: two lost
        SYNs). Not needed between OVS ports, nor on the kernel datapath."""
        del intf
        if self.datapath_type(switch) != "netdev":
            return
        if getattr(peer.node, "forwarder", None) is self:
            return  # another port of this run's OVS
        path = ns.path_of(peer.node.netns) if peer.node.netns else None
        nic.set_tx_checksum(path, peer.name, False)

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        if self.daemons is not None:
            self._run(["--if-exists", "del-port", switch.name, intf.name])

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        del switch, intf, up  # OVS follows the port's carrier

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        for intf in switch.intf_list():
            if intf.name != "lo":
                intf.set_up(up)
        self._up[switch.name] = up

    def waits(self, switch: Switch) -> bool:
        """Whether ``switch`` may not forward at once: STP, or a controller to reach.
        (Asked of every switch once the network is built: the ports added without
        waiting are waited for here.)"""
        self.sync()
        return switch.spec.stp or bool(self.controllers_of(switch))

    def forwarding(self, switch: Switch) -> bool:
        if self.daemons is None:
            return True
        self.sync()
        wanted = {self.target(switch, c) for c in self.controllers_of(switch)}
        if wanted:
            conn = self.daemons.controller_connections()
            if not all(conn.get((switch.name, t), False) for t in wanted):
                return False
        if not switch.spec.stp:
            return True
        out = self.daemons.vsctl(
            "--columns=status", "--format=csv", "--no-headings", "list", "port"
        )
        return "stp_state=learning" not in out and "stp_state=listening" not in out

    def stats(self, switch: Switch) -> dict[str, Any]:
        dp = self.datapath_type(switch) if self.daemons is not None else None
        return {"datapath": self.kind, "ovs_datapath": dp, "bridge": switch.name}

    def close(self) -> None:
        """Stop the relays and the run's OVS daemons, and remove their directory."""
        for relay in self._relays.values():
            relay.stop()
        self._relays.clear()
        self._targets.clear()
        self._switch_targets.clear()
        self._ref_shards.clear()
        if self.daemons is not None:
            self.daemons.stop(graceful=False)  # the fabric namespace goes next
            self.daemons = None


def _controller_commands(switch: Switch, targets: list[str]) -> list[list[str]]:
    """``ovs-vsctl`` commands giving ``switch``'s bridge ``targets`` as controllers:
    ``set-controller``, or, with ``reconnect_ms``, one Controller row per target
    with that ``max_backoff`` (Mininet's ``reconnectms``)."""
    of = switch.spec.openflow
    ms = of.reconnect_ms if of is not None else None
    if ms is None:
        return [["set-controller", switch.name, *targets]]
    tag = re.sub(r"[^A-Za-z0-9_]", "_", switch.name)
    ids = [f"@ctl_{tag}_{i}" for i in range(len(targets))]
    rows = [
        [f"--id={ref}", "create", "Controller", f'target="{t}"', f"max_backoff={ms}"]
        for ref, t in zip(ids, targets, strict=True)
    ]
    return [*rows, ["set", "bridge", switch.name, f"controller=[{','.join(ids)}]"]]
