"""Tearing a :class:`~fidelnet.network.Network` down: every process ended, every
object the run made removed (from its state file), then the wait for the kernel's own
cleanup of the namespaces (:mod:`fidelnet.kernel.nscleanup`). :func:`remove_node`
takes one node out of a running network the same way, from the records that are
its own.

The order matters: every node's processes are killed first, all at once, so each
node's close only reaps; then the node backends, the link engine, the switch
datapaths and the run's helpers end; only then are kernel objects removed, so no
process holds one open. It returns once every process it ended is gone, exited and
reaped (:mod:`fidelnet.kernel.procwait`; ``net.timings["process_exit"]`` says how
long that took): for that span this process adopts the orphans of the run (a node
shell's background jobs, whose parent dies first), so it reaps them at once
instead of waiting for PID 1 to.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from fidelnet.errors import FidelnetError, KernelError, UnsupportedError
from fidelnet.kernel import nscleanup, procwait
from fidelnet.kernel.teardown import remove_all as remove_recorded
from fidelnet.vt import run as vt_run

if TYPE_CHECKING:
    from fidelnet.links import Link
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

__all__ = ["remove_all", "remove_node", "stop"]

log = logging.getLogger("fidelnet")


def stop(net: Network, wait_kernel: bool, kernel_timeout: float) -> None:
    """Remove everything (``net.timings["teardown"]``), then, with ``wait_kernel``,
    wait for the kernel's cleanup (``net.timings["kernel_cleanup"]``)."""
    began = time.perf_counter()
    remove_all(net)
    net.timings["teardown"] = time.perf_counter() - began
    net.timings["kernel_cleanup"] = None
    if not wait_kernel:
        return
    done = nscleanup.wait_idle(timeout=kernel_timeout)
    net.timings["kernel_cleanup"] = done.seconds if done.finished else None
    if not done.finished:
        log.warning(
            "the kernel was still freeing network namespaces after %.0f s; stopped waiting",
            kernel_timeout,
        )
    elif done.seconds >= 1.0:
        log.info("the kernel freed the run's namespaces in %.1f s", done.seconds)


def remove_all(net: Network) -> None:
    ending = procwait.Ending()  # before adopting: children of ours now are Popen's
    with ending.adopting():
        _remove_all(net, ending)
    waited = ending.waited
    net.timings["process_exit"] = waited.seconds if waited is not None else None
    if waited is not None and waited.seconds >= 1.0:
        log.info(
            "the run's %d processes were gone %.1f s after they were ended",
            waited.processes,
            waited.seconds,
        )


def _remove_all(net: Network, ending: procwait.Ending) -> None:
    state = net._state
    assert state is not None
    vt_run.stopping(net)  # the adaptive TDF leaves the run alone from here
    for node in net.nodes.values():  # all at once: then each close only reaps
        with contextlib.suppress(Exception):
            node.kill_processes()
    for node in net.nodes.values():
        try:
            node.close()
        except Exception as exc:  # teardown goes on: the cgroups end what is left
            log.warning("run %s: closing %s: %s", state.run_id, node.name, exc)
    if net.engine is not None:
        failure = net.engine.stop()
        if failure:
            net.engine_failure = failure
            log.error("run %s: the link engine had failed: %s", state.run_id, failure)
        net.engine = None
    for datapath in net.datapaths.values():
        datapath.close()
    net.datapaths.clear()
    if net._fabric_nl is not None:
        net._fabric_nl.close()
        net._fabric_nl = None
    if net.mount_template is not None:
        net.mount_template.close()
        net.mount_template = None
    if net._exec_server is not None:
        net._exec_server.close()
        net._exec_server = None
    if log.isEnabledFor(logging.DEBUG):  # what goes, newest first (-v debug)
        for rec in reversed([r for r in state.live_objects() if r["kind"] != "info"]):
            what = " ".join(f"{k}={v}" for k, v in rec.items() if k != "kind")
            log.debug("run %s: removing %s %s", state.run_id, rec["kind"], what)
    problems = remove_recorded(state, ending=ending)
    for p in problems:
        log.error("run %s: teardown: %s", state.run_id, p)
    state.close(remove=not problems)
    net.forget()


def remove_node(net: Network, node: Node) -> None:
    """Take ``node`` out of the running network ``net``: its links go (the ends in
    other nodes deleted, switches told first), its processes end, and the objects the
    run recorded as the node's (its namespace, cgroups, shell, host-namespace
    interfaces, interfaces lent to it) are removed newest first, each marked gone.
    Its name is free again. A switch, or a node of another backend than network
    namespaces or containers, cannot be taken out alone: they go with the network."""
    state = net._state
    if state is None or net.nodes.get(node.name) is not node:
        return
    alone = ("netns", "container")
    if node.kind == "switch" or node.backend.kind not in alone or node.name in net.fastpath:
        raise UnsupportedError(
            f"removing {node.kind} {node.name} from a running network",
            f"node {node.name}",
            "stop the network instead",
        )
    for link in [lk for lk in net.links if node in (lk.intf1.node, lk.intf2.node)]:
        _drop_link(net, link, node)
    names = {i.name for i in node.intfs.values()}
    shell = node._shell.pid if node._shell is not None else None
    cgroup_dirs = set(node._cgroups or ())
    owned = getattr(node.backend, "owned", None)
    extra: list[tuple[str, str, object]] = owned(node) if owned is not None else []
    node.kill_processes()
    node.close()
    own_ns = net.ns_name(node.name) if node.netns is not None else None
    mine = [
        rec
        for rec in state.live_objects()
        if _owned_by(rec, own_ns, names, cgroup_dirs, shell)
        or any(rec.get("kind") == kind and rec.get(key) == value for kind, key, value in extra)
    ]
    problems = remove_recorded(state, mine)
    node.intfs.clear()
    node.netns = None
    del net.nodes[node.name]
    net.spec.nodes.pop(node.name, None)
    if problems:
        raise KernelError(f"{node.name}: removing it: {'; '.join(problems)}")


def _owned_by(
    rec: dict[str, Any],
    own_ns: str | None,
    names: set[str],
    cgroup_dirs: set[str],
    shell: int | None,
) -> bool:
    """Whether a record of the run is one of the node's objects."""
    kind = rec.get("kind")
    if kind == "netns":
        return own_ns is not None and rec.get("name") == own_ns
    if kind == "cgroup":
        return rec.get("path") in cgroup_dirs
    if kind == "process":
        return shell is not None and rec.get("pid") == shell
    if kind == "link":  # its interfaces in the host's namespace (macvlans: in its own)
        where = rec.get("netns")
        return (where == own_ns) if where else own_ns is None and rec.get("ifname") in names
    if kind == "hostintf":  # a host interface lent to it: given back first
        return own_ns is not None and rec.get("netns") == own_ns
    return False


def _drop_link(net: Network, link: Link, node: Node) -> None:
    """Delete a link of a node being removed: the switch at the other end is told, the
    other end deleted (a veth pair goes with it; an engine link's tap would outlive
    the node's namespace), and the network forgets the link."""
    for intf in (link.intf1, link.intf2):
        if intf.node is node:
            continue
        peer = intf.node
        with contextlib.suppress(FidelnetError, OSError):
            peer.port_removed(intf)
        with contextlib.suppress(FidelnetError, OSError):
            peer.netlink().delete_link(intf.index)
        if peer.intfs.get(intf.port) is intf:
            del peer.intfs[intf.port]
    with contextlib.suppress(FidelnetError, OSError):
        link.driver.remove()
    net.forget_link(link)
