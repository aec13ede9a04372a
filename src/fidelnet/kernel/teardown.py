"""Removing what a run owns, newest first, from its state records.

The same function serves a normal stop, the rollback of a failed setup, and
``fidelnet clean`` for a run whose owner died. It removes only what the records
name, and checks each object is still the one recorded: a process by pid *and*
start time, a host-namespace interface by its ``fidelnet:<run id>`` alias.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
from collections.abc import Callable
from typing import Any

from fidelnet.errors import FidelnetError, StateError
from fidelnet.kernel import cgroups, hostintf, iptables, neigh, ns, sriov, state
from fidelnet.kernel.state import RunState, mark_for, process_matches

__all__ = ["remove_all"]

log = logging.getLogger("fidelnet")


def _process(rec: dict[str, Any], _run_id: str) -> None:
    pid, start = int(rec["pid"]), int(rec["start"])
    if not process_matches(pid, start):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def _cgroup(rec: dict[str, Any], _run_id: str) -> None:
    cgroups.kill_and_remove(str(rec["path"]))


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


def _info(_rec: dict[str, Any], _run_id: str) -> None:
    """A note in the state file (a link's backend), nothing to remove."""


_REMOVERS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "process": _process,
    "file": _file,
    "tree": _tree,
    "info": _info,
    "cgroup": _cgroup,
    "netns": _netns,
    "link": _link,
    "sysctl": _sysctl,
    "sysctl_add": _sysctl_add,
    "mount": _mount,
    "hostintf": hostintf.give_back,
    "sriov": sriov.release,
    "iptables": iptables.remove,
}


def remove_all(state: RunState, records: list[dict[str, Any]] | None = None) -> list[str]:
    """Remove every live object of the run, newest first; returns the problems met
    (each object is attempted even when an earlier one failed)."""
    problems = []
    objs = records if records is not None else state.live_objects()
    # Processes go first whatever their place: they may hold namespaces and cgroups.
    ordered = [r for r in reversed(objs) if r["kind"] == "process"]
    ordered += [r for r in reversed(objs) if r["kind"] != "process"]
    for rec in ordered:
        kind = rec["kind"]
        remover = _REMOVERS.get(kind)
        if remover is None:
            problems.append(f"unknown record kind {kind!r}")
            continue
        ident = {k: v for k, v in rec.items() if k != "kind"}
        try:
            remover(rec, state.run_id)
        except (OSError, FidelnetError) as exc:
            problems.append(f"{kind} {ident}: {exc}")
            continue
        state.gone(kind, **ident)
    return problems
