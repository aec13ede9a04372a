"""The shard agent: one per machine, it runs that machine's Shards.

``python -m fidelnet.cluster.agent --kubeconfig K --machine NAME`` (or
``fidelnet cluster agent``), as root on the machine (here: on the host, one
process per kwok Node). It

- holds a ``coordination.k8s.io`` Lease named after its machine (holder
  ``MACHINE/pid PID``), renewed every third of its duration by a thread of its
  own, so a long build does not let it lapse; a dead agent's Lease lapses, which
  the controller reports as the machine lost;
- polls the Shards labelled with its machine every ``interval`` (a
  level-triggered loop, as the controller's); for a new Shard it reads the
  Topology's scenario, keeps the part's nodes and the links inside the part
  (:func:`.objects.part_spec`), and builds them as an ordinary fidelnet run
  (:class:`~fidelnet.network.Network`), then sets the Shard's status: ``Running``,
  the run id, the nodes, its wire address (``--wire-address``), and each cut link
  ``pending``; a build that fails sets ``Failed`` with the error;
- carries each cut link once the other machine's Shard shows its wire address: its
  half (:mod:`fidelnet.cluster.halves`, :mod:`fidelnet.links.cut`) in this run's
  linkd, the UDP socket in the agent's own network namespace (or ``--wire-netns``:
  the network namespace that reaches the other machines); when every half of a
  shard is carried, the whole topology's static routes of its nodes are installed
  (a part alone does not know the paths through other machines). The machines'
  clocks are compared first (:mod:`fidelnet.cluster.clock`: each agent answers
  probes on its wire address, at the port its Shards' status gives), once per peer
  machine: the offset goes to linkd, and the offset, its uncertainty and the
  one-way delay to the cut link's status (**measured once, at carry time**);
- on a Shard being deleted (``deletionTimestamp``), stops its run (or, for a run
  it did not start, a dead agent's, removes it by the run's records as
  ``fidelnet clean --run ID`` does) and then removes the finalizer
  :data:`.objects.FINALIZER`, which lets the deletion finish.

SIGTERM or SIGINT stops every run it holds and exits; SIGKILL leaves the runs to
``fidelnet clean`` (their owner is gone) and the Lease to lapse.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fidelnet.cluster import objects
from fidelnet.cluster.clock import ClockSample, Responder, probe
from fidelnet.cluster.clocks import ClockKeeper
from fidelnet.cluster.halves import Half, halves, resolved
from fidelnet.cluster.kube import Kube, KubeError, path
from fidelnet.errors import FidelnetError
from fidelnet.log import logger as log

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.topology.spec import TopologySpec

__all__ = ["Agent", "main"]

Json = dict[str, Any]
LEASE_SECONDS = 10
"""The Lease's duration: an agent silent this long is taken as lost."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Agent:
    """The agent of ``machine``: its Lease, its Shards' runs."""

    def __init__(
        self,
        kube: Kube,
        machine: str,
        namespace: str = "default",
        *,
        interval: float = 0.5,
        lease_seconds: int = LEASE_SECONDS,
        wire_address: str | None = None,
        wire_netns: str | None = None,
    ) -> None:
        self.kube = kube
        self.wire_address = wire_address
        self.wire_netns = wire_netns
        self.pending: dict[str, list[Half]] = {}  # Shard name -> halves not carried yet
        self.carried: dict[str, list[Json]] = {}  # Shard name -> its cut links' status
        self.wholes: dict[str, TopologySpec] = {}  # Shard name -> the whole, resolved
        self.clocks = ClockKeeper(self._probe)  # peer machines' clocks, measured again
        self.live: dict[str, list[Half]] = {}  # Shard name -> its halves carried
        self.responder: Responder | None = None
        self.machine = machine
        self.namespace = namespace
        self.interval = interval
        self.lease_seconds = lease_seconds
        self.identity = f"{machine}/pid {os.getpid()}"
        self.runs: dict[str, Network] = {}  # Shard name -> its run
        self.stopping = threading.Event()

    # -- the Lease ---------------------------------------------------------------

    def _lease_url(self) -> str:
        return path(objects.LEASE_API, "leases", self.machine, namespace=self.namespace)

    def take_lease(self) -> None:
        """Create the Lease, or take over the one a previous agent left."""
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": _now(),
            "renewTime": _now(),
        }
        body = {
            "apiVersion": objects.LEASE_API,
            "kind": "Lease",
            "metadata": {"name": self.machine, "namespace": self.namespace},
            "spec": spec,
        }
        collection = path(objects.LEASE_API, "leases", namespace=self.namespace)
        self.kube.apply(collection, body)

    def _renew_loop(self) -> None:
        while not self.stopping.wait(self.lease_seconds / 3):
            try:
                self.kube.patch(self._lease_url(), {"spec": {"renewTime": _now()}})
            except KubeError as exc:
                log.warning("agent %s: lease not renewed: %s", self.machine, exc)

    # -- the loop ----------------------------------------------------------------

    def run(self) -> None:
        """Take the Lease, then reconcile until :meth:`stop`; stop every run at the end."""
        if self.wire_address:
            # Its port is any free one, published in each Shard's status.
            self.responder = Responder(self.wire_address, self.wire_netns, port=0)
        self.take_lease()
        renewer = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
        renewer.start()
        try:
            while not self.stopping.is_set():
                try:
                    self.reconcile()
                except (KubeError, FidelnetError) as exc:
                    log.warning("agent %s: %s", self.machine, exc)
                self.stopping.wait(self.interval)
        finally:
            self.stopping.set()
            for name, net in list(self.runs.items()):
                log.info("agent %s: stopping the run of shard %s", self.machine, name)
                net.stop()
                del self.runs[name]
            if self.responder is not None:
                self.responder.close()
            renewer.join()

    def stop(self) -> None:
        self.stopping.set()

    def reconcile(self) -> None:
        selector = f"{objects.MACHINE_LABEL}={self.machine}"
        url = path(objects.API, "shards", namespace=self.namespace)
        for shard in self.kube.get(url, labelSelector=selector).get("items", []):
            if self.stopping.is_set():
                return
            if shard["spec"]["machine"] != self.machine:
                continue
            if shard["metadata"].get("deletionTimestamp"):
                self._teardown(shard)
            elif shard["metadata"]["name"] not in self.runs and not (shard.get("status") or {}).get(
                "phase"
            ):
                self._build(shard)
            elif self.pending.get(shard["metadata"]["name"]):
                self._carry(shard)
            elif self.live.get(shard["metadata"]["name"]):
                self._recompare(shard)

    def _shard_url(self, shard: Json, sub: str | None = None) -> str:
        name = shard["metadata"]["name"]
        return path(objects.API, "shards", name, namespace=self.namespace, sub=sub)

    def _status(self, shard: Json, status: Json) -> None:
        status = {"agent": self.identity, **status}
        self.kube.patch(self._shard_url(shard, "status"), {"status": status})

    def _build(self, shard: Json) -> None:
        from fidelnet.network import Network
        from fidelnet.scenario import ScenarioError, loads

        name = shard["metadata"]["name"]
        self._status(shard, {"phase": "Starting"})
        topo_name = shard["spec"]["topology"]
        try:
            topo = self.kube.get(
                path(objects.API, "topologies", topo_name, namespace=self.namespace)
            )
            scenario = loads(json.dumps(topo["spec"]["scenario"]), f"topology {topo_name}")
            part = shard["spec"]["part"]
            whole_spec = scenario.topology_spec()
            spec = objects.part_spec(whole_spec, part["nodes"], part["links"])
            cut = shard["spec"].get("cutLinks", [])
            self.pending[name] = halves(whole_spec, cut, self.machine)
            self.wholes[name] = resolved(whole_spec)
            # The part's own routes miss every path through another machine: the
            # whole topology's replace them once its cut links are carried.
            net = Network(spec, command=f"fidelnet cluster agent: shard {name}")
            self.runs[name] = net
            net.start()
        except (FidelnetError, ScenarioError, KubeError, OSError) as exc:
            log.error("agent %s: shard %s: %s", self.machine, name, exc)
            failed = self.runs.pop(name, None)
            for held in (self.pending, self.wholes):
                held.pop(name, None)
            if failed is not None:
                failed.stop()
            self._status(shard, {"phase": "Failed", "message": str(exc)})
            return
        cut = [{"name": c["name"], "state": "pending"} for c in shard["spec"].get("cutLinks", [])]
        self.carried[name] = cut
        wire: Json = {}
        if self.wire_address and self.responder is not None:
            wire = {
                "address": self.wire_address,
                "clockPort": self.responder.sock.getsockname()[1],
            }
        self._status(
            shard,
            {
                "phase": "Running",
                "runId": net.run_id,
                "nodes": list(spec.nodes),
                "cutLinks": cut,
                **({"wire": wire} if wire else {}),
                "message": (
                    f"run {net.run_id}: {len(spec.nodes)} nodes, {len(spec.links)} links"
                    + (f"; {len(cut)} cut links pending" if cut else "")
                ),
            },
        )
        log.info("agent %s: shard %s running as run %s", self.machine, name, net.run_id)

    def _carry(self, shard: Json) -> None:
        """Build the halves whose other machine's wire address is known."""
        from fidelnet.kernel import ns
        from fidelnet.links.cut import CutWire, add_cut_end

        name = shard["metadata"]["name"]
        net = self.runs.get(name)
        if net is None:
            return
        if not self.wire_address:
            self._cut_status(shard, "no wire address: start the agent with --wire-address")
            return
        topo = shard["spec"]["topology"]
        url = path(objects.API, "shards", namespace=self.namespace)
        peers: dict[str, Json] = {
            str(s["spec"]["machine"]): (s.get("status") or {}).get("wire") or {}
            for s in self.kube.get(url, labelSelector=f"{objects.TOPOLOGY_LABEL}={topo}")["items"]
        }
        left = []
        for half in self.pending[name]:
            peer_wire = peers.get(half.peer_machine) or {}
            peer = peer_wire.get("address")
            if not peer:
                left.append(half)
                continue
            clock = self._clock(half.peer_machine, str(peer), peer_wire.get("clockPort"))
            if clock is None:
                left.append(half)
                continue
            wire = CutWire(
                f"{self.wire_address}:{half.local_port}",
                f"{peer}:{half.peer_port}",
                netns=self.wire_netns or ns.own_path(),
                clock_offset_ns=clock.offset_ns,
            )
            try:
                add_cut_end(
                    net, half.node, half.ifname, half.out, half.back, wire,
                    ip=half.ip, mac=half.mac, port=half.port,
                )  # fmt: skip
            except (FidelnetError, OSError) as exc:
                log.error("agent %s: cut link %s: %s", self.machine, half.name, exc)
                self._cut_status(shard, f"cut link {half.name}: {exc}", failed=half.name)
                left.append(half)
                continue
            self.live.setdefault(name, []).append(half)
            for c in self.carried[name]:
                if c["name"] == half.name:
                    c.update(
                        state="carried",
                        local=wire.local,
                        peer=wire.peer,
                        clock=self.clocks.kept[half.peer_machine].as_status(),
                    )
            log.info("agent %s: cut link %s carried to %s", self.machine, half.name, wire.peer)
        self.pending[name] = left
        if not left:
            self._routes(name)
        self._cut_status(shard, None)

    def _probe(self, address: str, port: int) -> ClockSample:
        assert self.wire_address is not None
        return probe(self.wire_address, address, self.wire_netns, port=port)

    def _clock(self, machine: str, address: str, port: object) -> ClockSample | None:
        """The clock of ``machine`` (its responder at ``address:port``), as first
        measured; None (logged) while it does not answer."""
        if machine in self.clocks.kept:
            return self.clocks.kept[machine].last
        if not isinstance(port, int) or self.wire_address is None:
            return None
        try:
            got = self.clocks.first(machine, address, port)
        except FidelnetError as exc:
            log.warning("agent %s: %s", self.machine, exc)
            return None
        log.info(
            "agent %s: clock of %s: offset %d ns +- %d ns, one way %d ns",
            self.machine, machine, got.offset_ns, got.uncertainty_ns, got.one_way_ns,
        )  # fmt: skip
        return got

    def _recompare(self, shard: Json) -> None:
        """Compare the clocks of the machines this shard's cut links reach again, when
        due: linkd gets each new offset (from its next frame on), the status too."""
        name = shard["metadata"]["name"]
        net = self.runs.get(name)
        if net is None:
            return
        machines = sorted({h.peer_machine for h in self.live[name]})
        due = [m for m in machines if self.clocks.due(m)]
        if not due:
            return
        url = path(objects.API, "shards", namespace=self.namespace)
        topo = shard["spec"]["topology"]
        wires: dict[str, Json] = {
            str(s["spec"]["machine"]): (s.get("status") or {}).get("wire") or {}
            for s in self.kube.get(url, labelSelector=f"{objects.TOPOLOGY_LABEL}={topo}")["items"]
        }
        changed = False
        for machine in due:
            wire = wires.get(machine) or {}
            address, port = wire.get("address"), wire.get("clockPort")
            if not address or not isinstance(port, int):
                continue
            halves_to = [h for h in self.live[name] if h.peer_machine == machine]

            def apply(got: ClockSample, halves_to: list[Half] = halves_to) -> None:
                engine = net.link_engine()
                for h in halves_to:
                    engine.set_clock(f"{h.node}:{h.ifname}", got.offset_ns, got.uncertainty_ns)

            if self.clocks.refresh(machine, str(address), port, apply) is not None:
                status = self.clocks.kept[machine].as_status()
                for c in self.carried.get(name, []):
                    if any(c["name"] == h.name for h in halves_to):
                        c["clock"] = status
                changed = True
        if changed:
            self._cut_status(shard, None)

    def _cut_status(self, shard: Json, problem: str | None, failed: str | None = None) -> None:
        name = shard["metadata"]["name"]
        cut = self.carried.get(name, [])
        for c in cut:
            if failed is not None and c["name"] == failed:
                c.update(state="failed", message=problem)
        waiting = sum(c["state"] != "carried" for c in cut)
        status: Json = {"cutLinks": cut}
        if problem is not None and failed is None:
            status["message"] = problem
        elif not waiting:
            status["message"] = f"{len(cut)} cut links carried"
        self._status(shard, status)

    def _routes(self, name: str) -> None:
        """The whole topology's static routes of this shard's nodes."""
        from fidelnet.topology import routing

        net, whole = self.runs.get(name), self.wholes.get(name)
        if net is None or whole is None or not whole.auto_routes:
            return
        for node_name, routes in routing.static_routes(whole).items():
            node = net.nodes.get(node_name)
            if node is None:
                continue
            batch = [(r.dst, r.via, node.intf(r.dev).index) for r in routes]  # type: ignore[union-attr]
            node.interior().add_routes(batch)

    def _teardown(self, shard: Json) -> None:
        name = shard["metadata"]["name"]
        finalizers = shard["metadata"].get("finalizers") or []
        if objects.FINALIZER not in finalizers:
            return
        phase = (shard.get("status") or {}).get("phase")
        if phase not in ("Stopping", "Stopped"):
            self._status(shard, {"phase": "Stopping"})
        net = self.runs.pop(name, None)
        for held in (self.pending, self.carried, self.wholes, self.live):
            held.pop(name, None)
        if net is not None:
            net.stop()
        else:
            run_id = (shard.get("status") or {}).get("runId")
            if run_id:
                self._clean_by_records(str(run_id))
        rest = [f for f in finalizers if f != objects.FINALIZER]
        meta = {"finalizers": rest, "resourceVersion": shard["metadata"]["resourceVersion"]}
        try:
            self.kube.patch(self._shard_url(shard), {"metadata": meta})
        except KubeError as exc:
            if exc.status not in (404, 409):
                raise
            return  # gone or changed meanwhile: the next round looks again
        log.info("agent %s: shard %s torn down, finalizer removed", self.machine, name)

    def _clean_by_records(self, run_id: str) -> None:
        """A run this agent did not start (its agent died): remove it by its state
        file, as ``fidelnet clean --run RUN_ID`` does; nothing when it is gone."""
        from fidelnet.cleanup import clean_runs
        from fidelnet.kernel.state import list_runs

        if not any(r.run_id == run_id for r in list_runs()):
            return
        report = clean_runs({run_id})
        for line in report.lines:
            log.info("agent %s: %s", self.machine, line)
        if report.problems:
            raise FidelnetError(f"run {run_id}: " + "; ".join(report.problems))


def main(argv: list[str] | None = None) -> int:
    """``python -m fidelnet.cluster.agent --kubeconfig K --machine NAME``."""
    import argparse

    parser = argparse.ArgumentParser(prog="fidelnet-cluster-agent")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--lease-seconds", type=int, default=LEASE_SECONDS)
    parser.add_argument("--wire-address", default=None)
    parser.add_argument("--wire-netns", default=None)
    args = parser.parse_args(argv)
    return run_agent(
        args.kubeconfig,
        args.machine,
        args.namespace,
        args.interval,
        args.lease_seconds,
        args.wire_address,
        args.wire_netns,
    )


def run_agent(
    kubeconfig: str,
    machine: str,
    namespace: str,
    interval: float,
    lease_seconds: int,
    wire_address: str | None = None,
    wire_netns: str | None = None,
) -> int:
    agent = Agent(
        Kube.from_kubeconfig(kubeconfig),
        machine,
        namespace,
        interval=interval,
        lease_seconds=lease_seconds,
        wire_address=wire_address,
        wire_netns=wire_netns,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    agent.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
