"""SR-IOV provisioning for hardware links (HVNet, CIMininet's ``HwPair``): N virtual
functions on each of two cabled physical functions, VF i of both on VLAN
``vlan_base + i``, so that each pair of VFs is one isolated wire.

:func:`check` refuses, before anything is written, a PF that does not exist, has no
SR-IOV (``device/sriov_totalvfs`` absent) or too few VFs, already has VFs (someone
else's), the same PF twice, and VLAN ids outside 1..4094. :func:`provision` records
each PF (its VF count before) in the run state *before* writing its
``sriov_numvfs``, creates the VFs, sets on each ``spoofchk off``, ``trust on`` and its
VLAN (netlink, on the PF), waits until every VF's netdev exists, and returns the
pairs, VF i of the first PF with VF i of the second. :func:`release` (teardown, or
``fidelnet clean`` after a crash half-way) writes the count back: the VFs and their
settings go with them.

Kernel access goes through :class:`Host` (sysfs under ``root`` and rtnetlink), the
boundary a fake replaces in unit tests, where this machine has no SR-IOV NIC.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fidelnet.errors import KernelError, ValidationError

__all__ = ["Host", "SriovPlan", "check", "pairs_text", "provision", "release"]

VLAN_MAX = 4094


@dataclass(frozen=True)
class SriovPlan:
    """Two cabled PFs, how many VFs on each, and the first VLAN id."""

    pfs: tuple[str, str]
    vfs: int
    vlan_base: int


class Host:
    """This machine's SR-IOV: sysfs under ``root`` and rtnetlink (the boundary)."""

    def __init__(self, root: str = "/sys") -> None:
        self.root = root

    def _dev(self, pf: str, *parts: str) -> str:
        return os.path.join(self.root, "class", "net", pf, "device", *parts)

    def exists(self, pf: str) -> bool:
        return os.path.isdir(os.path.join(self.root, "class", "net", pf))

    def read(self, pf: str, name: str) -> str | None:
        try:
            with open(self._dev(pf, name), encoding="ascii") as f:
                return f.read().strip()
        except OSError:
            return None

    def write(self, pf: str, name: str, value: str) -> None:
        try:
            with open(self._dev(pf, name), "w", encoding="ascii") as f:
                f.write(value)
        except OSError as exc:
            raise KernelError(f"{pf}: writing {value} to device/{name}: {exc}") from exc

    def vf_netdev(self, pf: str, vf: int) -> str | None:
        """The netdev name of VF ``vf`` of ``pf`` once the kernel made it."""
        try:
            names = os.listdir(self._dev(pf, f"virtfn{vf}", "net"))
        except OSError:
            return None
        return sorted(names)[0] if names else None

    def set_vf(self, pf: str, vf: int, vlan: int) -> None:
        """VF ``vf`` of ``pf``: its VLAN, spoof checking off, trusted."""
        from fidelnet.kernel._pyroute2 import IPRoute, NetlinkError

        with IPRoute() as ipr:
            found = ipr.link_lookup(ifname=pf)
            if not found:
                raise KernelError(f"{pf}: gone while its VFs were set up")
            try:
                ipr.link(
                    "set",
                    index=found[0],
                    vf={"vf": vf, "vlan": vlan, "spoofchk": 0, "trust": 1},
                )
            except NetlinkError as exc:
                raise KernelError(
                    f"{pf}: VF {vf}: vlan {vlan}, spoofchk off, trust on: {exc}"
                ) from exc


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check(plan: SriovPlan, host: Host, where: str = "sriov") -> None:
    """Refuse the plan before anything is written, naming the field."""
    if not isinstance(plan.pfs, tuple | list) or len(plan.pfs) != 2:
        raise ValidationError(f"{where}.pfs", "must be two physical functions", plan.pfs)
    if plan.pfs[0] == plan.pfs[1]:
        raise ValidationError(
            f"{where}.pfs[1]", "the same PF twice: give two PFs joined by a cable", plan.pfs[1]
        )
    if not _whole(plan.vfs) or plan.vfs < 1:
        raise ValidationError(f"{where}.vfs", "must be a whole number >= 1", plan.vfs)
    if not _whole(plan.vlan_base) or not 1 <= plan.vlan_base <= VLAN_MAX:
        raise ValidationError(
            f"{where}.vlan_base", f"must be a VLAN id in 1..{VLAN_MAX}", plan.vlan_base
        )
    last = plan.vlan_base + plan.vfs - 1
    if last > VLAN_MAX:
        raise ValidationError(
            f"{where}.vlan_base",
            f"{plan.vfs} VFs from VLAN {plan.vlan_base} end at {last}, past {VLAN_MAX}",
            plan.vlan_base,
        )
    for j, pf in enumerate(plan.pfs):
        field = f"{where}.pfs[{j}]"
        if not isinstance(pf, str) or not host.exists(pf):
            raise ValidationError(field, "no such interface on this machine", pf)
        total = host.read(pf, "sriov_totalvfs")
        if total is None:
            raise ValidationError(field, "has no SR-IOV (no device/sriov_totalvfs)", pf)
        if not total.isdigit() or int(total) < plan.vfs:
            raise ValidationError(
                f"{where}.vfs", f"{pf} supports {total} VFs, {plan.vfs} asked", plan.vfs
            )
        now = host.read(pf, "sriov_numvfs") or "0"
        if now != "0":
            raise ValidationError(
                field,
                f"already has {now} VFs (not made by this run): set its sriov_numvfs to 0 "
                "first, or give their pairs as hardware pairs",
                pf,
            )


def provision(
    plan: SriovPlan,
    host: Host,
    record: Callable[..., None],
    timeout: float = 10.0,
    where: str = "sriov",
) -> list[tuple[str, str]]:
    """Create and configure the VFs (see the module doc); returns the pairs."""
    check(plan, host, where)
    for pf in plan.pfs:
        record("sriov", pf=pf, root=host.root, numvfs_before=0)
        host.write(pf, "sriov_numvfs", str(plan.vfs))
    for pf in plan.pfs:
        for i in range(plan.vfs):
            host.set_vf(pf, i, plan.vlan_base + i)
    deadline = time.monotonic() + timeout
    names: dict[tuple[str, int], str] = {}
    while True:
        for pf in plan.pfs:
            for i in range(plan.vfs):
                if (pf, i) not in names:
                    found = host.vf_netdev(pf, i)
                    if found:
                        names[pf, i] = found
        if len(names) == 2 * plan.vfs:
            break
        if time.monotonic() > deadline:
            missing = [
                f"{pf} VF {i}" for pf in plan.pfs for i in range(plan.vfs) if (pf, i) not in names
            ]
            raise KernelError(
                f"SR-IOV: no netdev within {timeout:g} s for {', '.join(missing[:6])}"
            )
        time.sleep(0.05)
    a, b = plan.pfs
    return [(names[a, i], names[b, i]) for i in range(plan.vfs)]


def release(rec: dict[str, Any], _run_id: str = "") -> None:
    """Put a PF's VF count back as it was (its VFs and their settings go with them)."""
    host = Host(str(rec.get("root") or "/sys"))
    pf = str(rec["pf"])
    if not host.exists(pf):
        return  # the PF is gone (unplugged): nothing of ours is left on it
    host.write(pf, "sriov_numvfs", str(int(rec.get("numvfs_before") or 0)))


def pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    """``IF1:IF2,IF3:IF4``: the pool as ``--pairs`` and FIDELNET_HW_PAIRS take it."""
    return ",".join(f"{a}:{b}" for a, b in pairs)
