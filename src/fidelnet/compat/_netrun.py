"""Running a Mininet network: ``start`` (controllers, switches, spanning trees),
``waitConnected``, ``stop``, ``run``, ``interact``, ``monitor`` and
``configLinkStatus``, mixed into :class:`fidelnet.compat.net.Mininet`."""

from __future__ import annotations

from typing import Any

from fidelnet import realize
from fidelnet.compat import _context
from fidelnet.compat._node import Node
from fidelnet.compat.log import error, info
from fidelnet.kernel import procfs
from fidelnet.vt import run as vt_run

__all__ = ["WAIT_CONNECTED_S", "NetRunning"]

WAIT_CONNECTED_S = 60.0
"""How long ``waitConnected()`` without a timeout waits (Mininet: for ever)."""
_STP_WAIT_S = 45.0


def _not_connected(switches: list[Any]) -> str:
    """Which switches did not connect, and to what."""
    parts = []
    for sw in switches:
        ctls = [c.address for c in _switch_controllers(sw)]
        if ctls:
            parts.append(f"{sw.name} is not connected to {' or '.join(ctls)}")
        else:
            parts.append(f"{sw.name} is not forwarding")
    return "; ".join(parts)


def _switch_controllers(switch: Any) -> list[Any]:
    from fidelnet import openflow
    from fidelnet.errors import FidelnetError

    try:
        return openflow.switch_controllers(switch.net, switch.name)
    except FidelnetError:
        return []


class NetRunning:
    """The running half of :class:`fidelnet.compat.net.Mininet`."""

    fn_net: Any
    built: bool
    waitConn: Any
    controllers: list[Any]
    switches: list[Any]
    hosts: list[Any]
    links: list[Any]
    nameToNode: dict[str, Any]
    _cpu_start: dict[int, procfs.CpuTimes]

    def build(self) -> None:
        raise NotImplementedError

    @property
    def cpu_usage(self) -> float:
        """VT-Mininet's ``net.cpu_usage``: the share of the machine's CPU time (all
        cores, in percent) spent busy since the network started, interrupts and
        softirqs included."""
        shares = procfs.busy_share(self._cpu_start, procfs.cpu_times())
        return 100.0 * sum(shares.values()) / len(shares) if shares else 0.0

    def start(self) -> None:
        """Start controllers (no-ops) and switches; wait for spanning trees to settle."""
        if not self.built:
            self.build()
        self._cpu_start = procfs.cpu_times()  # what cpu_usage counts from
        self.fn_net.start_nodes()  # VM hosts added since the build
        info("*** Starting controller\n")
        for controller in self.controllers:
            info(controller.name + " ")
            controller.start()
        info("\n")
        info(f"*** Starting {len(self.switches)} switches\n")
        for switch in self.switches:
            info(switch.name + " ")
            switch.start(self.controllers)
        info("\n")
        # Spanning trees settle before start() returns, as Mininet's bridges do;
        # controller connections are waited for only when asked (waitConnected).
        realize.wait_stp([s for s in self.switches if s.spec.stp], _STP_WAIT_S)
        if self.waitConn:
            self.waitConnected(self.waitConn)
        vt_run.started(self.fn_net)  # the adaptive TDF, when asked

    def waitConnected(self, timeout: Any = None, delay: float = 0.5) -> bool:
        """Wait until every switch is connected to a controller (OVS switches) or
        forwards (bridges at once, STP ones once settled); False, with a message naming
        the switches and their controllers, after ``timeout`` seconds. Mininet waits
        for ever without a timeout; here it is at most :data:`WAIT_CONNECTED_S`."""
        import time

        info("*** Waiting for switches to connect\n")
        if isinstance(timeout, bool):
            timeout = None if timeout else 0
        limit = WAIT_CONNECTED_S if timeout is None else float(timeout)
        start = time.monotonic()
        remaining = list(self.switches)
        while True:
            for switch in tuple(remaining):
                if switch.connected():
                    info(f"{switch} ")
                    remaining.remove(switch)
            if not remaining:
                info("\n")
                return True
            if time.monotonic() - start >= limit:
                break
            time.sleep(min(delay, 0.05 + (time.monotonic() - start) / 4))
        info("\n")
        error(f"*** Error: after {limit:g} s, {_not_connected(remaining)}\n")
        return False

    def stop(self) -> None:
        """Stop everything and remove every object the run made."""
        with _context.stopping(self.fn_net):
            info(f"*** Stopping {len(self.controllers)} controllers\n")
            for controller in self.controllers:
                info(controller.name + " ")
                controller.stop()
            info("\n")
            info(f"*** Stopping {len(self.links)} links\n")
            for link in self.links:
                info(".")
                link.stop()
            info("\n")
            info(f"*** Stopping {len(self.switches)} switches\n")
            for switch in self.switches:
                info(switch.name + " ")
                switch.stop()
                switch.terminate()
            info("\n")
            info(f"*** Stopping {len(self.hosts)} hosts\n")
            for host in self.hosts:
                info(host.name + " ")
                host.terminate()
            self.fn_net.stop()
        info("\n*** Done\n")

    def run(self, test: Any, *args: Any, **kwargs: Any) -> Any:
        """Start, run ``test(*args, **kwargs)``, stop; returns the test's result."""
        self.start()
        info("*** Running test\n")
        try:
            return test(*args, **kwargs)
        finally:
            self.stop()

    def monitor(self, hosts: list[Any] | None = None, timeoutms: int = -1) -> Any:
        """Yield (host, line) as hosts' shells print; (None, None) after a timeout."""
        import select

        hosts = hosts or self.hosts
        poller = select.poll()
        for host in hosts:
            poller.register(host.stdout.fileno(), select.POLLIN)
        while True:
            ready = poller.poll(timeoutms)
            for fd, event in ready:
                host = Node.fdToNode(fd)
                if host is not None and event & select.POLLIN:
                    line = host.readline()
                    if line is not None:
                        yield host, line
            if not ready and timeoutms >= 0:
                yield None, None

    def configLinkStatus(self, src: str, dst: str, status: str) -> None:
        """Bring every link between ``src`` and ``dst`` (names) up or down."""
        if status not in ("up", "down"):
            error(f"link status must be 'up' or 'down', not {status!r}\n")
            return
        for which, name in (("src", src), ("dst", dst)):
            if name not in self.nameToNode:
                known = list(self.nameToNode)
                shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
                error(f"{which} not in network: {name} (nodes: {shown})\n")
                return
        a, b = self.nameToNode[src], self.nameToNode[dst]
        connections = a.connectionsTo(b)
        if not connections:
            error(f"src and dst not connected: {a} {b}\n")
        for intf_a, intf_b in connections:
            for end, which in ((intf_a, "src"), (intf_b, "dst")):
                result = end.ifconfig(status)
                if result:
                    error(f"link {which} status change failed: {result}\n")

    def interact(self) -> Any:
        """Start, run the CLI, stop."""
        from fidelnet.compat.cli import CLI

        self.start()
        try:
            return CLI(self)
        finally:
            self.stop()
