"""Soak and concurrency: long runs must not grow, many runs at once must not touch
each other, and nothing may be left behind, even after ``kill -9`` (issue 14).

A benchmark, not a test: it prints what it measured and exits 1 when a run leaked or a
survivor failed. Run it as root after ``make install``::

    .venv/bin/python bench/soak.py run --minutes 60          # the hour
    .venv/bin/python bench/soak.py run --minutes 5           # the CI-sized version
    .venv/bin/python bench/soak.py concurrent --rounds 3     # four runs at once, killed at random

``run``: ``linear`` with ``--nodes`` nodes (hosts and switches; the first four
switch-to-switch links on the link engine with 1 ms of delay, so linkd carries the
traffic), a pktgen flow from the first host to the last for the whole run (1,000
packets/s in back-to-back 30 s pieces), and every second one host's access link (not
on the flow's path) taken down and, 0.3 s later, up again. Every ``--sample`` seconds:
the RSS, open descriptors and threads of this process and of linkd, the processes
under this one, the run's namespaces and the size of its state file. Growth is the
median of the last tenth of the run against the median of the tenth after the
warm-up (the first fifth, at least a minute). The series, the plot and the verdict go
to ``bench/results/soak-<UTC>.{json,png}``.

``concurrent``: ``--runs`` runs of this script's ``child`` mode (a 4-node line on the
engine, a pktgen flow in 5 s pieces) start in random order, a few seconds apart; a
random half of them is killed with SIGKILL part way, and ``fidelnet clean`` runs at
once after each kill, while the others still run. Every survivor must finish with its
own objects intact and its traffic through; after the round and a last ``fidelnet
clean``, nothing of any run may be left: namespaces, state files, host interfaces,
cgroups, fidelnet processes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FIDELNET = str(Path(sys.executable).with_name("fidelnet"))
CGROUP_ROOTS = ("/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuset")
BINARIES = ("fidelnet-linkd", "fidelnet-pktgen", "fidelnet-exec")


# -- what exists on the machine ----------------------------------------------------------------


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def objects() -> dict[str, set[str]]:
    """Every kind of object a run creates, as names (processes as ``pid exe``)."""
    cgroups = {
        f"{root}/{name}"
        for root in CGROUP_ROOTS
        for name in _listdir(root)
        if name.startswith("fidelnet")
    }
    procs = set()
    for pid in _listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if exe.startswith(BINARIES):
            procs.add(f"{pid} {exe}")
    return {
        "netns": set(_listdir("/run/netns")),
        "state files": set(_listdir("/run/fidelnet")),
        "host links": set(_listdir("/sys/class/net")),
        "cgroups": cgroups,
        "processes": procs,
    }


def leaked(before: dict[str, set[str]], after: dict[str, set[str]]) -> dict[str, list[str]]:
    return {k: sorted(after[k] - before[k]) for k in after if after[k] - before[k]}


def proc_stats(pid: int) -> dict[str, int] | None:
    """RSS (KiB), open descriptors and threads of ``pid``; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {
        "rss_kib": int(fields["VmRSS"].split()[0]),
        "fds": fds,
        "threads": int(fields["Threads"].strip()),
    }


def children(pid: int) -> int:
    """Processes whose parent is ``pid`` (every thread's children)."""
    total = 0
    for tid in _listdir(f"/proc/{pid}/task"):
        try:
            total += len(Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except OSError:
            continue
    return total


def clean() -> str:
    p = subprocess.run([FIDELNET, "clean"], capture_output=True, text=True, check=False)
    return (p.stdout + p.stderr).strip()


# -- run: one long run -------------------------------------------------------------------------


def soak(nodes: int, minutes: float, sample_s: float) -> dict[str, Any]:
    from fidelnet import Network
    from fidelnet.measure import pktgen
    from fidelnet.topology import LinkParams, linear

    spec = linear(max(3, nodes // 2))
    between = [lk for lk in spec.links if lk.a.startswith("s") and lk.b.startswith("s")]
    for lk in between[:4]:
        lk.backend = "engine"
        lk.params = LinkParams(delay=0.001)
    hosts = sorted((n for n in spec.nodes if n.startswith("h")), key=lambda n: int(n[1:]))
    before = objects()
    seconds = minutes * 60
    samples: list[dict[str, Any]] = []
    pieces: list[dict[str, Any]] = []
    flaps = {"done": 0, "errors": []}
    stop = threading.Event()
    with Network(spec, command="bench soak") as net:
        t0 = time.monotonic()
        run_id = net.run_id
        state = Path("/run/fidelnet") / f"{run_id}.state"
        access = [
            lk
            for lk in net.links
            if {lk.spec.a, lk.spec.b} & set(hosts[1:-1]) and lk.spec.backend != "engine"
        ]

        def sample() -> None:
            while not stop.wait(sample_s):
                linkd = net.engine.pid if net.engine is not None else None
                row: dict[str, Any] = {
                    "t": round(time.monotonic() - t0, 1),
                    "self": proc_stats(os.getpid()),
                    "linkd": proc_stats(linkd) if linkd else None,
                    "children": children(os.getpid()),
                    "netns": sum(1 for n in _listdir("/run/netns") if run_id in n),
                    "state_bytes": state.stat().st_size if state.exists() else 0,
                    "flaps": flaps["done"],
                }
                samples.append(row)

        def flap() -> None:
            k = 0
            while not stop.wait(1.0):
                link = access[k % len(access)]
                k += 1
                try:
                    link.down()
                    if stop.wait(0.3):
                        link.up()
                        break
                    link.up()
                    flaps["done"] += 1
                except Exception as exc:  # kept and reported: a flap must never fail
                    flaps["errors"].append(f"{time.monotonic() - t0:.1f}s {link}: {exc}")

        threads = [threading.Thread(target=f, daemon=True) for f in (sample, flap)]
        for t in threads:
            t.start()
        src, dst = net[hosts[0]], net[hosts[-1]]
        try:
            while time.monotonic() - t0 < seconds - 1:
                piece = min(30.0, seconds - (time.monotonic() - t0))
                r = pktgen.run(src, dst, str(dst.ip), pktgen.TrafficSpec(1000, 1000, piece))
                pieces.append(
                    {"t": round(time.monotonic() - t0, 1), "sent": r.sent, "lost": r.lost}
                )
        finally:
            stop.set()
            for t in threads:
                t.join()
    after = objects()
    return {
        "nodes": len(spec.nodes),
        "minutes": minutes,
        "samples": samples,
        "traffic": pieces,
        "flaps": flaps["done"],
        "flap_errors": flaps["errors"],
        "leaked": leaked(before, after),
    }


def growth(samples: list[dict[str, Any]], path: tuple[str, str]) -> tuple[float, float, float]:
    """(first, last, growth %) of one series: medians of the tenth after the warm-up
    (the first fifth of the run, at least 60 s) and of the last tenth."""
    end = samples[-1]["t"]
    warm = max(60.0, end / 5) if end > 120 else end / 5
    span = max((end - warm) / 10, samples[1]["t"] - samples[0]["t"] if len(samples) > 1 else 1)

    def value(s: dict[str, Any]) -> float | None:
        part = s.get(path[0])
        return None if part is None else float(part[path[1]])

    first = [v for s in samples if warm <= s["t"] < warm + span if (v := value(s)) is not None]
    last = [v for s in samples if s["t"] >= end - span if (v := value(s)) is not None]
    if not first or not last:
        return (0.0, 0.0, 0.0)
    a, b = statistics.median(first), statistics.median(last)
    return a, b, (b - a) / a * 100 if a else 0.0


def plot(result: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result["samples"]
    t = [x["t"] / 60 for x in s]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, (who, key, label) in zip(
        axes.flat,
        [
            ("self", "rss_kib", "fidelnet RSS (MiB)"),
            ("linkd", "rss_kib", "linkd RSS (MiB)"),
            ("self", "fds", "fidelnet open fds"),
            ("linkd", "fds", "linkd open fds"),
        ],
        strict=True,
    ):
        ys = [(x[who] or {}).get(key) for x in s]
        ys = [y / 1024 if y is not None and key == "rss_kib" else y for y in ys]
        ax.plot(t, ys)
        ax.set_title(label)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.suptitle(
        f"soak: {result['nodes']} nodes, {result['minutes']:g} min, {result['flaps']} link flaps"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def cmd_run(args: argparse.Namespace) -> int:
    result = soak(args.nodes, args.minutes, args.sample)
    rows = []
    for who in ("self", "linkd"):
        for key in ("rss_kib", "fds", "threads"):
            a, b, g = growth(result["samples"], (who, key))
            rows.append({"series": f"{who}.{key}", "first": a, "last": b, "growth_pct": g})
    result["growth"] = rows
    lost = sum(p["lost"] for p in result["traffic"])
    sent = sum(p["sent"] for p in result["traffic"])
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"soak-{stamp}"
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    plot(result, out.with_suffix(".png"))
    print(f"soak: {result['nodes']} nodes, {args.minutes:g} min, {result['flaps']} flaps "
          f"({len(result['flap_errors'])} failed), traffic {sent} sent, {lost} lost")  # fmt: skip
    print(f"{'series':16} {'after warm-up':>14} {'at the end':>12} {'growth':>8}")
    for r in rows:
        print(f"{r['series']:16} {r['first']:14.0f} {r['last']:12.0f} {r['growth_pct']:7.2f}%")
    print("leaked:", result["leaked"] or "nothing")
    print(f"written: {out}.json, {out}.png")
    for e in result["flap_errors"][:5]:
        print("flap error:", e)
    return 1 if result["leaked"] or result["flap_errors"] else 0


# -- concurrent: many runs at once, some killed --------------------------------------------------


def cmd_child(args: argparse.Namespace) -> int:
    """One run of the concurrent round: prints a JSON line with what it saw."""
    from fidelnet import Network
    from fidelnet.measure import pktgen
    from fidelnet.topology import LinkParams, linear

    spec = linear(4)
    spec.link_backend = "engine"
    for lk in spec.links:
        lk.params = LinkParams(delay=0.001)
    out: dict[str, Any] = {"index": args.index, "pieces": []}
    with Network(spec, command=f"bench soak child {args.index}") as net:
        out["run_id"] = net.run_id
        print(json.dumps({"started": net.run_id}), flush=True)
        mine = {n for n in _listdir("/run/netns") if net.run_id in n}
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            r = pktgen.run(
                net["h1"], net["h4"], str(net["h4"].ip), pktgen.TrafficSpec(500, 500, 5.0)
            )
            out["pieces"].append({"sent": r.sent, "received": r.unique})
        still = {n for n in _listdir("/run/netns") if net.run_id in n}
        out["own_objects_intact"] = (
            still == mine
            and net.engine is not None
            and (proc_stats(net.engine.pid or 0) is not None)
        )
    sent = sum(p["sent"] for p in out["pieces"])
    got = sum(p["received"] for p in out["pieces"])
    out["delivered"] = got / sent if sent else 0.0
    out["ok"] = bool(out["own_objects_intact"]) and out["delivered"] >= 0.95
    print(json.dumps(out), flush=True)
    return 0 if out["ok"] else 1


def one_round(runs: int, seconds: float, rng: random.Random) -> dict[str, Any]:
    before = objects()
    order = list(range(runs))
    rng.shuffle(order)
    victims = set(rng.sample(order, runs // 2))
    procs: dict[int, subprocess.Popen[str]] = {}
    started_at: dict[int, float] = {}
    for k in order:
        procs[k] = subprocess.Popen(
            [sys.executable, __file__, "child", "--index", str(k), "--seconds", str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started_at[k] = time.monotonic()
        time.sleep(rng.uniform(0.5, 3.0))
    kills = sorted((started_at[k] + rng.uniform(0.3, 0.7) * seconds, k) for k in victims)
    events = []
    for when, k in kills:
        time.sleep(max(0.0, when - time.monotonic()))
        procs[k].send_signal(signal.SIGKILL)
        procs[k].wait()
        events.append({"killed": k, "clean": clean()})
    outcomes = []
    for k in order:
        out, err = procs[k].communicate(timeout=seconds * 4 + 120)
        last = out.strip().splitlines()[-1] if out.strip() else ""
        result = json.loads(last) if last.startswith("{") else {}
        outcomes.append(
            {
                "index": k,
                "killed": k in victims,
                "exit": procs[k].returncode,
                "result": result if k not in victims else None,
                "stderr": err[-500:] if procs[k].returncode and k not in victims else "",
            }
        )
    final_clean = clean()
    return {
        "order": order,
        "killed": sorted(victims),
        "events": events,
        "outcomes": outcomes,
        "final_clean": final_clean,
        "leaked": leaked(before, objects()),
    }


def cmd_concurrent(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    rounds = []
    bad = 0
    for i in range(args.rounds):
        r = one_round(args.runs, args.seconds, rng)
        rounds.append(r)
        survivors = [o for o in r["outcomes"] if not o["killed"]]
        failed = [o for o in survivors if o["exit"] != 0]
        bad += bool(failed or r["leaked"])
        delivered = [round(o["result"].get("delivered", 0), 4) for o in survivors if o["result"]]
        failed_ids = [o["index"] for o in failed]
        print(f"round {i + 1}: started in order {r['order']}, killed {r['killed']} "
              f"(fidelnet clean after each), survivors delivered {delivered}, "
              f"failed {failed_ids}, leaked {r['leaked'] or 'nothing'}")  # fmt: skip
        for o in failed:
            print("  failure:", o["index"], o["exit"], o["stderr"])
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H%M%SZ")
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"soak-concurrent-{stamp}.json"
    out.write_text(json.dumps(rounds, indent=1))
    print(f"written: {out}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run", help="one long run: growth of memory and descriptors")
    r.add_argument("--nodes", type=int, default=100)
    r.add_argument("--minutes", type=float, default=60.0)
    r.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    r.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    c = sub.add_parser("concurrent", help="runs side by side, some killed with SIGKILL")
    c.add_argument("--runs", type=int, default=4)
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--seconds", type=float, default=40.0, help="each run's traffic")
    c.add_argument("--seed", type=int, default=None)
    c.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    ch = sub.add_parser("child", help=argparse.SUPPRESS)
    ch.add_argument("--index", type=int, required=True)
    ch.add_argument("--seconds", type=float, required=True)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("soak: needs root (it builds networks)", file=sys.stderr)
        return 2
    return {"run": cmd_run, "concurrent": cmd_concurrent, "child": cmd_child}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
