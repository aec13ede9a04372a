"""The fidelnet side of the build/teardown benchmark.

Run it with the project's virtualenv, as root::

    .venv/bin/python bench/fidelnet_side.py --topo linear,10
    .venv/bin/python bench/fidelnet_side.py --topo line,50 --json

Topologies (``--topo``) are the peer's (``peer_mininet.py``) and built the same way
a user would: ``linear,K``, ``single,N`` and ``tree,D,F`` through
``fidelnet.topology.from_mn_spec`` (Mininet's semantics), ``line,N`` through
``fidelnet.topology.line(N)``, the routed line of N nodes with no switches.

Build is ``Network(spec).start()`` and teardown ``.stop()``, both timed with
``time.perf_counter``; memory per idle node is the drop in ``MemAvailable`` from
just before the build to the idle network after a settle, divided by
``len(net.nodes)``; the processes the run started are reported beside it. After
teardown the script compares the host's interfaces, ``ip netns list``, the state
files under ``/run/fidelnet`` and the processes it started with what was there
before, keeps what carries this run's id (``net.run_id``: namespaces
``fn<run-id>-*``, interface aliases, ``<run-id>.json``; other runs may be active on
the machine) and reports it as a leak. It cleans nothing up itself: a leak is
a bug to see, not to hide.

Exit status: 0 on success, 1 when the run failed or leaked, 3 when the fidelnet
API it needs cannot be imported (the driver then skips this side).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _benchlib as bl

STATE_DIR = Path("/run/fidelnet")


def state_files() -> set[str]:
    try:
        return {p.name for p in STATE_DIR.iterdir()}
    except FileNotFoundError:
        return set()


def make_spec(spec: str, ipv6: bool = True, datapath: str = "auto") -> Any:
    from fidelnet.topology import fattree, from_mn_spec, line

    name, *args = spec.split(",")
    if name in ("line", "fattree"):
        if len(args) != 1 or not args[0].isdigit():
            sys.exit(f"fidelnet_side: --topo {spec!r}: expected {name},N")
        built = line(int(args[0])) if name == "line" else fattree(int(args[0]))
    else:
        built = from_mn_spec(spec)
    built.ipv6 = ipv6
    built.datapath = datapath
    return built


def verify(net: Any, spec: str) -> float:
    """Percent of pings lost: first to last node along a routed line, all pairs
    otherwise."""
    if spec.startswith("line,"):
        nodes = list(net.nodes.values()) if hasattr(net.nodes, "values") else list(net.nodes)
        first, last = nodes[0], nodes[-1]
        out = first.cmd(f"ping -c1 -W2 {last.ip}")
        return 0.0 if " 0% packet loss" in out else 100.0
    return float(net.ping_all())


def run(
    spec_text: str,
    settle: float,
    check: bool,
    shells: bool = False,
    ipv6: bool = True,
    datapath: str = "auto",
) -> dict[str, Any]:
    import fidelnet
    from fidelnet import Network

    result: dict[str, Any] = {
        "side": "fidelnet",
        "topo": spec_text,
        "fidelnet_version": getattr(fidelnet, "__version__", "unknown"),
        "python": sys.version.split()[0],
        "kernel": bl.kernel_release(),
    }
    spec = make_spec(spec_text, ipv6, datapath)
    result["ipv6"] = ipv6
    result["datapath"] = datapath
    links_before = bl.root_links()
    netns_before = bl.named_netns()
    state_before = state_files()
    procs_before = bl.snapshot_pids()

    net = Network(spec)
    run_id: str | None = None  # known once the network is open
    ns_inodes: set[int] = set()

    def ours(p: bl.Proc) -> bool:
        """An orphan is ours if it lives in one of this run's namespaces."""
        return bl.netns_inode(p.pid) in ns_inodes

    mem_before = bl.idle_settle(0.1, **bl.sampling(settle))
    started = False
    try:
        t0 = time.perf_counter()
        # With shells: Mininet starts a bash in every node, switches included, as it
        # makes the node; fidelnet starts one on first use, and start(shells=True)
        # makes it do as Mininet does. Each shell's prompt is awaited, then one
        # command ("unset HISTFILE; set +m") and its prompt, as Mininet's
        # startShell() does with its own ("unset HISTFILE; stty -echo; set +m").
        # (Until 2026-11-26 this also ran `true` in every shell one after another
        # after the build, a round trip Mininet's build does not make.)
        net.start(shells=shells)
        if shells and not all(node.has_shell() for node in net.nodes.values()):
            raise RuntimeError("a node has no shell after start(shells=True)")
        result["build_s"] = time.perf_counter() - t0
        result["shells"] = shells
        started = True
        run_id = str(net.run_id)
        result["run_id"] = run_id
        nodes = len(net.nodes)
        result["nodes"] = nodes
        result["hosts"] = len(net.hosts)
        result["switches"] = len(net.switches)
        result["links"] = len(net.links)
        ns_inodes = bl.named_netns_inodes(f"fn{run_id}")
        mem_idle = bl.idle_settle(settle, **bl.sampling(settle))
        result["processes"] = bl.process_summary(bl.started_processes(procs_before, ours))
        result["root_links_added"] = len(bl.root_links() - links_before)
        result["netns_added"] = len(
            [n for n in bl.named_netns() - netns_before if n.startswith(f"fn{run_id}")]
        )
        result.update(bl.memory_fields(mem_before, mem_idle, nodes))
        if check:  # after the idle measurement, so ARP caches etc. do not count
            result["check_loss_pct"] = verify(net, spec_text)
    finally:
        t0 = time.perf_counter()
        net.stop()  # waits for the kernel to free the namespaces (net.timings)
        if started:
            result["teardown_s"] = net.timings.get("teardown")
            result["cleanup_s"] = net.timings.get("kernel_cleanup")
    result["mem_available_after_teardown_kib"] = bl.idle_settle(
        min(settle, 0.5), **bl.sampling(settle)
    )[0]

    # Attribute by run id where it is known: other runs may be active on this machine.
    new_links = {n: a for n, a in bl.root_links_with_alias().items() if n not in links_before}
    new_netns = bl.named_netns() - netns_before
    new_state = state_files() - state_before
    if run_id:
        new_links = {n: a for n, a in new_links.items() if run_id in a or run_id in n}
        new_netns = {n for n in new_netns if n.startswith(f"fn{run_id}")}
        new_state = {n for n in new_state if run_id in n}
    else:
        result["leaks_unattributed"] = True  # Network has no run_id: plain differences
    leaks = {
        "root_links": sorted(new_links),
        "netns": sorted(new_netns),
        "state_files": sorted(new_state),
        "processes": [f"{p.pid}:{p.comm}" for p in bl.started_processes(procs_before, ours)],
    }
    result["leaks"] = {k: v for k, v in leaks.items() if v}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--topo",
        required=True,
        help="linear,K | single,N | tree,D,F | torus,X,Y | fattree,K | line,N",
    )
    parser.add_argument("--settle", type=float, default=2.0, help="idle seconds before memory")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument(
        "--check", action="store_true", help="ping through the network before teardown"
    )
    parser.add_argument(
        "--shells",
        action="store_true",
        help="start a shell in every node during build (as Mininet does), counted in build",
    )
    parser.add_argument("--ipv6", choices=["on", "off"], default="on", help="IPv6 in nodes")
    parser.add_argument(
        "--datapath", choices=["auto", "bridge", "bpf"], default="auto", help="switches' datapath"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("fidelnet_side: building namespaces needs root")
    try:
        import fidelnet  # noqa: F401
        from fidelnet import Network  # noqa: F401
        from fidelnet.topology import from_mn_spec, line  # noqa: F401
    except ImportError as exc:
        print(f"fidelnet_side: fidelnet API not available: {exc}", file=sys.stderr)
        return 3
    try:
        result = run(
            args.topo, args.settle, args.check, args.shells, args.ipv6 == "on", args.datapath
        )
    except Exception as exc:  # report, do not hide: the driver prints it
        traceback.print_exc()
        result = {"side": "fidelnet", "topo": args.topo, "error": f"{type(exc).__name__}: {exc}"}
    bl.emit(result, args.json)
    return 1 if "error" in result or result.get("leaks") else 0


if __name__ == "__main__":
    sys.exit(main())
