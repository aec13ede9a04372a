"""A small library built on Mininet's classes, the way IP-network libraries are built,
and a script that uses it: run unchanged on the shim by test_mininet_contract.py.

It relies on Mininet's class contracts only: constructors that call the base class's
``__init__`` (by name and through ``super()``), ``config``/``terminate`` hooks,
attributes Mininet code assigns (``self.mac``, ``self.ip``, ``self.pid``), list
attributes extended in a subclass, nodes added with ``addHost(name, cls=...)``,
interfaces of the library's own class through a ``Topo``'s link options. Every check
prints ``ok: ...``; the first that fails raises. With ``--hold`` it stops half way,
its network built and its daemons running, and prints ``READY``, the run id, its
router's directory and its daemons' pids, for a test to kill it with SIGKILL.
"""

import os
import shutil
import sys
import tempfile
import time

from mininet.link import Intf, Link, TCIntf, TCLink
from mininet.log import info, setLogLevel
from mininet.net import Mininet
from mininet.node import Host, LinuxBridge, Node
from mininet.topo import Topo


def check(what, ok):
    if not ok:
        raise AssertionError(what)
    print("ok:", what, flush=True)


class IPIntf(Intf):
    """An interface that keeps its own record of addresses, IPv4 and IPv6."""

    def __init__(self, name, node=None, port=None, link=None, mac=None, **params):
        self.mac = mac  # before the base class, as some libraries do
        self.ip6 = params.pop("ip6", None)
        Intf.__init__(self, name, node=node, port=port, link=link, mac=mac, **params)
        self.mac = self.MAC()  # Mininet code assigns its attributes

    def config(self, **params):
        r = super().config(**params)
        if self.ip6:
            self.cmd("ip -6 addr add", self.ip6, "dev", self.name, "nodad")
        return r


class IPNode(Node):
    """A node with a working directory of its own, daemons and config files."""

    daemons = ["sleeper"]  # subclasses extend it

    def __init__(self, name, workdir=None, **params):
        self.workdir = workdir or tempfile.mkdtemp(prefix=f"fnlib-{name}-")
        self.started = []
        Node.__init__(self, name, **params)  # the base class by name

    def config(self, **params):
        r = super().config(**params)
        for daemon in self.daemons:
            path = os.path.join(self.workdir, daemon + ".conf")
            with open(path, "w") as f:
                f.write(f"name {self.name}\n")
            self.cmd("sleep 600 &")
            self.started.append(self.lastPid)
        return r

    def terminate(self):
        for pid in self.started:
            self.cmd(f"kill {pid}")
        shutil.rmtree(self.workdir, ignore_errors=True)
        super().terminate()


class IPRouter(IPNode):
    """A router: forwarding on, IPv4 and IPv6, and one more daemon than a node."""

    daemons = IPNode.daemons + ["routingd"]  # noqa: RUF005 - the idiom at issue

    def config(self, **params):
        r = super().config(**params)
        self.cmd("sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1")
        return r


class IPHost(Host):
    """A host with an IPv6 default route to its router."""

    def __init__(self, name, gw6=None, **params):
        super().__init__(name, **params)
        self.gw6 = gw6

    def config(self, defaultRoute=None, **params):
        r = super().config(defaultRoute=defaultRoute, **params)
        if self.gw6:
            self.cmd("ip -6 route add default via", self.gw6)
        return r


class IPTCIntf(IPIntf, TCIntf):
    """Both: IPv6 addresses and shaping, each hook calling the next."""


class CountingBridge(LinuxBridge):
    """A switch subclass counting its starts."""

    def __init__(self, name, **params):
        self.starts = 0
        LinuxBridge.__init__(self, name, **params)

    def start(self, controllers):
        self.starts += 1
        LinuxBridge.start(self, controllers)


class TwoSubnets(Topo):
    """h1 - r1 - h2 over a switch; addresses in link options, the library's classes."""

    def build(self):
        r1 = self.addHost("r1", cls=IPRouter, ip=None)
        s1 = self.addSwitch("s1")
        for i in (1, 2):
            h = self.addHost(
                f"h{i}",
                cls=IPHost,
                ip=f"10.{i}.0.1/24",
                defaultRoute=f"via 10.{i}.0.254",
                gw6=f"fd00:{i}::254",
            )
            self.addLink(
                h,
                r1 if i == 1 else s1,
                intfName2=f"r1-eth{i}" if i == 1 else None,
                cls1=IPIntf,
                cls2=IPIntf,
                params1={"ip6": f"fd00:{i}::1/64"},
                params2={"ip": f"10.{i}.0.254/24", "ip6": f"fd00:{i}::254/64"} if i == 1 else {},
            )
        self.addLink(
            r1,
            s1,
            intfName1="r1-eth2",
            cls=TCLink,
            cls1=IPTCIntf,
            bw=50,
            params1={"ip": "10.2.0.254/24", "ip6": "fd00:2::254/64"},
        )


def wait_dad(*nodes, timeout=10.0):
    """IPv6 libraries wait for duplicate address detection: a router whose link-local
    address is still tentative solicits its neighbours from the unspecified address,
    and the first packets it forwards are lost."""
    deadline = time.monotonic() + timeout
    while any(n.cmd("ip -6 addr show tentative").strip() for n in nodes):
        if time.monotonic() > deadline:
            raise AssertionError("IPv6 addresses still tentative")
        time.sleep(0.1)


def main():
    setLogLevel("warning")
    net = Mininet(topo=TwoSubnets(), switch=CountingBridge, controller=None)
    try:
        net.start()
        r1, h1, h2, s1 = net.get("r1", "h1", "h2", "s1")
        check("a Node subclass made by addHost(cls=...) is one node", net.hosts.count(r1) == 1)
        check("its own attributes survive", r1.workdir and os.path.isdir(r1.workdir))
        check(
            "a class list extended by a subclass is a list",
            IPRouter.daemons == ["sleeper", "routingd"],
        )
        check("config ran: a daemon per entry", len(r1.started) == 2 and all(r1.started))
        check("the switch subclass started once", s1.starts == 1)
        i1 = h1.intf("h1-eth0")
        check("the Intf subclass is the link's end", isinstance(i1, IPIntf))
        check("an assigned mac is the interface's", i1.mac == i1.MAC() == h1.MAC())
        i1.mac = "02:00:00:00:00:aa"
        check("assigning mac sets the attribute", i1.mac == "02:00:00:00:00:aa")
        i1.updateMAC()
        check(
            "updateMAC reads the kernel again",
            i1.mac == h1.cmd("cat /sys/class/net/h1-eth0/address").strip(),
        )
        check("the TCLink end is the library's TCIntf", isinstance(r1.intf("r1-eth2"), IPTCIntf))
        check("IPv4 across the router", "1 received" in h1.cmd("ping -c1 -W2 10.2.0.1"))
        wait_dad(h1, r1, h2)
        check("IPv6 across the router", "1 received" in h1.cmd("ping -6 -c1 -W2 fd00:2::1"))
        if "--hold" in sys.argv:  # for a kill -9: the run id, the daemons, then wait
            pids = [p for n in (r1, h1, h2) for p in getattr(n, "started", [])]
            print("READY", net.fn_net.run_id, r1.workdir, *pids, flush=True)
            time.sleep(600)
        h2.pid = 12345
        check("node.pid is assignable, as in Mininet", h2.pid == 12345)
        del h2.pid
        check("and computed again once deleted", h2.pid != 12345 and h2.pid > 0)
        # A node of the library's class added and deleted at runtime; its name reused.
        for _ in range(2):
            r2 = net.addHost("r2", cls=IPRouter)
            link = net.addLink(r2, s1)
            r2.configDefault()
            check("a runtime node runs commands", r2.cmd("echo up").strip() == "up")
            net.delLink(link)
            net.delHost(r2)
        # Standalone nodes, no Mininet: made, linked, stopped, made again.
        for _ in range(2):
            a, b = Node("t0", ip="10.9.0.1/24"), Node("t1", inNamespace=False)
            Link(a, b)
            a.configDefault()
            check("standalone nodes have their link", a.intfNames() == ["t0-eth0"])
            a.stop(deleteIntfs=True)
            b.stop(deleteIntfs=True)
    finally:
        net.stop()
    info("done\n")
    print("library: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
