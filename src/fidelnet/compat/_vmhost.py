"""CIMininet's ``VMHost`` on fidelnet: a Mininet host that is a QEMU virtual machine
(fidelnet's ``qemu`` node backend, docs/vm.md).

``Mininet(topo, host=VMHost)`` or ``net.addHost('h1', cls=VMHost, cpus=2,
memory='512M', kernel=..., initrd=..., cmdline=...)``: the VM is made with its
namespace when the host is added, and boots when the network is built, once its
links exist (all VMs together). Its shell, ``cmd``, ``popen`` and ``pexec`` run in
the guest. ``image=`` (a disk image) is refused: not built yet.
"""

from __future__ import annotations

import re
from typing import Any

from fidelnet.compat._node import Host
from fidelnet.errors import ValidationError
from fidelnet.topology.spec import NodeSpec, VMSpec

__all__ = ["VMHost"]

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
        if image is not None:
            raise ValidationError(
                f"{name}.image",
                "a disk image is not supported yet: give kernel and initrd, or neither "
                "(fidelnet's image from Debian's packages)",
                image,
            )
        pins = tuple(int(c) for c in cpupin) if cpupin is not None else None
        self.fn_vm = VMSpec(
            cpus=int(cpus),
            memory_mb=memory_mb(name, memory),
            cpupin=pins,
            kernel=kernel,
            initrd=initrd,
            cmdline=cmdline,
            accel=accel,  # type: ignore[arg-type]  # checked with the spec
        )
        super().__init__(name, **params)

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        spec = super().fn_spec(name, params)
        spec.backend = "qemu"
        spec.vm = self.fn_vm
        return spec
