"""The scenario file format as pydantic models: topology, setup, traffic, checks.

A scenario declares a topology (a builder, nodes, links), setup steps run in nodes,
traffic (``pktgen``, ``iperf``, ``ping``, ``zero_loss``) and pass/fail checks on it.
The file format is documented in ``docs/scenarios.md``; this module, with the ones it
re-exports from, is its single source of truth, and ``schemas/scenario.schema.json``
is generated from it. The models live in:

- :mod:`fidelnet.scenario.fields`: quantities, names, argument lists, the base model;
- :mod:`fidelnet.scenario.model_topology`: the ``topology`` section;
- :mod:`fidelnet.scenario.model_steps`: ``setup`` and ``traffic``;
- :mod:`fidelnet.scenario.model_checks`: ``checks``;
- here: :class:`Scenario`, the whole file, and the checks across fields.

Import the models from here; each of those modules imports only the ones above it.

Every model forbids unknown keys and is strict about types (YAML ``"5"`` is not
the number 5). Quantities are kept as written (``"10kpps"``, ``"2s"``, ``"0.1%"``)
and checked when the model is built; typed properties give them in base units for
the runner: ``rate_pps``, ``duration_s``, ``max_ratio``, ``max_ns``, ``min_bps``...

Validating a :class:`Scenario` also checks what a single field cannot: names are
unique, every node, traffic and check a scenario refers to exists, a check fits its
traffic's type, and the topology (built with :mod:`fidelnet.topology`, no kernel)
passes :func:`fidelnet.topology.validate.problems`. Those problems are raised
together as one :class:`~fidelnet.scenario.errors.ScenarioError`. Read files with
:func:`fidelnet.scenario.load`, which adds line and column to every problem.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator

from fidelnet.scenario.errors import Path, Problem, ScenarioError
from fidelnet.scenario.fields import PPS_UNITS, Name, _Model, parse_pps
from fidelnet.scenario.limits import MAX_CHECKS, MAX_SETUP, MAX_TRAFFIC
from fidelnet.scenario.model_checks import (
    CHECK_TRAFFIC,
    CHECK_TYPES,
    REGRESSION_TRAFFIC,
    Check,
    CommandCheck,
    GoodputCheck,
    JainCheck,
    LatencyCheck,
    LossCheck,
    OutageCheck,
    ReachabilityCheck,
    RegressionCheck,
    ZeroLossRateCheck,
)
from fidelnet.scenario.model_events import ConditionModel, EventModel, event_problems
from fidelnet.scenario.model_hardware import External, Hardware, Sriov
from fidelnet.scenario.model_routing import Flow, RandomArgs, RandomFlows, Routing
from fidelnet.scenario.model_steps import (
    TRAFFIC_TYPES,
    FileSpec,
    FileStep,
    Iperf,
    Ping,
    Pktgen,
    RunStep,
    SetupStep,
    Traffic,
    ZeroLoss,
)
from fidelnet.scenario.model_topology import (
    BUILDERS,
    NODE_BACKENDS,
    VM,
    Builder,
    Container,
    Controller,
    Defaults,
    Link,
    LinkParamsModel,
    LossModel,
    Node,
    OpenFlow,
    Topology,
    TreeArgs,
)
from fidelnet.scenario.model_vt import AdaptiveTdf, TdfAuto
from fidelnet.topology.spec import TopologySpec

if TYPE_CHECKING:
    from fidelnet.scenario.topology import Built

__all__ = [
    "BUILDERS",
    "CHECK_TRAFFIC",
    "CHECK_TYPES",
    "NODE_BACKENDS",
    "PPS_UNITS",
    "TRAFFIC_TYPES",
    "VM",
    "AdaptiveTdf",
    "Builder",
    "Check",
    "CommandCheck",
    "ConditionModel",
    "Container",
    "Controller",
    "Defaults",
    "EventModel",
    "External",
    "FileSpec",
    "FileStep",
    "Flow",
    "GoodputCheck",
    "Hardware",
    "Iperf",
    "JainCheck",
    "LatencyCheck",
    "Link",
    "LinkParamsModel",
    "LossCheck",
    "LossModel",
    "Node",
    "OpenFlow",
    "OutageCheck",
    "Ping",
    "Pktgen",
    "RandomArgs",
    "RandomFlows",
    "ReachabilityCheck",
    "RegressionCheck",
    "Routing",
    "RunStep",
    "Scenario",
    "SetupStep",
    "Sriov",
    "TdfAuto",
    "Topology",
    "Traffic",
    "TreeArgs",
    "ZeroLoss",
    "ZeroLossRateCheck",
    "parse_pps",
]


# --- the scenario ---------------------------------------------------------------------------


class Scenario(_Model):
    """A whole scenario file. Build it with :func:`fidelnet.scenario.load` (positions in
    errors) or ``Scenario.model_validate(mapping)``; either raises
    :class:`~fidelnet.scenario.errors.ScenarioError` for problems across fields."""

    name: Name
    """What the scenario is called: letters, digits, ``_``, ``.``, ``-``."""
    description: str | None = None
    """Free text."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Seed of every link's random choices (loss, jitter); default: random, recorded."""
    repeat: Annotated[int, Field(ge=1)] = 1
    """Run the traffic and the checks this many times (default 1)."""
    topology: Topology
    """The network."""
    setup: list[SetupStep] = Field(default_factory=list, max_length=MAX_SETUP)
    """Steps run in order after the network is up, before the traffic."""
    traffic: list[Traffic] = Field(default_factory=list, max_length=MAX_TRAFFIC)
    """Measurements, run in order."""
    checks: list[Check] = Field(default_factory=list, max_length=MAX_CHECKS)
    """Pass/fail checks on the traffic's results and on commands."""

    _base_dir: FsPath | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_check(self, info: ValidationInfo) -> Scenario:
        context = info.context if isinstance(info.context, dict) else {}
        base = context.get("base_dir")
        self._base_dir = FsPath(base) if base is not None else None
        found = self.problems()
        if found:
            raise ScenarioError(found)
        return self

    # -- typed access ------------------------------------------------------------------------

    @property
    def base_dir(self) -> FsPath | None:
        """The directory relative trace files are read from (the scenario file's)."""
        return self._base_dir

    def traffic_named(self, name: str) -> Pktgen | Iperf | Ping | ZeroLoss:
        """The traffic called ``name``; KeyError if there is none."""
        for item in self.traffic:
            if item.name == name:
                return item
        raise KeyError(name)

    def topology_spec(self) -> TopologySpec:
        """The topology as a :class:`TopologySpec` (a new one each call; no I/O besides
        reading trace files). The scenario was validated, so this cannot fail."""
        from fidelnet.scenario.topology import build

        return build(self).spec

    # -- checks across fields ----------------------------------------------------------------

    def problems(self) -> list[Problem]:
        """Every problem across fields (no positions), names of checks filled in first."""
        from fidelnet.scenario.topology import build, spec_problems

        self._name_checks()
        conditions = self._condition_problems()
        built = build(self)
        found = list(built.problems) + conditions
        if not built.nodes and not built.problems:
            found.append(Problem("declares no nodes: give a builder or nodes", ("topology",)))
        found += _unique(self.traffic, "traffic")
        found += _unique(self.checks, "checks")
        if built.builder_ok:
            found += self._reference_problems(built)
        placed = {p.path for p in found}
        found += [p for p in spec_problems(self, built) if p.path not in placed]
        return found

    def _name_checks(self) -> None:
        taken = {c.name for c in self.checks if c.name is not None}
        for check in self.checks:
            if check.name is not None:
                continue
            base = check.default_name()
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}-{n}"
            taken.add(name)
            check.name = name

    def _condition_problems(self) -> list[Problem]:
        """Events that wait for a check by name get its condition (a ``command``
        check with a deadline), or a problem naming the checks there are."""
        found: list[Problem] = []
        commands = {c.key: c for c in self.checks if isinstance(c, CommandCheck)}
        for i, item in enumerate(self.traffic):
            for j, ev in enumerate(getattr(item, "events", ())):
                cond = ev.after
                if cond is None or cond.check is None:
                    continue
                path: Path = ("traffic", i, "events", j, "after", "check")
                check = commands.get(cond.check)
                if check is None:
                    others = [c.key for c in self.checks]
                    why = "only command checks can be waited for" if cond.check in others else ""
                    found.append(_unknown(path, cond.check, sorted(commands), "command check", why))
                    continue
                cond.take_from(check)
                if cond.wait is None:
                    found.append(
                        Problem(
                            f"check {cond.check!r} has no wait: give the deadline here or there",
                            (*path[:-1], "wait"),
                        )
                    )
        return found

    def _reference_problems(self, built: Built) -> list[Problem]:
        found: list[Problem] = []
        kinds = {name: node.kind for name, node in built.spec.nodes.items()}

        def node_ref(path: Path, name: str, runs: str | None = None) -> None:
            if name not in kinds:
                found.append(_unknown(path, name, list(kinds), "node"))
            elif runs is not None and kinds[name] == "switch":
                found.append(
                    Problem(
                        f"{name} is a switch; {runs} run in hosts and routers",
                        path,
                        value=name,
                    )
                )

        for i, link in enumerate(self.topology.links):
            for side in ("a", "b"):
                node_ref(("topology", "links", i, side), getattr(link, side))
        for i, step in enumerate(self.setup):
            node_ref(("setup", i, "node"), step.node, "setup steps")
        traffic_types: dict[str, str] = {}
        for i, item in enumerate(self.traffic):
            traffic_types.setdefault(item.name, item.type)
            for sub, name in item.nodes():
                node_ref(("traffic", i, *sub), name, "traffic sources and sinks")
            found += _pair_problems(("traffic", i), item)
            if isinstance(item, Pktgen):
                found += _event_problems(("traffic", i), item, built.spec)
        for i, check in enumerate(self.checks):
            if isinstance(check, CommandCheck):
                node_ref(("checks", i, "node"), check.node, "commands")
                continue
            found += _check_target(("checks", i), check, traffic_types, self)
        return found


def _event_problems(path: Path, item: Pktgen, spec: TopologySpec) -> list[Problem]:
    found = event_problems((*path, "events"), item.events, item.duration_s)
    links = {frozenset((lk.a, lk.b)) for lk in spec.links}
    names = sorted(f"{lk.a}-{lk.b}" for lk in spec.links)
    for sub, (a, b) in item.links():
        if frozenset((a, b)) not in links:
            found.append(_unknown((*path, *sub), f"{a}-{b}", names, "link"))
    return found


def _unknown(path: Path, name: str, known: list[str], what: str, why: str = "") -> Problem:
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
    message = f"unknown {what}" + (f" ({why})" if why else "")
    if close:
        message += f", did you mean {close[0]!r}?"
    shown = tuple(known[:12]) + (("...",) if len(known) > 12 else ())
    return Problem(message, path, value=name, choices=shown)


def _unique(items: list[Any], where: str) -> list[Problem]:
    found: list[Problem] = []
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        name = item.name
        if name in first:
            found.append(
                Problem(
                    f"duplicate name: {where}[{first[name]}] is already called {name!r}",
                    (where, i, "name"),
                    value=name,
                )
            )
        else:
            first[name] = i
    return found


def _pair_problems(path: Path, item: Pktgen | Iperf | Ping | ZeroLoss) -> list[Problem]:
    found: list[Problem] = []
    if isinstance(item, Pktgen | ZeroLoss) and item.src == item.dst:
        found.append(Problem("src and dst must be different nodes", (*path, "dst"), value=item.dst))
    pairs: list[list[str]] = []
    key = ""
    if isinstance(item, Iperf):
        pairs, key = item.pairs, "pairs"
    elif isinstance(item, Ping) and item.between != "all":
        pairs, key = item.between, "between"
    for j, pair in enumerate(pairs):
        if pair[0] == pair[1]:
            found.append(Problem("a pair needs two different nodes", (*path, key, j), value=pair))
    return found


def _check_target(
    path: Path, check: Any, traffic_types: dict[str, str], scenario: Scenario
) -> list[Problem]:
    name: str = check.traffic
    if name not in traffic_types:
        return [_unknown((*path, "traffic"), name, list(traffic_types), "traffic")]
    needed = CHECK_TRAFFIC[check.type]
    if isinstance(check, RegressionCheck):
        needed = REGRESSION_TRAFFIC[check.metric]
    if traffic_types[name] != needed:
        fitting = tuple(n for n, t in traffic_types.items() if t == needed)
        return [
            Problem(
                f"a {check.type} check needs {needed} traffic; {name!r} is "
                f"{traffic_types[name]} traffic",
                (*path, "traffic"),
                value=name,
                choices=fitting,
            )
        ]
    if isinstance(check, OutageCheck):
        target = scenario.traffic_named(name)
        assert isinstance(target, Pktgen)
        keys = [ev.key for ev in target.events]
        if not keys:
            return [Problem(f"{name!r} has no events to judge", (*path, "traffic"), value=name)]
        if check.event is not None and check.event not in keys:
            return [_unknown((*path, "event"), check.event, keys, "event")]
    if isinstance(check, GoodputCheck | JainCheck):
        target = scenario.traffic_named(name)
        assert isinstance(target, Iperf)
        if (
            isinstance(check, GoodputCheck)
            and check.flow is not None
            and check.flow >= target.flow_count
        ):
            return [
                Problem(
                    f"{name!r} has {target.flow_count} flow(s), numbered from 0",
                    (*path, "flow"),
                    value=check.flow,
                )
            ]
        if isinstance(check, JainCheck) and target.flow_count < 2:
            return [
                Problem(
                    f"a Jain index needs at least two flows; {name!r} has one",
                    (*path, "traffic"),
                    value=name,
                )
            ]
    return []
