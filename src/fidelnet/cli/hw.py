"""``fidelnet hw``: hardware for hardware links (docs/hwlinks.md).

``fidelnet hw sriov PF1 PF2 --vfs N --vlan-base V [-- COMMAND...]`` makes N SR-IOV
VFs on each of two cabled PFs, VF i of both on VLAN ``V + i`` (spoof checking off,
trusted), prints the pairs, and keeps them while COMMAND runs (with the pairs in
``FIDELNET_HW_PAIRS``) or, without one, until it is interrupted; then it puts the
PFs back as they were. The VFs are recorded in a run state before they exist:
after a crash, ``fidelnet clean`` removes them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import click

__all__ = ["hw"]


@click.group()
def hw() -> None:
    """Hardware for hardware links: `sriov` (VF pairs on two cabled NICs)."""


@hw.command(context_settings={"ignore_unknown_options": True})
@click.argument("pf1")
@click.argument("pf2")
@click.option("--vfs", type=click.IntRange(1, 256), required=True, help="VFs on each PF.")
@click.option(
    "--vlan-base",
    type=click.IntRange(1, 4094),
    default=100,
    show_default=True,
    help="VLAN id of VF 0 (VF i: VLAN-BASE + i).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def sriov(pf1: str, pf2: str, vfs: int, vlan_base: int, command: tuple[str, ...]) -> None:
    """Make VF pairs on PF1 and PF2, print them, keep them while COMMAND runs."""
    from fidelnet.kernel import sriov as sr
    from fidelnet.kernel.state import RunState
    from fidelnet.kernel.teardown import remove_all

    plan = sr.SriovPlan((pf1, pf2), vfs, vlan_base)
    host = sr.Host()
    sr.check(plan, host)  # a clear error before any state exists
    state = RunState.create(command=" ".join(["fidelnet", "hw", "sriov", pf1, pf2]))
    code = 0
    try:
        pairs = sr.provision(plan, host, state.record)
        text = sr.pairs_text(pairs)
        for a, b in pairs:
            click.echo(f"{a} {b}")
        click.echo(f"FIDELNET_HW_PAIRS={text}")
        if command:
            argv = list(command[1:] if command[0] == "--" else command)
            code = subprocess.run(argv, env={**os.environ, "FIDELNET_HW_PAIRS": text},
                                  check=False).returncode  # fmt: skip
        else:
            click.echo("the VFs are kept until this command is interrupted (Ctrl-C)", err=True)
            done = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_a: done.set())
            done.wait()
    finally:
        problems = remove_all(state)
        state.close(remove=not problems)
        for p in problems:
            click.echo(f"fidelnet hw sriov: {p}", err=True)
    sys.exit(code)
