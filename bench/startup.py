"""Whole-process start-up: the ``fidelnet`` command, and ``fidelnet mn`` against stock
Mininet's ``mn``, timed from outside, from ``exec`` to exit.

A benchmark, not a test: it asserts nothing. It prints medians and, for ``mn``, the
ratio Mininet/fidelnet measured in the same run, pair by pair (the two commands
alternate, so a drift of the machine's speed moves both)::

    .venv/bin/python bench/startup.py                # light commands + linear,50, 5 each
    .venv/bin/python bench/startup.py --repeat 9 --topo linear,100
    .venv/bin/python bench/startup.py --no-peer      # light commands only, no root needed

Commands, each a fresh process (``subprocess.run``; stdout and stderr read and
dropped), after one warm-up run that is not counted:

- light: ``fidelnet --version``, ``fidelnet validate examples/*.yaml``,
  ``fidelnet runs``, ``fidelnet --help``;
- ``fidelnet mn --topo T --test none`` and ``/usr/bin/mn --topo T --test none
  --switch lxbr --controller none`` (``--peer-args``): stock Mininet's default switch
  needs a running Open vSwitch with its kernel module, which a machine may lack, so
  its peer is the Linux bridge with no controller, as in build_teardown.py; fidelnet
  runs with its defaults (the BPF learning switch), or with the peer's options too
  (``--same-args``). ``--mn-args`` adds options to both.
  Between two network runs the benchmark waits until the kernel has finished
  cleaning up the namespaces (not counted): fidelnet's ``stop()`` waits for the
  kernel to free what the run made, Mininet exits before, and the next run would
  otherwise pay for the previous one's.

Bytecode: both sides get a private, warmed-up ``PYTHONPYCACHEPREFIX`` (a temporary
directory removed at the end), as an installed program has its ``.pyc`` files;
``--no-pyc`` runs both without them (``PYTHONDONTWRITEBYTECODE``), which adds the
compile time of every imported module. Records and a provenance header go to
``bench/results/startup-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import _benchlib as bl  # noqa: E402


def fidelnet_bin() -> str:
    venv = REPO / ".venv" / "bin" / "fidelnet"
    return str(venv) if venv.exists() else (shutil.which("fidelnet") or "fidelnet")


def environment(args: argparse.Namespace, pyc_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    # the venv's bin holds fidelnet-exec; put it first as an activated venv would
    env["PATH"] = str(Path(args.fidelnet).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if pyc_dir is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = pyc_dir
    return env


def timed(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """One whole-process run: wall seconds from start to exit, and its exit status."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"argv": argv, "error": f"timed out after {timeout} s"}
    record: dict[str, Any] = {
        "argv": argv,
        "wall_s": time.perf_counter() - started,
        "exit_status": proc.returncode,
    }
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        record["error"] = " | ".join(tail) or f"exit status {proc.returncode}"
    return record


def light_commands(args: argparse.Namespace) -> dict[str, list[str]]:
    fn = args.fidelnet
    examples = sorted(str(p) for p in (REPO / "examples").glob("*.yaml"))
    return {
        "fidelnet --version": [fn, "--version"],
        f"fidelnet validate examples/*.yaml ({len(examples)})": [fn, "validate", *examples],
        "fidelnet runs": [fn, "runs"],
        "fidelnet --help": [fn, "--help"],
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run_light(args: argparse.Namespace, env: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for name, argv in light_commands(args).items():
        timed(argv, env, args.timeout)  # warm-up: bytecode, page cache
        runs = [timed(argv, env, args.timeout) for _ in range(args.repeat)]
        walls = [r["wall_s"] for r in runs if "error" not in r]
        row: dict[str, Any] = {"command": name, "runs": runs}
        if walls:
            row.update(spread(walls))
        else:
            row["error"] = runs[0].get("error")
        rows.append(row)
        shown = f"{row['median']:.3f} s (min {row['min']:.3f}, max {row['max']:.3f})"
        print(f"  {name:<42} {shown if walls else 'FAILED: ' + str(row['error'])}")
    return rows


def run_pair(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    extra = args.mn_args.split()
    peer = args.peer_args.split()
    fn = [args.fidelnet, "mn", "--topo", args.topo, "--test", "none", *extra]
    fn += peer if args.same_args else []
    mn = [args.mininet, "--topo", args.topo, "--test", "none", *extra, *peer]
    sides = {"fidelnet": fn, "mininet": mn}
    print(f"fidelnet {' '.join(fn[1:])}  vs  {' '.join(mn)}:")
    for argv in sides.values():  # warm-up
        timed(argv, env, args.timeout)
        bl.wait_kernel_cleanup()
    runs: dict[str, list[dict[str, Any]]] = {"fidelnet": [], "mininet": []}
    ratios: list[float] = []
    for rep in range(args.repeat):
        order = ("fidelnet", "mininet") if rep % 2 == 0 else ("mininet", "fidelnet")
        pair: dict[str, float] = {}
        for side in order:
            r = timed(sides[side], env, args.timeout)
            r["cleanup_wait_s"] = bl.wait_kernel_cleanup()
            runs[side].append(r)
            if "error" not in r:
                pair[side] = r["wall_s"]
        if len(pair) == 2:
            ratios.append(pair["mininet"] / pair["fidelnet"])
        print(
            f"  pair {rep + 1}/{args.repeat}: fidelnet {pair.get('fidelnet', float('nan')):.3f} s,"
            f" mininet {pair.get('mininet', float('nan')):.3f} s"
        )
    result: dict[str, Any] = {"topo": args.topo, "fidelnet_argv": fn, "mininet_argv": mn}
    for side, rs in runs.items():
        walls = [r["wall_s"] for r in rs if "error" not in r]
        result[side] = {"runs": rs, **(spread(walls) if walls else {"error": rs[0].get("error")})}
    if ratios:
        result["ratio_mininet_over_fidelnet"] = spread(ratios)
    return result


def provenance(args: argparse.Namespace) -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    version = subprocess.run([args.fidelnet, "--version"], capture_output=True, text=True)
    return {
        "benchmark": "startup",
        "command": [sys.executable, *sys.argv],
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit or None,
        "fidelnet_version": version.stdout.strip() or None,
        "machine": {
            "kernel": platform.release(),
            "nproc": os.cpu_count(),
            "mem_total_kib": bl.mem_total_kib(),
            "loadavg": os.getloadavg(),
        },
        "settings": {
            "repeat": args.repeat,
            "topo": args.topo,
            "mn_args": args.mn_args,
            "peer_args": args.peer_args,
            "same_args": args.same_args,
            "pyc": not args.no_pyc,
            "fidelnet": args.fidelnet,
            "mininet": args.mininet,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Whole-process start-up of fidelnet's commands; fidelnet mn vs mn.",
        epilog="The mn pair needs root. Results: bench/results/startup-<timestamp>.json",
    )
    parser.add_argument("--repeat", type=int, default=5, help="counted runs per command (5)")
    parser.add_argument("--topo", default="linear,50", help="the mn topology (linear,50)")
    parser.add_argument("--mn-args", default="", help="more options for both mn commands")
    parser.add_argument(
        "--peer-args",
        default="--switch lxbr --controller none",
        help="options for stock mn only (default: %(default)s)",
    )
    parser.add_argument(
        "--same-args", action="store_true", help="give fidelnet mn the --peer-args too"
    )
    parser.add_argument("--no-peer", action="store_true", help="light commands only")
    parser.add_argument("--no-pyc", action="store_true", help="run without .pyc files")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument("--fidelnet", default=fidelnet_bin(), help="the fidelnet command")
    parser.add_argument("--mininet", default="/usr/bin/mn", help="stock Mininet's mn")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat: must be at least 1")
    peer = not args.no_peer
    if peer and os.geteuid() != 0:
        sys.exit("startup: the mn pair builds networks and needs root (or --no-peer)")
    if peer and not os.access(args.mininet, os.X_OK):
        sys.exit(f"startup: {args.mininet}: not found (Debian: apt-get install mininet)")

    record = provenance(args)
    pyc_dir = None if args.no_pyc else tempfile.mkdtemp(prefix="startup-pyc-")
    try:
        env = environment(args, pyc_dir)
        print(f"light commands, median of {args.repeat} (whole process):")
        record["light"] = run_light(args, env)
        if peer:
            record["mn"] = run_pair(args, env)
    finally:
        if pyc_dir is not None:
            shutil.rmtree(pyc_dir, ignore_errors=True)

    if peer:
        mn = record["mn"]
        fn_m, mn_m = mn["fidelnet"].get("median"), mn["mininet"].get("median")
        ratio = mn.get("ratio_mininet_over_fidelnet")
        print()
        print(
            f"whole process, {args.topo}: fidelnet mn {fn_m if fn_m is None else f'{fn_m:.3f}'} s,"
            f" stock mn {mn_m if mn_m is None else f'{mn_m:.3f}'} s (medians of {args.repeat})"
        )
        if ratio:
            print(
                f"ratio mn/fidelnet: median {ratio['median']:.1f}x "
                f"(pairs {ratio['min']:.1f}x-{ratio['max']:.1f}x)"
            )
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"startup-{stamp}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"records: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
