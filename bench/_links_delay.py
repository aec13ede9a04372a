"""Link fidelity benchmark, ``delay`` and ``jitter``: RTT error under load, one-way
delay quantiles (``bench/links.py`` runs it)."""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from _linkslib import (
    PROBE,
    US,
    Ctx,
    Pair,
    finish,
    iperf_json,
    iperf_server,
    own_stats,
    pairs_spec,
    pct,
    print_table,
    probe_json,
    start,
    verdict,
    wait_stderr,
)

from fidelnet import Network
from fidelnet.topology import LinkParams

# -- delay ----------------------------------------------------------------------------

DELAYS = (0.001, 0.010, 0.050)
ENDPOINTS = ("af_xdp", "tap")  # af_xdp: what auto takes for a link with delay
DELAY_GOAL_P50_US = 20.0
DELAY_GOAL_P999_US = 200.0


def target_delay(ctx: Ctx) -> dict[str, Any]:
    count = 1000 if ctx.args.quick else 5000
    interval = 0.001
    pairs = [Pair("veth (stack)", "veth", LinkParams(), LinkParams())]
    delays = [0.0]
    for kind in ENDPOINTS:
        for d in (0.0, *DELAYS):
            p = LinkParams(delay=d) if d else LinkParams()
            pairs.append(Pair(f"engine {kind} delay {d * 1e3:g} ms", "engine", p, p, kind))
            delays.append(d)
    runs: list[dict[str, Any]] = []
    with Network(pairs_spec(pairs, ctx.args.seed)) as net:
        for i, (p, d) in enumerate(zip(pairs, delays, strict=True), 1):
            print(f"# delay: {p.label}", flush=True)
            a, b = net[f"a{i}"], net[f"b{i}"]
            load_s = math.ceil(count * interval + 2 * d + 3)
            server = iperf_server(b)
            load = start(
                a, ["iperf3", "-c", f"10.0.{i}.2", "-u", "-b", "10M", "-t", str(load_s), "-J"]
            )
            time.sleep(0.5)
            out, err, _ = a.pexec(
                [
                    ctx.python,
                    PROBE,
                    "ping",
                    "--dst",
                    f"10.0.{i}.2",
                    "--count",
                    str(count),
                    "--interval",
                    str(interval),
                    "--wait",
                    str(2 * d + 1),
                ]
            )
            lout, lerr = finish(load, load_s + 30)
            finish(server, 5)
            ping = probe_json(out, err, f"delay {p.label}")
            lj = iperf_json(lout, lerr, f"delay {p.label} load")
            errs_us = [(r - 2 * d * 1e9) / US for r in ping["rtt_ns"]]
            stats = own_stats(net.links[i - 1].stats()) if p.backend == "engine" else {}
            runs.append(
                {
                    "label": p.label,
                    "delay_s": d,
                    "sent": ping["sent"],
                    "received": ping["received"],
                    "err_p50_us": pct(errs_us, 0.5),
                    "err_p99_us": pct(errs_us, 0.99),
                    "err_p999_us": pct(errs_us, 0.999),
                    "err_min_us": min(errs_us, default=math.nan),
                    "err_max_us": max(errs_us, default=math.nan),
                    "load_received_bps": lj["end"]["sum_received"]["bits_per_second"],
                    "load_lost_percent": lj["end"]["sum_received"]["lost_percent"],
                    "link_stats": stats,
                }
            )
    veth = runs[0]
    floors = {
        p.endpoint: r for p, r in zip(pairs, runs, strict=True) if p.endpoint and not r["delay_s"]
    }
    rows = []
    for p, r in zip(pairs, runs, strict=True):
        ref = ""
        ok: bool | None = None
        floor = floors.get(p.endpoint)
        r["endpoint"] = p.endpoint
        if r is veth:
            what = "RTT (unshaped veth: the stack's own)"
        elif r is floor:
            what = f"RTT ({p.endpoint}, delay 0: the engine's floor)"
            ref = f"veth p50 {veth['err_p50_us']:.1f} p99.9 {veth['err_p999_us']:.1f}"
        else:
            assert floor is not None
            what = f"RTT 2 x {r['delay_s'] * 1e3:g} ms ({p.endpoint})"
            ok = r["err_p50_us"] <= DELAY_GOAL_P50_US and r["err_p999_us"] <= DELAY_GOAL_P999_US
            ref = (
                f"floor p50 {floor['err_p50_us']:.1f} p99.9 {floor['err_p999_us']:.1f}; "
                f"veth p50 {veth['err_p50_us']:.1f} p99.9 {veth['err_p999_us']:.1f}"
            )
        r["ok"] = ok
        lost = r["sent"] - r["received"]
        rows.append(
            [
                what,
                f"{r['err_p50_us']:.1f} / {r['err_p99_us']:.1f} / {r['err_p999_us']:.1f} / "
                f"{r['err_max_us']:.1f}",
                f"{r['err_min_us']:.1f}",
                "p50 <= 20, p99.9 <= 200" if ok is not None else "(reference)",
                verdict(ok),
                ref,
                f"{r['received']}" + (f" ({lost} lost)" if lost else ""),
            ]
        )
    print_table(
        "DELAY: RTT error = measured RTT - 2 x configured delay, us, with 10 Mb/s UDP "
        "load on the link (ICMP echo, kernel receive stamps)",
        [
            "case",
            "error p50 / p99 / p99.9 / max",
            "min",
            "goal (us)",
            "pass",
            "reference (us)",
            "samples",
        ],
        rows,
    )
    lat_rows = []
    for r in runs:
        for direction in ("ab", "ba"):
            lat = r["link_stats"].get(direction, {}).get("lateness")
            if not lat:
                continue
            lat_rows.append(
                [
                    r["label"],
                    direction,
                    str(lat["count"]),
                    f"{lat['p50_ns'] / US:.1f}",
                    f"{lat['p90_ns'] / US:.1f}",
                    f"{lat['p99_ns'] / US:.1f}",
                    f"{lat['p999_ns'] / US:.1f}",
                    f"{lat['max_ns'] / US:.1f}",
                ]
            )
    print_table(
        "DELAY: the engine's own lateness (departure - scheduled departure), us, from "
        "link.stats(); ab carries the load and the echo requests",
        ["link", "dir", "packets", "p50", "p90", "p99", "p99.9", "max"],
        lat_rows,
    )
    return {"runs": runs, "count": count, "interval_s": interval}


# -- jitter ---------------------------------------------------------------------------

JITTER_DELAY = 0.010
JITTER = 0.002
JITTER_GOAL = 0.10  # of the configured jitter, per quantile
QUANTILES = (0.10, 0.50, 0.90)


def configured_quantile(dist: str, q: float) -> float:
    """Seconds: the q-quantile of delay + jitter as configured."""
    if dist == "uniform":
        return JITTER_DELAY + JITTER * (2 * q - 1)
    return JITTER_DELAY + JITTER * statistics.NormalDist().inv_cdf(q)


def order_kept_model(dist: str, send_ns: Sequence[int], seed: int, reps: int = 5) -> list[float]:
    """One-way delays (s) the engine's rule gives for these send times when order is
    kept: departure = max(send + delay + jitter sample, previous departure)."""
    rng = random.Random(seed)
    d, j = JITTER_DELAY * 1e9, JITTER * 1e9
    out = []
    for _ in range(reps):
        prev = -math.inf
        for s in send_ns:
            jit = rng.uniform(-j, j) if dist == "uniform" else rng.gauss(0, j)
            dep = max(s + max(0.0, d + jit), prev)
            prev = dep
            out.append((dep - s) / 1e9)
    return out


def owd_runs(
    ctx: Ctx, net: Network, idxs: Sequence[int], count: int, spacing: float
) -> dict[int, dict[str, Any]]:
    """Probe flows a<i> -> b<i> for every i in ``idxs`` at once, ``count`` datagrams
    ``spacing`` apart each; the receivers' records by i."""
    recvs = {}
    for i in idxs:
        recvs[i] = start(
            net[f"b{i}"],
            [ctx.python, PROBE, "udp-recv", "--port", "9000", "--count", str(count), "--idle", "1"],
        )
    for proc in recvs.values():
        wait_stderr(proc, "ready")
    senders = {}
    for i in idxs:
        senders[i] = start(
            net[f"a{i}"],
            [
                ctx.python,
                PROBE,
                "udp-send",
                "--dst",
                f"10.0.{i}.2",
                "--port",
                "9000",
                "--count",
                str(count),
                "--interval",
                str(spacing),
            ],
        )
    out: dict[int, dict[str, Any]] = {}
    for i in idxs:
        sent = probe_json(*finish(senders[i], count * spacing + 60), f"jitter sender {i}")
        got = probe_json(*finish(recvs[i], 30), f"jitter receiver {i}")
        reordered, highest = 0, -1
        for seq in got["seq"]:
            if seq < highest:
                reordered += 1
            highest = max(highest, seq)
        got["reordered"] = reordered
        got["send_errors"] = sent["send_errors"]
        got["sent"] = count
        out[i] = got
    return out


def target_jitter(ctx: Ctx) -> dict[str, Any]:
    flows = 2 if ctx.args.quick else 4  # parallel links per sparse case
    sparse_n, dense_n = (250, 2000) if ctx.args.quick else (750, 6000)
    sparse, dense = 0.010, 0.0005

    def params(dist: str, reorder: bool = False) -> LinkParams:
        return LinkParams(
            delay=JITTER_DELAY,
            jitter=JITTER,
            jitter_dist=dist,  # type: ignore[arg-type]
            reorder=reorder or None,
        )

    # (label, dist or None for a reference, spacing, packets per flow, reorder, links)
    cases: list[tuple[str, str | None, float, int, bool, list[Pair]]] = [
        (
            f"uniform, {sparse * 1e3:g} ms apart",
            "uniform",
            sparse,
            sparse_n,
            False,
            [Pair("u", "engine", params("uniform"), LinkParams()) for _ in range(flows)]
            + [
                Pair("floor", "engine", LinkParams(), LinkParams()),
                Pair("veth", "veth", LinkParams(), LinkParams()),
            ],
        ),
        (
            f"normal, {sparse * 1e3:g} ms apart",
            "normal",
            sparse,
            sparse_n,
            False,
            [Pair("n", "engine", params("normal"), LinkParams()) for _ in range(flows)],
        ),
        (
            f"uniform, {dense * 1e3:g} ms apart",
            "uniform",
            dense,
            dense_n,
            False,
            [Pair("u", "engine", params("uniform"), LinkParams())],
        ),
        (
            f"normal, {dense * 1e3:g} ms apart",
            "normal",
            dense,
            dense_n,
            False,
            [Pair("n", "engine", params("normal"), LinkParams())],
        ),
        (
            f"uniform, {dense * 1e3:g} ms apart, reorder=True",
            "uniform",
            dense,
            dense_n,
            True,
            [Pair("r", "engine", params("uniform", True), LinkParams())],
        ),
    ]
    runs = []
    refs: dict[str, list[float]] = {}
    for label, dist, spacing, n, reorder, pairs in cases:
        assert dist is not None
        print(
            f"# jitter: {label}" + (f" ({len(pairs)} links at once)" if len(pairs) > 1 else ""),
            flush=True,
        )
        with Network(pairs_spec(pairs, ctx.args.seed)) as net:
            got = owd_runs(ctx, net, range(1, len(pairs) + 1), n, spacing)
            lateness = own_stats(net.links[0].stats())["ab"]["lateness"]
        owd: list[float] = []
        send_ns: list[list[int]] = []
        reordered = received = sent = 0
        for i, p in enumerate(pairs, 1):
            g = got[i]
            delays = [(r - t) / 1e9 for t, r in zip(g["send_ns"], g["recv_ns"], strict=True)]
            if p.label in ("floor", "veth"):
                refs[p.label] = delays
                continue
            owd += delays
            send_ns.append(sorted(g["send_ns"]))
            reordered += g["reordered"]
            received += len(delays)
            sent += g["sent"]
        measured = {q: pct(owd, q) for q in QUANTILES}
        configured = {q: configured_quantile(dist, q) for q in QUANTILES}
        model = None
        if spacing < 2 * JITTER and not reorder:
            sim = [x for times in send_ns for x in order_kept_model(dist, times, ctx.args.seed)]
            model = {q: pct(sim, q) for q in QUANTILES}
        expect = model or configured
        worst = max(abs(measured[q] - expect[q]) for q in QUANTILES) / JITTER
        reorder_ok = reordered > 0 if reorder else reordered == 0
        runs.append(
            {
                "label": label,
                "dist": dist,
                "spacing_s": spacing,
                "reorder": reorder,
                "links": len([p for p in pairs if p.label not in ("floor", "veth")]),
                "sent": sent,
                "received": received,
                "reordered": reordered,
                "measured_s": {str(q): v for q, v in measured.items()},
                "configured_s": {str(q): v for q, v in configured.items()},
                "order_kept_model_s": {str(q): v for q, v in model.items()} if model else None,
                "worst_error_of_jitter": worst,
                "ok": worst <= JITTER_GOAL and reorder_ok,
                "mean_s": statistics.fmean(owd) if owd else math.nan,
                "stdev_s": statistics.pstdev(owd) if len(owd) > 1 else math.nan,
                "lateness_first_link": lateness,
            }
        )
    references = {
        name: {str(q): pct(v, q) for q in (0.1, 0.5, 0.9, 0.99)} for name, v in refs.items()
    }
    rows = []
    for r in runs:
        ms = [float(r["measured_s"][str(q)]) * 1e3 for q in QUANTILES]
        cf = [float(r["configured_s"][str(q)]) * 1e3 for q in QUANTILES]
        kept = r["order_kept_model_s"]
        mo = [float(kept[str(q)]) * 1e3 for q in QUANTILES] if kept else None
        rows.append(
            [
                r["label"],
                " / ".join(f"{x:.3f}" for x in cf),
                " / ".join(f"{x:.3f}" for x in ms),
                " / ".join(f"{x:.3f}" for x in mo) if mo else "(= configured)",
                f"{r['worst_error_of_jitter'] * 100:.1f}% vs {'model' if mo else 'configured'}",
                f"{r['reordered']}" + (" (> 0 wanted)" if r["reorder"] else ""),
                verdict(r["ok"]),
                f"{r['received']}/{r['sent']}",
                f"{r['lateness_first_link']['p50_ns'] / US:.0f} / "
                f"{r['lateness_first_link']['p99_ns'] / US:.0f}",
            ]
        )
    print_table(
        f"JITTER: one-way delay quantiles p10 / p50 / p90, ms, delay {JITTER_DELAY * 1e3:g} ms "
        f"jitter {JITTER * 1e3:g} ms; goal: each quantile within {JITTER_GOAL * 100:g}% of the "
        "jitter (200 us), no reordering unless asked",
        [
            "case (distribution, probe spacing)",
            "configured",
            "measured",
            "order-kept model",
            "worst error (of jitter)",
            "reordered",
            "pass",
            "received",
            "lateness p50/p99 us",
        ],
        rows,
    )
    if references:
        print(
            "reference, same run as the sparse uniform case, one-way delay p10 / p50 / p90 / "
            "p99 in us: "
            + "; ".join(
                f"{'engine, delay 0' if k == 'floor' else 'unshaped veth'} "
                + " / ".join(f"{v[str(q)] * 1e6:.0f}" for q in (0.1, 0.5, 0.9, 0.99))
                for k, v in references.items()
            )
        )
    print(
        "Probes spaced wider than the jitter's range see the configured distribution. "
        "Spaced closer, a packet never leaves\nbefore the one ahead of it (order kept), so "
        "short draws wait for their predecessor: delays shift up and narrow.\nThe "
        "order-kept model replays the send times through departure = max(send + delay + "
        "jitter, previous departure)."
    )
    return {"runs": runs, "references_s": references}
