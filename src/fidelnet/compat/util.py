"""Mininet's ``mininet.util``: helpers scripts import, on fidelnet.

- running host commands: :func:`errRun`, :func:`errFail`, :func:`quietRun`,
  :func:`which`, :func:`isShellBuiltin`;
- addresses: :func:`ipStr`, :func:`ipNum`, :func:`ipAdd`, :func:`ipParse`,
  :func:`netParse`, :func:`macColonHex`;
- parsing: :func:`checkInt`, :func:`checkFloat`, :func:`makeNumeric`,
  :func:`splitArgs`;
- sorting and ranges: :func:`natural`, :func:`naturalSeq`, :func:`irange`;
- classes and topologies: :func:`custom`, :func:`customClass`,
  :func:`specialClass`, :func:`buildTopo`;
- nodes: :func:`dumpNodeConnections`, :func:`dumpNetConnections`,
  :func:`dumpPorts`, :func:`waitListening`, :func:`pmonitor`;
- versions: :class:`StrictVersion`;
- the rest: :func:`numCores`, :func:`retry`, :func:`ensureRoot`,
  :func:`fixLimits` and :func:`mountCgroups` (nothing to do on fidelnet).
"""

from __future__ import annotations

import codecs
import fcntl
import functools
import os
import re
import select
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fidelnet.compat.log import debug, error, info, output
from fidelnet.errors import NodeError, ValidationError

__all__ = [
    "BaseString",
    "Python3",
    "StrictVersion",
    "checkFloat",
    "checkInt",
    "custom",
    "customClass",
    "decode",
    "dumpNetConnections",
    "dumpNodeConnections",
    "dumpPorts",
    "encode",
    "ensureRoot",
    "errFail",
    "errRun",
    "fixLimits",
    "getincrementaldecoder",
    "ipAdd",
    "ipNum",
    "ipParse",
    "ipStr",
    "irange",
    "isShellBuiltin",
    "macColonHex",
    "makeIntfPair",
    "makeNumeric",
    "mountCgroups",
    "moveIntf",
    "natural",
    "naturalSeq",
    "netParse",
    "numCores",
    "pexpect",
    "pmonitor",
    "quietRun",
    "retry",
    "run",
    "specialClass",
    "splitArgs",
    "waitListening",
    "which",
]

Python3 = True
BaseString = str


def decode(s: bytes | str) -> str:
    return s.decode("utf-8", "replace") if isinstance(s, bytes) else s


def encode(s: bytes | str) -> bytes:
    return s.encode() if isinstance(s, str) else s


def getincrementaldecoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors="replace")


# -- running commands on the host ------------------------------------------------------


def errRun(*cmd: Any, **kwargs: Any) -> tuple[str, str, int]:
    """Run a host command; returns (stdout, stderr, exit code).

    A single string is split on spaces (or run by ``sh -c`` with ``shell=True``);
    ``stderr=subprocess.STDOUT`` merges the streams; ``echo=True`` prints the output.
    """
    stderr = kwargs.get("stderr", subprocess.PIPE)
    shell = bool(kwargs.get("shell", False))
    echo = bool(kwargs.get("echo", False))
    command: Any = cmd[0] if len(cmd) == 1 else list(cmd)
    if isinstance(command, str) and not shell:
        command = [a for a in command.split(" ") if a]
    elif isinstance(command, (list, tuple)):
        command = [str(a) for a in command]
        if shell:
            command = " ".join(command)
    if echo:
        info(command, "\n")
    debug("*** errRun:", command, "\n")
    try:
        proc = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=stderr, shell=shell, check=False
        )
    except OSError as exc:
        return "", f"{exc}\n", 127
    out = decode(proc.stdout or b"")
    err = decode(proc.stderr or b"") if stderr == subprocess.PIPE else ""
    if echo:
        output(out)
    return out, err, proc.returncode


def errFail(*cmd: Any, **kwargs: Any) -> tuple[str, str, int]:
    """:func:`errRun`, raising when the command exits non-zero."""
    out, err, ret = errRun(*cmd, **kwargs)
    if ret:
        raise NodeError(f"errFail: {cmd} failed with return code {ret}: {err}")
    return out, err, ret


def run(cmd: Any) -> str:
    """Run a host command (a string split on spaces, or a list); its output with
    stderr merged."""
    return errRun(cmd, stderr=subprocess.STDOUT)[0]


class _Pexpect:
    """``mininet.util.pexpect``: the ``pexpect`` module, with ``spawn`` decoding
    UTF-8 by default (Mininet's Python 3 wrapper)."""

    @staticmethod
    def spawn(*args: Any, **kwargs: Any) -> Any:
        import pexpect as real  # type: ignore[import-untyped]

        kwargs.setdefault("encoding", "utf-8")
        return real.spawn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        import pexpect as real

        return getattr(real, name)


pexpect = _Pexpect()


def moveIntf(intf: Any, dstNode: Any, printError: bool = True, **_kwargs: Any) -> bool:
    """Move the host's interface ``intf`` (a name) into ``dstNode``, recorded by the
    run and given back at its end (:mod:`fidelnet.kernel.hostintf`); False, with an
    error printed, when it cannot move."""
    from fidelnet.errors import FidelnetError
    from fidelnet.kernel import hostintf

    name = str(intf)
    try:
        if dstNode.netns is None:
            raise NodeError(f"{dstNode.name} shares the host's namespace")
        hostintf.lend(name, os.path.basename(dstNode.netns), dstNode.net.state_record)
    except FidelnetError as exc:
        if printError:
            error(f"*** Error: moveIntf: {name} not successfully moved to {dstNode}: {exc}\n")
        return False
    return True


def makeIntfPair(
    intf1: str,
    intf2: str,
    addr1: str | None = None,
    addr2: str | None = None,
    node1: Any = None,
    node2: Any = None,
    deleteIntfs: bool = True,
    runCmd: Any = None,
) -> str:
    """A veth pair ``intf1``-``intf2`` between ``node1`` and ``node2`` (two nodes of
    one network: fidelnet makes no interface in the host's namespace), with MACs
    ``addr1``/``addr2``; made as a link of their network."""
    del deleteIntfs, runCmd
    from fidelnet.topology.spec import LinkSpec

    if node1 is None or node2 is None or node1.net is not node2.net:
        raise NodeError(
            f"makeIntfPair({intf1}, {intf2}): needs two nodes of one network "
            "(fidelnet makes no interfaces in the host's namespace)"
        )
    node1.net.add_link(
        LinkSpec(node1.name, node2.name, a_intf=intf1, b_intf=intf2, a_mac=addr1, b_mac=addr2)
    )
    return ""


def quietRun(cmd: Any, **kwargs: Any) -> str:
    """Run a host command and return its stdout and stderr merged."""
    return errRun(cmd, stderr=subprocess.STDOUT, **kwargs)[0]


def which(cmd: str, **kwargs: Any) -> str | None:
    out, _, ret = errRun(["which", cmd], stderr=subprocess.STDOUT, **kwargs)
    return out.rstrip() if ret == 0 else None


_BUILTINS: set[str] | None = None


def isShellBuiltin(cmd: str) -> bool:
    """Whether the first word of ``cmd`` is a bash builtin."""
    global _BUILTINS
    if _BUILTINS is None:
        _BUILTINS = set(quietRun(["bash", "-c", "enable"]).replace("enable ", "").split())
    space = cmd.find(" ")
    return (cmd[:space] if space > 0 else cmd) in _BUILTINS


# -- addresses ---------------------------------------------------------------------------


def _colonHex(val: int, bytecount: int) -> str:
    return ":".join(f"{(val >> (8 * i)) & 0xFF:02x}" for i in range(bytecount - 1, -1, -1))


def macColonHex(mac: int) -> str:
    """``macColonHex(1) == '00:00:00:00:00:01'``."""
    return _colonHex(mac, 6)


def ipStr(ip: int) -> str:
    """Dotted quad of a 32-bit number."""
    return ".".join(str((ip >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def ipNum(w: int, x: int, y: int, z: int) -> int:
    return (w << 24) | (x << 16) | (y << 8) | z


def ipAdd(i: int, prefixLen: int = 8, ipBaseNum: int = 0x0A000000) -> str:
    """Host number ``i`` in the network ``ipBaseNum/prefixLen``: ``ipAdd(1) == '10.0.0.1'``."""
    imax = 0xFFFFFFFF >> prefixLen
    if i > imax:
        raise ValidationError("ipAdd", f"not enough addresses in a /{prefixLen} for host {i}", i)
    mask = 0xFFFFFFFF ^ imax
    return ipStr((ipBaseNum & mask) + i)


def ipParse(ip: str) -> int:
    """A dotted address as a number; short forms fill zeros before the last part."""
    args = [int(arg) for arg in ip.split(".")]
    while len(args) < 4:
        args.insert(len(args) - 1, 0)
    return ipNum(*args)


def netParse(ipstr: str) -> tuple[int, int]:
    """``'10.0.0.0/8'`` -> (address number, prefix length); no ``/len`` means /24."""
    if "/" in ipstr:
        ip, pf = ipstr.split("/")
        return ipParse(ip), int(pf)
    return ipParse(ipstr), 24


# -- parsing -----------------------------------------------------------------------------


def checkInt(s: Any) -> bool:
    try:
        int(s)
    except (TypeError, ValueError):
        return False
    return True


def checkFloat(s: Any) -> bool:
    try:
        float(s)
    except (TypeError, ValueError):
        return False
    return True


def makeNumeric(s: Any) -> Any:
    """An int if ``s`` reads as one, else a float if it reads as one, else ``s``."""
    if checkInt(s):
        return int(s)
    if checkFloat(s):
        return float(s)
    return s


def splitArgs(argstr: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``'fn,arg1,key=val'`` -> ('fn', [arg1], {'key': val}), numbers converted."""
    fn, *params = argstr.split(",")
    args = [makeNumeric(s) for s in params if "=" not in s]
    kwargs: dict[str, Any] = {}
    for s in params:
        if "=" in s:
            key, val = s.split("=", 1)
            kwargs[key] = makeNumeric(val)
    return fn, args, kwargs


# -- sorting -------------------------------------------------------------------------------


def natural(text: Any) -> list[Any]:
    """Sort key putting ``h2`` before ``h10``."""
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", str(text))]


def naturalSeq(t: Iterable[Any]) -> list[list[Any]]:
    return [natural(x) for x in t]


def irange(start: int, end: int) -> range:
    """Inclusive range: ``irange(1, 3)`` is 1, 2, 3."""
    return range(start, end + 1)


# -- classes ---------------------------------------------------------------------------------


def custom(cls: Any, **params: Any) -> Callable[..., Any]:
    """A constructor for ``cls`` with ``params`` preset (they override the caller's)."""

    def customized(*args: Any, **kwargs: Any) -> Any:
        kwargs = dict(kwargs)
        kwargs.update(params)
        return cls(*args, **kwargs)

    customized.__name__ = f"custom({cls},{params})"
    # fidelnet reads these to know what a customized constructor builds.
    customized.fn_cls = cls  # type: ignore[attr-defined]
    customized.fn_params = dict(params)  # type: ignore[attr-defined]
    return customized


def specialClass(
    cls: Any,
    prepend: list[Any] | None = None,
    append: list[Any] | None = None,
    defaults: dict[str, Any] | None = None,
    override: dict[str, Any] | None = None,
) -> type:
    """A subclass of ``cls`` with preset arguments (like ``functools.partial``)."""
    pre, post = list(prepend or []), list(append or [])
    dflt, over = dict(defaults or {}), dict(override or {})

    def init(self: Any, *args: Any, **params: Any) -> None:
        newparams = dict(dflt)
        newparams.update(params)
        newparams.update(over)
        cls.__init__(self, *(pre + list(args) + post), **newparams)

    # fn_params: what fidelnet's checks read to see the preset keyword arguments.
    return type(
        f"{cls.__name__}{dflt}",
        (cls,),
        {"__init__": init, "__doc__": cls.__doc__, "fn_params": {**dflt, **over}},
    )


def customClass(classes: dict[str, Any], argStr: str) -> Any:
    """The class named by ``argStr`` (``'lxbr,stp=1'``) with its arguments preset."""
    cname, args, kwargs = splitArgs(argStr)
    cls = classes.get(cname)
    if cls is None:
        raise ValidationError("class", f"unknown name {cname!r}", argStr, sorted(classes))
    if not args and not kwargs:
        return cls
    return specialClass(cls, append=args, defaults=kwargs)


def buildTopo(topos: dict[str, Callable[..., Any]], topoStr: str) -> Any:
    """Build the topology ``topoStr`` (``'linear,3'``) from a dict of constructors."""
    topo, args, kwargs = splitArgs(topoStr)
    if topo not in topos:
        raise ValidationError("topo", f"unknown topology {topo!r}", topoStr, sorted(topos))
    return topos[topo](*args, **kwargs)


# -- nodes ------------------------------------------------------------------------------------


def dumpNodeConnections(nodes: Iterable[Any]) -> None:
    """Print each node's interfaces and what they connect to (``h1 h1-eth0:s1-eth1``)."""
    for node in nodes:
        output(node.name)
        for intf in node.intfList():
            output(f" {intf}:")
            link = getattr(intf, "link", None)
            if link is not None:
                other = link.intf2 if link.intf1 is intf else link.intf1
                output(str(other))
            else:
                output(" ")
        output("\n")


def dumpNetConnections(net: Any) -> None:
    dumpNodeConnections(net.controllers + net.switches + net.hosts)


def dumpPorts(switches: Iterable[Any]) -> None:
    for switch in switches:
        output(f"{switch.name} ")
        for intf in switch.intfList():
            output(f"{intf}:{switch.ports[intf]} ")
        output("\n")


def waitListening(
    client: Any = None, server: Any = "127.0.0.1", port: int = 80, timeout: float | None = None
) -> bool:
    """Wait until something listens on ``server``:``port``, trying from ``client``
    (a node, or the host when None). Returns False on timeout or no route."""
    ip = server if isinstance(server, str) else server.IP()
    probe = ["bash", "-c", f"exec 3<>/dev/tcp/{shlex.quote(str(ip))}/{int(port)}"]
    waited = 0.0
    while True:
        if client is not None:
            _, err, code = client.pexec(probe)
        else:
            _, err, code = errRun(probe)
        if code == 0:
            return True
        if "No route" in err or "unreachable" in err:
            error(f"no route to {server}:{port}\n")
            return False
        if timeout is not None and waited >= timeout:
            error(f"could not connect to {server} on port {port}\n")
            return False
        debug("waiting for", server, "to listen on port", port, "\n")
        time.sleep(0.1)
        waited += 0.1


def pmonitor(
    popens: dict[Any, Any], timeoutms: int = 500, readline: bool = True, readmax: int = 1024
) -> Iterator[tuple[Any, str]]:
    """Yield (host, line) as the processes in ``popens`` (host -> Popen) write; (None, '')
    after ``timeoutms`` without output; ends when every process closed its output."""
    poller = select.poll()
    fd_to_host: dict[int, Any] = {}
    decoders: dict[int, codecs.IncrementalDecoder] = {}
    for host, popen in popens.items():
        fd = popen.stdout.fileno()
        fd_to_host[fd] = host
        decoders[fd] = getincrementaldecoder()
        poller.register(fd, select.POLLIN)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    while popens:
        ready = poller.poll(timeoutms)
        if not ready:
            yield None, ""
            continue
        for fd, event in ready:
            host = fd_to_host[fd]
            popen = popens[host]
            if event & (select.POLLIN | select.POLLHUP):
                while True:
                    try:
                        raw = popen.stdout.readline() if readline else popen.stdout.read(readmax)
                    except OSError:
                        raw = b""
                    line = decoders[fd].decode(raw or b"")
                    if line == "":
                        break
                    yield host, line
            if event & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                poller.unregister(fd)
                del popens[host]


# -- versions ------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"(\d+)((?:\.\d+)*)(?:([ab])(\d+))?")


@functools.total_ordering
class StrictVersion:
    """Mininet's ``StrictVersion`` (``packaging.version.parse`` there, or distutils'
    class): a version number like ``1.12.0`` or ``2.3b1`` that compares as numbers,
    ``StrictVersion('1.12.0') > StrictVersion('1.9')``. A pre-release (``a``/``b``)
    sorts before its release."""

    def __init__(self, vstring: str) -> None:
        text = str(vstring).strip()
        m = _VERSION_RE.fullmatch(text)
        if m is None:
            raise ValidationError("StrictVersion", "not a version number like 1.12.0", vstring)
        self.vstring = text
        numbers = [int(m.group(1)), *(int(p) for p in m.group(2).split(".") if p)]
        while len(numbers) > 1 and numbers[-1] == 0:
            numbers.pop()  # 1.12.0 == 1.12
        self.version = tuple(numbers)
        self.prerelease = (m.group(3), int(m.group(4))) if m.group(3) else None

    def _key(self) -> tuple[tuple[int, ...], tuple[int, str, int]]:
        pre = (0, *self.prerelease) if self.prerelease else (1, "", 0)
        return self.version, pre

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = StrictVersion(other)
        if not isinstance(other, StrictVersion):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if isinstance(other, str):
            other = StrictVersion(other)
        if not isinstance(other, StrictVersion):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.vstring

    def __repr__(self) -> str:
        return f"StrictVersion({self.vstring!r})"


# -- the rest -----------------------------------------------------------------------------------


def numCores() -> int:
    return os.cpu_count() or 1


def retry(
    retries: int, delaySecs: float, fn: Callable[..., Any], *args: Any, **keywords: Any
) -> None:
    """Call ``fn`` until it returns true, at most ``retries`` times."""
    tries = 0
    while not fn(*args, **keywords) and tries < retries:
        time.sleep(delaySecs)
        tries += 1
    if tries >= retries:
        raise NodeError(f"*** gave up after {retries} retries of {fn}")


def ensureRoot() -> None:
    """fidelnet, like Mininet, needs root to make namespaces."""
    if os.geteuid() != 0:
        raise NodeError("fidelnet must run as root (it creates network namespaces)")


def fixLimits() -> None:
    """Mininet raises sysctl and rlimit values here; fidelnet changes no host settings."""


def mountCgroups() -> None:
    """Mininet mounts cgroups here; fidelnet uses the ones the system mounted."""
