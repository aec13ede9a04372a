"""``fidelnet calibrate``: measure what this machine carries faithfully and keep it
as its profile (:mod:`fidelnet.calibrate`)."""

from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

import click
from rich.console import Console

__all__ = ["calibrate"]


@click.command()
@click.option("--quick", is_flag=True, help="About a minute: fewer samples and sizes.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory of the page and raw samples (default fidelnet-results/calibrate-TIME).",
)
@click.option(
    "--save/--no-save",
    default=True,
    show_default=True,
    help="Keep the result as this machine's profile.",
)
def calibrate(quick: bool, out: Path | None, save: bool) -> None:
    """Run Mininet-HiFi's micro-benchmarks on this machine (under 5 minutes) and keep
    the result as its profile, which every later verdict and capacity check reads.

    Needs root. An interrupted calibration saves nothing."""
    from fidelnet.calibrate import Plan
    from fidelnet.calibrate import calibrate as run
    from fidelnet.calibrate.page import write_page
    from fidelnet.fidelity import profile as prof

    console = Console(stderr=True)
    try:
        cal = run(
            Plan.quick() if quick else Plan(),
            progress=lambda m: console.print(f"[dim]*** {m}"),
        )
    except KeyboardInterrupt:
        click.echo("fidelnet calibrate: interrupted; no profile saved", err=True)
        sys.exit(130)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    target = out or Path("fidelnet-results") / f"calibrate-{stamp}"
    page = write_page(cal, target)
    p = cal.profile
    for f in p.forwarding:
        click.echo(
            f"forwarding {f.backend:6} {f.links} {f.layout:8} link(s): "
            f"{f.breaking_pps / 1000:7.1f} kpps without loss"
        )
    for r in p.rate_accuracy:
        click.echo(
            f"rate {r.backend:6} {r.rate_bps / 1e6:6g} Mbit/s: 10 ms windows p1 "
            f"{100 * r.p1_ratio:.1f} %, mean {100 * r.mean_ratio:.1f} %, "
            f"p99 {100 * r.p99_ratio:.1f} %"
        )
    for t in p.timer:
        click.echo(
            f"timer {t.load}: p99 {t.p99_ns / 1000:.0f} µs late, max {t.max_ns / 1000:.0f} µs"
        )
    for s in p.cpu_shares:
        click.echo(
            f"cpu shares {s.processes} x {s.share_pct:.1f} %: largest error "
            f"{s.max_error_pct:.1f} points per second"
        )
    for e in p.engine_release:
        click.echo(
            f"engine at real-time priority {e.realtime_priority:2}, spin {e.spin_us:3} µs: "
            f"lateness p50 {e.p50_ns / 1000:.0f} µs, p99.9 "
            f"{e.p999_ns / 1000:.0f} µs, max {e.max_ns / 1000:.0f} µs"
        )
    click.echo(
        f"engine real-time priority chosen: {p.engine_realtime_priority} (0: off); "
        f"spin: {p.engine_spin_us} µs (0: off)"
    )
    click.echo(f"steal at rest {p.steal_at_rest_pct:.2f} %; took {p.seconds:.0f} s")
    if save:
        click.echo(f"profile: {prof.save(p)}")
    else:
        click.echo("profile: not saved (--no-save)")
    click.echo(f"page: {page}")
