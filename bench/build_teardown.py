"""Build and teardown time, and memory per idle node: fidelnet against stock Mininet.

A benchmark, not a test: it asserts nothing, it prints ratios against stock
Mininet measured in the same run on the same machine (absolute times drift from
run to run; ratios measured side by side are what to compare). Run it as root::

    make bench                                  # installs what it needs, then this
    .venv/bin/python bench/build_teardown.py    # the full set, 3 repetitions
    .venv/bin/python bench/build_teardown.py --quick --repeat 1

Topologies: ``linear,100`` (Mininet's ``LinearTopo(k=100)``: 100 hosts, 100
switches), ``line,50`` (a routed line of 50 nodes, no switches) and ``tree,3,4``
(64 hosts, 21 switches); ``--quick`` uses ``linear,10``, ``line,10`` and
``tree,2,3``. Each measurement runs in its own subprocess, one side at a time, the
two sides alternating from one repetition to the next:

- fidelnet: ``<venv>/bin/python bench/fidelnet_side.py --topo T --json``
- Mininet:  ``/usr/bin/python3 bench/peer_mininet.py --topo T --json``
  (``Mininet(topo, switch=LinuxBridge, controller=None)``)

The table shows medians; the raw records and a provenance header (command,
versions, kernel, machine, settings) go to
``bench/results/build_teardown-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import _benchlib as bl  # noqa: E402

FULL = ["linear,100", "line,50", "tree,3,4"]
QUICK = ["linear,10", "line,10", "tree,2,3"]
SIDES = ("fidelnet", "mininet")
UNAVAILABLE = 3  # exit status of a side that cannot import what it needs


def default_fidelnet_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def side_command(
    side: str, topo: str, args: argparse.Namespace, extra: list[str] | None = None
) -> list[str]:
    if side == "fidelnet":
        argv = [args.fidelnet_python, str(HERE / "fidelnet_side.py")]
    else:
        argv = [args.mininet_python, str(HERE / "peer_mininet.py")]
    argv += ["--topo", topo, "--json", "--settle", str(args.settle)]
    if args.check:
        argv.append("--check")
    if args.shells and side == "fidelnet":
        argv.append("--shells")
    return argv + (extra or [])


def side_env(side: str, args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if side == "fidelnet":
        # the venv's bin holds fidelnet-exec; put it first as an activated venv would
        venv_bin = str(Path(args.fidelnet_python).parent)
        env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    return env


def run_side(
    side: str, topo: str, args: argparse.Namespace, extra: list[str] | None = None
) -> dict[str, Any]:
    argv = side_command(side, topo, args, extra)
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            env=side_env(side, args),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"side": side, "topo": topo, "error": f"timed out after {args.timeout} s"}
    record: dict[str, Any] = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                record = json.loads(line)
            break
    record.setdefault("side", side)
    record.setdefault("topo", topo)
    record["exit_status"] = proc.returncode
    record["wall_s"] = time.perf_counter() - started
    if proc.returncode != 0 and "error" not in record and not record.get("leaks"):
        tail = proc.stderr.strip().splitlines()[-3:]
        record["error"] = " | ".join(tail) or f"exit status {proc.returncode}"
    return record


def median(records: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else None


def summarise(runs: list[dict[str, Any]], topos: list[str]) -> list[dict[str, Any]]:
    rows = []
    for topo in topos:
        per_side: dict[str, dict[str, Any]] = {}
        for side in SIDES:
            ok = [r for r in runs if r["side"] == side and r["topo"] == topo and "error" not in r]
            for r in ok:
                if "build_s" in r and "teardown_s" in r:
                    r["total_s"] = r["build_s"] + r["teardown_s"]
                procs = r.get("processes") or {}
                if r.get("nodes"):
                    r["rss_per_node_mib"] = procs.get("rss_sum_kib", 0) / 1024 / r["nodes"]
                    r["pss_per_node_mib"] = procs.get("pss_sum_kib", 0) / 1024 / r["nodes"]
            per_side[side] = {
                "topo": topo,
                "side": side,
                "runs": len(ok),
                "failed": sum(
                    1 for r in runs if r["side"] == side and r["topo"] == topo and "error" in r
                ),
                "nodes": ok[0].get("nodes") if ok else None,
                **{
                    k: median(ok, k)
                    for k in (
                        "build_s",
                        "teardown_s",
                        "total_s",
                        "mem_per_node_mib",
                        "mem_noise_per_node_mib",
                        "rss_per_node_mib",
                        "pss_per_node_mib",
                        "root_links_added",
                    )
                },
            }
        fn, mn = per_side["fidelnet"], per_side["mininet"]
        for row in (fn, mn):
            row["speedup_mininet_over_fidelnet"] = None
            row["memory_fidelnet_over_mininet"] = None
        if fn["total_s"] and mn["total_s"]:
            fn["speedup_mininet_over_fidelnet"] = mn["total_s"] / fn["total_s"]
        if resolved(fn) and resolved(mn):
            fn["memory_fidelnet_over_mininet"] = fn["mem_per_node_mib"] / mn["mem_per_node_mib"]
        rows += [fn, mn]
    return rows


def resolved(row: dict[str, Any]) -> bool:
    """Whether the memory figure stands above the noise of its readings."""
    mem, noise = row.get("mem_per_node_mib"), row.get("mem_noise_per_node_mib")
    return mem is not None and noise is not None and mem > noise


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'topology':<11} {'side':<9} {'nodes':>5} {'build s':>8} {'teardown s':>10} "
        f"{'total s':>8} {'MB/node':>8} {'PSS MB/node':>11} {'runs':>4}  ratio"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = ""
        if row["side"] == "fidelnet":
            parts = []
            if row["speedup_mininet_over_fidelnet"] is not None:
                parts.append(f"time mn/fn {row['speedup_mininet_over_fidelnet']:.1f}x")
            if row["memory_fidelnet_over_mininet"] is not None:
                parts.append(f"mem fn/mn {row['memory_fidelnet_over_mininet']:.2f}")
            elif row["mem_per_node_mib"] is not None:
                parts.append("mem: within noise")
            ratio = ", ".join(parts)
        runs = f"{row['runs']}" + (f"+{row['failed']}!" if row["failed"] else "")
        mem = fmt(row["mem_per_node_mib"], ".2f")
        if row["mem_per_node_mib"] is not None and not resolved(row):
            mem += "?"
        print(
            f"{row['topo']:<11} {row['side']:<9} {fmt(row['nodes'], 'd'):>5} "
            f"{fmt(row['build_s'], '.3f'):>8} {fmt(row['teardown_s'], '.3f'):>10} "
            f"{fmt(row['total_s'], '.3f'):>8} {mem:>8} "
            f"{fmt(row['pss_per_node_mib'], '.2f'):>11} {runs:>4}  {ratio}"
        )
    print(
        "\nMB/node: drop in MemAvailable per idle node, MiB ('?': not above the spread of "
        "its readings, i.e. noise);\nPSS MB/node: proportional set size of the processes "
        "the run started, per node; ratios from medians;\n'!': failed runs (see the JSON). "
        "Teardown is what the caller waits for: the kernel frees namespaces afterwards, "
        "asynchronously."
    )


def provenance(args: argparse.Namespace) -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None
            )
    except OSError:
        pass
    return {
        "benchmark": "build_teardown",
        "command": [sys.executable, *sys.argv],
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "machine": {
            "kernel": platform.release(),
            "nproc": os.cpu_count(),
            "cpu": cpu,
            "mem_total_kib": bl.mem_total_kib(),
            "ci": os.environ.get("CI"),
        },
        "settings": {
            "repeat": args.repeat,
            "settle_s": args.settle,
            "gap_s": args.gap,
            "check": args.check,
            "fidelnet_python": args.fidelnet_python,
            "mininet_python": args.mininet_python,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Build/teardown time and memory per node: fidelnet vs stock Mininet.",
        epilog="Run as root. Results: bench/results/build_teardown-<timestamp>.json",
    )
    parser.add_argument("--repeat", type=int, default=3, help="repetitions per side (3)")
    parser.add_argument(
        "--quick", action="store_true", help=f"small sizes ({', '.join(QUICK)}), under a minute"
    )
    parser.add_argument(
        "--topo", action="append", help=f"a topology to run (repeatable); default {FULL}"
    )
    parser.add_argument("--side", choices=(*SIDES, "both"), default="both")
    parser.add_argument("--settle", type=float, help="idle seconds before reading memory")
    parser.add_argument("--gap", type=float, help="pause between runs, seconds")
    parser.add_argument("--check", action="store_true", help="ping through each network too")
    parser.add_argument(
        "--shells",
        action="store_true",
        help="fidelnet starts a shell in every node during build, as Mininet always does",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    parser.add_argument("--fidelnet-python", default=default_fidelnet_python())
    parser.add_argument("--mininet-python", default="/usr/bin/python3")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: must be at least 1")
    if args.settle is None:
        args.settle = 0.3 if args.quick else 2.0
    if args.gap is None:
        args.gap = 0.2 if args.quick else 2.0
    if os.geteuid() != 0:
        sys.exit("build_teardown: both sides build network namespaces and need root")
    topos = args.topo or (QUICK if args.quick else FULL)
    sides = list(SIDES) if args.side == "both" else [args.side]

    record = provenance(args)
    record["topologies"] = topos
    runs: list[dict[str, Any]] = []
    unavailable: set[str] = set()
    for topo in topos:
        for rep in range(args.repeat):
            order = sides if rep % 2 == 0 else list(reversed(sides))
            for side in order:
                if side in unavailable:
                    continue
                print(f"# {topo:<11} {side:<9} run {rep + 1}/{args.repeat}", end="", flush=True)
                r = run_side(side, topo, args)
                r["repetition"] = rep
                runs.append(r)
                if r["exit_status"] == UNAVAILABLE:
                    unavailable.add(side)
                    print(f"  unavailable, skipping this side: {r.get('error')}")
                elif "error" in r:
                    print(f"  FAILED: {r['error']}")
                else:
                    total = r.get("build_s", 0.0) + r.get("teardown_s", 0.0)
                    print(f"  {total:.3f} s")
                if r.get("leaks"):
                    print(f"  WARNING: {side} left objects behind: {r['leaks']}")
                time.sleep(args.gap)

    rows = summarise(runs, topos)
    versions = {
        "fidelnet": next((r["fidelnet_version"] for r in runs if "fidelnet_version" in r), None),
        "mininet": next((r["mininet_version"] for r in runs if "mininet_version" in r), None),
    }
    record["versions"] = versions
    record["shells"] = args.shells
    record["summary"] = rows
    record["runs"] = runs

    print()
    print(
        f"fidelnet {versions['fidelnet'] or '-'} vs Mininet {versions['mininet'] or '-'}, "
        f"kernel {platform.release()}, {os.cpu_count()} cores, medians of {args.repeat}"
    )
    print(
        "fidelnet build includes a shell started in every node (--shells), as Mininet's does"
        if args.shells
        else "fidelnet build starts no shells (they start on first use); --shells adds them"
    )
    print_table(rows)

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"build_teardown-{stamp}.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nraw results: {path}")
    failed = any("error" in r for r in runs if r["side"] not in unavailable)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
