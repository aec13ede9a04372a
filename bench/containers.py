"""Container nodes (issue 37): how fast they start, what they cost, and whether a line
through container routers forwards as a line through namespace routers does.

Three parts, in one run, each beside its namespace counterpart measured the same way:

1. **Start**: ``count`` container hosts (default 1 and 50) on one switch,
   ``Network.start()`` timed to the moment the network is up, then the first command
   in each container (its shell is started by ``crun exec``); the same with namespace
   hosts. Per node: start seconds, first command ms.
2. **Memory**: ``MemAvailable`` before the run and with every node idle with its shell
   started (each container: the image's entrypoint, an HTTP server, plus the shell),
   per node; the same for namespace hosts with a shell. Ratio container/namespace.
3. **Line**: lg - r1..rN - rx, routers as containers (the kernel forwards; the image
   is irrelevant to the data path) or as namespaces: UDP latency p50/p99 at a fixed
   rate and the zero-loss rate (NDR), one after the other, on the same machine.

    .venv/bin/python bench/containers.py [--counts 1 50] [--routers 5] [--rate 20000]

The image is built with buildah once (tests/_images.py, ``busybox-httpd``). A
benchmark, not a test: it prints a table and JSON, and asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import mem_available_kib  # noqa: E402


def _image() -> str:
    from _images import build

    return f"docker-archive:{build('busybox-httpd')['docker-archive']}"


def _star(count: int, image: str | None) -> Any:
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
    from fidelnet.topology.spec import ContainerSpec

    t = TopologySpec()
    t.add_node(NodeSpec("s1", kind="switch"))
    for i in range(1, count + 1):
        name = f"n{i}"
        ip = f"10.0.{i // 250}.{i % 250 + 1}/16"
        if image is None:
            t.add_node(NodeSpec(name, ip=ip))
        else:
            c = ContainerSpec(image=image)
            t.add_node(NodeSpec(name, ip=ip, backend="container", container=c))
        t.add_link(LinkSpec(name, "s1"))
    return t


def start_and_memory(count: int, image: str | None) -> dict[str, Any]:
    from fidelnet import Network

    spec = _star(count, image)
    before = mem_available_kib()
    began = time.monotonic()
    with Network(spec) as net:
        up = time.monotonic() - began
        firsts = []
        for i in range(1, count + 1):
            t0 = time.monotonic()
            net[f"n{i}"].cmd("true")
            firsts.append(time.monotonic() - t0)
        answering = time.monotonic() - began
        time.sleep(1.0)
        idle = statistics.median(mem_available_kib() for _ in range(5))
        loss = net.ping_pairs([net["n1"], net[f"n{count}"]]) if count > 1 else {}
    return {
        "kind": "container" if image else "netns",
        "nodes": count,
        "start_s": round(up, 3),
        "start_per_node_s": round(up / count, 4),
        "to_all_answering_s": round(answering, 3),
        "first_cmd_ms_median": round(1e3 * statistics.median(firsts), 1),
        "mem_per_node_mib": round((before - idle) / 1024 / count, 2),
        "reached": all(loss.values()) if loss else None,
    }


def _line(n: int, image: str | None) -> Any:
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
    from fidelnet.topology.spec import ContainerSpec

    t = TopologySpec(auto_routes=True)
    names = ["lg", *[f"r{i}" for i in range(1, n + 1)], "rx"]
    for name in names:
        if name in ("lg", "rx"):
            t.add_node(NodeSpec(name))
        elif image is None:
            t.add_node(NodeSpec(name, kind="router"))
        else:
            c = ContainerSpec(image=image)
            t.add_node(NodeSpec(name, kind="router", backend="container", container=c))
    for i, (a, b) in enumerate(itertools.pairwise(names)):
        t.add_link(LinkSpec(a, b, a_ip=f"10.10.{i}.1/24", b_ip=f"10.10.{i}.2/24"))
    return t


def line(n: int, image: str | None, rate: float, duration: float) -> dict[str, Any]:
    from fidelnet import Network
    from fidelnet.measure import udp, zero_loss_rate

    with Network(_line(n, image)) as net:
        r = udp(net, "lg", "rx", rate_pps=rate, duration=duration)
        z = zero_loss_rate(net, "lg", "rx", trial_s=1.0, high_pps=400_000, mode="gso")
    return {
        "kind": "container" if image else "netns",
        "routers": n,
        "rate_pps": rate,
        "p50_us": round(r.latency.p50_ns / 1e3, 1),
        "p99_us": round(r.latency.p99_ns / 1e3, 1),
        "loss_pct": round(100 * r.loss_ratio, 3),
        "verdict": r.verdict.level if r.verdict else None,
        "ndr_kpps": round(z.ndr_pps / 1e3, 1),
        "ndr_verdict": z.verdict.level if z.verdict else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--counts", type=int, nargs="+", default=[1, 50])
    ap.add_argument("--routers", type=int, default=5)
    ap.add_argument("--rate", type=float, default=20_000)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    image = _image()
    starts = []
    for count in args.counts:
        for img in (image, None):
            row = start_and_memory(count, img)
            starts.append(row)
            print(json.dumps(row), flush=True)
    lines = []
    for img in (image, None):
        row = line(args.routers, img, args.rate, args.duration)
        lines.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(
        f"{'nodes':>6} {'kind':>10} {'start s':>8} {'s/node':>7} {'1st cmd ms':>10} {'MiB/node':>9}"
    )
    for r in starts:
        print(
            f"{r['nodes']:>6} {r['kind']:>10} {r['start_s']:>8} {r['start_per_node_s']:>7} "
            f"{r['first_cmd_ms_median']:>10} {r['mem_per_node_mib']:>9}"
        )
    by = {(r["kind"], r["nodes"]): r for r in starts}
    for count in args.counts:
        c, n = by[("container", count)], by[("netns", count)]
        if n["mem_per_node_mib"] > 0:
            ratio = c["mem_per_node_mib"] / n["mem_per_node_mib"]
            print(f"{count} nodes: memory container/netns {ratio:.2f}x")
    print()
    print(f"{'routers':>8} {'kind':>10} {'p50 us':>8} {'p99 us':>8} {'NDR kpps':>9} verdicts")
    for r in lines:
        print(
            f"{r['routers']:>8} {r['kind']:>10} {r['p50_us']:>8} {r['p99_us']:>8} "
            f"{r['ndr_kpps']:>9} {r['verdict']}/{r['ndr_verdict']}"
        )
    c, n = lines
    p50, p99 = c["p50_us"] / n["p50_us"], c["p99_us"] / n["p99_us"]
    ndr = c["ndr_kpps"] / n["ndr_kpps"]
    print(f"container/netns: p50 {p50:.3f}x, p99 {p99:.3f}x, NDR {ndr:.3f}x")
    if args.json:
        args.json.write_text(json.dumps({"start": starts, "line": lines}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
