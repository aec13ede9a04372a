"""Open vSwitch switches and OpenFlow controllers: fidelnet against stock Mininet, the
same Mininet script on both sides (bench/_ovs_side.py), in the same run.

A benchmark, not a test: it prints medians and ratios (Mininet's time / fidelnet's)
and writes the raw records to ``bench/results/ovs_switches-<UTC>.json``. Run it as
root after ``make test`` (Debian's mininet, openvswitch-switch and
openvswitch-testcontroller)::

    .venv/bin/python bench/ovs_switches.py              # 3 repetitions
    .venv/bin/python bench/ovs_switches.py --repeat 1

Both sides use OVS's userspace datapath (this kernel has no ``openvswitch``
module): Mininet's ``OVSSwitch(datapath='user')`` on a private ``ovs-vswitchd`` the
peer script starts, fidelnet's on the run's own. Cases:

- ``standalone``: ``OVSBridge`` (learning bridges, no controller) on ``linear,100``
  and ``tree,3,4``;
- ``ref``: ``OVSSwitch`` with ``OVSController`` (Open vSwitch's test controller) on
  ``linear,16`` and ``tree,2,4``, and, fidelnet only, ``linear,100`` and ``tree,3,4``:
  the test controller serves at most 16 switches, so Mininet's switches past the 16th
  never connect (fidelnet runs one controller process per 16 switches).

Columns: ``up`` (build, start, and wait until every switch is connected),
``reach`` (h1 pings the last host and back), ``pingall`` (topologies of at most 16
hosts), ``stop``, and the loss of the pingall. The ratio "to a connected, pingable
network" is Mininet's (up + reach) over fidelnet's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIDE = HERE / "_ovs_side.py"
PEER_PYTHON = "/usr/bin/python3"

CASES = [
    ("standalone", "linear,100", True),
    ("standalone", "tree,3,4", True),
    ("ref", "linear,16", True),
    ("ref", "tree,2,4", True),
    ("ref", "linear,100", False),
    ("ref", "tree,3,4", False),
]


def _run(side: str, mode: str, topo: str) -> dict[str, Any]:
    if side == "fidelnet":
        from fidelnet.compat import shim_path

        env = dict(os.environ, PYTHONPATH=f"{shim_path()}:{ROOT / 'src'}")
        argv = [sys.executable, str(SIDE), "--topo", topo, "--mode", mode]
    else:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        argv = [PEER_PYTHON, str(SIDE), "--topo", topo, "--mode", mode]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800, check=False)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"side": side, "topo": topo, "error": (p.stderr or p.stdout)[-600:]}
    rec: dict[str, Any] = json.loads(lines[-1])
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("ovs_switches: run as root")
        return 2
    records: list[dict[str, Any]] = []
    for mode, topo, peer in CASES:
        for i in range(args.repeat):
            sides = ["fidelnet", "mininet"] if peer else ["fidelnet"]
            if i % 2:
                sides.reverse()
            for side in sides:
                rec = _run(side, mode, topo)
                rec.update(mode=mode, rep=i)
                records.append(rec)
                print(json.dumps(rec), flush=True)
    print()
    print(f"{'case':<24}{'side':<10}{'up s':>8}{'reach s':>9}{'pingall s':>11}{'stop s':>8}")
    keys = ("up", "reach", "pingall", "stop")
    for mode, topo, peer in CASES:
        med: dict[str, dict[str, float]] = {}
        for side in ("fidelnet", "mininet") if peer else ("fidelnet",):
            rs = [r for r in records if r["side"] == side and r["topo"] == topo]
            rs = [r for r in rs if r.get("mode") == mode and "error" not in r]
            if not rs:
                print(f"{mode + ' ' + topo:<24}{side:<10}  failed: see the records")
                continue
            m = med[side] = {
                k: statistics.median(r[k] for r in rs) for k in keys if all(k in r for r in rs)
            }
            ping = (
                f"{m['pingall']:.2f} ({statistics.median(r['loss'] for r in rs):.0f}%)"
                if ("pingall" in m)
                else "-"
            )
            print(
                f"{mode + ' ' + topo:<24}{side:<10}{m['up']:>8.2f}{m['reach']:>9.2f}"
                f"{ping:>11}{m['stop']:>8.2f}"
            )
        if len(med) == 2:
            f, p = med["fidelnet"], med["mininet"]
            ratios = " ".join(f"{k} {p[k] / f[k]:.1f}x" for k in keys if k in f and k in p)
            pingable = (p["up"] + p["reach"]) / (f["up"] + f["reach"])
            print(f"{'':<24}ratio     {ratios}; to a connected, pingable network {pingable:.1f}x")
        elif not peer:
            print(f"{'':<24}{'mininet':<10}  cannot: ovs-testcontroller serves 16 switches")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"ovs_switches-{stamp}.json"
    path.write_text(json.dumps({"command": sys.argv, "records": records}, indent=1))
    print(f"\nrecords: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
