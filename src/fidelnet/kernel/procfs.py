"""Read-only facts from /proc and /sys: loaded modules, listening sockets."""

from __future__ import annotations

import os

__all__ = ["loaded_modules", "module_loaded", "tcp_listening"]

_TCP_LISTEN = "0A"


def loaded_modules() -> str:
    """The text of ``/proc/modules`` (empty when unreadable)."""
    try:
        with open("/proc/modules", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def module_loaded(name: str) -> bool:
    """Whether kernel module ``name`` is loaded (or built in with a sysfs entry)."""
    return os.path.isdir(os.path.join("/sys/module", name))


def tcp_listening(pid: int, port: int) -> bool:
    """Whether the network namespace of process ``pid`` has a TCP socket listening on
    ``port`` (IPv4 or IPv6)."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if fields[3] == _TCP_LISTEN and local_port == port:
                        return True
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return False
