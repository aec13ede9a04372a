"""AF_XDP support on this kernel, probed without creating anything that outlives
the probe (an unbound socket, closed at once)."""

from __future__ import annotations

import errno
import functools
import socket

__all__ = ["AF_XDP", "af_xdp_missing"]

AF_XDP = 44


@functools.cache
def af_xdp_missing() -> str | None:
    """Why the link engine cannot use AF_XDP endpoints here, or None when it can."""
    try:
        sock = socket.socket(AF_XDP, socket.SOCK_RAW, 0)
    except OSError as exc:
        if exc.errno in (errno.EAFNOSUPPORT, errno.EINVAL):
            return "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)"
        if exc.errno == errno.EPERM:
            return "AF_XDP sockets need CAP_NET_RAW"
        return f"an AF_XDP socket cannot be created: {exc}"
    sock.close()
    return None
