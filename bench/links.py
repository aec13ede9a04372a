"""Link fidelity: how closely engine links deliver the rate, delay, jitter, loss,
fairness and packet rate they are configured for, measured on the receiving side.

A benchmark, not a test: it asserts nothing. For each target it prints the
configured value, the measured one, the error, pass or fail against the goal of
the link-engine issue, and a reference measured in the same run on the same
machine where one exists (htb, a plain veth pair, the engine with nothing to
do). Run it as root with the project's virtualenv::

    make bench-links                       # installs what is missing, then this
    .venv/bin/python bench/links.py        # every target, about 5 minutes
    .venv/bin/python bench/links.py --quick --only delay,loss

Targets (``--only`` takes a comma-separated list of them):

- ``rate``: TCP and UDP through one link at 10 Mb/s, 100 Mb/s and 1 Gb/s (and TCP at 2
  and 5 Gb/s), engine
  and htb (backend ``tc``) side by side; the delivered rate per 10 ms window
  from a receiver-side capture (tcpdump), its deviation from the configured rate.
- ``delay``: RTT minus twice the configured delay (1, 10, 50 ms) under 10 Mb/s
  of UDP load, with an unshaped veth pair and an engine link of delay 0 as the
  references, and the engine's own lateness percentiles.
- ``jitter``: one-way delay quantiles for 10 ms +- 2 ms, uniform and normal,
  with probes spaced wider and narrower than the jitter; reordering.
- ``loss``: random loss of 1 % and 10 % against the 99 % binomial interval;
  Gilbert-Elliott burst lengths against 1/r.
- ``fairness``: Jain's index of four UDP flows through a 10 Mb/s dumbbell
  bottleneck, HiFi queue and drop-tail.
- ``tcp``: one bulk TCP flow through an unshaped engine link (with and without
  segmentation offloads) against a bare veth pair, with 10 ms of delay, and
  shaped at 1 and 10 Gbit/s against htb at the same rate.
- ``capacity``: the highest zero-loss rate of 64-byte frames through one engine
  link, a chain of six, and a plain veth pair (the generator's ceiling).

Raw figures and a provenance header go to ``bench/results/links-<UTC
timestamp>.json``; bench/README.md explains every measure.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _benchlib as bl
from _links_capacity import (
    target_capacity,
)
from _links_delay import (
    target_delay,
    target_jitter,
)
from _links_loss import (
    target_fairness,
    target_loss,
)
from _links_rate import (
    target_rate,
)
from _links_tcp import target_tcp
from _linkslib import (
    HERE,
    REPO,
    TARGETS,
    Ctx,
    cpu_mark,
    cpu_since,
)

# -- driver ---------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "rate": target_rate,
    "delay": target_delay,
    "jitter": target_jitter,
    "loss": target_loss,
    "fairness": target_fairness,
    "capacity": target_capacity,
    "tcp": target_tcp,
}


def provenance(args: argparse.Namespace, linkd: str | None) -> dict[str, Any]:
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
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    linkd_info: dict[str, Any] = {"path": linkd}
    if linkd:
        st = os.stat(linkd)
        linkd_info["mtime_utc"] = dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc).isoformat(
            timespec="seconds"
        )
        linkd_info["size"] = st.st_size
    return {
        "benchmark": "links",
        "command": [sys.executable, *sys.argv],
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "machine": {
            "kernel": platform.release(),
            "nproc": os.cpu_count(),
            "cpu": cpu,
            "mem_total_kib": bl.mem_total_kib(),
            "loadavg_start": os.getloadavg(),
            "ci": os.environ.get("CI"),
        },
        "linkd": linkd_info,
        "settings": {
            "quick": args.quick,
            "only": args.only,
            "seed": args.seed,
            "repeat": args.repeat,
        },
        "tools": {
            "iperf3": _first_line(["iperf3", "--version"]),
            "tcpdump": _first_line(["tcpdump", "--version"]),
        },
    }


def _first_line(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    except OSError:
        return None
    return out.splitlines()[0] if out else None


def jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    return x


@contextlib.contextmanager
def private_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fidelnet-bench-links-"))
    try:
        yield path
    finally:
        for p in path.iterdir():
            p.unlink()
        path.rmdir()


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Link fidelity of the link engine: rate, delay, jitter, loss, fairness, "
        "capacity, measured on the receiving side.",
        epilog="Run as root. Results: bench/results/links-<timestamp>.json",
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples, about 2 minutes")
    parser.add_argument(
        "--only", default=",".join(TARGETS), help=f"comma-separated targets ({','.join(TARGETS)})"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of every link's random choices (1)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="runs per rate measurement, their windows pooled (default 2; --quick: 1)",
    )
    parser.add_argument("--linkd", help="fidelnet-linkd to use (default: fidelnet's own search)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    only = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = sorted(set(only) - set(TARGETS))
    if unknown:
        parser.error(
            f"--only: unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}"
        )
    if os.geteuid() != 0:
        sys.exit("links: the benchmark builds network namespaces and needs root")
    if args.linkd:
        os.environ["FIDELNET_LINKD"] = str(Path(args.linkd).resolve())
    from fidelnet.links.engine import find_linkd

    try:
        linkd: str | None = find_linkd()
    except Exception as exc:
        sys.exit(f"links: {exc}")
    missing = [tool for tool in ("iperf3", "tcpdump", "ss") if not _which(tool)]
    if missing:
        sys.exit(f"links: missing {', '.join(missing)} (make bench-links installs them)")

    record = provenance(args, linkd)
    record["targets"] = {}
    print(
        f"fidelnet link fidelity, kernel {platform.release()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}, linkd {linkd}",
        flush=True,
    )
    failed = False
    with private_dir() as tmp:
        ctx = Ctx(args, tmp, sys.executable)
        for name in TARGETS:
            if name not in only:
                continue
            mark = cpu_mark()
            try:
                result = RUNNERS[name](ctx)
            except Exception as exc:
                failed = True
                traceback.print_exc()
                result = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"\n{name.upper()}: FAILED: {result['error']}")
            load = cpu_since(mark)
            result["machine_load"] = load
            note = (
                "  <- others were busy: figures may be disturbed"
                if load["other_cores"] > 0.25 or load["steal_cores"] > 0.1
                else ""
            )
            print(
                f"[{name}: {load['wall_s']:.0f} s; the rest of the machine used "
                f"{load['other_cores']:.2f} cores, steal {load['steal_cores']:.2f}{note}]",
                flush=True,
            )
            record["targets"][name] = result
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"links-{stamp}.json"
    path.write_text(json.dumps(jsonable(record), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nraw results: {path}")
    return 1 if failed else 0


def _which(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


if __name__ == "__main__":
    sys.exit(main())
