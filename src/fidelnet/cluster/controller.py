"""The controller: from a ``Topology`` to its ``Shard``s and their Pods.

A **level-triggered polling loop** (:meth:`Controller.run`), not a watch: every
``interval`` seconds it lists the Topologies of its namespace and reconciles each
(:meth:`Controller.reconcile`), so a missed event or a restart of the controller
costs one interval, never a lost object. :mod:`.kube` has no watch; a list of a
few objects every half second is cheap at this scale.

For a new Topology (no ``status.shards`` yet): validate its scenario with the
scenario loader (invalid: status ``Failed`` with every problem, nothing created);
place it on the machines (:func:`.objects.machines_of`, delays from the
:data:`.objects.DELAYS_KEY` annotation) with :func:`.partition.partition`
(refused: ``Failed`` naming the links); then create one ``Shard`` per machine that
got nodes, owned by the Topology (``controller``, ``blockOwnerDeletion``) with the
finalizer :data:`.objects.FINALIZER`, and one Pod per Shard, owned by the Shard
and bound to its machine (``nodeName``). Creating is idempotent (an existing
object is kept), so a controller that dies half-way finishes the job next time.

For a Topology with Shards: its status follows them and the agents' Leases
(:func:`.objects.topology_status`): ``Starting``, ``Running``, or ``Failed``
naming the shard that failed or the machine whose agent's Lease lapsed. Deletion
is the garbage collector's: deleting the Topology deletes its Shards, whose
finalizer keeps each until its agent has torn its run down.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from fidelnet.cluster import objects
from fidelnet.cluster.kube import Kube, KubeError, path
from fidelnet.cluster.partition import PartitionError, partition
from fidelnet.errors import FidelnetError
from fidelnet.log import logger as log

__all__ = ["Controller"]

Json = dict[str, Any]


class Controller:
    """Reconciles the Topologies of ``namespace`` every ``interval`` seconds."""

    def __init__(self, kube: Kube, namespace: str = "default", interval: float = 0.5) -> None:
        self.kube = kube
        self.namespace = namespace
        self.interval = interval
        self.stopping = threading.Event()

    def _path(self, plural: str, name: str | None = None, sub: str | None = None) -> str:
        api = {"topologies": objects.API, "shards": objects.API, "pods": "v1"}[plural]
        return path(api, plural, name, namespace=self.namespace, sub=sub)

    def run(self) -> None:
        """Reconcile until :meth:`stop`; a failing round is logged and retried."""
        while not self.stopping.is_set():
            try:
                self.reconcile_all()
            except (KubeError, FidelnetError) as exc:
                log.warning("controller: %s", exc)
            self.stopping.wait(self.interval)

    def stop(self) -> None:
        self.stopping.set()

    def reconcile_all(self) -> None:
        for topo in self.kube.get(self._path("topologies")).get("items", []):
            try:
                self.reconcile(topo)
            except KubeError as exc:
                if exc.status not in (404, 409):  # gone or changed meanwhile: next round
                    raise

    def reconcile(self, topo: Json) -> None:
        """One Topology: create its Shards if it has none yet, else follow them."""
        status = topo.get("status") or {}
        if topo["metadata"].get("deletionTimestamp"):
            if status.get("phase") != "Deleting":
                self._set_status(topo, {"phase": "Deleting"})
            return
        if status.get("phase") == "Failed" and "shards" not in status:
            return  # refused: nothing was made, nothing to follow
        if "shards" not in status:
            self._create(topo)
            return
        self._follow(topo)

    def _set_status(self, topo: Json, status: Json) -> None:
        name = topo["metadata"]["name"]
        merged = {**status, "observedGeneration": topo["metadata"].get("generation", 1)}
        current = topo.get("status") or {}
        if all(current.get(k) == v for k, v in merged.items()):
            return
        self.kube.patch(self._path("topologies", name, "status"), {"status": merged})
        if merged.get("phase") != current.get("phase"):
            log.info(
                "controller: topology %s: %s (%s)",
                name,
                merged.get("phase"),
                merged.get("message", ""),
            )

    def _fail(self, topo: Json, message: str) -> None:
        self._set_status(topo, {"phase": "Failed", "message": message})

    def _create(self, topo: Json) -> None:
        from fidelnet.scenario import ScenarioError, loads

        name = topo["metadata"]["name"]
        self._set_status(topo, {"phase": "Partitioning"})
        try:
            scenario = loads(json.dumps(topo["spec"]["scenario"]), f"topology {name}")
            spec = scenario.topology_spec()
        except ScenarioError as exc:
            self._fail(topo, f"invalid scenario: {exc}")
            return
        try:
            nodes = self.kube.get(path("v1", "nodes")).get("items", [])
            machines = objects.machines_of(topo, nodes)
            placed = partition(
                spec, machines, objects.delays_of(topo), seed=int(topo["spec"].get("seed", 1))
            )
        except PartitionError as exc:
            self._fail(topo, f"cannot partition: {exc}")
            return
        except FidelnetError as exc:  # ValidationError among them
            self._fail(topo, str(exc))
            return
        used = [m.name for m in machines if placed.nodes_on(m.name)]
        for machine in used:
            shard = self._ensure(
                self._path("shards"), objects.shard_manifest(topo, spec, placed, machine)
            )
            self._ensure(self._path("pods"), objects.pod_manifest(shard))
        self._set_status(
            topo,
            {
                "phase": "Starting",
                "shards": len(used),
                "shardsReady": 0,
                "message": placed.summary(),
            },
        )

    def _ensure(self, collection: str, obj: Json) -> Json:
        try:
            created: Json = self.kube.create(collection, obj)
            return created
        except KubeError as exc:
            if exc.status != 409:
                raise
        existing: Json = self.kube.get(f"{collection}/{obj['metadata']['name']}")
        return existing

    def _follow(self, topo: Json) -> None:
        name = topo["metadata"]["name"]
        selector = f"{objects.TOPOLOGY_LABEL}={name}"
        shards = self.kube.get(self._path("shards"), labelSelector=selector).get("items", [])
        mine = [s for s in shards if _owned_by(s, topo)]
        leases: dict[str, Json | None] = {}
        for shard in mine:
            machine = shard["spec"]["machine"]
            url = path(objects.LEASE_API, "leases", machine, namespace=self.namespace)
            try:
                leases[machine] = self.kube.get(url)
            except KubeError as exc:
                if exc.status != 404:
                    raise
                leases[machine] = None
        status = objects.topology_status(mine, leases)
        if (topo.get("status") or {}).get("phase") == "Failed":
            status["phase"] = "Failed"  # a lost machine stays lost: the run is broken
        self._set_status(topo, status)


def _owned_by(obj: Json, owner: Json) -> bool:
    uid = owner["metadata"]["uid"]
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def main(argv: list[str] | None = None) -> int:
    """``python -m fidelnet.cluster.controller --kubeconfig K [--namespace N]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="fidelnet-cluster-controller")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args(argv)
    controller = Controller(Kube.from_kubeconfig(args.kubeconfig), args.namespace, args.interval)
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: controller.stop())
    controller.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
