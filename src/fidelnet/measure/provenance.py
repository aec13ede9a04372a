"""Where a result came from: command line, versions, backends, topology, machine, time.

A number without its provenance cannot be compared with another one; every result
file carries a :class:`Provenance` header.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from fidelnet._version import __version__
from fidelnet.errors import StateError
from fidelnet.fidelity.machine import Machine, machine

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.topology.spec import TopologySpec

__all__ = ["Machine", "Provenance", "collect", "machine", "tool_version", "topology_hash"]


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[str]
    time_utc: str
    fidelnet: str = __version__
    python: str = platform.python_version()
    tools: dict[str, str] = Field(default_factory=dict)
    run_id: str | None = None
    backends: dict[str, int] = Field(default_factory=dict)
    topology_hash: str | None = None
    seed: int | None = None
    machine: Machine
    vms: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each VM node's machine as it ran: accelerator (``kvm``/``tcg``), vCPUs,
    memory (``memory_mb``) and the QEMU process's resident memory (``rss_kib``), the
    guest image's content hash (``image``), its disk image, its clock's offset and
    uncertainty."""
    containers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Container nodes by name: the image as given, its digest (the pin), where it
    came from, and the runtime and its version (docs/containers.md)."""
    virtual_time: dict[str, Any] = Field(default_factory=dict)
    """A dilated run's time dilation: ``tdf`` now, its ``timeline`` (each factor
    with when and why it was set) and the programs that ran ``unreached`` by the
    clock shim (static binaries, Go), each with its path and why."""


def tool_version(argv: list[str]) -> str | None:
    """First line of ``argv``'s output (``[tool, "--version"]``), or None."""
    if shutil.which(argv[0]) is None and not os.access(argv[0], os.X_OK):
        return None
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout or p.stderr).strip()
    return text.splitlines()[0] if text else None


def topology_hash(spec: TopologySpec) -> str:
    """SHA-256 of the topology's canonical JSON: equal topologies, equal hashes."""

    def default(o: Any) -> Any:
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            return dataclasses.asdict(o)
        return str(o)

    doc = json.dumps(dataclasses.asdict(spec), sort_keys=True, default=default)
    return "sha256:" + hashlib.sha256(doc.encode()).hexdigest()


def collect(
    net: Network | None = None,
    *,
    command: list[str] | None = None,
    tools: dict[str, str] | None = None,
) -> Provenance:
    """Provenance for a result measured now, on ``net`` if given."""
    backends: dict[str, int] = {}
    vms: dict[str, dict[str, Any]] = {}
    containers: dict[str, dict[str, Any]] = {}
    vt: dict[str, Any] = {}
    run_id = topo = None
    seed = None
    if net is not None:
        counts = Counter(f"link:{link.backend}" for link in net.links)
        counts.update(f"node:{n.kind}" for n in net)
        # Routers forwarding in XDP are a backend of their own (docs/fastpath.md).
        counts.update("fastpath:xdp" for _name in getattr(net, "fastpath", {}))
        backends = dict(sorted(counts.items()))
        vms = _vms(net)
        containers = _containers(net)
        from fidelnet.vt import run as vt_run  # the links' kernel layer: only with a net

        vt = vt_run.describe(net)
        topo = topology_hash(net.spec)
        seed = net.seed
        try:
            run_id = net.run_id
        except StateError:  # not open yet: no run id
            run_id = None
    return Provenance(
        command=list(command) if command is not None else list(sys.argv),
        time_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tools=dict(tools or {}),
        run_id=run_id,
        backends=backends,
        topology_hash=topo,
        seed=seed,
        machine=machine(),
        vms=vms,
        containers=containers,
        virtual_time=vt,
    )


_VM_KEYS = (
    "accel", "cpus", "memory_mb", "rss_kib", "image", "disk", "clock_offset_ns",
    "clock_uncertainty_ns",
)  # fmt: skip


def _vms(net: Network) -> dict[str, dict[str, Any]]:
    out = {}
    for node in net:
        backend = getattr(node, "backend", None)
        if backend is None or backend.kind != "qemu":
            continue
        info = backend.describe(node)
        out[node.name] = {k: info[k] for k in _VM_KEYS if k in info}
    return out


def _containers(net: Network) -> dict[str, dict[str, Any]]:
    out = {}
    for node in net:
        backend = getattr(node, "backend", None)
        if backend is not None and backend.kind == "container":
            info = backend.describe(node)
            out[node.name] = {k: v for k, v in info.items() if k != "backend"}
    return out
