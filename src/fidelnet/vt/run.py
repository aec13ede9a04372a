"""Virtual time for a run (issue 11): the run's clock page, and what its nodes'
processes get to see it.

A network built with ``tdf`` (``Network(spec, tdf=4)``, ``TopologySpec.tdf``) has one
:class:`~fidelnet.vt.page.TimePage`, a file in the state directory recorded before it
exists, and every process started in one of its nodes (shells, ``cmd``, ``popen``,
their children) has the clock shim preloaded on it. ``Network.set_tdf`` changes the
factor for all of them at one instant.

Not there yet (docs/virtual-time.md): links that follow the TDF (so a dilated
topology's links must be unshaped for now: validation says so), VM nodes, kernel
timestamps, static binaries.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fidelnet.errors import StateError
from fidelnet.kernel.state import STATE_DIR
from fidelnet.vt.page import TimePage, check_tdf, shim_path

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["env", "open_page", "set_tdf"]


def open_page(net: Network) -> None:
    """The run's clock page, when its topology is dilated (recorded first)."""
    if net.spec.tdf is None or net.vt_page is not None:
        return
    shim_path()  # a clear error now rather than undilated programs later
    path = os.path.join(STATE_DIR, f"{net.run_id}-vt.page")
    net.state_record("file", path=path)
    net.vt_page = TimePage(path, net.spec.tdf)


def env(net: Network) -> dict[str, str]:
    """What a node's process gets in its environment for virtual time (nothing for an
    undilated run)."""
    page = net.vt_page
    if page is None:
        return {}
    return {"LD_PRELOAD": shim_path(), "FIDELNET_VT_PAGE": str(page.path)}


def set_tdf(net: Network, tdf: float) -> None:
    """Change the run's TDF now: every node's clocks go on from where they are."""
    value = check_tdf(tdf)
    if net.vt_page is None:
        raise StateError(
            "this run has no virtual time: build it with tdf (Network(spec, tdf=1.0) "
            "to change the factor later)"
        )
    net.vt_page.set_tdf(value)
    net.spec.tdf = value
