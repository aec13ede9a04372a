"""``fidelnet capture RUN NODE:INTF``: a running run's interface as a live pcapng stream.

    fidelnet capture 3f9a2c h1:h1-eth0 -w h1.pcapng
    fidelnet capture latest r1:r1-eth1 | wireshark -k -i -

RUN is a run id (or its first characters) or ``latest`` (the newest live run); NODE
a host, router or switch of it (a switch's ports are in the run's fabric); INTF one of
the node's interfaces: a veth end, an engine link's TAP, a VM's TAP, a container
node's interface. The capture ends by itself when the run ends (see
:mod:`fidelnet.kernel.capture`).
"""

from __future__ import annotations

import os
import sys

import click

from fidelnet.errors import ValidationError

__all__ = ["capture"]


def _find_run(run: str) -> tuple[str, str]:
    """(run id, state file) of the live run ``run`` names."""
    from fidelnet.kernel import state

    runs = [r for r in state.list_runs() if r.alive]
    if run == "latest":
        if not runs:
            raise ValidationError("RUN", "no run is running now (fidelnet runs)", run)
        newest = max(runs, key=lambda r: r.created)
        return newest.run_id, newest.path
    found = [r for r in runs if r.run_id.startswith(run)]
    if len(found) != 1:
        choices = [r.run_id for r in runs]
        why = "no live run has that id" if not found else "more than one live run starts so"
        raise ValidationError("RUN", why, run, choices or ["(none running)"])
    return found[0].run_id, found[0].path


def _namespace(run_id: str, node: str, intf: str) -> str | None:
    """The network namespace file ``intf`` of ``node`` is in (None: the host's)."""
    own = f"/run/netns/fn{run_id}-{node}"
    if os.path.exists(own):
        return own
    fabric = f"/run/netns/fn{run_id}.fabric"
    if os.path.exists(fabric) and intf.startswith(f"{node}-"):
        return fabric  # a switch's port
    if os.path.exists(f"/sys/class/net/{intf}"):
        return None  # a node in the host's namespace
    raise ValidationError("NODE:INTF", f"run {run_id} has no node {node!r} with {intf!r}", node)


@click.command()
@click.argument("run")
@click.argument("where", metavar="NODE:INTF")
@click.option(
    "-w",
    "--write",
    "out",
    default="-",
    show_default=True,
    help="pcapng file to write; - for standard output (| wireshark -k -i -).",
)
@click.option("-c", "--count", type=click.IntRange(1), default=None, help="Stop after N frames.")
@click.option("--snaplen", type=click.IntRange(64, 262144), default=262144, show_default=True)
def capture(run: str, where: str, out: str, count: int | None, snaplen: int) -> None:
    """Capture NODE:INTF of a running run as pcapng (a file, or stdout for
    `| wireshark -k -i -`), until the run ends."""
    from fidelnet.kernel import launcher

    node, sep, intf = where.partition(":")
    if not sep or not node or not intf or "/" in intf:
        raise ValidationError("NODE:INTF", "a node and one of its interfaces: h1:h1-eth0", where)
    if out == "-" and sys.stdout.isatty():
        raise ValidationError(
            "--write", "pcapng is binary: give a file, or pipe it (| wireshark -k -i -)", out
        )
    run_id, state_file = _find_run(run)
    netns = _namespace(run_id, node, intf)
    argv = [sys.executable, "-m", "fidelnet.kernel.capture", "--intf", intf, "--out", out,
            "--state-file", state_file, "--snaplen", str(snaplen),
            "--comment", f"fidelnet run {run_id}, {node}:{intf}"]  # fmt: skip
    if count is not None:
        argv += ["--count", str(count)]
    full = launcher.exec_argv(argv, netns=netns) if netns is not None else argv
    sys.stdout.flush()
    os.execv(full[0], full)
