"""VM nodes: how long they take to boot, together, and what each costs in memory
(issue 12). For each count (default 1, 4 and 8): that many VM hosts and one namespace
host on one switch, ``Network.start()`` timed to the moment every guest's agent
answered and its NICs were set up, then one command in each guest, then the RSS of
each QEMU process. Prints a table; a benchmark, not a test: it asserts nothing.

    .venv/bin/python bench/vm_boot.py --counts 1 4 8 --memory 256

The accelerator is the one fidelnet chooses (KVM where a guest boots with it, else
TCG, which the table says).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def measure(count: int, memory: int) -> dict[str, object]:
    from fidelnet import Network
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
    from fidelnet.topology.spec import VMSpec

    t = TopologySpec()
    t.add_node(NodeSpec("s1", kind="switch"))
    t.add_node(NodeSpec("h0", ip="10.0.0.100/24"))
    t.add_link(LinkSpec("h0", "s1"))
    for i in range(1, count + 1):
        vm = VMSpec(memory_mb=memory)
        t.add_node(NodeSpec(f"v{i}", ip=f"10.0.0.{i}/24", backend="qemu", vm=vm))
        t.add_link(LinkSpec(f"v{i}", "s1"))
    began = time.monotonic()
    with Network(t) as net:
        up = time.monotonic() - began
        firsts = []
        for i in range(1, count + 1):
            t0 = time.monotonic()
            net[f"v{i}"].cmd("true")
            firsts.append(time.monotonic() - t0)
        out = net["h0"].cmd(f"ping -c1 -W5 10.0.0.{count}")
        about = [net[f"v{i}"].backend.describe(net[f"v{i}"]) for i in range(1, count + 1)]
        rss = [int(a["rss_kib"]) for a in about if a.get("rss_kib")]
        accel = str(about[0].get("accel", "?"))
        clocks = [int(a["clock_uncertainty_ns"]) for a in about if "clock_uncertainty_ns" in a]
    return {
        "vms": count,
        "memory_mb": memory,
        "accel": accel,
        "start_s": round(up, 2),
        "first_cmd_ms": round(1e3 * statistics.median(firsts), 1),
        "rss_mib_median": round(statistics.median(rss) / 1024, 1) if rss else None,
        "rss_mib_max": round(max(rss) / 1024, 1) if rss else None,
        "clock_uncertainty_us_max": round(max(clocks) / 1e3, 1) if clocks else None,
        "ping_ok": " 0% packet loss" in out,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--memory", type=int, default=256, help="MiB per VM")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("vm_boot: building networks needs root")
    rows = []
    for n in args.counts:
        r = measure(n, args.memory)
        rows.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(f"{'VMs':>4} {'accel':>5} {'start s':>8} {'s per VM':>9} {'RSS MiB':>8} "
          f"{'1st cmd ms':>10} {'clock ±us':>9}")  # fmt: skip
    for r in rows:
        per = float(str(r["start_s"])) / int(str(r["vms"]))
        print(
            f"{r['vms']:>4} {r['accel']:>5} {r['start_s']:>8} {per:>9.2f} "
            f"{r['rss_mib_median']!s:>8} {r['first_cmd_ms']:>10} "
            f"{r['clock_uncertainty_us_max']!s:>9}"
        )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"vm-boot-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.write_text(json.dumps(rows, indent=1))
    print(f"\nrecords: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
