"""Flows with their own paths and random topologies in a scenario file (HVNet).

``topology.routing.flows`` lists flows routed by path (per-flow policy routing,
:mod:`fidelnet.topology.flows`); ``topology.builder.random`` makes a seeded random
topology, with random flows if asked (:mod:`fidelnet.topology.randomnet`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from fidelnet.scenario.fields import Name, NodeName, Rate, _Model
from fidelnet.topology import randomnet
from fidelnet.topology.spec import FlowSpec, TopologySpec
from fidelnet.topology.units import parse_rate

__all__ = ["Flow", "RandomArgs", "RandomFlows", "Routing"]

_Range = Annotated[list[Annotated[float, Field(ge=0)]], Field(min_length=2, max_length=2)]


class Flow(_Model):
    """A flow whose packets take ``path``, whatever the destination routes say."""

    name: Name | None = None
    """Its name (default ``flow<N>``, N its place in the list from 1)."""
    path: Annotated[list[NodeName], Field(min_length=2, max_length=256)]
    """Nodes from source to destination, each linked to the next; the inner ones routers."""
    port: Annotated[int, Field(ge=1, le=65535)]
    """The destination port that marks the flow's packets (one flow per port)."""
    protocol: Literal["udp", "tcp"] = "udp"
    """``udp`` (default) or ``tcp``."""
    rate: Rate | None = None
    """Its rate, for traffic generators: ``100Mbit``."""
    size: Annotated[int, Field(ge=28, le=9000)] | None = None
    """Bytes per packet (the IP packet), for traffic generators."""

    def to_spec(self, index: int) -> FlowSpec:
        rate = parse_rate("rate", self.rate) if self.rate is not None else None
        return FlowSpec(
            self.name or f"flow{index + 1}",
            tuple(self.path),
            self.port,
            self.protocol,
            rate,
            self.size,
        )


class Routing(_Model):
    """Routing beyond destination routes."""

    flows: Annotated[list[Flow], Field(max_length=10_000)] = Field(default_factory=list)
    """Flows routed by their own path (``ip rule`` on protocol and destination port)."""


class RandomFlows(_Model):
    """Random flows along random simple paths of the random topology."""

    count: Annotated[int, Field(ge=0, le=10_000)] = 10
    """How many."""
    hops: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2, max_length=2)] = [2, 5]
    """The range of links per path: ``[2, 5]`` (HVNet's)."""
    rate_mbps: _Range = [1.0, 294.0]
    """The range of per-flow rates in Mbit/s (HVNet's 1-294)."""
    size: Annotated[int, Field(ge=28, le=9000)] = 363
    """Bytes per packet (HVNet's 363)."""
    base_port: Annotated[int, Field(ge=1, le=65535)] = 10_000
    """The first flow's UDP destination port; the others follow."""


class RandomArgs(_Model):
    """A seeded random topology of routers joined directly (no switches)."""

    nodes: Annotated[int, Field(ge=2, le=randomnet.MAX_RANDOM_NODES)]
    """How many routers (``h1``..``hN``)."""
    seed: Annotated[int, Field(ge=0)] = 1
    """The same seed, the same topology and flows."""
    degree: Annotated[float, Field(ge=1)] = 2.5
    """Mean links per node (a spanning tree first: always connected)."""
    bw_mbps: _Range | None = None
    """Each link's rate drawn from this range, Mbit/s (default: unshaped)."""
    delay_ms: _Range | None = None
    """Each link's delay drawn from this range, ms (default: none)."""
    flows: RandomFlows | None = None
    """Random flows, routed by their paths."""

    def build(self) -> TopologySpec:
        spec = randomnet.random_topology(
            self.nodes,
            self.seed,
            self.degree,
            _pair(self.bw_mbps),
            _pair(self.delay_ms),
        )
        if self.flows is not None:
            f = self.flows
            spec.flows = randomnet.random_flows(
                spec,
                f.count,
                self.seed,
                (f.hops[0], f.hops[1]),
                (f.rate_mbps[0], f.rate_mbps[1]),
                f.size,
                f.base_port,
            )
        return spec


def _pair(value: list[float] | None) -> tuple[float, float] | None:
    return (value[0], value[1]) if value is not None else None
