"""The Kubernetes objects of a cluster run, as pure functions (no server here).

The controller (:mod:`.controller`) and the shard agents (:mod:`.agent`) share
these: the names, labels, annotation keys and finalizer; the machines and delays a
``Topology`` asks for (:func:`machines_of`, :func:`delays_of`); the manifests of a
``Shard`` and of its Pod (:func:`shard_manifest`, :func:`pod_manifest`); the part
of a topology one shard builds (:func:`part_spec`); when a ``Lease`` has lapsed
(:func:`lease_lapsed`); and a Topology's status from its Shards and the agents'
Leases (:func:`topology_status`). Unit-tested without a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fidelnet.cluster.machines import Delays, MachineSpec
from fidelnet.cluster.partition import Partition
from fidelnet.errors import FidelnetError
from fidelnet.topology.spec import TopologySpec

__all__ = [
    "API",
    "CAPACITY_KEY",
    "DELAYS_KEY",
    "FINALIZER",
    "LEASE_API",
    "MACHINE_LABEL",
    "MAX_WEIGHT_KEY",
    "POD_IMAGE",
    "TOPOLOGY_LABEL",
    "delays_of",
    "lease_lapsed",
    "machines_of",
    "part_spec",
    "pod_manifest",
    "shard_manifest",
    "shard_name",
    "topology_status",
]

API = "fidelnet.dev/v1alpha1"
LEASE_API = "coordination.k8s.io/v1"
FINALIZER = "fidelnet.dev/teardown"
"""On every Shard; only its agent removes it, after its run is torn down."""
MACHINE_LABEL = "fidelnet.dev/machine"
"""On a Node: it is a fidelnet machine. On a Shard and its Pod: the machine."""
TOPOLOGY_LABEL = "fidelnet.dev/topology"
"""On a Shard and its Pod: the Topology's name."""
CAPACITY_KEY = "fidelnet.dev/capacity"
"""A Node's relative capacity (annotation or label; default 1)."""
MAX_WEIGHT_KEY = "fidelnet.dev/max-weight"
"""A Node's hard limit on the weight it carries (annotation or label; optional)."""
DELAYS_KEY = "fidelnet.dev/delays"
"""A Topology's annotation: the one-way delays between machines, in seconds, as
JSON ``{"m1": {"m2": 0.0002}}`` (one direction given counts for both)."""
POD_IMAGE = "fidelnet:dev"
"""The shard Pod's image: a placeholder (no image is built yet; kwok runs no
containers)."""

Json = dict[str, Any]


def shard_name(topology: str, machine: str) -> str:
    return f"{topology}-{machine}"


def _number(where: str, value: object) -> float:
    try:
        out = float(str(value))
    except ValueError:
        raise FidelnetError(f"{where}: not a number (got {value!r})") from None
    if not out > 0:
        raise FidelnetError(f"{where}: must be positive (got {value!r})")
    return out


def machines_of(
    topology: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]
) -> list[MachineSpec]:
    """The machines a Topology is placed on: its ``spec.machines`` if given (each
    must be a Node in ``nodes``), else every Ready Node labelled
    :data:`MACHINE_LABEL`, with capacity and limit from its :data:`CAPACITY_KEY`
    and :data:`MAX_WEIGHT_KEY` (annotation, else label)."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    wanted = topology.get("spec", {}).get("machines")
    out: list[MachineSpec] = []
    if wanted:
        for m in wanted:
            if m["name"] not in by_name:
                known = ", ".join(sorted(by_name)) or "none"
                raise FidelnetError(f"spec.machines: no Node named {m['name']!r} (valid: {known})")
            limit = m.get("maxWeight")
            out.append(MachineSpec(m["name"], float(m.get("capacity", 1.0)), limit))
        return out
    for name, node in by_name.items():
        meta = node["metadata"]
        labels = meta.get("labels") or {}
        if MACHINE_LABEL not in labels or not _ready(node):
            continue
        keys = {**labels, **(meta.get("annotations") or {})}
        capacity = _number(f"Node {name}: {CAPACITY_KEY}", keys.get(CAPACITY_KEY, 1))
        limit = keys.get(MAX_WEIGHT_KEY)
        max_weight = _number(f"Node {name}: {MAX_WEIGHT_KEY}", limit) if limit else None
        out.append(MachineSpec(name, capacity, max_weight))
    if not out:
        raise FidelnetError(f"no machines: no Ready Node is labelled {MACHINE_LABEL}")
    return out


def _ready(node: Mapping[str, Any]) -> bool:
    for cond in node.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def delays_of(topology: Mapping[str, Any]) -> Delays | None:
    """The one-way delays between machines from the Topology's :data:`DELAYS_KEY`
    annotation (None when absent: fine for one machine, refused by the
    partitioner for more)."""
    text = (topology.get("metadata", {}).get("annotations") or {}).get(DELAYS_KEY)
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FidelnetError(f"annotation {DELAYS_KEY}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise FidelnetError(f"annotation {DELAYS_KEY}: not a mapping of machines (got {text})")
    delays: Delays = value
    return delays


def _owner(obj: Mapping[str, Any]) -> Json:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def shard_manifest(
    topology: Mapping[str, Any], spec: TopologySpec, part: Partition, machine: str
) -> Json:
    """The Shard of ``machine``'s part: its nodes and the links inside the part
    (by name and index in the scenario's topology), the cut links touching it,
    owned by the Topology, with the :data:`FINALIZER`."""
    name = topology["metadata"]["name"]
    nodes = part.nodes_on(machine)
    here = set(nodes)
    links = [i for i, link in enumerate(spec.links) if link.a in here and link.b in here]
    cut = [
        {
            "name": c.name,
            "index": c.index,
            "ordinal": k,
            "a": c.a,
            "b": c.b,
            "aMachine": c.a_machine,
            "bMachine": c.b_machine,
            "measuredAB": c.network_ab,
            "measuredBA": c.network_ba,
            "compensatedAB": c.compensated_ab,
            "compensatedBA": c.compensated_ba,
            **({"delayAB": c.delay_ab} if c.delay_ab is not None else {}),
            **({"delayBA": c.delay_ba} if c.delay_ba is not None else {}),
        }
        for k, c in enumerate(part.cut)
        if machine in (c.a_machine, c.b_machine)
    ]
    return {
        "apiVersion": API,
        "kind": "Shard",
        "metadata": {
            "name": shard_name(name, machine),
            "namespace": topology["metadata"]["namespace"],
            "labels": {TOPOLOGY_LABEL: name, MACHINE_LABEL: machine},
            "ownerReferences": [_owner(topology)],
            "finalizers": [FINALIZER],
        },
        "spec": {
            "topology": name,
            "machine": machine,
            "part": {"nodes": nodes, "links": links},
            "cutLinks": cut,
        },
    }


def pod_manifest(shard: Mapping[str, Any]) -> Json:
    """The Pod of a Shard's agent: owned by the Shard, bound to its machine."""
    meta = shard["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-agent",
            "namespace": meta["namespace"],
            "labels": dict(meta["labels"]),
            "ownerReferences": [_owner(shard)],
        },
        "spec": {
            "nodeName": shard["spec"]["machine"],
            "containers": [
                {
                    "name": "agent",
                    "image": POD_IMAGE,
                    "args": ["cluster", "agent", "--machine", shard["spec"]["machine"]],
                    "securityContext": {"privileged": True},
                }
            ],
            "hostNetwork": True,
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
        },
    }


def part_spec(spec: TopologySpec, nodes: Sequence[str], links: Sequence[int]) -> TopologySpec:
    """The part of ``spec`` one shard builds (:func:`.halves.part_spec`)."""
    from fidelnet.cluster.halves import part_spec as _part

    return _part(spec, nodes, links)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def lease_lapsed(lease: Mapping[str, Any], now: datetime) -> str | None:
    """Why ``lease`` no longer holds at ``now`` (its last renewal plus its duration
    is past), or None while it holds."""
    spec = lease.get("spec", {})
    renewed = spec.get("renewTime") or spec.get("acquireTime")
    seconds = spec.get("leaseDurationSeconds")
    if renewed is None or seconds is None:
        return "its lease was never renewed"
    expiry = _time(renewed).timestamp() + float(seconds)
    if now.timestamp() <= expiry:
        return None
    late = now.timestamp() - expiry
    return f"its lease (held by {spec.get('holderIdentity')}) lapsed {late:.1f} s ago"


def topology_status(
    shards: Sequence[Mapping[str, Any]],
    leases: Mapping[str, Mapping[str, Any] | None],
    now: datetime | None = None,
) -> Json:
    """A Topology's status from its Shards and the Leases of their machines'
    agents (``leases``: machine to Lease, None when there is none): ``Failed`` when
    a shard failed or a machine whose agent took its shard lost its Lease (the
    message names the machine), ``Running`` when every shard runs, else
    ``Starting``. ``shards`` and ``shardsReady`` count them."""
    now = now or datetime.now(UTC)
    ready = sum(1 for s in shards if s.get("status", {}).get("phase") == "Running")
    problems: list[str] = []
    for shard in sorted(shards, key=lambda s: str(s["spec"]["machine"])):
        machine = shard["spec"]["machine"]
        status = shard.get("status", {})
        if status.get("phase") == "Failed":
            problems.append(
                f"shard {shard['metadata']['name']} on machine {machine} failed: "
                f"{status.get('message', 'no message')}"
            )
            continue
        if not status.get("agent"):
            continue  # no agent has taken it: nothing to lose yet
        lease = leases.get(machine)
        why = "its agent holds no lease" if lease is None else lease_lapsed(lease, now)
        if why is not None:
            problems.append(f"machine {machine} lost: {why}")
    if problems:
        phase = "Failed"
        message = "; ".join(problems)
    elif shards and ready == len(shards):
        phase, message = "Running", f"{ready} shards running"
    else:
        phase, message = "Starting", f"{ready} of {len(shards)} shards running"
    return {"phase": phase, "shards": len(shards), "shardsReady": ready, "message": message}
