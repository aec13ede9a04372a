"""One topology over several machines (docs/cluster.md).

Built so far: partitioning. :func:`partition` places every node of a
:class:`~fidelnet.topology.spec.TopologySpec` on one of several machines
(:class:`MachineSpec`) with METIS, keeping hosts with their switch and never
cutting a link whose configured delay is below the measured one-way delay between
the machines (:data:`Delays`); the :class:`Partition` lists the cut links
(:class:`CutLink`) with the delay each end shapes after compensation, or
:class:`PartitionError` names what cannot be honoured.

Also here, imported only by name (they are not re-exported): :mod:`.controlplane`,
a real Kubernetes control plane (etcd, kube-apiserver, -controller-manager,
-scheduler, kwok Nodes) started and stopped for tests, with its command lines in
:mod:`.cpconfig`; :mod:`.kube`, a small client of the Kubernetes API on the
standard library; :mod:`.controller` (Topologies to Shards and Pods) and
:mod:`.agent` (a machine's shard agent), with the objects they share in
:mod:`.objects`. The CRDs are in ``deploy/crds/``.

Not built yet: the image, RBAC and manifests, links carried between machines (a
shard builds its part without its cut links), verdicts across machines.
"""

from __future__ import annotations

from fidelnet.cluster.machines import Delays, MachineSpec
from fidelnet.cluster.partition import (
    MAX_ROUNDS,
    UNSHAPED_MBPS,
    VM_WEIGHT,
    CutLink,
    Partition,
    PartitionError,
    link_weight,
    node_weight,
    partition,
)

__all__ = [
    "MAX_ROUNDS",
    "UNSHAPED_MBPS",
    "VM_WEIGHT",
    "CutLink",
    "Delays",
    "MachineSpec",
    "Partition",
    "PartitionError",
    "link_weight",
    "node_weight",
    "partition",
]
