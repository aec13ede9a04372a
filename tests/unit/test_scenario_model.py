"""Scenario files: the models, typed values in base units, the topology they build,
problems collected across the file, and ``fidelnet validate``."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import get_args

import pytest
from click.testing import CliRunner

from fidelnet.cli.validate import validate
from fidelnet.errors import FidelnetError, UnitError, ValidationError
from fidelnet.fastpath import wanted
from fidelnet.links.params import PARAM_NAMES
from fidelnet.measure import pktgen
from fidelnet.scenario import (
    CommandCheck,
    FileStep,
    GoodputCheck,
    Iperf,
    LatencyCheck,
    LossCheck,
    Ping,
    Pktgen,
    Problem,
    ReachabilityCheck,
    RunStep,
    Scenario,
    ScenarioError,
    ZeroLoss,
    ZeroLossRateCheck,
    default_scenario,
    load,
    loads,
    parse_pps,
)
from fidelnet.scenario import model as m
from fidelnet.scenario.schema import schema_text
from fidelnet.scenario.topology import build, scenario_path
from fidelnet.topology.spec import (
    ENGINE_ENDPOINTS,
    FASTPATHS,
    JITTER_DISTS,
    LINK_BACKENDS,
    NODE_KINDS,
    QUEUE_KINDS,
    GilbertElliott,
)
from fidelnet.topology.validate import problems as topology_problems

GOOD = Path(__file__).parent / "data" / "scenarios" / "good"
BAD = Path(__file__).parent / "data" / "scenarios" / "bad"

TWO_HOSTS = """\
name: x
topology:
  nodes:
    h1: {}
    h2: {}
  links:
    - {a: h1, b: h2}
"""


# --- packet rates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pps"),
    [("10kpps", 1e4), ("1.5Mpps", 1.5e6), ("500pps", 500.0), (" 2 kpps ", 2e3), ("1e3pps", 1e3)],
)
def test_parse_pps(text: str, pps: float) -> None:
    assert parse_pps("rate", text) == pps


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("10", "a packet rate needs a unit"),
        ("10KPPS", "unknown packet-rate unit 'KPPS'"),
        ("10mpps", "unknown packet-rate unit 'mpps'"),
        ("fast", "not a number followed by a unit"),
        ("-5kpps", "must not be negative"),
        ("nankpps", "not a number followed by a unit"),
        ("1e999kpps", "must be a finite number"),
    ],
)
def test_parse_pps_refuses(text: str, problem: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_pps("rate", text)
    assert info.value.problem == problem
    assert info.value.field == "rate"


@pytest.mark.parametrize("value", [10, 2.5, True, None, [1]])
def test_parse_pps_refuses_non_text(value: object) -> None:
    with pytest.raises(UnitError, match="rate: "):
        parse_pps("rate", value)  # type: ignore[arg-type]


# --- the default scenario -------------------------------------------------------------------


def test_default_scenario() -> None:
    s = default_scenario()
    assert s.name == "default-line"
    spec = s.topology_spec()
    assert list(spec.nodes) == [*(f"h{i}" for i in range(1, 8)), "lg", "rx"]
    assert {n.kind for n in spec.routers()} == {"router"} and len(spec.routers()) == 7
    assert [n.name for n in spec.hosts()] == ["lg", "rx"]
    assert spec.auto_routes and spec.seed == 1
    assert [(link.a, link.b) for link in spec.links[-2:]] == [("lg", "h1"), ("h7", "rx")]
    assert topology_problems(spec) == []
    reach, load_ = s.traffic
    assert isinstance(reach, Ping) and reach.between == "all"
    assert len(reach.pairs_in(spec)) == 9 * 8
    assert isinstance(load_, Pktgen)
    assert (load_.rate_pps, load_.duration_s, load_.size) == (10_000.0, 2.0, 64)
    load_.traffic_spec().check()
    assert [c.key for c in s.checks] == ["reachability-reach", "loss-load", "latency-load"]
    reach_check, loss, latency = s.checks
    assert isinstance(reach_check, ReachabilityCheck) and reach_check.max_loss_ratio == 0.0
    assert isinstance(loss, LossCheck) and loss.max_ratio == 0.0
    assert isinstance(latency, LatencyCheck)
    assert (latency.percentile, latency.max_ns) == (99.0, 5_000_000)


def test_default_scenario_is_the_bench_line_shape() -> None:
    from fidelnet.bench.line import topology

    spec, bench = default_scenario().topology_spec(), topology(7)
    assert sorted(spec.nodes) == sorted(bench.nodes)
    assert {k: n.kind for k, n in spec.nodes.items()} == {k: n.kind for k, n in bench.nodes.items()}
    edges = {frozenset((link.a, link.b)) for link in spec.links}
    assert edges == {frozenset((link.a, link.b)) for link in bench.links}


# --- the good files -------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(GOOD.glob("*.yaml")), ids=lambda p: p.name)
def test_good_files_load(path: Path) -> None:
    scenario = load(path)
    assert topology_problems(scenario.topology_spec()) == []
    assert scenario.base_dir == path.parent


def test_everything_typed_values() -> None:
    s = load(GOOD / "everything.yaml")
    assert (s.seed, s.repeat) == (7, 2)
    run, write = s.setup
    assert isinstance(run, RunStep) and run.run == ["sysctl", "-w", "net.ipv4.ip_forward=1"]
    assert (run.expect_exit, run.timeout_s) == (0, 5.0)
    assert isinstance(write, FileStep)
    assert (write.file.mode_bits, write.file.content) == (0o600, "key = value\n")

    reach = s.traffic_named("reach")
    assert isinstance(reach, Ping)
    assert reach.pairs_in(s.topology_spec()) == [("a1", "r1"), ("h1", "h3")]
    assert (reach.count, reach.interval_s, reach.timeout_s) == (2, 0.1, 1.0)
    load_ = s.traffic_named("load")
    assert isinstance(load_, Pktgen)
    spec = load_.traffic_spec()
    assert (spec.rate_pps, spec.size, spec.pattern, spec.burst, spec.flows, spec.seed) == (
        10_000.0,
        128,
        "burst",
        50,
        4,
        9,
    )
    bulk = s.traffic_named("bulk")
    assert isinstance(bulk, Iperf)
    assert (bulk.duration_s, bulk.warmup_s, bulk.interval_s) == (6.0, 2.0, 0.5)
    assert (bulk.window_bytes, bulk.apply_window, bulk.flow_count) == (None, True, 4)
    assert bulk.flow_pairs == [("h1", "h3"), ("h2", "h4")]
    fixed = s.traffic_named("fixed")
    assert isinstance(fixed, Iperf)
    assert (fixed.window_bytes, fixed.apply_window, fixed.warmup_s) == (256 * 1024, False, None)
    ndr = s.traffic_named("ndr")
    assert isinstance(ndr, ZeroLoss)
    assert (ndr.low_pps, ndr.high_pps, ndr.trial_s, ndr.resolution_pps) == (1e4, 5e5, 1.0, 5e3)
    assert math.isclose(ndr.pdr_loss_ratio, 0.005)
    with pytest.raises(KeyError):
        s.traffic_named("nothing")

    by_name = {c.key: c for c in s.checks}
    assert list(by_name) == [
        "reachability-reach",
        "no-loss",
        "latency-load",
        "latency-load-2",
        "goodput-bulk",
        "goodput-bulk-2",
        "jain-bulk",
        "zero_loss_rate-ndr",
        "zero_loss_rate-ndr-2",
        "command-r1",
        "command-a1",
    ]
    loss = by_name["no-loss"]
    assert isinstance(loss, LossCheck) and math.isclose(loss.max_ratio, 0.001)
    latency = by_name["latency-load-2"]
    assert isinstance(latency, LatencyCheck) and (latency.percentile, latency.max_ns) == (
        50.0,
        5_000_000,
    )
    goodput = by_name["goodput-bulk-2"]
    assert isinstance(goodput, GoodputCheck) and (goodput.min_bps, goodput.flow) == (20e6, 3)
    pdr = by_name["zero_loss_rate-ndr-2"]
    assert isinstance(pdr, ZeroLossRateCheck) and (pdr.min_pps, pdr.which) == (120e3, "pdr")
    route = by_name["command-r1"]
    assert isinstance(route, CommandCheck) and route.output_re is not None
    assert route.output_re.search("10.1.0.0/24 dev r1-eth0")
    cat = by_name["command-a1"]
    assert isinstance(cat, CommandCheck) and cat.exit_code is None and cat.output_re is None
    assert cat.timeout_s == 10.0


def test_everything_topology_spec() -> None:
    s = load(GOOD / "everything.yaml")
    spec = s.topology_spec()
    assert list(spec.nodes) == ["s1", "s2", "h1", "h2", "h3", "h4", "r1", "a1", "b1", "s3"]
    assert (spec.seed, spec.link_backend, spec.auto_static_arp) == (7, "auto", True)
    assert (spec.engine_endpoint, spec.fastpath) == ("tap", "xdp")
    r1 = spec.nodes["r1"]
    assert (r1.kind, r1.cpu, r1.cores, r1.sched) == ("router", 0.5, (0,), "cfs")
    assert r1.fastpath == "xdp" and spec.nodes["a1"].fastpath is None
    assert spec.nodes["b1"].kind == "host"
    assert spec.nodes["s3"].stp
    bottleneck = spec.links[0]  # the builder's, under the defaults
    assert (bottleneck.params.bw, bottleneck.params.delay) == (100e6, 0.001)
    own = spec.links[5]
    assert (own.a, own.b, own.b_ip, own.backend) == ("a1", "r1", "10.1.0.2/24", "engine")
    assert own.endpoint == "af_xdp"
    assert spec.links[6].endpoint is None and spec.links[0].endpoint is None
    assert (own.params.bw, own.params.delay, own.params.jitter) == (100e6, 0.005, 0.001)
    assert (own.params.jitter_dist, own.params.loss) == ("normal", 0.1)
    assert own.direction("a1").bw == 10e6
    assert own.direction("r1").loss_model == GilbertElliott(p=1.0, r=25.0)
    assert spec.links[6].a_intf == "r1-out"
    assert spec.links[7].params.queue_bytes == 65536
    assert s.topology_spec() is not spec  # a new one each time


def test_tree_builder() -> None:
    spec = load(GOOD / "tree.yaml").topology_spec()
    assert len(spec.switches()) == 4 and len(spec.hosts()) == 9
    assert all(link.params.bw == 1e9 for link in spec.links)
    assert spec.link_backend == "tc"


@pytest.mark.parametrize(
    ("builder", "nodes", "links"),
    [("{linear: 3}", 6, 5), ("{single: 3}", 4, 3), ("{dumbbell: 1}", 4, 3), ("{line: 2}", 2, 1)],
)
def test_builders(builder: str, nodes: int, links: int) -> None:
    spec = loads(f"name: b\ntopology:\n  builder: {builder}\n").topology_spec()
    assert (len(spec.nodes), len(spec.links)) == (nodes, links)


def test_engine_endpoint_and_fastpath_reach_the_spec() -> None:
    text = (
        "name: f\ntopology:\n  builder: {line: 3}\n  fastpath: xdp\n"
        "  nodes:\n    lg: {}\n    r9: {kind: router, fastpath: xdp}\n"
        "  links:\n    - {a: lg, b: h1}\n    - {a: h3, b: r9, endpoint: tap}\n"
    )
    spec = loads(text).topology_spec()
    assert wanted(spec) == ["h1", "h2", "h3", "r9"]  # the builder's routers too
    assert spec.engine_endpoint == "auto"  # the default
    assert [link.endpoint for link in spec.links] == [None, None, None, "tap"]
    plain = loads("name: p\ntopology:\n  builder: {line: 2}\n").topology_spec()
    assert (plain.fastpath, wanted(plain)) == (None, [])


def test_topology_wide_keys_are_placed_at_their_scenario_key() -> None:
    s = load(GOOD / "minimal.yaml")
    built = build(s)
    for key in ("engine_endpoint", "fastpath", "link_backend"):
        assert scenario_path(s, built, key) == (("topology", key), "")


# --- conveniences -----------------------------------------------------------------------


def test_node_without_value_is_a_default_host() -> None:
    s = loads("name: x\ntopology:\n  nodes:\n    h1:\n    h2:\n  links: [{a: h1, b: h2}]\n")
    assert [n.kind for n in s.topology_spec().nodes.values()] == ["host", "host"]


def test_argv_numbers_become_text() -> None:
    s = loads(TWO_HOSTS + "setup:\n  - {node: h1, run: [ping, -c, 3, -W, 0.5]}\n")
    step = s.setup[0]
    assert isinstance(step, RunStep) and step.run == ["ping", "-c", "3", "-W", "0.5"]


def test_percent_may_be_a_bare_number() -> None:
    s = loads(
        TWO_HOSTS + "traffic:\n  - {name: t, type: pktgen, src: h1, dst: h2, rate: 1kpps}\n"
        "checks:\n  - {type: loss, traffic: t, max: 0.5}\n"
    )
    check = s.checks[0]
    assert isinstance(check, LossCheck) and check.max_ratio == 0.005


def test_yaml_merge_keys() -> None:
    s = loads(
        "name: x\ntopology:\n  nodes: {h1: {}, h2: {}}\n  links:\n"
        "    - &base {a: h1, b: h2, params: {delay: 1ms}}\n"
        "    - {<<: *base, backend: engine}\n"
    )
    spec = s.topology_spec()
    assert [(link.params.delay, link.backend) for link in spec.links] == [
        (0.001, None),
        (0.001, "engine"),
    ]


def test_relative_trace_is_read_from_the_scenario_directory(tmp_path: Path) -> None:
    (tmp_path / "cell.trace").write_text("1\n2\n3\n")
    path = tmp_path / "s.yaml"
    path.write_text(
        TWO_HOSTS.replace("{a: h1, b: h2}", "{a: h1, b: h2, params: {trace: cell.trace}}")
    )
    spec = load(path).topology_spec()
    assert spec.links[0].params.trace == str(tmp_path / "cell.trace")


def test_missing_trace_is_a_problem_at_its_key(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        TWO_HOSTS.replace("{a: h1, b: h2}", "{a: h1, b: h2, params: {trace: no.trace}}")
    )
    with pytest.raises(ScenarioError) as info:
        load(path)
    (problem,) = info.value.problems
    assert (problem.field, problem.line, problem.col) == ("topology.links[0].params.trace", 7, 31)


# --- problems -------------------------------------------------------------------------------


def test_every_structural_problem_is_reported_in_file_order() -> None:
    text = """\
name: x
repeat: 0
topology:
  link_backend: fast
  nodes:
    h1: {kind: hots}
traffic:
  - {name: t, type: pktgen, src: h1, dst: h2, rate: 10 kpp}
"""
    with pytest.raises(ScenarioError) as info:
        loads(text, "f.yaml")
    assert [(p.line, p.field) for p in info.value.problems] == [
        (2, "repeat"),
        (4, "topology.link_backend"),
        (6, "topology.nodes.h1.kind"),
        (8, "traffic[0].rate"),
    ]
    assert str(info.value).count("\n") == 3
    assert str(info.value).startswith("f.yaml:2:1: repeat: must be at least 1 (got 0)")


def test_every_reference_problem_is_reported() -> None:
    text = """\
name: x
topology:
  builder: {line: 3}
  nodes:
    lg: {}
  links:
    - {a: lg, b: h9}
setup:
  - {node: h4, run: [echo]}
traffic:
  - {name: t, type: pktgen, src: lg, dst: rxx, rate: 10kpps}
  - {name: t, type: ping}
checks:
  - {type: loss, traffic: tt, max: 0%}
  - {type: command, node: nobody, run: [echo]}
"""
    with pytest.raises(ScenarioError) as info:
        loads(text)
    assert [p.field for p in info.value.problems] == [
        "topology.links[0].b",
        "setup[0].node",
        "traffic[0].dst",
        "traffic[1].name",
        "checks[0].traffic",
        "checks[1].node",
    ]


def test_model_validate_raises_cross_problems_without_positions() -> None:
    data = {
        "name": "x",
        "topology": {"nodes": {"h1": {}}},
        "traffic": [{"name": "t", "type": "ping", "between": [["h1", "h2"]]}],
    }
    with pytest.raises(ScenarioError) as info:
        Scenario.model_validate(data)
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.value) == (
        ("traffic", 0, "between", 0, 1),
        None,
        "h2",
    )
    assert (
        problem.format() == "<string>: traffic[0].between[0][1]: unknown node (got 'h2'; valid: h1)"
    )


def test_scenario_error_is_a_validation_error() -> None:
    with pytest.raises(ScenarioError) as info:
        loads("name: 1\n", "n.yaml")
    exc = info.value
    assert isinstance(exc, ValidationError) and isinstance(exc, FidelnetError)
    assert (exc.field, exc.problem, exc.value) == ("name", "must be a string", 1)
    assert len(exc.problems) == 2  # and topology is missing


def test_problem_format() -> None:
    p = Problem("bad", ("a", 0, "b"), "f.yaml", 3, 4, value=None, choices=("x", "y"))
    assert p.format() == "f.yaml:3:4: a[0].b: bad (got null; valid: x, y)"
    assert str(Problem("whole file", file="g.yaml")) == "g.yaml: whole file"
    assert "..." in Problem("long", ("k",), value="x" * 200).format()


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(ScenarioError, match="an alias refers to a node that contains it"):
        loads("name: x\ntopology: &t {nodes: {h1: {}}, links: [*t]}\n")


def test_python_tags_are_refused() -> None:
    with pytest.raises(ScenarioError, match="could not determine a constructor"):
        loads("name: !!python/object:os.system x\ntopology: {}\n")


# --- the models stay in step with fidelnet ---------------------------------------------------


def test_link_parameters_are_those_of_parse_params() -> None:
    assert list(m.LinkParamsModel.model_fields) == list(PARAM_NAMES)


def test_choices_are_fidelnet_s() -> None:
    fields = m.LinkParamsModel.model_fields
    assert get_args(get_args(fields["jitter_dist"].annotation)[0]) == JITTER_DISTS
    assert get_args(get_args(fields["queue"].annotation)[0]) == QUEUE_KINDS
    assert get_args(m.Node.model_fields["kind"].annotation) == NODE_KINDS
    assert get_args(m.Topology.model_fields["link_backend"].annotation) == LINK_BACKENDS
    assert get_args(m.Topology.model_fields["engine_endpoint"].annotation) == ENGINE_ENDPOINTS
    assert get_args(get_args(m.Link.model_fields["endpoint"].annotation)[0]) == ENGINE_ENDPOINTS
    assert get_args(get_args(m.Topology.model_fields["fastpath"].annotation)[0]) == FASTPATHS
    assert get_args(get_args(m.Node.model_fields["fastpath"].annotation)[0]) == FASTPATHS
    assert get_args(m.Pktgen.model_fields["pattern"].annotation) == pktgen.PATTERNS
    assert get_args(m.Pktgen.model_fields["mode"].annotation) == pktgen.MODES
    assert set(m.CHECK_TRAFFIC.values()) == set(m.TRAFFIC_TYPES)
    assert set(m.CHECK_TRAFFIC) | {"command"} == set(m.CHECK_TYPES)
    assert tuple(m.Builder.model_fields) == m.BUILDERS


# --- fidelnet validate ------------------------------------------------------------------------


def test_cli_ok() -> None:
    result = CliRunner().invoke(validate, [str(GOOD / "line7.yaml"), str(GOOD / "minimal.yaml")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{GOOD / 'line7.yaml'}: ok (9 nodes, 8 links, 2 traffic, 3 checks)",
        f"{GOOD / 'minimal.yaml'}: ok (2 nodes, 1 links, 0 traffic, 0 checks)",
    ]


def test_cli_errors_exit_1() -> None:
    bad = BAD / "rate-fast.yaml"
    result = CliRunner().invoke(validate, [str(GOOD / "minimal.yaml"), str(bad)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].endswith(": ok (2 nodes, 1 links, 0 traffic, 0 checks)")
    assert re.fullmatch(rf"{re.escape(str(bad))}:9:47: traffic\[0\]\.rate: .*", lines[1])
    assert len(lines) == 2


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    assert CliRunner().invoke(validate, []).exit_code == 2
    missing = CliRunner().invoke(validate, [str(tmp_path / "missing.yaml")])
    assert missing.exit_code == 2
    assert "does not exist" in missing.output


def test_cli_schema() -> None:
    result = CliRunner().invoke(validate, ["--schema"])
    assert result.exit_code == 0
    assert result.output == schema_text()
