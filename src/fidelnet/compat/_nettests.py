"""The tests a ``Mininet`` object runs: ping, iperf (with iperf3) and the CPU test.

Output matches Mininet's (``*** Ping: testing ping reachability``, ``h1 -> h2 h3``,
``*** Results: 0% dropped (6/6 received)``, ``*** Results: ['9.52 Mbits/sec',
'9.87 Mbits/sec']``).

``iperf`` reports, like Mininet, [server rate, client rate]. TCP runs through
:func:`fidelnet.measure.tcp.tcp` (iperf3 in both nodes, argv lists, never a shell):
the server's figure is the receiver's goodput after the warm-up (``max(1 s, 4 x
RTT)``) when the run is long enough to leave at least 1 s after it, else over the
whole run; the client's is the sender's own figure over the whole run, as Mininet's
is. Each flag of the measurement (the sender disagreeing with the receiver, more
than the bottleneck carried) is logged as a warning. UDP runs ``iperf3 -s -1 -J``
and ``iperf3 -c IP -u -b BW -t N -J`` directly.

Pings run in the source node's shell (as Mininet's do), up to 48 at a time, and
a few sources ping at once; results are printed in Mininet's order.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from fidelnet.compat.log import debug, error, info, output, warn
from fidelnet.errors import NodeError, ValidationError
from fidelnet.kernel import procfs

if TYPE_CHECKING:
    from fidelnet.measure.results import TcpResult

__all__ = ["NetTests", "format_rate"]

_PING_RE = re.compile(r"(\d+) packets transmitted, (\d+)( packets)? received")
_RTT_RE = re.compile(r"rtt min/avg/max/mdev = (\d+\.\d+)/(\d+\.\d+)/(\d+\.\d+)/(\d+\.\d+) ms")
_PING_SOURCES = 2 * (os.cpu_count() or 1)  # sources pinging at once
_PING_BATCH = 48  # pings one shell command line starts (it stays well under 4 KiB)


def format_rate(bps: float, fmt: str | None = None) -> str:
    """A rate as iperf prints it: adaptive bits (``9.57 Mbits/sec``) or a fixed unit
    (``fmt`` k/m/g for bits, K/M/G for bytes)."""
    units = {
        "k": (1e3, "Kbits"),
        "m": (1e6, "Mbits"),
        "g": (1e9, "Gbits"),
        "K": (8 * 1024, "KBytes"),
        "M": (8 * 1024**2, "MBytes"),
        "G": (8 * 1024**3, "GBytes"),
    }
    if fmt and fmt in units:
        div, name = units[fmt]
    else:
        div, name = 1.0, "bits"
        for scale, label in ((1e9, "Gbits"), (1e6, "Mbits"), (1e3, "Kbits")):
            if bps >= scale:
                div, name = scale, label
                break
    value = bps / div
    digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
    return f"{value:.{digits}f} {name}/sec"


def _iperf_json(text: str, who: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NodeError(f"iperf3 {who}: unreadable output: {text[:200]!r}") from exc
    if data.get("error"):
        raise NodeError(f"iperf3 {who}: {data['error']}")
    return data


UDP_TRIES = 3


def _iperf_error(text: str) -> str | None:
    """iperf3's own error in its JSON output, if any."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    err = data.get("error") if isinstance(data, dict) else None
    return str(err) if err else None


def _rate(data: dict[str, Any], *keys: str) -> float | None:
    end = data.get("end", {})
    for key in keys:
        bps = end.get(key, {}).get("bits_per_second")
        if isinstance(bps, (int, float)):
            return float(bps)
    return None


class NetTests:
    """Mixin for ``Mininet``: the test methods (it needs ``hosts`` and ``fn_net``)."""

    hosts: list[Any]
    controllers: list[Any]
    fn_net: Any
    nameToNode: dict[str, Any]

    def _fn_nodes(self, hosts: Any, where: str) -> list[Any]:
        """``hosts`` as node objects: nodes of this network, or their names; anything
        else is an error naming the place and the nodes there are."""
        from fidelnet.errors import UnknownNodeError

        if isinstance(hosts, str | bytes) or not hasattr(hosts, "__iter__"):
            raise ValidationError(f"{where}.hosts", "must be a list of nodes", hosts)
        out = []
        for given in hosts:
            node = given
            if isinstance(given, str):
                if given not in self.nameToNode:
                    raise UnknownNodeError(given, list(self.nameToNode))
                node = self.nameToNode[given]
            name = getattr(node, "name", None)
            if not isinstance(name, str) or self.nameToNode.get(name) is not node:
                raise ValidationError(
                    f"{where}.hosts", "not a node of this network", given, sorted(self.nameToNode)
                )
            out.append(node)
        return out

    # -- ping ---------------------------------------------------------------------------------

    @staticmethod
    def _parsePing(pingOutput: str) -> tuple[int, int]:
        """(sent, received) from ping's output."""
        if "connect: Network is unreachable" in pingOutput:
            return 1, 0
        m = _PING_RE.search(pingOutput)
        if m is None:
            error(f"*** Error: could not parse ping output: {pingOutput}\n")
            return 1, 0
        return int(m.group(1)), int(m.group(2))

    @staticmethod
    def _parsePingFull(pingOutput: str) -> tuple[int, int, float, float, float, float]:
        """(sent, received, rtt min, avg, max, mdev) from ping's output."""
        failed = (1, 0, 0.0, 0.0, 0.0, 0.0)
        if re.search(r"[uU]nreachable", pingOutput):
            return failed
        m = _PING_RE.search(pingOutput)
        if m is None:
            error(f"*** Error: could not parse ping output: {pingOutput}\n")
            return failed
        sent, received = int(m.group(1)), int(m.group(2))
        r = _RTT_RE.search(pingOutput)
        if r is None:
            if received:
                error(f"*** Error: could not parse ping output: {pingOutput}\n")
            return failed
        rtts = [float(g) for g in r.groups()]
        return sent, received, rtts[0], rtts[1], rtts[2], rtts[3]

    @staticmethod
    def _ping_outputs(node: Any, dests: list[Any], timeout: Any) -> list[str | None]:
        """Ping each destination once from ``node``'s shell, up to 48 at a time; the
        outputs in order (None for a destination without interfaces)."""
        outs: list[str | None] = [None if not d.intfs else "" for d in dests]
        wait = f"-W {shlex.quote(str(timeout))} " if timeout else ""
        targets = [(i, str(d.IP())) for i, d in enumerate(dests) if d.intfs]
        for first in range(0, len(targets), _PING_BATCH):
            batch = targets[first : first + _PING_BATCH]
            # Wait for these pings only, not for jobs the user left in the shell.
            jobs = " ".join(f'_fnping {i} {shlex.quote(ip)} & _fnp="$_fnp $!";' for i, ip in batch)
            text = node.cmd(
                "_fnping() { local r; r=$(ping -c1 " + wait + '"$2" 2>&1); '
                "printf '@@%s %s\\n' \"$1\" \"${r//$'\\n'/ }\"; }; _fnp=; "
                + jobs
                + " wait $_fnp; unset _fnp"
            )
            for line in text.splitlines():
                if line.startswith("@@"):
                    index, _, rest = line[2:].partition(" ")
                    if index.isdigit() and int(index) < len(outs):
                        outs[int(index)] = rest
        return outs

    def _fn_reactive(self) -> bool:
        """Whether an OpenFlow controller decides where frames go: it learns from the
        traffic in the order it comes, so the order of the pings matters."""
        return any(type(c).__name__ != "NullController" for c in self.controllers)

    def _ping_rounds(
        self, hosts: list[Any], timeout: Any
    ) -> Iterator[tuple[Any, list[Any], list[str | None]]]:
        """(source, destinations, ping outputs) for every source in order; several
        sources' shells ping at once, except under an OpenFlow controller: then one
        source after another, in Mininet's order (each source's pings still go out
        together). A reactive controller learns where a host is from the first frame
        it sees; after a host moved (mobility.py), pings to it from other sources
        that came before its own went where it used to be, and the flows installed
        for them outlived the pings (1 in 4 runs of mobility.py lost pings)."""
        self.fn_net.start_shells(hosts)  # here, all at once, not in the threads
        for node in hosts:
            node.fn_shell()
        rounds = [(node, [d for d in hosts if d is not node]) for node in hosts]
        if self._fn_reactive():
            for node, dests in rounds:
                yield node, dests, self._ping_outputs(node, dests, timeout)
            return
        with ThreadPoolExecutor(max_workers=_PING_SOURCES) as pool:
            futures = [pool.submit(self._ping_outputs, n, d, timeout) for n, d in rounds]
            for (node, dests), future in zip(rounds, futures, strict=True):
                yield node, dests, future.result()

    def ping(self, hosts: list[Any] | None = None, timeout: Any = None) -> float:
        """Ping between every pair of ``hosts`` (all hosts by default); returns the
        percentage of packets lost."""
        packets = lost = 0
        if not hosts:
            hosts = self.hosts
            output("*** Ping: testing ping reachability\n")
        hosts = self._fn_nodes(hosts, "ping")
        for node, dests, results in self._ping_rounds(hosts, timeout):
            output(f"{node.name} -> ")
            for dest, result in zip(dests, results, strict=True):
                sent, received = (0, 0) if result is None else self._parsePing(result)
                packets += sent
                if received > sent:
                    raise NodeError(
                        f"ping {node.name} -> {dest.name}: received more packets "
                        f"than sent: {result}"
                    )
                lost += sent - received
                output(f"{dest.name} " if received else "X ")
            output("\n")
        if packets > 0:
            ploss = 100.0 * lost / packets
            output(f"*** Results: {int(ploss)}% dropped ({packets - lost}/{packets} received)\n")
            return ploss
        output("*** Warning: No packets sent\n")
        return 0.0

    def pingFull(self, hosts: list[Any] | None = None, timeout: Any = None) -> list[Any]:
        """Ping every pair; returns [(src, dst, (sent, received, min, avg, max, mdev))]."""
        results = []
        if not hosts:
            hosts = self.hosts
            output("*** Ping: testing ping reachability\n")
        hosts = self._fn_nodes(hosts, "pingFull")
        for node, dests, outs in self._ping_rounds(hosts, timeout):
            output(f"{node.name} -> ")
            for dest, result in zip(dests, outs, strict=True):
                parsed = self._parsePingFull(result or "")
                results.append((node, dest, parsed))
                output(f"{dest.name} " if parsed[1] else "X ")
            output("\n")
        output("*** Results: \n")
        for src, dest, (sent, received, rmin, ravg, rmax, rdev) in results:
            output(f" {src}->{dest}: {sent}/{received}, ")
            output(f"rtt min/avg/max/mdev {rmin:0.3f}/{ravg:0.3f}/{rmax:0.3f}/{rdev:0.3f} ms\n")
        return results

    def pingAll(self, timeout: Any = None) -> float:
        return self.ping(timeout=timeout)

    def _fn_pair(self, where: str) -> list[Any]:
        if len(self.hosts) < 2:
            raise ValidationError(where, f"needs two hosts, the network has {len(self.hosts)}")
        return [self.hosts[0], self.hosts[1]]

    def pingPair(self) -> float:
        return self.ping(hosts=self._fn_pair("pingPair"))

    def pingAllFull(self) -> list[Any]:
        return self.pingFull()

    def pingPairFull(self) -> list[Any]:
        return self.pingFull(hosts=self._fn_pair("pingPairFull"))

    # -- iperf ----------------------------------------------------------------------------------

    @staticmethod
    def _parseIperf(iperfOutput: str) -> str:
        found = re.findall(r"([\d\.]+ \w+/sec)", iperfOutput)
        if found:
            return str(found[-1])
        error("could not parse iperf output: " + iperfOutput)
        return ""

    def iperf(
        self,
        hosts: list[Any] | None = None,
        l4Type: str = "TCP",
        udpBw: str = "10M",
        fmt: str | None = None,
        seconds: int = 5,
        port: int = 5001,
    ) -> list[str]:
        """Measure bandwidth from the first host (client) to the second (server); returns
        [server rate, client rate] (for UDP [udpBw, server rate, client rate])."""
        if not hosts:
            hosts = self._fn_pair("iperf")
            hosts = [hosts[0], self.hosts[-1]]
        hosts = self._fn_nodes(hosts, "iperf")
        if len(hosts) != 2:
            raise ValidationError("iperf.hosts", "needs exactly two hosts", hosts)
        client, server = hosts
        if l4Type not in ("TCP", "UDP"):
            raise ValidationError("iperf.l4Type", "unknown protocol", l4Type, ["TCP", "UDP"])
        output("*** Iperf: testing", l4Type, "bandwidth between", client, "and", server, "\n")
        if l4Type == "TCP":
            res = self._iperf_tcp(client, server, seconds, port)
            result = [format_rate(res.flows[0].goodput_bps, fmt)]
            # The client's figure is what left it: the bytes the server received over
            # the whole run, warm-up included. What the client wrote into its socket
            # (iperf's own client figure) also counts data still queued when it
            # stopped, and an autotuned send buffer grows by megabytes in a few
            # seconds: 11.6-12.5 Mbit/s "sent" on a 10 Mbit/s link, 107 on 100.
            result.append(format_rate(res.flows[0].receiver_bps, fmt))
            output(f"*** Results: {result}\n")
            return result
        # A lossy link loses iperf3's TCP control connection's packets too (Mininet's
        # iperf 2 has none): at 50 % loss its client sometimes gives up on it. That
        # run measured nothing; it is run again, at most UDP_TRIES times, and said so.
        for attempt in range(1, UDP_TRIES + 1):
            cliout, servout = self._iperf_udp_once(client, server, seconds, port, udpBw)
            error_text = _iperf_error(cliout)
            if not error_text or "unable to" not in error_text or attempt == UDP_TRIES:
                break
            warn(
                f"*** Warning: iperf: {client}'s iperf3 lost its control connection "
                f"({error_text}); trying again ({attempt + 1}/{UDP_TRIES})\n"
            )
        cdata = _iperf_json(cliout, f"client in {client}")
        sdata = _iperf_json(servout, f"server in {server}") if servout.strip() else {}
        srate = _rate(sdata, "sum_received", "sum") or _rate(cdata, "sum_received")
        crate = _rate(cdata, "sum_sent", "sum")
        result = [udpBw, format_rate(srate or 0.0, fmt), format_rate(crate or 0.0, fmt)]
        output(f"*** Results: {result}\n")
        return result

    def _iperf_udp_once(
        self, client: Any, server: Any, seconds: Any, port: int, udpBw: str
    ) -> tuple[str, str]:
        """One UDP iperf3 run: (client's JSON, server's JSON)."""
        srv = server.popen(
            ["iperf3", "-s", "-1", "-J", "-p", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 10
            while not procfs.tcp_listening(srv.pid, port):
                if srv.poll() is not None or time.monotonic() > deadline:
                    out = srv.communicate()[0].decode("utf-8", "replace")
                    raise NodeError(
                        f"iperf3 server in {server}: not listening on port {port}: {out[:300]}"
                    )
                time.sleep(0.01)
            argv = ["iperf3", "-c", str(server.IP()), "-p", str(port), "-t", str(seconds), "-J"]
            argv += ["-u", "-b", str(udpBw)]
            try:
                cliout, clierr, _ = client.pexec(argv, timeout=int(seconds) + 15)
            except subprocess.TimeoutExpired:
                cliout = json.dumps({"error": "unable to finish: its control connection stalled"})
                clierr = ""
            debug(f"Client output: {cliout}{clierr}\n")
            try:
                servout = srv.communicate(timeout=15)[0].decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                servout = ""  # it still waits for a client that gave up: killed below
            debug(f"Server output: {servout}\n")
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        return cliout, servout

    def _iperf_tcp(self, client: Any, server: Any, seconds: Any, port: int) -> TcpResult:
        """One TCP flow through :func:`fidelnet.measure.tcp.tcp`; the warm-up is dropped
        when the run leaves at least 1 s after it (else the whole run counts)."""
        from fidelnet.measure.tcp import tcp  # pydantic costs 0.3 s: only when iperf runs

        pairs = [(client.name, server.name)]
        duration = int(seconds)  # Mininet passes ``-t %d``
        try:
            res = tcp(self.fn_net, pairs, duration=duration, port=port)
        except ValidationError as exc:
            if exc.field != "duration":
                raise
            debug(f"iperf: {exc}; the whole run counts\n")
            res = tcp(self.fn_net, pairs, duration=duration, port=port, warmup=0.0)
        flow = res.flows[0]
        debug(
            f"iperf: goodput {flow.goodput_bps:.0f} bit/s after a {res.warmup_s:g} s "
            f"warm-up, sender {flow.sender_bps:.0f} bit/s over the same span, "
            f"bottleneck {res.bottleneck_bps} bit/s, path {' -> '.join(flow.path)}\n"
        )
        for flag in res.flags:
            warn(f"*** Warning: iperf {flag.code}: {flag.message}\n")
        return res

    def iperfSingle(
        self, hosts: list[Any] | None = None, udpBw: str = "10M", period: int = 60, port: int = 5001
    ) -> list[str]:
        """A UDP iperf between two hosts (older Mininet's name)."""
        return self.iperf(hosts, l4Type="UDP", udpBw=udpBw, seconds=period, port=port)

    # -- CPU --------------------------------------------------------------------------------------

    def runCpuLimitTest(self, cpu: float, duration: int = 5) -> list[float]:
        """Run busy loops in every host's shell for ``duration`` seconds and return each
        host's share of the machine's CPU time, per second, in percent."""
        info(f"*** Testing CPU {cpu * 100:.0f}% bandwidth limit\n")
        cores = os.cpu_count() or 1
        nprocs = math.ceil(cores * cpu)
        hosts = self.hosts
        pids: dict[Any, list[int]] = {h: [] for h in hosts}
        try:
            for h in hosts:
                for _ in range(nprocs):
                    h.cmd("while true; do a=1; done &")
                    if h.lastPid is not None:
                        pids[h].append(h.lastPid)
            usage = {h: _cpu_usage_us(h) for h in hosts}
            outputs: dict[Any, list[float]] = {h: [] for h in hosts}
            for _ in range(duration):
                time.sleep(1)
                for h in hosts:
                    now = _cpu_usage_us(h)
                    outputs[h].append((now - usage[h]) / 1e6 / cores * 100)
                    usage[h] = now
        finally:
            for h, found in pids.items():
                for pid in found:
                    h.cmd(f"kill -9 {pid}")
        fractions = [pct for h in hosts for pct in outputs[h]]
        output(f"*** Results: {fractions}\n")
        return fractions


def _cpu_usage_us(host: Any) -> float:
    """Microseconds of CPU the host's processes used (its cgroup's ``cpu.stat``)."""
    for d in host.cgroup_dirs():
        path = os.path.join(d, "cpu.stat")
        if os.path.exists(path):
            with open(path, encoding="ascii") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return float(value)
        path = os.path.join(d, "cpuacct.usage")
        if os.path.exists(path):
            with open(path, encoding="ascii") as f:
                return float(f.read()) / 1000
    raise NodeError(f"{host}: no cgroup reports its CPU usage")
