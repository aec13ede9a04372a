"""Removing what a run owns, newest first, from its state records.

The same function serves a normal stop, the rollback of a failed setup, and
``fidelnet clean`` for a run whose owner died. It removes only what the records
name, and checks each object is still the one recorded: a process by pid *and*
start time, a host-namespace interface by its ``fidelnet:<run id>`` alias.

It returns when what it removed is gone: every process it ended (the recorded ones,
and every member of the run's cgroups, zombies included) has exited and been
reaped (:mod:`fidelnet.kernel.procwait`), and no namespace, interface, cgroup, file
or mount it removed is still visible. A process still there at the bound, or an
object still visible, is a problem it returns, one line each.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable
from typing import Any

from fidelnet.errors import FidelnetError, StateError
from fidelnet.kernel import cgroups, hostintf, iptables, neigh, ns, procwait, sriov, state
from fidelnet.kernel.state import RunState, mark_for

__all__ = ["remove_all"]

log = logging.getLogger("fidelnet")


def _process(rec: dict[str, Any], _run_id: str, ending: procwait.Ending) -> None:
    """A recorded process (and its group when it leads one): killed if it is still
    the one recorded, and held to wait for."""
    ending.kill(int(rec["pid"]), int(rec["start"]), group=True)


def _cgroup(rec: dict[str, Any], _run_id: str, ending: procwait.Ending) -> None:
    """Every process in it killed and held to wait for, then the directory removed."""
    cgroups.kill_and_remove(str(rec["path"]), seen=ending.track)


def _netns(rec: dict[str, Any], _run_id: str) -> None:
    ns.delete(str(rec["name"]))


def _link(rec: dict[str, Any], run_id: str) -> None:
    from fidelnet.kernel.netlink import Netlink

    nl = Netlink(None)
    try:
        idx = nl.index_or_none(str(rec["ifname"]))
        if idx is None:
            return
        if nl.link_info(idx).get("alias") != mark_for(run_id):
            log.warning("%s: not marked as owned by run %s; left alone", rec["ifname"], run_id)
            return
        nl.delete_link(idx)
    finally:
        nl.close()


def _sysctl(rec: dict[str, Any], _run_id: str) -> None:
    with open(str(rec["path"]), "w", encoding="ascii") as f:
        f.write(str(rec["old"]))


def _sysctl_add(rec: dict[str, Any], _run_id: str) -> None:
    """A limit the run raised by ``delta`` (:mod:`fidelnet.kernel.neigh`): lowered by
    as much, whatever other runs did meanwhile."""
    neigh.undo(str(rec["path"]), int(rec["delta"]))


def _file(rec: dict[str, Any], _run_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(str(rec["path"]))


def _tmpdir(rec: dict[str, Any], run_id: str) -> None:
    """A measurement's scratch directory (:mod:`fidelnet.measure.workdir`): only ever
    a real directory named for the run, ``fidelnet-<run id>-...``."""
    path = str(rec["path"])
    if not os.path.basename(path).startswith(f"fidelnet-{run_id}-") or os.path.islink(path):
        raise StateError(f"refusing to remove {path}: not a scratch directory of run {run_id}")
    shutil.rmtree(path, ignore_errors=True)


def _tree(rec: dict[str, Any], _run_id: str) -> None:
    """A directory of the run's own (OVS's database and sockets), only ever one
    directly under the state directory."""
    path = os.path.realpath(str(rec["path"]))
    home = os.path.realpath(state.STATE_DIR)
    if os.path.dirname(path) != home:
        raise StateError(f"refusing to remove {path}: not a run directory in {home}")
    shutil.rmtree(path, ignore_errors=True)


def _mount(rec: dict[str, Any], _run_id: str) -> None:
    """A private bpffs (the fast path's pins): unmounted if it still is one."""
    from fidelnet.kernel import xdp

    xdp.umount_bpffs(str(rec["path"]))


def _container(rec: dict[str, Any], _run_id: str) -> None:
    """A container node's container (:mod:`fidelnet.nodes.container`): deleted by the
    run's own crun state directory and its id, never by name in the user's."""
    from fidelnet.kernel import oci

    root = os.path.realpath(str(rec["root"]))
    if os.path.dirname(root) != os.path.realpath(state.STATE_DIR):
        raise StateError(f"refusing crun state {root}: not a run directory")
    oci.delete(root, str(rec["id"]))


def _overlay(rec: dict[str, Any], _run_id: str) -> None:
    """A container node's root file system: unmounted if it still is mounted."""
    from fidelnet.kernel import oci

    oci.umount(str(rec["path"]))


def _info(_rec: dict[str, Any], _run_id: str) -> None:
    """A note in the state file (a link's backend), nothing to remove."""


_ENDERS: dict[str, Callable[[dict[str, Any], str, procwait.Ending], None]] = {
    "process": _process,
    "cgroup": _cgroup,
}
"""Kinds whose removal ends processes."""

_REMOVERS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "file": _file,
    "tree": _tree,
    "tmpdir": _tmpdir,
    "info": _info,
    "netns": _netns,
    "link": _link,
    "sysctl": _sysctl,
    "sysctl_add": _sysctl_add,
    "mount": _mount,
    "overlay": _overlay,
    "container": _container,
    "hostintf": hostintf.give_back,
    "sriov": sriov.release,
    "iptables": iptables.remove,
}


def remove_all(
    state: RunState,
    records: list[dict[str, Any]] | None = None,
    *,
    ending: procwait.Ending | None = None,
    exit_timeout: float = procwait.EXIT_TIMEOUT,
    whole_run: bool | None = None,
) -> list[str]:
    """Remove every live object of the run (or ``records``, some of them), newest
    first, and wait until what was removed is gone (processes at most
    ``exit_timeout`` seconds); returns the problems met (each object is attempted
    even when an earlier one failed). ``ending`` holds the processes ended, the ones
    a caller ended before included; its
    :attr:`~fidelnet.kernel.procwait.Ending.waited` says how the wait went.

    With ``whole_run`` (the default without ``records``) every process ever in the
    run's cgroup tree is waited for, whatever the records still list: a teardown
    killed after it removed the cgroups but before their zombies were reaped leaves
    no record of them."""
    problems = []
    objs = records if records is not None else state.live_objects()
    # Processes go first whatever their place: they may hold namespaces and cgroups.
    ordered = [r for r in reversed(objs) if r["kind"] == "process"]
    ordered += [r for r in reversed(objs) if r["kind"] != "process"]
    ending = ending if ending is not None else procwait.Ending()
    ended: list[dict[str, Any]] = []  # process records: gone once the wait says so
    removed: list[dict[str, Any]] = []
    try:
        for rec in ordered:
            kind = rec["kind"]
            ender = _ENDERS.get(kind)
            remover = _REMOVERS.get(kind)
            if remover is None and ender is None:
                problems.append(f"unknown record kind {kind!r}")
                continue
            ident = {k: v for k, v in rec.items() if k != "kind"}
            try:
                if ender is not None:
                    ender(rec, state.run_id, ending)
                elif remover is not None:
                    remover(rec, state.run_id)
            except (OSError, FidelnetError) as exc:
                problems.append(f"{kind} {ident}: {exc}")
                continue
            if kind == "process":
                ended.append(rec)
                continue
            state.gone(kind, **ident)
            removed.append(rec)
        # Members of the run's cgroups that exited before (or while) they were
        # listed: zombies whose parent died with the run, which PID 1 reaps later.
        whole = records is None if whole_run is None else whole_run
        ending.track_cgroup_members(_v2_paths(removed, state.run_id, whole))
        waited = ending.wait(exit_timeout)
    finally:
        ending.close()
    stuck = {s.pid for s in waited.stragglers}
    problems += [s.line() for s in waited.stragglers]
    for rec in ended:
        if int(rec["pid"]) not in stuck:
            state.gone("process", **{k: v for k, v in rec.items() if k != "kind"})
    problems += still_there(removed, state.run_id)
    return problems


def _v2_paths(removed: list[dict[str, Any]], run_id: str, whole_run: bool) -> set[str]:
    """The run's removed cgroups in the unified hierarchy, relative to its mount (as
    ``/proc/PID/cgroup`` names them); with ``whole_run``, its whole tree."""
    dirs = [str(r["path"]) for r in removed if r["kind"] == "cgroup"]
    if not dirs and not whole_run:
        return set()
    unified = cgroups.detect().unified
    if unified is None:
        return set()
    root = unified.rstrip("/")
    out = {d[len(root) :] for d in dirs if d.startswith(root + "/")}
    if whole_run:  # the tree cgroups.CgroupFS.node_dirs makes for the run
        out.add(f"/fidelnet-{run_id}")
    return out


def still_there(removed: list[dict[str, Any]], run_id: str) -> list[str]:
    """Objects removed that the kernel still shows: one line each."""
    out = []
    links = []
    for rec in removed:
        kind, where = rec["kind"], str(rec.get("path") or rec.get("name") or "")
        if kind == "netns" and os.path.lexists(ns.path_of(where)):
            out.append(f"netns {where}: still at {ns.path_of(where)} after removal")
        elif kind == "cgroup" and os.path.isdir(where):
            out.append(f"cgroup {where}: still exists after removal")
        elif kind in ("file", "tree", "tmpdir") and os.path.lexists(where):
            out.append(f"{kind} {where}: still exists after removal")
        elif kind in ("mount", "overlay") and os.path.ismount(where):
            out.append(f"mount {where}: still mounted after removal")
        elif kind == "link":
            links.append(str(rec["ifname"]))
    if links:
        from fidelnet.kernel.netlink import Netlink

        nl = Netlink(None)
        try:
            for name in links:
                idx = nl.index_or_none(name)
                if idx is not None and nl.link_info(idx).get("alias") == mark_for(run_id):
                    out.append(f"link {name}: still in the host namespace after removal")
        finally:
            nl.close()
    return out
