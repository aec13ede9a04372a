"""Scenario files: a topology, setup, traffic and pass/fail checks in one YAML file.

Read one with :func:`load` (or :func:`loads` for text); either returns a validated
:class:`Scenario` or raises :class:`ScenarioError` listing every problem as
``FILE:LINE:COL: path.to.field: message (got VALUE; valid: A, B)``. Nothing here
touches the kernel. The format is described in ``docs/scenarios.md``; its JSON
Schema, generated from the models, is ``schemas/scenario.schema.json``
(:func:`scenario_schema`).

>>> s = default_scenario()
>>> spec = s.topology_spec()  # a TopologySpec, as the builders make
>>> [t.name for t in s.traffic], [c.name for c in s.checks]
(['reach', 'load'], ['reachability-reach', 'loss-load', 'latency-load'])
"""

from __future__ import annotations

from typing import Any

from fidelnet.scenario.errors import Problem, ScenarioError
from fidelnet.scenario.load import default_scenario, dumps, load, loads
from fidelnet.scenario.model import (
    Check,
    CommandCheck,
    FileStep,
    GoodputCheck,
    Iperf,
    JainCheck,
    LatencyCheck,
    LossCheck,
    Ping,
    Pktgen,
    ReachabilityCheck,
    RunStep,
    Scenario,
    SetupStep,
    Traffic,
    ZeroLoss,
    ZeroLossRateCheck,
    parse_pps,
)


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files (see :mod:`fidelnet.scenario.schema`)."""
    from fidelnet.scenario.schema import scenario_schema as generate

    return generate()


__all__ = [
    "Check",
    "CommandCheck",
    "FileStep",
    "GoodputCheck",
    "Iperf",
    "JainCheck",
    "LatencyCheck",
    "LossCheck",
    "Ping",
    "Pktgen",
    "Problem",
    "ReachabilityCheck",
    "RunStep",
    "Scenario",
    "ScenarioError",
    "SetupStep",
    "Traffic",
    "ZeroLoss",
    "ZeroLossRateCheck",
    "default_scenario",
    "dumps",
    "load",
    "loads",
    "parse_pps",
    "scenario_schema",
]
