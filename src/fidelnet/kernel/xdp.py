"""The XDP fast path for forwarding nodes: loading ``bpf/fastpath.bpf.c`` (built by
``make install``) onto a router's interfaces with Debian's ``bpftool``.

Per router, once: the program is loaded and pinned, with its maps, in a private
bpffs mounted for the setup only (recorded as a ``mount`` in the run state, so a
crash leaves nothing ``fidelnet clean`` cannot remove); the egress ports it may
redirect to go into its devmap, from inside the router's namespace (a devmap
resolves interface indexes in the namespace of the process that updates it); it
is attached (native XDP) to each interface. Then the pins are dropped and the
bpffs unmounted: the attachments hold the program and its maps, and both go away
with the interfaces when the run ends. Nothing is left to clean but the
interfaces themselves.

Every command is an argument list run in the router through ``run`` (the node's
``pexec``); nothing here builds a shell string.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from fidelnet.errors import FidelnetError

__all__ = [
    "COUNTERS",
    "OBJECT",
    "FastPathError",
    "Run",
    "attach",
    "drop_pins",
    "find_object",
    "mount_bpffs",
    "remove_port",
    "stats",
    "umount_bpffs",
]

Run = Callable[[Sequence[str]], tuple[str, str, int]]

OBJECT = "fastpath.bpf.o"
COUNTERS = (
    "forwarded",
    "not_ip",
    "ttl_expired",
    "options_or_fragment",
    "kernel_path",
    "egress_shaped",
    "link_local",
)
"""The program's counters, in the order of its ``enum counter``: what it forwarded,
and why it handed the rest to the kernel."""


class FastPathError(FidelnetError):
    """The XDP fast path cannot be set up (missing program or tool, refused attach)."""


def find_object() -> str:
    """The built program: $FIDELNET_BPF_DIR, the virtualenv's share/fidelnet/bpf, or
    the source tree's build/bpf."""
    root = Path(__file__).resolve().parents[3]
    candidates = [
        os.environ.get("FIDELNET_BPF_DIR", ""),
        str(Path(sys.prefix) / "share" / "fidelnet" / "bpf"),
        str(root / "build" / "bpf"),
    ]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, OBJECT)):
            return os.path.join(c, OBJECT)
    raise FastPathError(
        f"fastpath: the XDP program {OBJECT} was not found (run `make install`, which "
        "builds it with clang; or set FIDELNET_BPF_DIR)"
    )


def check_tools() -> None:
    """Refuse early, before anything is built, when bpftool is missing."""
    if shutil.which("bpftool") is None:
        raise FastPathError(
            "fastpath: bpftool is not installed (`make install` installs it; on Debian "
            "`apt-get install bpftool`)"
        )


def mount_bpffs(path: str) -> None:
    """Mount a private bpffs at ``path`` (created, must not exist)."""
    os.mkdir(path, 0o700)
    p = subprocess.run(
        ["mount", "-t", "bpf", "bpf", path], capture_output=True, text=True, check=False
    )
    if p.returncode != 0:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        raise FastPathError(f"fastpath: cannot mount a bpffs at {path}: {p.stderr.strip()}")


def is_bpffs(path: str) -> bool:
    """Whether ``path`` is a bpffs mount point now."""
    real = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) > 4 and fields[4] == real and right.split()[:1] == ["bpf"]:
                return True
    return False


def umount_bpffs(path: str) -> None:
    """Unmount the bpffs at ``path`` (if it is one) and remove the directory."""
    if os.path.isdir(path) and is_bpffs(path):
        p = subprocess.run(["umount", path], capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise FastPathError(f"fastpath: cannot unmount {path}: {p.stderr.strip()}")
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)


def _must(run: Run, argv: Sequence[str], what: str) -> str:
    out, err, code = run(list(argv))
    if code != 0:
        raise FastPathError(f"fastpath: {what}: {(err or out).strip()[-500:]}")
    return out


def attach(
    run: Run,
    node: str,
    pins: str,
    obj: str,
    interfaces: Sequence[str],
    ports: Sequence[str],
    *,
    keep_pins: bool = False,
) -> None:
    """Load ``obj`` once for router ``node`` (pinned under the bpffs ``pins``), allow
    redirects to ``ports`` and attach it to every interface in ``interfaces``; every
    command runs in the router through ``run``. With ``keep_pins`` the maps stay
    pinned under ``pins/<node>-maps`` (for :func:`remove_port`) until the bpffs is
    unmounted."""
    prog = os.path.join(pins, f"{node}-prog")
    maps = os.path.join(pins, f"{node}-maps")
    _must(
        run,
        ["bpftool", "prog", "load", obj, prog, "type", "xdp", "pinmaps", maps],
        f"{node}: loading {obj}",
    )
    try:
        for port in ports:
            index = int(_must(run, ["cat", f"/sys/class/net/{port}/ifindex"], port).strip())
            key = [str(b) for b in index.to_bytes(4, "little")]
            _must(
                run,
                ["bpftool", "map", "update", "pinned", os.path.join(maps, "fastpath_ports"),
                 "key", *key, "value", *key],
                f"{node}: allowing redirects to {port}",
            )  # fmt: skip
        for ifname in interfaces:
            _must(
                run,
                ["bpftool", "net", "attach", "xdpdrv", "pinned", prog, "dev", ifname],
                f"{node}: attaching to {ifname} (native XDP)",
            )
    finally:
        drop_pins(prog, maps if not keep_pins else None, ("fastpath_ports", "fastpath_stats"))


def drop_pins(prog: str, maps: str | None, names: Sequence[str]) -> None:
    """Remove a program's pin, and unless ``maps`` is None its maps' pins (``names``)
    and their directory; whatever is missing is skipped. The objects live on while an
    attachment or a descriptor holds them."""
    if maps is not None:
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(maps, name))
        with contextlib.suppress(OSError):
            os.rmdir(maps)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(prog)


def remove_port(run: Run, maps: str, ifname: str) -> None:
    """Stop redirecting to ``ifname`` (its packets take the normal path again)."""
    index = int(_must(run, ["cat", f"/sys/class/net/{ifname}/ifindex"], ifname).strip())
    key = [str(b) for b in index.to_bytes(4, "little")]
    _must(
        run,
        ["bpftool", "map", "delete", "pinned", os.path.join(maps, "fastpath_ports"), "key", *key],
        f"removing the port {ifname}",
    )


def stats(run: Run, ifname: str) -> dict[str, int]:
    """The counters of the program attached to ``ifname`` (summed over CPUs); empty
    when none is attached."""
    links = json.loads(_must(run, ["ip", "-j", "-d", "link", "show", "dev", ifname], ifname))
    xdp = links[0].get("xdp", {}) if links else {}
    prog_id = xdp.get("prog", {}).get("id")
    if prog_id is None:
        return {}
    prog = json.loads(_must(run, ["bpftool", "-j", "prog", "show", "id", str(prog_id)], "prog"))
    for map_id in prog.get("map_ids", []):
        info = json.loads(_must(run, ["bpftool", "-j", "map", "show", "id", str(map_id)], "map"))
        if info.get("type") != "percpu_array":
            continue
        dump = json.loads(_must(run, ["bpftool", "-j", "map", "dump", "id", str(map_id)], "map"))
        out = dict.fromkeys(COUNTERS, 0)
        for entry in dump:
            key = int(entry["formatted"]["key"])
            if key < len(COUNTERS):
                out[COUNTERS[key]] = sum(int(v["value"]) for v in entry["formatted"]["values"])
        return out
    return {}
