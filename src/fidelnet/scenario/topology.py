"""A scenario's topology as a :class:`~fidelnet.topology.spec.TopologySpec`.

Pure: builders from :mod:`fidelnet.topology.builders`, then the scenario's own
nodes and links, link parameters parsed with
:func:`fidelnet.links.params.parse_params`. Nothing touches the kernel; only trace
files named by links are read when the topology is validated.

Order and precedence:

1. the builder's nodes and links (a ``line`` turns ``auto_routes`` on);
2. ``seed``, ``link_backend``, ``engine_endpoint``, ``ip_base``, ``auto_routes``
   (when given), ``auto_static_arp`` and ``fastpath``;
3. ``defaults.link`` under every link's parameters, the builder's links included;
4. the scenario's nodes (a name the builder already made is a problem), then its
   links, after the builder's.

:func:`spec_problems` runs :func:`fidelnet.topology.validate.problems` and maps each
problem's field (``links[7].params.delay``) back to the scenario key it came from
(``topology.links[1].params.delay``, or ``topology.defaults.link.delay`` when the
value came from the defaults, or ``topology.builder`` for what the builder made).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path as FsPath
from typing import TYPE_CHECKING

from fidelnet.errors import ValidationError
from fidelnet.scenario import model_vt
from fidelnet.scenario.errors import NO_VALUE, Path, Problem
from fidelnet.topology.spec import (
    ContainerSpec,
    ControllerSpec,
    ExternalSpec,
    LinkParams,
    LinkSpec,
    NodeBackendKind,
    NodeSpec,
    OpenFlowSpec,
    SriovSpec,
    TopologySpec,
    VMSpec,
)
from fidelnet.topology.validate import problems as topology_problems

if TYPE_CHECKING:
    from fidelnet.scenario.model import LinkParamsModel, OpenFlow, Scenario
    from fidelnet.scenario.model_topology import VM, Node

__all__ = ["Built", "build", "spec_problems"]


@dataclass
class Built:
    """A scenario's topology and what is needed to place its problems."""

    spec: TopologySpec
    builder_nodes: frozenset[str] = frozenset()
    builder_links: int = 0
    builder_flows: int = 0
    builder_ok: bool = True
    problems: list[Problem] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return list(self.spec.nodes)


def _params(model: LinkParamsModel | None, base_dir: FsPath | None) -> LinkParams | None:
    if model is None:
        return None
    params = model.to_params()
    if params.trace is not None and base_dir is not None:
        trace = FsPath(params.trace).expanduser()
        if not trace.is_absolute():
            params = replace(params, trace=str(base_dir / trace))
    return params


def _openflow(of: OpenFlow | None) -> OpenFlowSpec | None:
    if of is None:
        return None
    return OpenFlowSpec(
        protocols=tuple(of.protocols) if of.protocols is not None else None,
        fail_mode=of.fail_mode,
        dpid=of.dpid,
        controllers=tuple(of.controllers) if of.controllers is not None else None,
        in_band=of.in_band,
        reconnect_ms=of.reconnect_ms,
        datapath_type=of.datapath_type,
    )


def build(scenario: Scenario) -> Built:
    """The scenario's topology, with the problems found while building it (a builder
    that refuses its arguments, a node the builder already made)."""
    topo = scenario.topology
    base_dir = scenario.base_dir
    built = Built(TopologySpec())
    if topo.builder is not None:
        try:
            built.spec = topo.builder.build()
        except ValidationError as exc:
            built.builder_ok = False
            built.problems.append(
                Problem.from_error(exc, ("topology", "builder", topo.builder.kind))
            )
        built.builder_nodes = frozenset(built.spec.nodes)
        built.builder_links = len(built.spec.links)
    spec = built.spec
    spec.seed = scenario.seed
    spec.link_backend = topo.link_backend
    spec.hardware_pairs = [(p[0], p[1]) for p in topo.hardware.pairs]
    spec.external = [
        ExternalSpec(x.node, x.interface, x.mode, x.name, x.ip) for x in topo.hardware.external
    ]
    spec.sriov = [SriovSpec((s.pfs[0], s.pfs[1]), s.vfs, s.vlan_base) for s in topo.hardware.sriov]
    built.builder_flows = len(spec.flows)
    spec.flows = spec.flows + [f.to_spec(i) for i, f in enumerate(topo.routing.flows)]
    spec.engine_endpoint = topo.engine_endpoint
    spec.engine_threads = topo.engine_threads
    spec.tdf, spec.tdf_auto = model_vt.to_spec(topo.tdf)
    spec.ipv6 = topo.ipv6
    spec.datapath = topo.datapath
    spec.controllers = [
        ControllerSpec(c.name, c.kind, c.port, ip=c.ip, node=c.node) for c in topo.controllers
    ]
    spec.ip_base = topo.ip_base
    if topo.auto_routes is not None:
        spec.auto_routes = topo.auto_routes
    spec.auto_static_arp = topo.auto_static_arp
    spec.fastpath = topo.fastpath
    base = _params(topo.defaults.link, base_dir) or LinkParams()
    for link in spec.links:
        link.params = base.merged(link.params)
    for name, node in topo.nodes.items():
        if name in built.builder_nodes:
            assert topo.builder is not None
            built.problems.append(
                Problem(
                    f"the {topo.builder.kind} builder already makes a node {name!r}; "
                    "a builder's nodes cannot be redefined: choose another name",
                    ("topology", "nodes", name),
                    value=name,
                    choices=_shown(sorted(built.builder_nodes)),
                )
            )
            continue
        spec.add_node(
            NodeSpec(
                name,
                kind=node.kind,
                ip=node.ip,
                mac=node.mac,
                default_route=node.default_route,
                cpu=node.cpu,
                cores=tuple(node.cores) if node.cores is not None else None,
                sched=node.sched,
                stp=node.stp,
                datapath=node.datapath,
                mld_snooping=node.mld_snooping,
                fastpath=node.fastpath,
                openflow=_openflow(node.openflow),
                backend=_backend(node),
                vm=_vm(node.vm),
                container=_container(node, base_dir),
            )
        )
    for own in topo.links:
        params = _params(own.params, base_dir)
        spec.add_link(
            LinkSpec(
                own.a,
                own.b,
                a_intf=own.a_intf,
                b_intf=own.b_intf,
                a_ip=own.a_ip,
                b_ip=own.b_ip,
                a_mac=own.a_mac,
                b_mac=own.b_mac,
                params=base.merged(params) if params is not None else base,
                params_ab=_params(own.params_ab, base_dir),
                params_ba=_params(own.params_ba, base_dir),
                backend=own.backend,
                endpoint=own.endpoint,
            )
        )
    return built


def _shown(names: list[str], limit: int = 12) -> tuple[str, ...]:
    return tuple(names[:limit]) + (("...",) if len(names) > limit else ())


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _split_field(text: str) -> list[str | int]:
    """``links[3].params.loss.p`` as ``["links", 3, "params", "loss", "p"]``."""
    return [int(index) if index else name for name, index in _PART.findall(text)]


def scenario_path(scenario: Scenario, built: Built, spec_field: str) -> tuple[Path, str]:
    """Where in the scenario a topology field comes from, and a prefix for the message
    when it names something the builder made."""
    parts = _split_field(spec_field)
    topo = scenario.topology
    builder: Path = ("topology", "builder", topo.builder.kind) if topo.builder else ("topology",)
    if not parts:
        return ("topology",), ""
    head = parts[0]
    if head == "nodes" and len(parts) >= 2:
        name = str(parts[1])
        rest = [p for p in parts[2:] if p != "name"]
        if name in topo.nodes:
            return ("topology", "nodes", name, *rest), ""
        return builder, f"node {name} (made by the builder): "
    if head == "links" and len(parts) >= 2 and isinstance(parts[1], int):
        index, rest = parts[1], parts[2:]
        if index < built.builder_links:
            link = built.spec.links[index]
            return builder, f"link {link.a}-{link.b} (made by the builder): "
        own = index - built.builder_links
        if rest and str(rest[0]).startswith("params") and len(rest) >= 2:
            attr, name = str(rest[0]), str(rest[1])
            mine = getattr(topo.links[own], attr)
            defaults = topo.defaults.link
            in_link = mine is not None and getattr(mine, name) is not None
            if not in_link and defaults is not None and getattr(defaults, name) is not None:
                return ("topology", "defaults", "link", *rest[1:]), ""
        return ("topology", "links", own, *rest), ""
    if head == "hardware_pairs":
        return ("topology", "hardware", "pairs", *parts[1:]), ""
    if head == "external":
        return ("topology", "hardware", "external", *parts[1:]), ""
    if head == "sriov":
        return ("topology", "hardware", "sriov", *parts[1:]), ""
    if head == "flows" and len(parts) >= 2 and isinstance(parts[1], int):
        if parts[1] < built.builder_flows:
            return builder, f"{spec_field} (made by the builder): "
        own = parts[1] - built.builder_flows
        field = {"rate_bps": "rate"}.get(str(parts[2]), parts[2]) if len(parts) > 2 else None
        tail = (field, *parts[3:]) if field is not None else ()
        return ("topology", "routing", "flows", own, *tail), ""
    if head in (
        "ip_base",
        "link_backend",
        "engine_endpoint",
        "engine_threads",
        "tdf",
        "ipv6",
        "fastpath",
        "datapath",
    ):
        return ("topology", head), ""
    return ("topology",), f"{spec_field}: "


_LINK_REF = re.compile(r"\blinks\[(\d+)\]")


def _link_name(built: Built, match: re.Match[str]) -> str:
    """``links[7]`` of the spec as the scenario names it."""
    index = int(match.group(1))
    if index >= built.builder_links:
        return f"topology.links[{index - built.builder_links}]"
    link = built.spec.links[index]
    return f"the builder's link {link.a}-{link.b}"


def _written(scenario: Scenario, path: Path) -> object:
    """The value at ``path`` as the scenario wrote it (``"1ms"``, not 0.001), if any."""
    value: object = scenario.model_dump(mode="json")
    for part in path:
        if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
            continue
        if not isinstance(value, dict) or part not in value:
            return NO_VALUE
        value = value[part]
    if isinstance(value, dict | list):
        return NO_VALUE
    return value


def spec_problems(scenario: Scenario, built: Built) -> list[Problem]:
    """:func:`fidelnet.topology.validate.problems` of the built topology, placed at the
    scenario keys they come from; one problem per place and message."""
    found: list[Problem] = []
    seen: set[tuple[Path, str]] = set()
    for exc in topology_problems(built.spec):
        path, prefix = scenario_path(scenario, built, exc.field)
        problem = Problem.from_error(exc, path, prefix)
        problem = replace(
            problem, message=_LINK_REF.sub(lambda m: _link_name(built, m), problem.message)
        )
        written = _written(scenario, path)
        if written is not NO_VALUE and problem.value is not NO_VALUE:
            problem = replace(problem, value=written)
        if (path, problem.message) in seen:
            continue
        seen.add((path, problem.message))
        found.append(problem)
    return found


def _backend(node: Node) -> NodeBackendKind:
    """``container`` when the node names an image and no backend."""
    if node.image is not None and "backend" not in node.model_fields_set:
        return "container"
    return node.backend


def _container(node: Node, base_dir: FsPath | None) -> ContainerSpec | None:
    if node.image is None and node.container is None:
        return None
    c = node.container
    image = node.image or ""
    for prefix in ("oci-archive:", "docker-archive:", "oci:", ""):
        rest = image[len(prefix) :]
        if image.startswith(prefix) and rest.startswith(("./", "../")) and base_dir is not None:
            image = prefix + str(base_dir / rest)
            break
    if c is None:
        return ContainerSpec(image=image)
    volumes = []
    for vol in c.volumes:
        host, sep, rest = vol.partition(":")
        if base_dir is not None and host and not host.startswith("/"):
            host = str(base_dir / host)
        volumes.append(host + sep + rest)
    return ContainerSpec(
        image=image,
        command=tuple(c.command) if c.command is not None else None,
        entrypoint=tuple(c.entrypoint) if c.entrypoint is not None else None,
        env=tuple(c.env.items()),
        volumes=tuple(volumes),
        workdir=c.workdir,
        user=c.user,
        privileged=c.privileged,
        cap_add=tuple(c.cap_add),
    )


def _vm(vm: VM | None) -> VMSpec | None:
    if vm is None:
        return None
    return VMSpec(
        cpus=vm.cpus,
        memory_mb=vm.memory,
        cpupin=tuple(vm.cpupin) if vm.cpupin is not None else None,
        kernel=vm.kernel,
        initrd=vm.initrd,
        image=vm.image,
        cmdline=vm.cmdline,
        accel=vm.accel,
        boot_timeout_s=vm.boot_timeout,
    )
