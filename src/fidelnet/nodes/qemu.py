"""The ``qemu`` node backend: a node is a virtual machine (issue 12, first part).

The node still has a network namespace of its own on the host, made as a ``netns``
node's (with IPv6 off: the host side must never speak on the node's behalf); its
links end there as for any node, so every link kind applies unchanged. The VM's
NICs are TAP devices QEMU makes in that namespace, one per link end, each joined to
its end by two tc mirred redirects (what arrives on the end leaves by the TAP, and
back); the guest's NIC has the end's MAC and, once the guest is up, the end's name.

Programs run in the guest through its agent (:mod:`fidelnet.vm.agent`): the node's
shell is a ``fidelnet-vm run --pty`` client, ``popen`` a plain one. Addresses,
routes, neighbours and sysctls go to the guest (:class:`GuestInterior`): queued
while it boots, then applied with one ``ip -batch``.

Processes and files: QEMU (started inside the node's namespace and cgroups) and the
multiplexer are recorded as the run's processes, the VM's run directory (sockets,
console log) as a ``tree`` under the state directory; teardown and ``fidelnet
clean`` end and remove them like everything else.

Not there yet (see docs/vm.md): interfaces added after the VM started (hot-plug),
vCPU pinning, a user's disk image, the Mininet layer's ``VMHost``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fidelnet.errors import KernelError, NodeError
from fidelnet.kernel import launcher, ns, tc
from fidelnet.kernel.state import STATE_DIR, process_start_time
from fidelnet.nodes.netns import IPV6_OFF
from fidelnet.topology.spec import VMSpec
from fidelnet.vm import agent, image, qemu

if TYPE_CHECKING:
    from fidelnet.kernel.netlink import Netlink
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node

__all__ = ["GuestInterior", "QemuBackend"]

log = logging.getLogger("fidelnet")

_NIC_SCRIPT = 'for d in /sys/class/net/*; do echo "${d##*/} $(cat "$d/address")"; done'
"""Prints each guest interface's name and MAC (a fixed text: no input goes in it)."""


@dataclass
class _Vm:
    node: Node
    spec: VMSpec
    dir: str
    guest: qemu.Guest | None = None
    qemu: subprocess.Popen[bytes] | None = None
    mux: subprocess.Popen[bytes] | None = None
    up: bool = False
    taps: dict[int, str] = field(default_factory=dict)  # end index -> TAP name
    clock: agent.ClockSync | None = None
    vcpu_tids: list[int] = field(default_factory=list)  # host thread of each vCPU


class GuestInterior:
    """A VM node's own configuration, run in the guest with ``ip``; kept while the
    guest boots and applied at once when it is up."""

    def __init__(self, vm: _Vm) -> None:
        self.vm = vm
        self.pending: list[str] = []  # ip -batch lines
        self.pending_sysctls: list[tuple[str, str]] = []  # (path, value)
        self.named: set[int] = {1}  # ends whose NIC the guest has under the end's name

    def _name(self, index: int) -> str:
        if index == 1:
            return "lo"
        for intf in self.vm.node.intfs.values():
            if intf.index == index:
                return intf.name
        raise NodeError(f"{self.vm.node.name}: no interface with index {index}")

    def _ip(self, line: str, index: int | None = None) -> None:
        """Run now, or keep until the guest is up and has the interface's NIC (a link
        added to a running VM gets its address before its NIC is plugged).

        ``ip -batch`` splits a line at blanks: every word here is a checked name,
        address or number, and a line that would hold a newline is refused rather
        than read as two commands."""
        if "\n" in line or "\r" in line or "\0" in line:
            raise NodeError(f"{self.vm.node.name}: refusing a guest ip command: {line!r}")
        if self.vm.up and (index is None or index in self.named):
            self._batch([line])
        else:
            self.pending.append(line)

    def _batch(self, lines: list[str]) -> None:
        if not lines:
            return
        p = self.vm.node.popen(
            ["ip", "-batch", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, err = p.communicate("\n".join(lines) + "\n", timeout=60)
        if p.returncode != 0:
            raise KernelError(f"{self.vm.node.name}: in the guest, ip: {err.strip()[-300:]}")

    def flush(self) -> None:
        lines, self.pending = self.pending, []
        self._batch(lines)

    def set_link(self, index: int, **attrs: Any) -> None:
        name = self._name(index)
        if "address" in attrs:
            # The end in the namespace keeps the guest NIC's MAC (what link_info reads).
            self.vm.node.netlink().set_link(index, address=attrs["address"])
            self._ip(f"link set dev {name} address {attrs['address']}", index)
        if "mtu" in attrs:
            self._ip(f"link set dev {name} mtu {int(attrs['mtu'])}", index)
        if "state" in attrs:
            self._ip(f"link set dev {name} {'up' if attrs['state'] == 'up' else 'down'}", index)

    def link_info(self, index: int) -> dict[str, Any]:
        # The guest's NIC has the end's MAC by construction (QEMU's -device mac=).
        host = self.vm.node.netlink().link_info(index)
        info = {"mac": host["mac"], "up": host["up"]}
        if self.vm.up:
            out, _, code = self.vm.node.pexec(
                ["cat", f"/sys/class/net/{self._name(index)}/operstate"], timeout=30
            )
            if code == 0:
                info["up"] = out.strip() in ("up", "unknown")
        return info

    def add_address(self, index: int, cidr: str) -> None:
        self._ip(f"address add {cidr} dev {self._name(index)}", index)

    def addresses(self, index: int) -> list[str]:
        if not self.vm.up:
            return []
        out, err, code = self.vm.node.pexec(
            ["ip", "-j", "address", "show", "dev", self._name(index)], timeout=30
        )
        if code != 0:
            raise KernelError(f"{self.vm.node.name}: in the guest, ip address: {err.strip()}")
        found = []
        for link in json.loads(out or "[]"):
            for a in link.get("addr_info", []):
                found.append(f"{a['local']}/{a['prefixlen']}")
        return found

    def flush_addresses(self, index: int) -> None:
        self._ip(f"address flush dev {self._name(index)} to 0.0.0.0/0", index)  # IPv4 only

    def add_routes(self, routes: Sequence[tuple[str, str | None, int | None]]) -> None:
        for dst, via, index in routes:
            line = f"route replace {dst}"
            if via:
                line += f" via {via}"
            if index is not None:
                line += f" dev {self._name(index)}"
            self._ip(line, index)

    def add_neighbour(self, index: int, ip: str, mac: str) -> None:
        self._ip(f"neigh replace {ip} lladdr {mac} dev {self._name(index)} nud permanent", index)

    def add_flow_routes(
        self,
        tables: Sequence[tuple[int, str, int]],
        rules: Sequence[tuple[int, int, int, int]],
    ) -> None:
        for table, gateway, index in tables:
            dev = self._name(index)
            self._ip(f"route replace default via {gateway} dev {dev} table {int(table)}", index)
        for priority, proto, port, table in rules:
            self._ip(
                f"rule add pref {int(priority)} ipproto {int(proto)} dport {int(port)} "
                f"table {int(table)}"
            )

    def write_sysctl(self, key: str, value: str) -> str:
        if not key.startswith("net.") or ".." in key or "/" in key:
            raise KernelError(f"sysctl {key}: only net.* keys are set in a node")
        path = "/proc/sys/" + key.replace(".", "/")
        if not self.vm.up:
            self.pending_sysctls.append((path, value))
            return ""
        out, _, _ = self.vm.node.pexec(["cat", path], timeout=30)
        _, err, code = self.vm.node.pexec(["sh", "-c", 'echo "$1" > "$0"', path, value])
        if code != 0:
            raise KernelError(f"{self.vm.node.name}: in the guest, {key}: {err.strip()}")
        return out.strip()

    def apply_sysctls(self) -> None:
        todo, self.pending_sysctls = self.pending_sysctls, []
        for path, value in todo:
            _, err, code = self.vm.node.pexec(["sh", "-c", 'echo "$1" > "$0"', path, value])
            if code != 0:
                raise KernelError(f"{self.vm.node.name}: in the guest, {path}: {err.strip()}")


class QemuBackend:
    """Nodes as QEMU virtual machines."""

    kind = "qemu"
    host_cpus = False

    def __init__(self) -> None:
        self._vms: dict[str, _Vm] = {}
        self._interiors: dict[str, GuestInterior] = {}
        self._image: image.Image | None = None

    # -- making -----------------------------------------------------------------

    def create(self, node: Node) -> None:
        qemu.find_qemu()  # before anything exists: a clear error if QEMU is missing
        net = node.net
        name = net.ns_name(node.name)
        with net._owning("netns", name=name):
            node.netns = ns.create(name)
        nl = node.netlink()
        for key in IPV6_OFF:  # the host side never speaks for the guest
            nl.write_sysctl(key, "1")
        nl.set_link(1, state="up")
        d = os.path.join(STATE_DIR, f"{net.run_id}-vm-{node.name}")
        net.state_record("tree", path=d)
        os.makedirs(d, mode=0o700, exist_ok=True)
        vm = _Vm(node, node.spec.vm or VMSpec(), d)
        self._vms[node.name] = vm
        self._interiors[node.name] = GuestInterior(vm)

    def _boot(self, spec: VMSpec) -> qemu.Boot:
        if spec.kernel and spec.initrd:
            return qemu.Boot(spec.kernel, spec.initrd, "user:" + os.path.basename(spec.kernel))
        if self._image is None:
            self._image = image.find() or image.build()
        img = self._image
        mods = str(img.modules) if img.modules.is_dir() else None
        return qemu.Boot(str(img.kernel), str(img.initrd), img.digest, mods)

    def start(self, nodes: Sequence[Node]) -> None:
        """Boot every VM at once, then wait for each guest's agent; join each NIC to
        its link end; name the guest's NICs and configure them."""
        vms = [self._vms[n.name] for n in nodes]
        for vm in vms:
            self._launch(vm)
        began = time.monotonic()
        waits = {
            vm.node.name: subprocess.Popen(
                [
                    agent.find_tool(),
                    "wait",
                    vm.guest.mux_sock if vm.guest else "",
                    str(int(vm.spec.boot_timeout_s * 1000)),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for vm in vms
        }
        try:
            self._await(vms, waits, began)
        finally:
            for w in waits.values():  # the others' waits, when one VM failed
                if w.poll() is None:
                    w.kill()
                w.wait()
                if w.stderr is not None:
                    w.stderr.close()
        log.info("%d VM(s) answered after %.1f s", len(vms), time.monotonic() - began)
        for vm in vms:
            assert vm.guest is not None
            vm.clock = agent.sync_clock(vm.guest.mux_sock)
            vm.node.net.state_record(
                "info",
                node=vm.node.name,
                vm_clock_offset_ns=vm.clock.offset_ns,
                vm_clock_uncertainty_ns=vm.clock.uncertainty_ns,
            )
            self._pin(vm)
            self._plumb(vm)
            self._name_nics(vm)
            interior = self._interiors[vm.node.name]
            interior.apply_sysctls()
            interior.flush()

    def _launch(self, vm: _Vm) -> None:
        node = vm.node
        boot = self._boot(vm.spec)
        accel = qemu.choose_accel(vm.spec.accel, boot)
        nics = []
        for i, intf in enumerate(node.intf_list()):
            tap = f"vmtap{i}"
            vm.taps[intf.index] = tap
            nics.append((tap, str(node.netlink().link_info(intf.index)["mac"])))
        vm.guest = qemu.Guest(
            name=f"{node.net.run_id}-{node.name}",
            dir=vm.dir,
            cpus=vm.spec.cpus,
            memory_mb=vm.spec.memory_mb,
            accel=accel,
            boot=boot,
            cmdline=vm.spec.cmdline,
            agent_path=agent.find_tool(),
            nics=tuple(nics),
            disk=vm.spec.image,
        )
        full = launcher.exec_argv(qemu.argv(vm.guest), netns=node.netns, cgroups=node.cgroup_dirs())
        with open(os.path.join(vm.dir, "qemu.err"), "wb") as err:
            vm.qemu = subprocess.Popen(
                full,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                # A disk image's temporary write layer (snapshot=on) goes here, with
                # the rest of the VM's files.
                env={**os.environ, "TMPDIR": vm.dir},
            )
        self._record(node, vm.qemu.pid)
        vm.mux = subprocess.Popen(
            agent.mux_argv(vm.guest.agent_sock, vm.guest.mux_sock),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        self._record(node, vm.mux.pid)
        node.net.state_record(
            "info",
            node=node.name,
            vm_accel=accel,
            vm_image=boot.digest,
            vm_dir=vm.dir,
            vm_pid=vm.qemu.pid,
            vm_memory_mb=vm.spec.memory_mb,
        )

    @staticmethod
    def _record(node: Node, pid: int) -> None:
        start = process_start_time(pid)
        if start is not None:
            node.net.state_record("process", pid=pid, start=start)

    def _await(
        self, vms: list[_Vm], waits: dict[str, subprocess.Popen[bytes]], began: float
    ) -> None:
        """Until every agent answered; a VM whose QEMU stopped first (a kernel that
        does not boot, an /init that gave up and powered off) fails at once."""
        pending = {vm.node.name: vm for vm in vms}
        deadline = began + max(vm.spec.boot_timeout_s for vm in vms) + 30
        while pending:
            for name, vm in list(pending.items()):
                w = waits[name]
                code = w.poll()
                if code is not None:
                    del pending[name]
                    if code != 0:
                        if self._stopped(vm):
                            raise NodeError(self._stopped_failure(vm, began))
                        err = w.stderr.read() if w.stderr is not None else b""
                        raise NodeError(self._boot_failure(vm, err.decode(errors="replace")))
                    vm.up = True
                elif vm.qemu is not None and vm.qemu.poll() is not None:
                    raise NodeError(self._stopped_failure(vm, began))
            if pending and time.monotonic() > deadline:
                vm = next(iter(pending.values()))
                raise NodeError(self._boot_failure(vm, "fidelnet-vm wait did not return"))
            time.sleep(0.05)

    @staticmethod
    def _stopped(vm: _Vm) -> bool:
        """Whether the VM's QEMU has exited (given a moment to, when its agent's
        connection just went away)."""
        if vm.qemu is None:
            return False
        try:
            vm.qemu.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _stopped_failure(self, vm: _Vm, began: float) -> str:
        assert vm.qemu is not None
        why = (
            f"QEMU stopped after {time.monotonic() - began:.1f} s, exit status {vm.qemu.returncode}"
        )
        return self._boot_failure(vm, why, stopped=True)

    def _boot_failure(self, vm: _Vm, why: str, stopped: bool = False) -> str:
        tail = ""
        for f in ("qemu.err", "console.log"):
            try:
                with open(os.path.join(vm.dir, f), encoding="utf-8", errors="replace") as fh:
                    text = fh.read().strip()
            except OSError:
                continue
            if text:
                tail += f"\n--- {f} (last lines) ---\n" + "\n".join(text.splitlines()[-15:])
        kept = self._keep_console(vm)
        when = "" if stopped else f" within {vm.spec.boot_timeout_s:.0f} s"
        return (
            f"{vm.node.name}: the VM did not answer{when} ({why.strip() or 'no reason given'}); "
            f"console kept in {kept}{tail}"
        )

    @staticmethod
    def _keep_console(vm: _Vm) -> str:
        """Copy the console log out of the run directory (removed at teardown)."""
        dest = os.path.join(
            os.environ.get("FIDELNET_RESULTS", "/tmp"),
            f"fidelnet-{vm.node.net.run_id}-{vm.node.name}-console.log",
        )
        try:
            shutil.copyfile(os.path.join(vm.dir, "console.log"), dest)
        except OSError:
            return "(no console log)"
        return dest

    @staticmethod
    def _pin(vm: _Vm) -> None:
        """Learn the host thread of each vCPU (QMP), for pinning and for the fidelity
        monitor, and pin vCPU i's thread on ``cpupin[i]``."""
        if vm.guest is None:
            return
        try:
            threads = qemu.vcpu_threads(vm.guest.qmp_sock)
        except OSError as exc:
            if vm.spec.cpupin:
                raise NodeError(f"{vm.node.name}: the threads of its vCPUs: {exc}") from exc
            log.warning("%s: its vCPU threads are unknown: %s", vm.node.name, exc)
            return
        vm.vcpu_tids = threads
        vm.node.net.state_record("info", node=vm.node.name, vm_vcpu_threads=threads)
        if not vm.spec.cpupin:
            return
        try:
            for tid, core in zip(threads, vm.spec.cpupin, strict=False):
                os.sched_setaffinity(tid, {core})
        except OSError as exc:
            raise NodeError(
                f"{vm.node.name}: pinning its vCPUs to {vm.spec.cpupin}: {exc}"
            ) from exc

    def _plumb(self, vm: _Vm) -> None:
        nl = vm.node.netlink()
        for end, tap in vm.taps.items():
            self._join(nl, end, tap)

    @staticmethod
    def _join(nl: Netlink, end: int, tap: str) -> None:
        """What arrives on the link end leaves by the TAP (to the guest), and back."""
        t = nl.index(tap)
        nl.set_link(t, state="up")
        tc.redirect_all(nl, end, "ingress", t, "egress")
        tc.redirect_all(nl, t, "ingress", end, "egress")

    def _name_nics(self, vm: _Vm, only: list[Interface] | None = None) -> None:
        node = vm.node
        out, err, code = node.pexec(["sh", "-c", _NIC_SCRIPT], timeout=60)
        if code != 0:
            raise NodeError(f"{node.name}: cannot list the guest's interfaces: {err.strip()}")
        by_mac = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                by_mac[parts[1].lower()] = parts[0]
        lines = [] if only else ["link set dev lo up"]
        for intf in only or node.intf_list():
            mac = str(node.netlink().link_info(intf.index)["mac"]).lower()
            guest = by_mac.get(mac)
            if guest is None:
                raise NodeError(f"{node.name}: the guest has no NIC with {intf.name}'s MAC {mac}")
            if guest != intf.name:
                lines.append(f"link set dev {guest} name {intf.name}")
            lines.append(f"link set dev {intf.name} up")
        interior = self._interiors[node.name]
        interior._batch(lines)
        interior.named.update(i.index for i in (only or node.intf_list()))
        if not only:
            node.pexec(["hostname", node.name], timeout=30)

    # -- reaching ---------------------------------------------------------------

    def _sock(self, node: Node) -> str:
        vm = self._vms.get(node.name)
        if vm is None or vm.guest is None or not vm.up:
            raise NodeError(f"{node.name}: the VM is not running (the network starts it)")
        return vm.guest.mux_sock

    def shell_argv(self, node: Node) -> tuple[list[str], bool]:
        sh = ["bash", "--norc", "--noediting", "-is", f"fidelnet:{node.name}"]
        return agent.run_argv(self._sock(node), sh, pty=True), False

    def exec_argv(self, node: Node, argv: Sequence[str], cwd: str | None) -> list[str]:
        return agent.run_argv(self._sock(node), argv, cwd=cwd)

    def intf_added(self, node: Node, intf: Interface) -> None:
        """A link added after the VM booted: a NIC hot-plugged into a free PCIe port,
        joined to the end like the others, named and brought up in the guest; what was
        queued for the guest meanwhile (its address) applied after."""
        vm = self._vms.get(node.name)
        if vm is None or not vm.up or vm.guest is None or intf.index in vm.taps:
            return
        slot = len(vm.taps) - len(vm.guest.nics)
        if slot >= qemu.HOTPLUG_SLOTS:
            raise NodeError(
                f"{node.name}: a VM takes at most {qemu.HOTPLUG_SLOTS} links added after it "
                f"booted; add {intf.name}'s link before start()"
            )
        tap = f"vmtap{len(vm.taps)}"
        mac = str(node.netlink().link_info(intf.index)["mac"])
        try:
            qemu.hotplug_nic(vm.guest.qmp_sock, slot, tap, mac)
        except OSError as exc:
            raise NodeError(f"{node.name}: hot-plugging a NIC for {intf.name}: {exc}") from exc
        vm.taps[intf.index] = tap
        nl = node.netlink()
        deadline = time.monotonic() + 10
        while nl.index_or_none(tap) is None:
            if time.monotonic() > deadline:
                raise NodeError(f"{node.name}: QEMU made no {tap} for {intf.name}")
            time.sleep(0.02)
        self._join(nl, intf.index, tap)
        deadline = time.monotonic() + 30
        while True:  # the guest's driver takes a moment to bind the new device
            try:
                self._name_nics(vm, only=[intf])
                break
            except NodeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self._interiors[node.name].flush()

    def interior(self, node: Node) -> GuestInterior:
        return self._interiors[node.name]

    def describe(self, node: Node) -> dict[str, Any]:
        vm = self._vms.get(node.name)
        out: dict[str, Any] = {"backend": self.kind}
        if vm is None or vm.guest is None:
            return out
        out.update(
            accel=vm.guest.accel,
            image=vm.guest.boot.digest,
            cpus=vm.guest.cpus,
            memory_mb=vm.guest.memory_mb,
        )
        if vm.guest.disk:
            out["disk"] = vm.guest.disk
        if vm.qemu is not None:
            out["qemu_pid"] = vm.qemu.pid
            out["rss_kib"] = _rss_kib(vm.qemu.pid)
            out["vcpu_tids"] = list(vm.vcpu_tids)
        if vm.clock is not None:
            out["clock_offset_ns"] = vm.clock.offset_ns
            out["clock_uncertainty_ns"] = vm.clock.uncertainty_ns
        return out

    def close(self, node: Node) -> None:
        vm = self._vms.pop(node.name, None)
        self._interiors.pop(node.name, None)
        if vm is None:
            return
        for p in (vm.mux, vm.qemu):
            if p is not None and p.poll() is None:
                p.kill()
        for p in (vm.mux, vm.qemu):
            if p is not None:
                p.wait()
        vm.up = False


def _rss_kib(pid: int) -> int | None:
    """Resident memory of a process, KiB (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
