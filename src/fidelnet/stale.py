"""A name in the host's namespace that a new run needs and finds taken.

fidelnet adds nothing to the host's namespace except the ends of links to nodes that
share it (Mininet's ``Node('root', inNamespace=False)``, sshd.py and controlnet.py's
``root-eth0``), named as the script names them and marked ``fidelnet:<run id>``. A
run killed with SIGKILL leaves such an interface behind, and the next run of the same
script needs its name. :func:`clear_host_name` finds out whose it is, before anything
is made:

- a stale run's (its mark, or failing that its records, name a run whose owning
  process is gone): that run is cleaned first, from its own records, as ``fidelnet
  clean`` would, and one warning line says so;
- a live run's: an error naming the run and its process;
- anything else: an error naming the interface and how to free the name. Nothing
  fidelnet does not own is removed.
"""

from __future__ import annotations

import logging

from fidelnet.errors import KernelError
from fidelnet.kernel.netlink import Netlink
from fidelnet.kernel.state import RunInfo, RunState, list_runs, live_objects
from fidelnet.kernel.teardown import remove_all

__all__ = ["clear_host_name"]

log = logging.getLogger("fidelnet")

_MARK = "fidelnet:"


def _alias(ifname: str) -> str | None:
    """The alias of ``ifname`` in the host's namespace ("" when it has none), or None
    when there is no such interface."""
    nl = Netlink(None)
    try:
        idx = nl.index_or_none(ifname)
        if idx is None:
            return None
        return str(nl.link_info(idx).get("alias") or "")
    finally:
        nl.close()


def _recorded_by(ifname: str, runs: list[RunInfo]) -> RunInfo | None:
    """A stale run whose records list ``ifname`` (killed after recording it, before
    marking it)."""
    for run in runs:
        if run.alive:
            continue
        if any(
            o.get("kind") == "link" and o.get("ifname") == ifname for o in live_objects(run.path)
        ):
            return run
    return None


def clear_host_name(ifname: str, run_id: str) -> None:
    """Make sure run ``run_id`` can create ``ifname`` in the host's namespace: free it
    when a stale fidelnet run left it, else raise a one-line :class:`KernelError`
    saying whose it is and what to do."""
    alias = _alias(ifname)
    if alias is None:
        return
    runs = list_runs()
    owner = alias[len(_MARK) :] if alias.startswith(_MARK) else None
    run = next((r for r in runs if r.run_id == owner), None) if owner else None
    if owner is None:
        run = _recorded_by(ifname, runs)
    where = f"{ifname}: an interface of this name is already in the host's namespace"
    if owner == run_id:
        raise KernelError(f"{where}, made by this run; give the link's end another name")
    if run is None:
        whose = (
            f"marked as fidelnet run {owner}'s, a run with no state left"
            if owner
            else ("and it is not fidelnet's")
        )
        raise KernelError(f"{where}, {whose}; free the name (ip link del {ifname}) or rename it")
    if run.alive:
        raise KernelError(
            f"{where}: it is fidelnet run {run.run_id}'s, which is running "
            f"(pid {run.owner_pid}: {run.command}); stop that run first"
        )
    log.warning(
        "%s: left in the host's namespace by fidelnet run %s, whose process (pid %d) is "
        "gone: cleaning that run first",
        ifname,
        run.run_id,
        run.owner_pid,
    )
    state = RunState.open_existing(run.path)
    problems = remove_all(state, live_objects(run.path))
    state.close(remove=not problems)
    if problems:
        raise KernelError(
            f"{where}: cleaning stale run {run.run_id} did not free it ({problems[0]}); "
            "run `fidelnet clean`"
        )
    if _alias(ifname) is not None:  # recorded, never marked: maybe not the run's own
        raise KernelError(
            f"{where}, unmarked (stale run {run.run_id} was cleaned; it may have been "
            f"killed while making it); free the name: ip link del {ifname}"
        )
