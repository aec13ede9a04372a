"""Malformed scenario files: each must give exactly one problem, at the right line and
column, with the right message. One file per case in ``data/scenarios/bad/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from fidelnet.scenario import ScenarioError, load

BAD = Path(__file__).parent / "data" / "scenarios" / "bad"

# (file, "LINE:COL" or "" when the file has no position, start of "path: message")
CASES: list[tuple[str, str, str]] = [
    (
        "argv-bool.yaml",
        "9:28",
        "setup[0].run[1]: YAML reads this as the boolean true, not as text:",
    ),
    ("argv-item-mapping.yaml", "9:28", "setup[0].run[1]: must be a string, not a mapping"),
    (
        "argv-string.yaml",
        "9:16",
        "setup[0].run: must be a list of arguments (argv), not a shell string;",
    ),
    (
        "bad-ip.yaml",
        "4:10",
        "topology.nodes.h1.ip: must be an IPv4 address with prefix length like",
    ),
    ("bad-regex.yaml", "9:49", "checks[0].output: not a valid regular expression: missing ),"),
    (
        "builder-duplicate-ip.yaml",
        "8:22",
        "topology.links[0].a_ip: address 10.0.1.1 is already used by the",
    ),
    (
        "builder-node-clash.yaml",
        "5:5",
        "topology.nodes.h2: the line builder already makes a node 'h2'; a",
    ),
    ("bw-no-unit.yaml", "7:31", "topology.links[0].params.bw: a rate needs a unit"),
    ("check-missing-type.yaml", "9:5", "checks[0].type: every check needs a type"),
    (
        "check-type-unknown.yaml",
        "9:6",
        "checks[0].type: unknown check type, did you mean 'latency'?",
    ),
    (
        "check-unknown-traffic.yaml",
        "11:18",
        "checks[0].traffic: unknown traffic, did you mean 'load'?",
    ),
    (
        "check-wrong-traffic-type.yaml",
        "12:18",
        "checks[0].traffic: a loss check needs pktgen traffic; 'bulk' is iperf",
    ),
    (
        "command-argv-string.yaml",
        "9:31",
        "checks[0].run: must be a list of arguments (argv), not a shell string;",
    ),
    ("command-unknown-node.yaml", "9:21", "checks[0].node: unknown node"),
    ("cores-not-list.yaml", "4:10", "topology.nodes.h1.cores: must be a list"),
    ("cpu-1.5.yaml", "4:10", "topology.nodes.h1.cpu: must be at most 1"),
    (
        "defaults-delay-no-unit.yaml",
        "5:12",
        "topology.defaults.link.delay: a duration needs a unit",
    ),
    ("delay-parsecs.yaml", "7:31", "topology.links[0].params.delay: unknown time unit 'parsecs'"),
    (
        "duplicate-check-name.yaml",
        "12:6",
        "checks[1].name: duplicate name: checks[0] is already called 'c'",
    ),
    ("duplicate-ip.yaml", "7:41", "topology.links[0].b_ip: address 10.0.0.1 is already used by"),
    (
        "duplicate-node.yaml",
        "6:5",
        "topology.nodes.h1: duplicate key: 'h1' is already given at 4:5",
    ),
    (
        "duplicate-param.yaml",
        "7:43",
        "topology.links[0].params.delay: duplicate key: 'delay' is already given",
    ),
    ("duplicate-top-key.yaml", "8:1", "name: duplicate key: 'name' is already given at 1:1"),
    (
        "duplicate-traffic-name.yaml",
        "10:6",
        "traffic[1].name: duplicate name: traffic[0] is already called 't'",
    ),
    ("duration-no-unit.yaml", "9:60", "traffic[0].duration: a duration needs a unit"),
    ("empty-builder.yaml", "3:3", "topology.builder: give exactly one builder (given: none)"),
    ("empty.yaml", "1:1", "the file is empty; a scenario needs at least name and topology"),
    (
        "endpoint-on-tc-link.yaml",
        "8:57",
        "topology.links[1].endpoint: an endpoint applies to engine links, and this link's "
        "backend is tc",
    ),
    ("endpoint-unknown.yaml", "8:44", "topology.links[1].endpoint: unknown value"),
    ("engine-endpoint-unknown.yaml", "4:3", "topology.engine_endpoint: unknown value"),
    ("engine-threads-0.yaml", "4:3", "topology.engine_threads: must be at least 1 (got 0)"),
    ("expect-exit-300.yaml", "9:33", "setup[0].expect_exit: must be at most 255"),
    ("tdf-0.yaml", "4:3", "topology.tdf: must be greater than 0"),
    ("tdf-too-big.yaml", "4:3", "topology.tdf: must be at most 1000"),
    ("ipv6-not-bool.yaml", "4:3", "topology.ipv6: must be true or false"),
    (
        "fastpath-on-host.yaml",
        "5:10",
        "topology.nodes.h1.fastpath: only routers have a fast path, and h1 is a host",
    ),
    ("fastpath-unknown.yaml", "4:24", "topology.nodes.r1.fastpath: unknown value"),
    (
        "file-mode-unquoted.yaml",
        "10:39",
        'setup[0].file.mode: write the mode as a quoted string such as "0644"',
    ),
    ("file-relative-path.yaml", "10:12", "setup[0].file.path: must be an absolute path"),
    ("flows-2000.yaml", "9:60", "traffic[0].flows: must be at most 1024"),
    ("frame-too-small.yaml", "9:60", "traffic[0].size: must be at least 64"),
    ("goodput-bad-unit.yaml", "11:33", "checks[0].min: unknown rate unit 'Mbits'"),
    (
        "goodput-flow-out-of-range.yaml",
        "11:45",
        "checks[0].flow: 'b' has 2 flow(s), numbered from 0",
    ),
    (
        "intf-name-too-long.yaml",
        "7:22",
        "topology.links[0].a_intf: is 21 bytes; Linux allows at most 15; choose",
    ),
    (
        "iperf-fractional-duration.yaml",
        "9:47",
        "traffic[0].duration: must be whole seconds (iperf3's -t)",
    ),
    ("iperf-unknown-node.yaml", "9:51", "traffic[0].pairs[1][1]: unknown node"),
    ("jain-min-2.yaml", "11:30", "checks[0].min: must be at most 1"),
    ("jain-min-string.yaml", "11:30", "checks[0].min: must be a number, not a string"),
    (
        "jain-one-flow.yaml",
        "11:18",
        "checks[0].traffic: a Jain index needs at least two flows; 'b' has one",
    ),
    (
        "jitter-without-delay.yaml",
        "7:31",
        "topology.links[0].params.jitter: jitter needs a delay on the same link",
    ),
    ("latency-max-no-unit.yaml", "11:49", "checks[0].max: a duration needs a unit"),
    ("line-1.yaml", "3:13", "topology.builder.line: must be at least 2"),
    (
        "link-backend-unknown.yaml",
        "4:3",
        "topology.link_backend: unknown value, did you mean 'tc'?",
    ),
    ("link-list.yaml", "7:7", "topology.links[0]: must be a mapping, not a list"),
    ("link-missing-b.yaml", "7:7", "topology.links[0].b: required field missing"),
    ("link-unknown-node.yaml", "7:15", "topology.links[0].b: unknown node, did you mean 'h2'?"),
    ("loss-150.yaml", "7:31", "topology.links[0].params.loss: must be at most 100%"),
    ("max-loss-150.yaml", "11:30", "checks[0].max: must be at most 100%"),
    ("missing-name.yaml", "1:1", "name: required field missing"),
    ("missing-topology.yaml", "1:1", "topology: required field missing"),
    ("name-not-string.yaml", "1:1", "name: must be a string"),
    ("negative-duration.yaml", "9:60", "traffic[0].duration: must not be negative"),
    ("no-nodes.yaml", "2:1", "topology: declares no nodes: give a builder or nodes"),
    (
        "node-backend-cgroup.yaml",
        "4:10",
        "topology.nodes.h1.backend: node backend 'cgroup' is not yet supported",
    ),
    (
        "node-kind-unknown.yaml",
        "4:10",
        "topology.nodes.h1.kind: unknown value, did you mean 'host'?",
    ),
    (
        "node-name-invalid.yaml",
        "4:5",
        "topology.nodes.1bad: node names must start with a letter, contain only",
    ),
    ("nodes-list.yaml", "3:3", "topology.nodes: must be a mapping, not a list"),
    ("not-utf8.yaml", "", "not UTF-8 text (byte 9 cannot be decoded)"),
    ("null-document.yaml", "1:1", "a scenario is a mapping (name: ..., topology: ...), not null"),
    ("pair-of-three.yaml", "9:36", "traffic[0].pairs[0]: must be a [src, dst] pair"),
    ("pattern-unknown.yaml", "9:60", "traffic[0].pattern: unknown value, did you mean 'cbr'?"),
    ("percentile-101.yaml", "11:33", "checks[0].percentile: must be at most 100"),
    ("percentile-zero.yaml", "11:33", "checks[0].percentile: must be greater than 0"),
    (
        "ping-between-word.yaml",
        "9:27",
        "traffic[0].between: must be all or a list of [src, dst] pairs",
    ),
    ("ping-count-zero.yaml", "9:27", "traffic[0].count: must be at least 1"),
    ("ping-unknown-node.yaml", "9:42", "traffic[0].between[0][1]: unknown node"),
    ("pktgen-missing-rate.yaml", "9:5", "traffic[0].rate: required field missing"),
    ("queue-unknown.yaml", "7:31", "topology.links[0].params.queue: unknown value"),
    ("rate-above-max.yaml", "9:47", "traffic[0].rate: at most 100Mpps"),
    ("rate-bare-number.yaml", "9:47", "traffic[0].rate: a packet rate needs a unit"),
    ("rate-fast.yaml", "9:47", "traffic[0].rate: not a number followed by a unit"),
    ("rate-wrong-case.yaml", "9:47", "traffic[0].rate: unknown packet-rate unit 'KPPS'"),
    (
        "reachability-on-pktgen.yaml",
        "11:26",
        "checks[0].traffic: a reachability check needs ping traffic; 'load' is",
    ),
    ("repeat-string.yaml", "2:1", "repeat: must be an integer, not a string"),
    ("repeat-zero.yaml", "2:1", "repeat: must be at least 1"),
    (
        "scenario-name-invalid.yaml",
        "1:1",
        "name: names contain only letters, digits, '_', '.' and '-'",
    ),
    ("seed-negative.yaml", "2:1", "seed: must be at least 0"),
    ("self-link.yaml", "7:7", "topology.links[0]: a link cannot connect a node to itself"),
    ("setup-neither.yaml", "9:5", "setup[0]: a setup step needs run (an argv list) or file"),
    ("setup-run-and-file.yaml", "9:5", "setup[0]: give either run or file in one step, not both"),
    ("setup-unknown-node.yaml", "9:6", "setup[0].node: unknown node"),
    ("src-equals-dst.yaml", "9:38", "traffic[0].dst: src and dst must be different nodes"),
    ("stp-string.yaml", "4:24", "topology.nodes.s1.stp: must be true or false, not a string"),
    (
        "syntax-indent.yaml",
        "5:4",
        "YAML syntax: expected <block end>, but found '<block mapping start>'",
    ),
    (
        "syntax-tab.yaml",
        "3:1",
        "YAML syntax: found character '\\t' that cannot start any token (while",
    ),
    (
        "syntax-two-documents.yaml",
        "2:1",
        "YAML syntax: expected a single document in the stream, but found",
    ),
    (
        "syntax-unclosed.yaml",
        "2:26",
        "YAML syntax: expected ',' or ']', but got '}' (while parsing a flow",
    ),
    (
        "top-level-list.yaml",
        "1:1",
        "a scenario is a mapping (name: ..., topology: ...), not a list",
    ),
    ("topology-fastpath-unknown.yaml", "4:3", "topology.fastpath: unknown value"),
    ("topology-string.yaml", "2:1", "topology: must be a mapping, not a string"),
    (
        "traffic-from-switch.yaml",
        "5:29",
        "traffic[0].src: s1 is a switch; traffic sources and sinks run in hosts",
    ),
    ("traffic-mapping.yaml", "8:1", "traffic: must be a list, not a mapping"),
    ("traffic-missing-type.yaml", "9:5", "traffic[0].type: every traffic needs a type"),
    (
        "traffic-type-unknown.yaml",
        "9:15",
        "traffic[0].type: unknown traffic type, did you mean 'pktgen'?",
    ),
    ("traffic-unknown-src.yaml", "11:29", "traffic[0].src: unknown node, did you mean 'lg'?"),
    ("tree-bad-depth.yaml", "3:20", "topology.builder.tree.depth: must be at least 1"),
    (
        "two-builders.yaml",
        "3:3",
        "topology.builder: give exactly one builder (given: line, single)",
    ),
    ("unknown-builder.yaml", "3:13", "topology.builder.ring: unknown field"),
    (
        "unknown-check-key.yaml",
        "11:59",
        "checks[0].percentil: unknown field, did you mean 'percentile'?",
    ),
    (
        "unknown-defaults-key.yaml",
        "5:5",
        "topology.defaults.links: unknown field, did you mean 'link'?",
    ),
    ("unknown-file-key.yaml", "10:39", "setup[0].file.owner: unknown field"),
    ("unknown-link-key.yaml", "7:22", "topology.links[0].delay: unknown field"),
    (
        "unknown-link-param.yaml",
        "7:31",
        "topology.links[0].params.lossy: unknown field, did you mean 'loss'?",
    ),
    ("unknown-loss-model-key.yaml", "7:51", "topology.links[0].params.loss.q: unknown field"),
    ("unknown-node-key.yaml", "4:22", "topology.nodes.h1.cpus: unknown field, did you mean 'cpu'?"),
    (
        "unknown-setup-key.yaml",
        "9:33",
        "setup[0].expect: unknown field, did you mean 'expect_exit'?",
    ),
    ("unknown-top-key.yaml", "3:1", "toplogy: unknown field, did you mean 'topology'?"),
    ("unknown-topology-key.yaml", "3:3", "topology.buildr: unknown field, did you mean 'builder'?"),
    ("unknown-traffic-key.yaml", "9:60", "traffic[0].sise: unknown field, did you mean 'size'?"),
    ("vm-memory-too-small.yaml", "4:30", "topology.nodes.h1.vm.memory: must be at least 96"),
    ("window-bad.yaml", "9:47", "traffic[0].window: must be auto, none or a size such as 256KiB"),
    ("zero-duration.yaml", "9:60", "traffic[0].duration: must be greater than zero"),
    ("zero-loss-low-above-high.yaml", "9:50", "traffic[0].low: must be below high (100kpps)"),
]


def test_every_bad_file_has_exactly_one_case() -> None:
    files = sorted(p.name for p in BAD.iterdir())
    named = [name for name, _, _ in CASES]
    assert len(named) == len(set(named)), "a file is listed twice"
    assert sorted(named) == files
    assert len(files) >= 50


@pytest.mark.parametrize(("name", "where", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_malformed_file(name: str, where: str, fragment: str) -> None:
    path = BAD / name
    with pytest.raises(ScenarioError) as info:
        load(path)
    problems = info.value.problems
    assert len(problems) == 1, "\n".join(p.format() for p in problems)
    problem = problems[0]
    assert problem.file == str(path)
    assert (f"{problem.line}:{problem.col}" if problem.line is not None else "") == where
    prefix = f"{path}:{where}: " if where else f"{path}: "
    assert problem.format().startswith(prefix + fragment), problem.format()


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "unknown-top-key.yaml",
            "3:1: toplogy: unknown field, did you mean 'topology'? (valid: name, description, "
            "seed, repeat, topology, setup, traffic, checks)",
        ),
        (
            "rate-fast.yaml",
            "9:47: traffic[0].rate: not a number followed by a unit (got 'fast'; valid: pps, "
            "kpps, Mpps)",
        ),
        (
            "bw-no-unit.yaml",
            "7:31: topology.links[0].params.bw: a rate needs a unit (got 10; valid: bit, kbit, "
            "Mbit, Gbit, Mbps)",
        ),
        (
            "link-backend-unknown.yaml",
            "4:3: topology.link_backend: unknown value, did you mean 'tc'? (got 'tcc'; valid: "
            "auto, tc, engine, hw)",
        ),
        (
            "node-backend-cgroup.yaml",
            "4:10: topology.nodes.h1.backend: node backend 'cgroup' is not yet supported (got "
            "'cgroup'; valid: netns, qemu, container)",
        ),
        (
            "endpoint-unknown.yaml",
            "8:44: topology.links[1].endpoint: unknown value, did you mean 'af_xdp'? (got "
            "'afxdp'; valid: auto, tap, af_xdp)",
        ),
        (
            "endpoint-on-tc-link.yaml",
            "8:57: topology.links[1].endpoint: an endpoint applies to engine links, and this "
            "link's backend is tc (drop endpoint, or choose backend 'engine' or 'auto') (got "
            "'af_xdp')",
        ),
        (
            "engine-endpoint-unknown.yaml",
            "4:3: topology.engine_endpoint: unknown value, did you mean 'tap'? (got 'tapp'; "
            "valid: auto, tap, af_xdp)",
        ),
        (
            "fastpath-on-host.yaml",
            "5:10: topology.nodes.h1.fastpath: only routers have a fast path, and h1 is a host "
            "(drop fastpath, or make the node a router) (got 'xdp')",
        ),
        (
            "fastpath-unknown.yaml",
            "4:24: topology.nodes.r1.fastpath: unknown value (got 'dpdk'; valid: xdp)",
        ),
        (
            "topology-fastpath-unknown.yaml",
            "4:3: topology.fastpath: unknown value (got 'ebpf'; valid: xdp)",
        ),
        (
            "argv-string.yaml",
            "9:16: setup[0].run: must be a list of arguments (argv), not a shell string; write "
            "it as a list: [sysctl, -w, net.ipv4.ip_forward=1] (got 'sysctl -w "
            "net.ipv4.ip_forward=1')",
        ),
        (
            "traffic-unknown-src.yaml",
            "11:29: traffic[0].src: unknown node, did you mean 'lg'? (got 'lgg'; valid: h1, h2, "
            "h3, lg, rx)",
        ),
        (
            "check-wrong-traffic-type.yaml",
            "12:18: checks[0].traffic: a loss check needs pktgen traffic; 'bulk' is iperf "
            "traffic (got 'bulk'; valid: load)",
        ),
    ],
)
def test_whole_lines(name: str, line: str) -> None:
    """The complete line, value and choices included, for a few representative cases."""
    with pytest.raises(ScenarioError) as info:
        load(BAD / name)
    assert str(info.value) == f"{BAD / name}:{line}"
