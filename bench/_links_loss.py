"""Link fidelity benchmark, ``loss`` and ``fairness``: binomial bands,
Gilbert-Elliott bursts, Jain's index of a dumbbell (``bench/links.py`` runs it)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from _linkslib import (
    MBIT,
    PROBE,
    Ctx,
    Pair,
    binomial_interval,
    finish,
    iperf_json,
    iperf_server,
    jain,
    own_stats,
    pairs_spec,
    print_table,
    probe_json,
    start,
    verdict,
    wait_stderr,
)

from fidelnet import Network
from fidelnet.topology import LinkParams
from fidelnet.topology.builders import dumbbell
from fidelnet.topology.spec import GilbertElliott

# -- loss -----------------------------------------------------------------------------


def target_loss(ctx: Ctx) -> dict[str, Any]:
    n_random, n_ge = (10000, 20000) if ctx.args.quick else (30000, 50000)
    interval = 0.0001
    ge = GilbertElliott(p=1.0, r=25.0)
    cases: list[tuple[str, LinkParams, int]] = [
        ("random 1%", LinkParams(loss=1.0), n_random),
        ("random 10%", LinkParams(loss=10.0), n_random),
        ("Gilbert-Elliott p=1% r=25%", LinkParams(loss_model=ge), n_ge),
    ]
    pairs = [Pair(label, "engine", params, LinkParams()) for label, params, _ in cases]
    runs = []
    with Network(pairs_spec(pairs, ctx.args.seed)) as net:
        for i, ((label, params, n), _p) in enumerate(zip(cases, pairs, strict=True), 1):
            print(f"# loss: {label}", flush=True)
            a, b = net[f"a{i}"], net[f"b{i}"]
            link = net.links[i - 1]
            before = link.stats()["ab"]
            recv = start(
                b,
                [ctx.python, PROBE, "udp-recv", "--port", "9000", "--count", str(n), "--idle", "1"],
            )
            wait_stderr(recv, "ready")
            out, err, _ = a.pexec(
                [
                    ctx.python,
                    PROBE,
                    "udp-send",
                    "--dst",
                    f"10.0.{i}.2",
                    "--port",
                    "9000",
                    "--count",
                    str(n),
                    "--interval",
                    str(interval),
                ]
            )
            sent = probe_json(out, err, f"loss {label} sender")
            rout, rerr = finish(recv, 60)
            got = probe_json(rout, rerr, f"loss {label} receiver")
            after = link.stats()["ab"]
            seqs = set(got["seq"])
            lost = n - len(seqs)
            bursts: list[int] = []
            run = 0
            for s in range(n):
                if s in seqs:
                    if run:
                        bursts.append(run)
                    run = 0
                else:
                    run += 1
            if run:
                bursts.append(run)
            r: dict[str, Any] = {
                "label": label,
                "sent": n,
                "send_errors": sent["send_errors"],
                "send_s": sent["elapsed_s"],
                "received": len(seqs),
                "lost": lost,
                "engine_loss_drops": after["drops"]["loss"] - before["drops"]["loss"],
                "engine_queue_drops": after["drops"]["queue"] - before["drops"]["queue"],
                "bursts": len(bursts),
                "mean_burst": statistics.fmean(bursts) if bursts else math.nan,
            }
            if params.loss_model is None:
                assert params.loss is not None
                lo, hi = binomial_interval(n, params.loss / 100)
                r.update(interval_99=[lo, hi], ok=lo <= lost <= hi)
            else:
                m = params.loss_model
                r["expected_mean_burst"] = 100 / m.r
                pb = m.p / (m.p + m.r)
                r["expected_loss_percent"] = 100 * (pb * m.loss_bad + (1 - pb) * m.loss_good) / 100
                if len(bursts) > 1:
                    half = 2.576 * statistics.stdev(bursts) / math.sqrt(len(bursts))
                    r["mean_burst_ci99"] = [r["mean_burst"] - half, r["mean_burst"] + half]
                    r["ok"] = (
                        r["mean_burst_ci99"][0]
                        <= r["expected_mean_burst"]
                        <= r["mean_burst_ci99"][1]
                    )
                else:
                    r["ok"] = False
            runs.append(r)
    rows = []
    for r in runs:
        measured = f"{r['lost']}/{r['sent']} = {100 * r['lost'] / r['sent']:.3f}%"
        if "interval_99" in r:
            lo, hi = r["interval_99"]
            rows.append(
                [
                    r["label"],
                    measured,
                    f"99% binomial interval {lo}..{hi} lost",
                    verdict(r["ok"]),
                    f"engine counted {r['engine_loss_drops']}",
                    f"mean burst {r['mean_burst']:.2f}",
                ]
            )
        else:
            ci = r.get("mean_burst_ci99", [math.nan, math.nan])
            rows.append(
                [
                    r["label"],
                    f"{measured}; {r['bursts']} bursts, mean {r['mean_burst']:.2f} "
                    f"(99% CI {ci[0]:.2f}..{ci[1]:.2f})",
                    f"1/r = {r['expected_mean_burst']:.2f} inside the CI "
                    f"(loss {r['expected_loss_percent']:.2f}% expected)",
                    verdict(r["ok"]),
                    f"engine counted {r['engine_loss_drops']}",
                    "",
                ]
            )
    print_table(
        "LOSS: UDP probes at 10 kpps, counted by the receiver (sequence numbers)",
        ["configured", "measured", "goal", "pass", "cross-check", "note"],
        rows,
    )
    return {"runs": runs, "interval_s": interval}


# -- fairness -------------------------------------------------------------------------

FAIR_FLOWS = 4
FAIR_OFFERED = 5e6
FAIR_GOAL = 0.99


def fairness_run(ctx: Ctx, queue: str, seconds: int, seed: int) -> dict[str, Any]:
    bottleneck = LinkParams(bw=10e6, max_queue_size=100, queue=queue)  # type: ignore[arg-type]
    spec = dumbbell(FAIR_FLOWS, bottleneck)
    spec.seed = seed
    spec.auto_static_arp = True
    spec.links[0].backend = "engine"
    with Network(spec) as net:
        senders = [net[f"h{k}"] for k in range(1, FAIR_FLOWS + 1)]
        receivers = [net[f"h{k + FAIR_FLOWS}"] for k in range(1, FAIR_FLOWS + 1)]
        servers = [iperf_server(r) for r in receivers]
        clients = []
        for s, r in zip(senders, receivers, strict=True):
            assert r.ip is not None
            clients.append(
                start(
                    s,
                    [
                        "iperf3",
                        "-c",
                        r.ip,
                        "-u",
                        "-l",
                        "1472",
                        "-b",
                        str(int(FAIR_OFFERED)),
                        "-t",
                        str(seconds),
                        "-J",
                    ],
                )
            )
        flows = []
        for k, c in enumerate(clients):
            out, err = finish(c, seconds + 30)
            j = iperf_json(out, err, f"fairness {queue} flow {k + 1}")
            flows.append(
                {
                    "sent_bps": j["end"]["sum_sent"]["bits_per_second"],
                    "received_bps": j["end"]["sum_received"]["bits_per_second"],
                    "lost_percent": j["end"]["sum_received"]["lost_percent"],
                }
            )
        for srv in servers:
            finish(srv, 5)
        stats = own_stats(net.links[0].stats())
    received = [f["received_bps"] for f in flows]
    return {
        "queue": queue,
        "flows": flows,
        "jain": jain(received),
        "total_received_bps": sum(received),
        "bottleneck": stats.get("ab", {}),
    }


def target_fairness(ctx: Ctx) -> dict[str, Any]:
    seconds, reps = (5, 1) if ctx.args.quick else (8, 3)
    runs = []
    for rep in range(reps):
        for queue in ("hifi", "droptail"):
            print(f"# fairness: {queue}, run {rep + 1}/{reps}", flush=True)
            r = fairness_run(ctx, queue, seconds, ctx.args.seed + rep)
            r["repetition"] = rep
            runs.append(r)
    summary = {}
    for queue in ("hifi", "droptail"):
        js = [r["jain"] for r in runs if r["queue"] == queue]
        summary[queue] = {"median": statistics.median(js), "min": min(js), "max": max(js)}
    ok = summary["hifi"]["median"] >= FAIR_GOAL
    rows = []
    for queue in ("hifi", "droptail"):
        mine = [r for r in runs if r["queue"] == queue]
        rows.append(
            [
                f"queue={queue}",
                f"{summary[queue]['median']:.4f}",
                " ".join(f"{r['jain']:.4f}" for r in mine),
                "; ".join(
                    " ".join(f"{f['received_bps'] / MBIT:.2f}" for f in r["flows"]) for r in mine
                ),
                f">= {FAIR_GOAL}" if queue == "hifi" else "(reference)",
                verdict(ok if queue == "hifi" else None),
                " ".join(str(r["bottleneck"].get("drops", {}).get("queue", "-")) for r in mine),
            ]
        )
    print_table(
        f"FAIRNESS: {FAIR_FLOWS} UDP flows of {FAIR_OFFERED / MBIT:g} Mb/s each (iperf3, "
        f"{seconds} s) through a 10 Mb/s engine bottleneck (queue 100 packets) of a dumbbell; "
        "Jain's index of the payload rates received",
        [
            "case",
            "Jain median",
            "Jain per run",
            "per flow Mb/s, per run",
            "goal",
            "pass",
            "queue drops per run",
        ],
        rows,
    )
    return {
        "runs": runs,
        "summary": summary,
        "ok": ok,
        "seconds": seconds,
        "offered_bps": FAIR_OFFERED,
    }
