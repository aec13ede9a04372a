"""What a topology needs from the machine, checked before anything is built.

A topology too big for the machine used to fail half-way (``EMFILE`` after a few
thousand namespaces, ``fork`` failing for the last shells, the OOM killer), leaving a
partial build to roll back. :func:`check` compares an estimate with what
:func:`fidelnet.kernel.limits.machine` read and names the limit that would break.

The estimate, per object, from measurements on a 2-vCPU, 24 GiB Debian 12 VM with
kernel 6.18 (docs/scale.md, "Limits"):

- a node with its own namespace: 3 file descriptors in the building process (a
  netlink socket and the control pipe pyroute2 pairs with it) and about 0.15 to
  0.32 MiB of kernel memory with its interfaces (``MemAvailable`` before and after
  ``linear,300``, ``linear,600`` and ``single,600``); budgeted at 0.5 MiB;
- a switch: a bridge and its ports in the fabric namespace, budgeted at 0.25 MiB;
- a shell (the Mininet front door starts one per node): one task, 3 file
  descriptors, budgeted at 2 MiB (bash's private pages; its text is shared).

Memory may use 90 % of ``MemAvailable`` and tasks 90 % of what ``kernel.pid_max``
leaves free, so the machine keeps room for the run's own programs.
"""

from __future__ import annotations

from dataclasses import dataclass

from fidelnet.errors import ValidationError
from fidelnet.kernel.limits import Machine
from fidelnet.topology.spec import TopologySpec

__all__ = ["Footprint", "check", "footprint"]

MIB = 1 << 20
FDS_PER_NAMESPACE = 3
FDS_PER_SHELL = 3
FDS_SPARE = 64  # the run's record, the engine's socket, measurement files, ...
MEM_PER_NAMESPACE = MIB // 2
MEM_PER_SWITCH = MIB // 4
MEM_PER_SHELL = 2 * MIB
SHARE = 0.9


@dataclass(frozen=True)
class Footprint:
    namespaces: int
    switches: int
    shells: int
    fds: int
    tasks: int
    memory: int


def footprint(spec: TopologySpec, shells: bool = False) -> Footprint:
    """The estimate for ``spec``; ``shells``: one shell per node is started."""
    switches = sum(1 for n in spec.nodes.values() if n.kind == "switch")
    namespaces = sum(1 for n in spec.nodes.values() if n.kind != "switch" and n.in_namespace) + (
        1 if switches else 0
    )
    n_shells = len(spec.nodes) if shells else 0
    return Footprint(
        namespaces=namespaces,
        switches=switches,
        shells=n_shells,
        fds=FDS_PER_NAMESPACE * namespaces + FDS_PER_SHELL * n_shells + FDS_SPARE,
        tasks=n_shells,
        memory=MEM_PER_NAMESPACE * namespaces
        + MEM_PER_SWITCH * switches
        + MEM_PER_SHELL * n_shells,
    )


def check(spec: TopologySpec, machine: Machine, shells: bool = False) -> Footprint:
    """Raise :class:`ValidationError` naming the first limit the topology would pass;
    return the estimate otherwise."""
    need = footprint(spec, shells)
    size = f"{len(spec.nodes)} nodes"
    hard = machine.nofile_hard
    if hard >= 0 and need.fds + machine.open_fds > hard:
        raise ValidationError(
            "topology",
            f"{size} need about {need.fds} open files in this process "
            f"({FDS_PER_NAMESPACE} per node namespace"
            + (f", {FDS_PER_SHELL} per shell" if need.shells else "")
            + f"), more than its hard limit RLIMIT_NOFILE={hard} allows "
            f"(raise it: ulimit -Hn, or LimitNOFILE= in a systemd unit)",
        )
    if machine.mem_available is not None and need.memory > SHARE * machine.mem_available:
        raise ValidationError(
            "topology",
            f"{size} need about {need.memory // MIB} MiB of memory, more than "
            f"{int(SHARE * 100)} % of what this machine has available "
            f"(MemAvailable {machine.mem_available // MIB} MiB)",
        )
    if need.tasks and machine.pid_max is not None:
        free = machine.pid_max - (machine.tasks or 0)
        if need.tasks > SHARE * free:
            raise ValidationError(
                "topology",
                f"{size} with a shell each need {need.tasks} processes; the machine "
                f"has room for {free} more tasks (kernel.pid_max={machine.pid_max}, "
                f"{machine.tasks} in use)",
            )
    limit = machine.max_net_namespaces
    if limit is not None and need.namespaces > limit:
        raise ValidationError(
            "topology",
            f"{size} need {need.namespaces} network namespaces, more than "
            f"user.max_net_namespaces={limit}",
        )
    return need
