"""CIMininet's ``VMHost`` on fidelnet: a Mininet host that is a QEMU virtual machine
(fidelnet's ``qemu`` node backend, docs/vm.md).

``Mininet(topo, host=VMHost)`` or ``net.addHost('h1', cls=VMHost, cpus=2,
memory='512M', kernel=..., initrd=..., cmdline=...)``: the VM is made with its
namespace when the host is added, and boots when the network is built, once its
links exist (all VMs together). Its shell, ``cmd``, ``popen`` and ``pexec`` run in
the guest. ``image=`` is a disk image (raw or qcow2) the guest runs on instead of
the host's file system.
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

from fidelnet.compat._node import Host
from fidelnet.errors import NodeError, ValidationError
from fidelnet.topology.spec import NodeSpec, VMSpec

__all__ = ["VMHost", "VMLinuxBridge"]

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_MIB = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def memory_mb(name: str, value: Any) -> int:
    """``512``, ``'512M'``, ``'1G'`` (QEMU's ``-m`` forms; a plain number is MiB)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.match(str(value))
    if m is None:
        raise ValidationError(f"{name}.memory", "a size such as 512M or 1G", value)
    mib = int(m.group(1)) * _MIB[m.group(2).upper()]
    if mib != int(mib):
        raise ValidationError(f"{name}.memory", "a whole number of MiB", value)
    return int(mib)


class VMHost(Host):
    """A host in its own virtual machine (QEMU; KVM where it works, else TCG)."""

    def __init__(
        self,
        name: str,
        cpus: int = 1,
        memory: Any = "256M",
        cpupin: Any = None,
        kernel: str | None = None,
        initrd: str | None = None,
        cmdline: str = "",
        image: str | None = None,
        accel: str = "auto",
        **params: Any,
    ) -> None:
        pins = tuple(int(c) for c in cpupin) if cpupin is not None else None
        self.fn_vm = VMSpec(
            cpus=int(cpus),
            memory_mb=memory_mb(name, memory),
            cpupin=pins,
            kernel=kernel,
            initrd=initrd,
            image=image,
            cmdline=cmdline,
            accel=accel,  # type: ignore[arg-type]  # checked with the spec
        )
        super().__init__(name, **params)

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        spec = super().fn_spec(name, params)
        spec.backend = "qemu"
        spec.vm = self.fn_vm
        return spec


class VMLinuxBridge(VMHost):
    """CIMininet's ``VMLinuxBridge``: a switch that is a VM whose own kernel bridges
    its NICs (a Linux bridge ``br0`` in the guest, no STP). ``addSwitch('s1',
    cls=VMLinuxBridge)`` or ``Mininet(topo, switch=VMLinuxBridge)``; it takes
    VMHost's parameters (``cpus``, ``memory``...). It has no address, and the
    network's spanning tree and controllers do not apply to it."""

    def __init__(
        self,
        name: str,
        dpid: str | None = None,
        opts: str = "",
        listenPort: int | None = None,
        **params: Any,
    ) -> None:
        params.pop("inNamespace", None)
        params.pop("stp", None)
        super().__init__(name, **params)
        self.dpid = dpid
        self.opts = opts
        self.listenPort = listenPort
        self.fn_bridged = False

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        spec = super().fn_spec(name, params)
        spec.ip = None  # a switch holds no address
        return spec

    def start(self, controllers: Any = None) -> None:
        """Bridge every NIC in the guest (again after links were added)."""
        del controllers
        lines = [] if self.fn_bridged else ["link add name br0 type bridge stp_state 0"]
        lines += [f"link set dev {i.name} master br0" for i in self.intf_list()]
        lines.append("link set dev br0 up")
        p = self.popen(
            ["ip", "-batch", "-"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, err = p.communicate("\n".join(lines) + "\n", timeout=60)
        if p.returncode != 0:
            raise NodeError(f"{self.name}: bridging its NICs in the guest: {err.strip()[-300:]}")
        self.fn_bridged = True

    def connected(self) -> bool:
        return self.fn_bridged
