"""Record the iperf3 ``-J`` outputs the unit tests read (as root, from the repo root:
``.venv/bin/python tests/unit/data/iperf3/record.py``). Argument lists only.

- ``loopback_*``: a server and a client over the loopback of a private network
  namespace (``unshare -n``, so the machine's own ``lo`` is not touched), 3 s, -i 0.1.
- ``refused_client.json``: a client with no server (connection refused).
- ``bufsize_*``: ``-w 40M``, above net.core.rmem_max here (16 MiB): both ends fail.
- ``link10m_cubic_*``: h1 -> h2 over a 10 Mbit/s, 5 ms engine link (fidelnet,
  ``linear(2)`` with the s1-s2 link shaped), CUBIC, 6 s: the sender runs ahead.
- ``link10m_window_*``: the same link, ``-w 14480`` (the suggested window), 6 s.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVER = ["iperf3", "-s", "-1", "-J", "-i", "0.1", "-p", "5301"]


def client(addr: str, *extra: str) -> list[str]:
    return ["iperf3", "-c", addr, "-p", "5301", "-i", "0.1", "-J", *extra]


def pair(name: str, *extra: str) -> None:
    """A server and a client on 127.0.0.1, outputs to ``name``_server/_client.json."""
    with (HERE / f"{name}_server.json").open("w") as out:
        server = subprocess.Popen(SERVER, stdout=out)
        time.sleep(0.5)
        with (HERE / f"{name}_client.json").open("w") as cout:
            subprocess.run(client("127.0.0.1", *extra), stdout=cout, check=False)
        server.wait(timeout=30)


def loopback_inside() -> None:
    """Runs in the private namespace."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    pair("loopback", "-t", "3")
    with (HERE / "refused_client.json").open("w") as out:
        subprocess.run(client("127.0.0.1", "-t", "1"), stdout=out, check=False)
    pair("bufsize", "-t", "1", "-w", "40M")


def emulated(name: str, *extra: str) -> None:
    from fidelnet import Network
    from fidelnet.topology import LinkParams, linear

    spec = linear(2)
    for link in spec.links:
        if {link.a, link.b} == {"s1", "s2"}:
            link.params = LinkParams(bw=10e6, delay=0.005)
            link.backend = "engine"
    with Network(spec) as net:
        h1, h2 = net["h1"], net["h2"]
        assert h2.ip is not None
        server = h2.popen(SERVER, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        out, err, code = h1.pexec(client(h2.ip, "-t", "6", *extra), timeout=30)
        assert code == 0, out + err
        (HERE / f"{name}_client.json").write_text(out)
        (HERE / f"{name}_server.json").write_text(server.communicate(timeout=30)[0])


if __name__ == "__main__":
    which = sys.argv[1:] or ["loopback", "cubic", "window"]
    if "--inside" in which:
        loopback_inside()
    if "loopback" in which:
        subprocess.run(["unshare", "-n", sys.executable, __file__, "--inside"], check=True)
    if "cubic" in which:
        emulated("link10m_cubic", "-C", "cubic")
    if "window" in which:
        emulated("link10m_window", "-w", "14480")
