"""Scale: build + teardown + the kernel's cleanup, per node, from tens to 10,000 nodes,
fidelnet beside stock Mininet in the same run.

A benchmark, not a test: it asserts nothing and prints ratios measured side by side.
Run it as root after ``make bench`` (which installs Debian's ``mininet``)::

    .venv/bin/python bench/scale.py                 # the standard set (about 40 min)
    .venv/bin/python bench/scale.py --quick         # linear 50/150, tree, torus, fat tree
    .venv/bin/python bench/scale.py --topos linear,300 --big linear,5000

Every measurement is one subprocess (``fidelnet_side.py`` or ``peer_mininet.py``),
one at a time, so nothing else builds meanwhile. For each topology:

- ``fidelnet``: ``Network(spec).start()`` then ``stop()``, IPv6 on (the default);
- ``+shells``: the same with a shell started in every node during the build, as
  Mininet always does;
- ``ipv6 off``: the same without shells, ``spec.ipv6 = False``;
- ``bridges``: like ``fidelnet`` with every switch a Linux bridge (``datapath:
  bridge``; the default ``auto`` takes the BPF learning switch, docs/switches.md);
- ``Mininet``: ``Mininet(topo, switch=LinuxBridge, controller=None)``, ``build()``,
  ``start()`` (and ``waitConnected()`` where STP runs), ``stop()``.

Total = build + teardown + the kernel's cleanup after it (until no kernel worker runs
namespace cleanup: :mod:`fidelnet.kernel.nscleanup`, the same test on both sides).
The peer is not started when the previous size predicts it would take longer than
``--peer-max-s`` (the per-node time of the last size, scaled with the square of the
size, which is how Mininet grows here); the ``--big`` sizes run fidelnet alone, with
IPv6 on and off (``--big-variants``). Records, a provenance header and the plot
(seconds per node against nodes, log scale) go to
``bench/results/scale-<UTC timestamp>.{json,png}``.

**The next build.** The kernel frees a deleted namespace's memory later still than
its cleanup work (``net_namespace`` objects stay allocated until another namespace
is destroyed, docs/scale.md). So, last, the first topology (``--next``, by default
``linear,50``) is built once more right after the biggest one, and its total is
printed beside its first measurement: whatever the biggest run left to the kernel
shows there. Each record also holds the machine's ``net_namespace`` slab count after
it (``/proc/slabinfo``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from build_teardown import run_side  # noqa: E402

STANDARD = [
    "linear,50",
    "linear,150",
    "linear,300",
    "linear,500",
    "tree,2,10",
    "tree,3,10",
    "torus,5,5",
    "torus,10,10",
    "fattree,4",
    "fattree,8",
]
QUICK = ["linear,50", "linear,150", "tree,2,10", "torus,4,4", "fattree,4"]
BIG = ["linear,1000", "linear,2500", "linear,5000"]
VARIANTS = ("fidelnet", "+shells", "ipv6 off", "bridges", "mininet")
BIG_VARIANTS = ("fidelnet", "ipv6 off")
_EXTRA = {"ipv6 off": ["--ipv6", "off"], "bridges": ["--datapath", "bridge"]}


def total(r: dict[str, Any]) -> float | None:
    parts = [r.get("build_s"), r.get("teardown_s"), r.get("cleanup_s")]
    if "error" in r or any(not isinstance(p, int | float) for p in parts):
        return None
    return float(sum(p for p in parts if isinstance(p, int | float)))


def measure(variant: str, topo: str, args: argparse.Namespace) -> dict[str, Any]:
    side = "mininet" if variant == "mininet" else "fidelnet"
    ns = argparse.Namespace(**vars(args))
    ns.shells = variant == "+shells"
    ns.check = False
    record = run_side(side, topo, ns, _EXTRA.get(variant, []))
    record["variant"] = variant
    record["total_s"] = total(record)
    record["net_namespace_objs"] = netns_objects()
    return record


def netns_objects() -> int | None:
    """Allocated ``net_namespace`` objects, machine-wide (None: no slabinfo)."""
    try:
        with open("/proc/slabinfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("net_namespace "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def line(r: dict[str, Any]) -> str:
    return (
        f"  {r['topo']:<13} {r['variant']:<9} build {fmt(r.get('build_s'), '.2f')} "
        f"teardown {fmt(r.get('teardown_s'), '.2f')} "
        f"cleanup {fmt(r.get('cleanup_s'), '.2f')} total {fmt(r.get('total_s'), '.2f')}"
        f"  netns objs {r.get('net_namespace_objs')}"
        + (f"  ERROR {r['error']}" if "error" in r else "")
    )


def family(topo: str) -> str:
    return topo.split(",")[0]


def predicted(done: list[dict[str, Any]], topo: str, nodes_hint: int) -> float | None:
    """The peer's total at ``topo`` from its last finished size of the same family."""
    same = [
        r
        for r in done
        if r["variant"] == "mininet" and family(r["topo"]) == family(topo) and r["total_s"]
    ]
    if not same:
        return None
    last = same[-1]
    return float(last["total_s"]) * (nodes_hint / float(last["nodes"])) ** 2


def nodes_of(topo: str) -> int:
    name, *a = topo.split(",")
    n = [int(x) for x in a]
    if name == "linear":
        return 2 * n[0]
    if name == "tree":
        depth, fan = n
        return sum(fan**i for i in range(depth + 1))
    if name == "torus":
        return 2 * n[0] * n[1]
    if name == "fattree":
        k = n[0]
        return (k // 2) ** 2 + k * k + k**3 // 4
    return 0


def fmt(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def table(records: list[dict[str, Any]], topos: list[str]) -> list[str]:
    lines = [
        f"{'topology':<13}{'nodes':>6}  "
        + "".join(f"{v + ' s':>11}{'ms/node':>9}" for v in VARIANTS)
        + f"{'Mininet/fidelnet':>18}{'Mininet/+shells':>17}"
    ]
    for topo in topos:
        cells: dict[str, dict[str, Any]] = {
            r["variant"]: r for r in records if r["topo"] == topo and r.get("variant")
        }
        nodes = next((r["nodes"] for r in cells.values() if r.get("nodes")), nodes_of(topo))
        row = f"{topo:<13}{nodes:>6}  "
        for v in VARIANTS:
            r = cells.get(v)
            t = r.get("total_s") if r else None
            why = "" if t is not None else ("err" if r and "error" in r else "-")
            row += f"{fmt(t) if t is not None else why:>11}"
            row += f"{fmt(t / nodes * 1e3, '.2f') if t is not None else '':>9}"
        peer = cells.get("mininet", {}).get("total_s")
        for v in ("fidelnet", "+shells"):
            mine = cells.get(v, {}).get("total_s")
            ratio = f"{peer / mine:.1f}x" if peer and mine else "-"
            row += f"{ratio:>18}" if v == "fidelnet" else f"{ratio:>17}"
        lines.append(row)
    return lines


def plot(records: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {
        "fidelnet": "o-",
        "+shells": "s--",
        "ipv6 off": "^:",
        "bridges": "d-.",
        "mininet": "x-",
    }
    for v in VARIANTS:
        for fam in sorted({family(r["topo"]) for r in records}):
            pts = sorted(
                (r["nodes"], r["total_s"] / r["nodes"] * 1e3)
                for r in records
                if r["variant"] == v and family(r["topo"]) == fam and r.get("total_s")
            )
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, styles[v], label=f"{v} {fam}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("build + teardown + kernel cleanup, ms per node")
    ax.set_title("Scale: time per node (lower is better; flat is linear)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topos", nargs="*", help="topologies for all four variants")
    p.add_argument("--big", nargs="*", help="fidelnet-only sizes")
    p.add_argument(
        "--big-variants",
        nargs="*",
        default=list(BIG_VARIANTS),
        choices=["fidelnet", "+shells", "ipv6 off", "bridges"],
        help="variants at the --big sizes",
    )
    p.add_argument("--next", default=None, help="built again after the biggest (first topo)")
    p.add_argument("--quick", action="store_true", help="small sizes, no --big")
    p.add_argument("--no-peer", action="store_true", help="fidelnet only")
    p.add_argument("--peer-max-s", type=float, default=900.0, help="skip slower peer runs")
    p.add_argument("--timeout", type=float, default=3600.0, help="one measurement, seconds")
    p.add_argument("--settle", type=float, default=0.5, help="idle seconds before memory")
    p.add_argument("--fidelnet-python", default=str(REPO / ".venv" / "bin" / "python"))
    p.add_argument("--mininet-python", default="/usr/bin/python3")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("scale: building networks needs root")
    topos = args.topos if args.topos is not None else (QUICK if args.quick else STANDARD)
    big = args.big if args.big is not None else ([] if args.quick else BIG)
    records: list[dict[str, Any]] = []
    for topo in topos:
        for v in VARIANTS:
            if v == "mininet":
                guess = predicted(records, topo, nodes_of(topo))
                if args.no_peer or (guess is not None and guess > args.peer_max_s):
                    why = "--no-peer" if args.no_peer else f"predicted {guess:.0f} s"
                    records.append({"variant": v, "topo": topo, "skipped": why})
                    print(f"  {topo:<13} {v:<9} not run: {why}", flush=True)
                    continue
            r = measure(v, topo, args)
            records.append(r)
            print(line(r), flush=True)
    for topo in big:
        for v in args.big_variants:
            r = measure(v, topo, args)
            records.append(r)
            print(line(r), flush=True)
    nxt = args.next or (topos[0] if topos else "linear,50")
    again = measure("fidelnet", nxt, args) if big else None
    if again is not None:
        print(line(again), " <- built again after the biggest", flush=True)
    print()
    for row in table(records, list(dict.fromkeys(topos + big))):
        print(row)
    if again is not None:
        first = next((r for r in records if r["topo"] == nxt and r["variant"] == "fidelnet"), None)
        before = first.get("total_s") if first else None
        print(
            f"\nnext build after {big[-1]}: {nxt} {fmt(again.get('total_s'), '.2f')} s"
            + (f" (first measured {fmt(before, '.2f')} s)" if before else "")
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    header = {
        "command": sys.argv,
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "git": subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
    }
    path = out / f"scale-{stamp}.json"
    doc: dict[str, Any] = {"header": header, "records": records}
    if again is not None:
        doc["next_build"] = again
    path.write_text(json.dumps(doc, indent=1))
    png = out / f"scale-{stamp}.png"
    print(f"\nrecords: {path}")
    print(f"plot:    {png if plot(records, png) else 'not drawn (no matplotlib)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
