"""Firewall rules a run adds to the host's namespace (Mininet's NAT), recorded before
they exist and deleted by the run's teardown or ``fidelnet clean``.

Rules are argv lists given to ``iptables`` (never shell text). A rule is deleted by
the same specification with ``-D``, so the host's own rules, and rules another run
added, are never touched; a rule already gone is not an error.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from fidelnet.errors import KernelError, UnsupportedError

__all__ = ["add", "remove"]


def _iptables() -> str:
    path = shutil.which("iptables")
    if path is None:
        raise UnsupportedError(
            "iptables (Debian: apt-get install iptables)", "NAT in the host's namespace"
        )
    return path


def add(
    table: str, chain: str, rule: Sequence[str], record: Callable[..., None], insert: bool = False
) -> None:
    """Append (or insert) ``rule`` to ``chain`` of ``table`` in this namespace,
    recorded first."""
    exe = _iptables()
    record("iptables", id=secrets.token_hex(6), table=table, chain=chain, rule=list(rule))
    argv = [exe, "-w", "-t", table, "-I" if insert else "-A", chain, *rule]
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise KernelError(f"iptables -t {table} {chain} {' '.join(rule)}: {p.stderr.strip()}")


def remove(rec: dict[str, Any], _run_id: str = "") -> None:
    """Delete the rule of record ``rec`` (nothing when it is gone already)."""
    exe = shutil.which("iptables")
    if exe is None:
        return  # iptables went away with its rules' tool; nothing can be deleted
    argv = [exe, "-w", "-t", str(rec["table"]), "-D", str(rec["chain"]), *map(str, rec["rule"])]
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    gone = "does a matching rule exist" in p.stderr + p.stdout or "Bad rule" in p.stderr
    if p.returncode != 0 and not gone:
        raise KernelError(f"{' '.join(argv[1:])}: {p.stderr.strip()}")
