"""The machine's own interfaces in a scenario file (``topology.hardware``): interface
pairs for hardware links, SR-IOV VFs the run makes, and real interfaces given to
nodes (docs/hwlinks.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from fidelnet.scenario.fields import NodeName, _Model

__all__ = ["External", "Hardware", "Sriov"]


class Sriov(_Model):
    """SR-IOV VFs the run makes on two cabled PFs, VF i of both on VLAN ``vlan_base + i``."""

    pfs: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=15)]], Field(min_length=2, max_length=2)
    ]
    """The two physical functions: ``[enp100s0f0, enp33s0f0]``."""
    vfs: Annotated[int, Field(ge=1, le=256)]
    """VFs on each."""
    vlan_base: Annotated[int, Field(ge=1, le=4094)] = 100
    """VLAN id of VF 0 (VF i gets ``vlan_base + i``)."""


class External(_Model):
    """A real interface of this machine given to a node (an external load generator)."""

    node: NodeName
    """The host or router that gets it."""
    interface: Annotated[str, Field(min_length=1, max_length=15)]
    """The machine's interface: ``eth1``."""
    mode: Literal["macvlan", "lend"] = "macvlan"
    """``macvlan`` (the host keeps the interface) or ``lend`` (moved in, given back)."""
    name: Annotated[str, Field(min_length=1, max_length=15)] | None = None
    """Its name in the node (default ``<node>-ext<i>``)."""
    ip: str | None = None
    """Its address, CIDR."""


class Hardware(_Model):
    """This machine's interfaces for hardware links (docs/hwlinks.md)."""

    pairs: Annotated[
        list[
            Annotated[
                list[Annotated[str, Field(min_length=1, max_length=15)]],
                Field(min_length=2, max_length=2),
            ]
        ],
        Field(max_length=4096),
    ] = Field(default_factory=list)
    """Pairs of interfaces joined by a cable (or SR-IOV VFs on one VLAN):
    ``[[enp1s0f0v0, enp2s0f0v0], ...]``; each link with backend ``hw`` takes the next
    free one, its first interface for the link's ``a`` node."""
    external: Annotated[list[External], Field(max_length=256)] = Field(default_factory=list)
    """Real interfaces given to nodes, for traffic that enters and leaves the emulation."""
    sriov: Annotated[list[Sriov], Field(max_length=16)] = Field(default_factory=list)
    """SR-IOV VFs made for the run (reverted at its end); their pairs join the pool
    after ``pairs``."""
