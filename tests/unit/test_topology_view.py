"""``fidelnet show``: a topology as text, Graphviz dot and Mermaid (issue 38)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fidelnet.scenario import loads
from fidelnet.topology.view import render

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """
name: view
topology:
  nodes:
    h1: {ip: 10.0.0.1/24}
    vm1: {backend: qemu}
    web: {image: "registry.example/web:1"}
    r1: {kind: router}
    s1: {kind: switch, datapath: ovs}
  links:
    - {a: h1, b: s1, params: {bw: 10Mbit, delay: 5ms, jitter: 1ms, loss: 1%}, backend: engine}
    - {a: vm1, b: s1, backend: tc, params: {delay: 2ms}, params_ab: {bw: 1Gbit}}
    - {a: web, b: r1, a_ip: 10.2.0.10/24, b_ip: 10.2.0.1/24}
    - {a: r1, b: s1}
"""


def _spec():  # type: ignore[no-untyped-def]
    return loads(SCENARIO).topology_spec()


def test_text_lists_nodes_with_how_they_are_made_and_links_with_what_was_asked() -> None:
    text = render(_spec(), "text")
    assert "5 nodes, 4 links" in text
    assert "container" in text and "image registry.example/web:1" in text
    assert "h1 -- s1: engine 10Mbit 5ms±1ms 1%" in text
    assert "vm1 -- s1: tc vm1>s1 1Gbit 2ms / s1>vm1 2ms" in text
    assert "web (10.2.0.10/24) -- r1 (10.2.0.1/24): auto" in text


def test_dot_draws_kinds_backends_and_link_styles() -> None:
    dot = render(_spec(), "dot")
    assert dot.startswith("graph topology {") and dot.rstrip().endswith("}")
    assert '"vm1" [label="vm1\\nVM", shape=box3d]' in dot
    assert 'style="rounded,dashed"' in dot and "web:1" in dot
    assert '"s1" [label="s1\\novs", shape=diamond]' in dot
    assert '"h1" -- "s1" [label="engine 10Mbit 5ms±1ms 1%", style=bold]' in dot
    assert 'taillabel="10.2.0.10/24"' in dot


def test_mermaid_has_one_line_per_node_and_link() -> None:
    mm = render(_spec(), "mermaid").splitlines()
    assert mm[0] == "graph LR" and len(mm) == 1 + 5 + 4
    assert '  n_s1{"s1<br/>ovs"}' in mm
    assert '  n_h1 ===|"engine 10Mbit 5ms±1ms 1%"| n_s1' in mm


def test_the_command(tmp_path: Path) -> None:
    f = tmp_path / "v.yaml"
    f.write_text(SCENARIO)
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "show", str(f), "--format", "mermaid"],
        capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("graph LR")
