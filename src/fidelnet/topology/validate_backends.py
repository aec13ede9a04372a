"""Checks of how each node is made (its backend, :mod:`fidelnet.nodes._base`)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import (
    NODE_BACKENDS,
    VM_ACCELS,
    VM_MIN_MEMORY_MB,
    NodeSpec,
    TopologySpec,
    VMSpec,
)

VM_MAX_CPUS = 64
VM_MAX_MEMORY_MB = 1 << 20
VM_MAX_BOOT_TIMEOUT_S = 3600.0

__all__ = ["check_node_backends"]


def check_node_backends(spec: TopologySpec) -> Iterator[ValidationError]:
    for name, node in spec.nodes.items():
        where = f"nodes.{name}.backend"
        if node.backend not in NODE_BACKENDS:
            yield ValidationError(where, "unknown node backend", node.backend, list(NODE_BACKENDS))
        elif node.backend != "netns" and node.kind == "switch":
            yield ValidationError(
                where, f"switches run in the fabric, and {name} is a switch", node.backend
            )
        elif node.backend != "netns" and not node.in_namespace:
            yield ValidationError(
                where, f"{name} is in the host namespace: only netns applies", node.backend
            )
        if node.vm is not None and node.backend != "qemu":
            yield ValidationError(
                f"nodes.{name}.vm", "a machine is only for backend qemu", "vm", ["backend: qemu"]
            )
        elif node.backend == "qemu":
            yield from _check_vm(name, node)


def _check_vm(name: str, node: NodeSpec) -> Iterator[ValidationError]:
    vm = node.vm or VMSpec()
    where = f"nodes.{name}.vm"
    cores = os.cpu_count() or 1
    most = min(VM_MAX_CPUS, cores)
    if not _whole(vm.cpus) or not 1 <= vm.cpus <= most:
        yield ValidationError(
            f"{where}.cpus",
            f"must be a whole number from 1 to {most} (this machine has {cores} cores: "
            "more vCPUs than cores would time-share them and distort every figure)",
            vm.cpus,
        )
    if not _whole(vm.memory_mb) or not VM_MIN_MEMORY_MB <= vm.memory_mb <= VM_MAX_MEMORY_MB:
        yield ValidationError(
            f"{where}.memory_mb",
            f"must be a whole number of MiB from {VM_MIN_MEMORY_MB} (the least that boots) "
            f"to {VM_MAX_MEMORY_MB}",
            vm.memory_mb,
        )
    if vm.cpupin is not None:
        pins = list(vm.cpupin)
        if not all(_whole(c) and 0 <= c < cores for c in pins):
            yield ValidationError(
                f"{where}.cpupin", f"cores are numbered 0 to {cores - 1} on this machine", pins
            )
        elif _whole(vm.cpus) and len(pins) != vm.cpus:
            yield ValidationError(
                f"{where}.cpupin", f"one core per vCPU: {vm.cpus} expected, {len(pins)} given", pins
            )
    for field in ("kernel", "initrd", "image"):
        path = getattr(vm, field)
        if path is not None and (not isinstance(path, str) or not os.path.isfile(path)):
            yield ValidationError(f"{where}.{field}", "no such file", path)
    if (vm.kernel is None) != (vm.initrd is None):
        yield ValidationError(
            f"{where}.kernel",
            "give both kernel and initrd, or neither (fidelnet's image)",
            vm.kernel,
        )
    if vm.image is not None and vm.initrd is not None:
        yield ValidationError(
            f"{where}.image",
            "a disk image boots with fidelnet's kernel and initramfs, which mount it: "
            "give image, or kernel and initrd, not both",
            vm.image,
        )
    elif (
        isinstance(vm.image, str) and os.path.isfile(vm.image) and not os.access(vm.image, os.R_OK)
    ):
        yield ValidationError(f"{where}.image", "not readable", vm.image)
    if vm.accel not in VM_ACCELS:
        yield ValidationError(f"{where}.accel", "unknown accelerator", vm.accel, list(VM_ACCELS))
    if not isinstance(vm.cmdline, str) or "\n" in vm.cmdline or "\0" in vm.cmdline:
        yield ValidationError(
            f"{where}.cmdline", "must be one line of kernel parameters", vm.cmdline
        )
    t = vm.boot_timeout_s
    if (
        not isinstance(t, int | float)
        or isinstance(t, bool)
        or not math.isfinite(t)
        or not 0 < t <= VM_MAX_BOOT_TIMEOUT_S
    ):
        yield ValidationError(
            f"{where}.boot_timeout_s", f"must be seconds in (0, {VM_MAX_BOOT_TIMEOUT_S:.0f}]", t
        )


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
