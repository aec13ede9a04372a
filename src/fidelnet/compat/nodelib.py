"""Mininet's ``mininet.nodelib``: :class:`LinuxBridge` and :class:`NAT`.

:class:`NAT` forwards and masquerades the network's subnet to the outside with
``iptables``, as Mininet's does. In a namespace of its own (natnet.py's NATs) its
rules and ``ip_forward`` live and die with that namespace. In the host's namespace
(``Mininet.addNAT()``, nat.py) they change the machine: each rule is recorded in the
run state before it is added, and so is ``net.ipv4.ip_forward``'s old value; the
run's teardown, or ``fidelnet clean`` after a crash, deletes exactly those rules
and restores the value. ``flush=True`` (Mininet: flush the host's whole firewall) is
refused: fidelnet never touches rules it did not add. Mininet's edit of
``/etc/network/interfaces`` (to keep a network manager off the NAT's interface) is
not made: the interface is the run's and goes with it.
"""

from __future__ import annotations

from typing import Any

from fidelnet.compat._node import Node
from fidelnet.compat._switch import LinuxBridge
from fidelnet.errors import KernelError, ValidationError

__all__ = ["NAT", "LinuxBridge"]

FORWARD_PATH = "/proc/sys/net/ipv4/ip_forward"


class NAT(Node):
    """NAT from the network's ``subnet`` to the outside, through the node's
    namespace (the host's by default with ``addNAT``)."""

    def __init__(
        self,
        name: str,
        subnet: str = "10.0/8",
        localIntf: Any = None,
        flush: bool = False,
        **params: Any,
    ) -> None:
        if flush:
            raise ValidationError(
                f"NAT({name!r}).flush",
                "would flush the host's whole firewall; fidelnet only adds and removes "
                "its own rules: leave flush off",
                flush,
            )
        super().__init__(name, **params)
        self.subnet = subnet
        self.localIntf = localIntf
        self.flush = flush
        self.forwardState = self.cmd("sysctl -n net.ipv4.ip_forward").strip()
        self.fn_configured = False

    def config(self, **params: Any) -> dict[str, Any]:  # type: ignore[override]
        """Address the NAT's interface, then forward and masquerade ``subnet``."""
        if not self.localIntf:
            self.localIntf = self.defaultIntf()
        r = super().config(**params)
        if self.fn_configured or self.localIntf is None:
            return r
        local, subnet = str(self.localIntf), str(self.subnet)
        rules = [
            ("filter", "FORWARD", ["-i", local, "-d", subnet, "-j", "DROP"], True),
            ("filter", "FORWARD", ["-i", local, "-s", subnet, "-j", "ACCEPT"], False),
            ("filter", "FORWARD", ["-o", local, "-d", subnet, "-j", "ACCEPT"], False),
            ("nat", "POSTROUTING", ["-s", subnet, "!", "-d", subnet, "-j", "MASQUERADE"], False),
        ]
        if self.netns is None:
            self._fn_host_rules(rules)
        else:
            for table, chain, rule, insert in rules:
                argv = ["iptables", "-w", "-t", table, "-I" if insert else "-A", chain, *rule]
                _out, err, code = self.pexec(argv)
                if code != 0:
                    raise KernelError(f"{self.name}: {' '.join(argv)}: {err.strip()}")
            self.pexec(["sysctl", "-w", "net.ipv4.ip_forward=1"])
        self.fn_configured = True
        return r

    def _fn_host_rules(self, rules: list[tuple[str, str, list[str], bool]]) -> None:
        from fidelnet.kernel import iptables

        record = self.net.state_record
        for table, chain, rule, insert in rules:
            iptables.add(table, chain, rule, record, insert=insert)
        with open(FORWARD_PATH, encoding="ascii") as f:
            old = f.read().strip()
        if old != "1":
            record("sysctl", path=FORWARD_PATH, old=old)
            with open(FORWARD_PATH, "w", encoding="ascii") as f:
                f.write("1")

    def setManualConfig(self, intf: Any) -> None:
        """Not made: the NAT's interface belongs to the run (see the module)."""
        del intf
