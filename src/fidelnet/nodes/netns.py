"""The ``netns`` node backend: a node is its network namespace.

The namespace is made (recorded in the run state first) when the node is created;
programs start in it through ``fidelnet-exec``: the persistent shell enters the
namespace, gets a mount and UTS namespace of its own (copied from the run's mount
template), its hostname and the node's cgroups; every other program joins the
shell's namespaces. The interior is the namespace itself, configured over netlink.
Switches live in the run's fabric namespace and are not made here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fidelnet.kernel import launcher, ns

if TYPE_CHECKING:
    from fidelnet.kernel.netlink import Netlink
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node

__all__ = ["IPV6_OFF", "NetnsBackend", "make_namespace"]

IPV6_OFF = ("net.ipv6.conf.default.disable_ipv6", "net.ipv6.conf.all.disable_ipv6")
"""The sysctls that turn IPv6 off in a namespace, set before its first device."""


class NetnsBackend:
    """Nodes as network namespaces."""

    kind = "netns"
    host_cpus = True

    def create(self, node: Node) -> None:
        make_namespace(node)

    def start(self, nodes: Sequence[Node]) -> None:
        del nodes  # a namespace runs as soon as it exists

    def shell_argv(self, node: Node) -> tuple[list[str], bool]:
        net = node.net
        template = getattr(net, "mount_template", None)
        argv = launcher.exec_argv(
            ["bash", "--norc", "--noediting", "-is", f"fidelnet:{node.name}"],
            netns=node.netns,
            new_mount=node.netns is not None,
            mount_base=template.path if template else None,
            hostname=node.name if node.netns is not None and node.kind != "switch" else None,
            cgroups=node.cgroup_dirs(),
            session=True,
            ctty=True,
        )
        return argv, True

    def exec_argv(self, node: Node, argv: Sequence[str], cwd: str | None) -> list[str]:
        sh = node.shell()
        return launcher.exec_argv(list(argv), join_pid=sh.pid, cgroups=node.cgroup_dirs(), cwd=cwd)

    def intf_added(self, node: Node, intf: Interface) -> None:
        del node, intf  # the end is the node's own interface already

    def interior(self, node: Node) -> Netlink:
        return node.netlink()

    def describe(self, node: Node) -> dict[str, Any]:
        del node
        return {"backend": self.kind}

    def close(self, node: Node) -> None:
        del node  # the namespace is the run's to remove


def make_namespace(node: Node) -> None:
    """The node's network namespace, recorded before it exists, with its loopback up
    (and IPv6 off when the topology has none); ``node.netns`` is set on return."""
    net = node.net
    name = net.ns_name(node.name)
    with net._owning("netns", name=name):
        node.netns = ns.create(name)
    nl = node.netlink()
    if not net.spec.ipv6:
        # Before any device exists, so none ever gets an IPv6 address or sends
        # DAD, router solicitations or MLD reports (docs/scale.md).
        for key in IPV6_OFF:
            nl.write_sysctl(key, "1")
    nl.set_link(1, state="up")
