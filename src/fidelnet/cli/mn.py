"""``fidelnet mn``: Mininet's ``mn`` command on fidelnet.

Same options as Mininet's ``mn`` (``--topo``, ``--switch``, ``--host``,
``--controller``, ``--link``, ``--test``, ``--custom``, ``-c``, ``--mac``, ``--arp``,
``-i``, ``-v``, ``--pre``/``--post``, ``--pin``, ``-w``/``-t``…), parsed with argparse;
or a script to run unchanged: ``fidelnet mn script.py [its args]`` runs it as
``__main__`` with the ``mininet`` shim first on ``sys.path``.

Exit status: 0 on success; 1 when a test fails (``pingall`` loses packets) or the
script or network fails; 2 on invalid input (the message says what and why).
Whatever happens, every network the run opened is torn down (SIGINT and SIGTERM
included).

Public: :func:`run_mn`, :func:`parse`, :class:`MnSetup`, ``TESTS``.
"""

from __future__ import annotations

import argparse
import os
import runpy
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fidelnet.compat import _context, shim_path
from fidelnet.compat import log as mlog
from fidelnet.compat._switch import LearningSwitch
from fidelnet.compat.link import EngineLink, TCIntf, TCLink, TCULink, end_params, preset
from fidelnet.compat.link import Link as _Link
from fidelnet.compat.node import (
    Controller,
    CPULimitedHost,
    DefaultController,
    Docker,
    Host,
    LinuxBridge,
    NullController,
    OVSBridge,
    OVSController,
    OVSSwitch,
    RemoteController,
    UserSwitch,
    VMHost,
)
from fidelnet.compat.topo import SpecTopo
from fidelnet.compat.util import buildTopo, customClass, specialClass, splitArgs
from fidelnet.errors import FidelnetError, UnsupportedError, ValidationError
from fidelnet.topology.builders import TOPOS as _SPEC_TOPOS
from fidelnet.topology.builders import from_mn_spec
from fidelnet.topology.spec import LinkParams

__all__ = ["TESTS", "MnSetup", "parse", "run_mn"]

SWITCHES: dict[str, Any] = {
    "default": OVSSwitch,
    "lxbr": LinuxBridge,
    "ovs": OVSSwitch,
    "ovsbr": OVSBridge,
    "ovsk": OVSSwitch,
    "user": UserSwitch,
}
HOSTS: dict[str, Any] = {
    "proc": Host,
    "cfs": specialClass(CPULimitedHost, defaults={"sched": "cfs"}),
    "rt": specialClass(CPULimitedHost, defaults={"sched": "rt"}),
    "vm": VMHost,  # a QEMU virtual machine per host (docs/vm.md); vm,memory=512M,cpus=2
    "docker": Docker,  # a container per host (docs/containers.md); docker,dimage=NAME
}
CONTROLLERS: dict[str, Any] = {
    "default": DefaultController,
    "ref": Controller,
    "ovsc": OVSController,
    "remote": RemoteController,
    "none": NullController,
}
LINKS: dict[str, Any] = {
    "default": _Link,
    "tc": TCLink,
    "tcu": TCULink,
    "ovs": _Link,
    "engine": EngineLink,
}
TESTS = (
    "pingall",
    "pingpair",
    "pingallfull",
    "pingpairfull",
    "iperf",
    "iperfudp",
    "all",
    "none",
    "build",
)


@dataclass
class MnSetup:
    """What the options ask for, resolved: classes, the topology, tests, flags."""

    options: argparse.Namespace
    topo: Any = None
    switch: Any = None
    host: Any = None
    controllers: list[Any] = field(default_factory=list)
    link: Any = None
    link_params: LinkParams = field(default_factory=LinkParams)
    tests: list[str] = field(default_factory=list)
    topos: dict[str, Callable[..., Any]] = field(default_factory=dict)


class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors become ValidationError."""

    def error(self, message: str) -> Any:
        raise _ParseError(message)


class _MnHelp(argparse.HelpFormatter):
    """Mininet's help begins ``Usage: mn [options]``; scripts and tests look for it."""

    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="mn",
        usage="%(prog)s [options] [script [script args]]\n(type %(prog)s -h for details)",
        formatter_class=_MnHelp,
        allow_abbrev=False,
        description="fidelnet mn: Mininet's mn on fidelnet. Create a network from the "
        "command line, run tests or the CLI, or run a Mininet script unchanged.",
    )
    add = p.add_argument
    add("--switch", default="default", help="|".join(SWITCHES) + "[,param=value...]")
    add("--host", default="proc", help="|".join(HOSTS) + "[,param=value...]")
    add(
        "--controller",
        action="append",
        default=[],
        help="|".join(CONTROLLERS) + "[,param=value...]",
    )
    add("--link", default="default", help="|".join(LINKS) + "[,param=value...]")
    add(
        "--topo",
        default="minimal",
        help="|".join(entry[3] for entry in _SPEC_TOPOS.values()) + "[,param=value...]",
    )
    add("-c", "--clean", action="store_true", help="remove what stale fidelnet runs own, exit")
    add(
        "--custom",
        action="append",
        default=[],
        metavar="FILE",
        help="read custom classes or topos from .py file(s)",
    )
    add("--test", action="append", default=[], help="|".join(TESTS) + " (several: a,b)")
    add("-x", "--xterms", action="store_true", help="(not supported; warns)")
    add("-i", "--ipbase", default="10.0.0.0/8", help="base IP address for hosts")
    add("--mac", action="store_true", help="automatically set host MACs")
    add("--arp", action="store_true", help="set all-pairs ARP entries")
    add(
        "--ipv6",
        choices=["on", "off"],
        default="on",
        help="off: IPv6 off in every node (big IPv4-only topologies build faster)",
    )
    add(
        "--tdf",
        default=None,
        help="time dilation factor: every node's clocks and every link run TDF times "
        "slower in real time; auto: the factor follows the machine's load "
        "(docs/virtual-time.md)",
    )
    add("-v", "--verbosity", default="info", choices=list(mlog.LEVELS))
    add("--innamespace", action="store_true", help="(accepted; warns)")
    add("--listenport", type=int, default=6654, help="(accepted)")
    add("--nolistenport", action="store_true", help="(accepted)")
    add("--pre", help="CLI script to run before tests")
    add("--post", help="CLI script to run after tests")
    add("--pin", action="store_true", help="pin hosts to CPU cores (with --host cfs)")
    add("--nat", action="store_true", help="(not supported)")
    add("--version", action="store_true", help="print the Mininet version emulated and exit")
    add("-w", "--wait", action="store_true", help="wait for switches to forward")
    add("-t", "--twait", type=int, dest="twait", help="timed wait (s) for switches")
    add("script", nargs="?", help="a Mininet script to run unchanged")
    add("script_args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def _tests(values: list[str]) -> list[str]:
    """``--test a,b`` and ``--test a+b`` both mean two tests; ``--test iperf,5`` keeps
    its arguments (Mininet's ``name,arg,key=value``)."""
    found: list[str] = []
    for value in values:
        for part in value.split("+"):
            pieces = part.split(",")
            if len(pieces) > 1 and all(p.lower() in TESTS for p in pieces):
                found += pieces
            else:
                found.append(part)
    for test in found:
        name = test.split(",")[0].lower()
        if name not in TESTS:
            raise ValidationError("--test", f"unknown test {name!r}", test, TESTS)
    return found


def _load_custom(paths: list[str]) -> dict[str, dict[str, Any]]:
    """Run ``--custom`` files (with the shim importable); their dicts by name."""
    found: dict[str, dict[str, Any]] = {
        "topos": {},
        "switches": {},
        "hosts": {},
        "controllers": {},
        "links": {},
    }
    shim = shim_path()
    if shim not in sys.path:
        sys.path.insert(0, shim)
    for value in paths:
        files = [value] if os.path.isfile(value) else value.split(",")
        for path in files:
            if not os.path.isfile(path):
                raise ValidationError("--custom", "no such file", path)
            scope: dict[str, Any] = {"__file__": path, "__name__": "__custom__"}
            _run_custom(path, scope)
            for key, table in found.items():
                extra = scope.get(key)
                if isinstance(extra, dict):
                    table.update(extra)
    return found


MAX_CUSTOM_BYTES = 4 << 20
"""The largest ``--custom`` file (as scenario files)."""


def _run_custom(path: str, scope: dict[str, Any]) -> None:
    """Compile and run one ``--custom`` file; every failure a ValidationError that
    names the file and, where there is one, the line."""
    size = os.path.getsize(path)
    if size > MAX_CUSTOM_BYTES:
        raise ValidationError(
            "--custom", f"file of {size} bytes; the limit is {MAX_CUSTOM_BYTES} bytes", path
        )
    try:
        with open(path, "rb") as f:
            source = f.read(MAX_CUSTOM_BYTES + 1).decode("utf-8")
        code = compile(source, path, "exec")
    except UnicodeDecodeError as exc:
        raise ValidationError("--custom", f"not UTF-8 text (byte {exc.start})", path) from None
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        line = getattr(exc, "lineno", None)
        where = f"{path}:{line}" if line else path
        raise ValidationError(
            "--custom", f"{where}: {exc.__class__.__name__}: {exc}", path
        ) from None
    except OSError as exc:
        raise ValidationError("--custom", f"cannot read: {exc.strerror}", path) from None
    try:
        exec(code, scope, scope)
    except FidelnetError:
        raise
    except Exception as exc:
        tb = exc.__traceback__
        line = None
        while tb is not None:  # the deepest frame in the custom file
            if tb.tb_frame.f_code.co_filename == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        where = f"{path}:{line}" if line else path
        raise ValidationError(
            "--custom", f"{where}: raised {exc.__class__.__name__}: {exc}", path
        ) from exc


def _topo(text: str, custom: dict[str, Any]) -> Any:
    name = text.split(",")[0].strip()
    if name in custom:
        return buildTopo(custom, text)
    try:
        return SpecTopo(from_mn_spec(text))
    except ValidationError as exc:
        if name in _SPEC_TOPOS:
            raise
        usages = [entry[3] for entry in _SPEC_TOPOS.values()]
        raise ValidationError(
            "--topo", f"unknown topology {name!r}", text, usages + sorted(custom)
        ) from exc


def parse(argv: list[str]) -> MnSetup:
    """Parse and resolve ``mn`` options; raises ValidationError on bad input (the
    topology is built as a Topo, nothing touches the kernel)."""
    parser = _parser()
    try:
        opts = parser.parse_args(argv)
    except _ParseError as exc:
        raise ValidationError("fidelnet mn", str(exc)) from None
    setup = MnSetup(options=opts)
    if opts.script or opts.clean or opts.version:
        return setup
    if opts.tdf is not None:
        opts.tdf = _tdf(opts.tdf)
    custom = _load_custom(opts.custom)
    setup.topos = custom["topos"]
    setup.tests = _tests(opts.test)
    switches = {**SWITCHES, **custom["switches"]}
    controllers = {**CONTROLLERS, **custom["controllers"]}
    if not opts.controller:
        # The default switch is a learning switch on the topology's datapath with no
        # controller (docs/switches.md); --switch lxbr asks for Linux bridges, ovsbr
        # for standalone OVS bridges. Any other switch gets mn's default controller,
        # as with mn.
        kind = opts.switch.split(",", 1)[0]
        opts.controller = ["none"] if kind in ("default", "lxbr", "ovsbr") else ["default"]
        if kind == "default":
            switches["default"] = LearningSwitch
    setup.switch = _resolve("--switch", switches, opts.switch)
    setup.host = _resolve("--host", {**HOSTS, **custom["hosts"]}, opts.host)
    setup.controllers = [_resolve("--controller", controllers, c) for c in opts.controller]
    setup.link = _resolve("--link", {**LINKS, **custom["links"]}, opts.link)
    lp = end_params(TCIntf, preset(setup.link), "--link") if _is_tc_link(setup.link) else None
    setup.link_params = lp or LinkParams()
    setup.topo = _topo(opts.topo, setup.topos)
    return setup


def _tdf(text: str) -> float | str:
    from fidelnet.vt.page import check_tdf

    if text == "auto":
        return text
    try:
        value = float(text)
    except ValueError:
        raise ValidationError("--tdf", "must be a number, or auto", text, ["auto"]) from None
    return check_tdf(value, "--tdf")


def _is_tc_link(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, TCLink)


def _resolve(option: str, table: dict[str, Any], text: str) -> Any:
    name = splitArgs(text)[0]
    if name not in table:
        raise ValidationError(option, f"unknown name {name!r}", text, sorted(table))
    return customClass(table, text)


# -- running ------------------------------------------------------------------------------------


def _run_script(script: str, args: list[str]) -> int:
    """Run a Mininet script unchanged, as ``__main__``, the shim first on sys.path."""
    if not os.path.isfile(script):
        raise ValidationError("script", "no such file", script)
    shim = shim_path()
    sys.path[:0] = [shim, os.path.dirname(os.path.abspath(script))]
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    return 0


def _run_tests(net: Any, tests: list[str]) -> bool:
    """Run the tests in order; False when one of them fails."""
    ok = True
    for test in tests:
        name, args, kwargs = splitArgs(test)
        name = name.lower()
        if name in ("pingall", "pingpair"):
            loss = (net.pingAll if name == "pingall" else net.pingPair)(*args, **kwargs)
            ok = ok and loss == 0
        elif name in ("pingallfull", "pingpairfull"):
            results = (net.pingAllFull if name == "pingallfull" else net.pingPairFull)()
            ok = ok and all(r[2][1] for r in results)
        elif name == "iperf":
            net.iperf(*args, **kwargs)
        elif name == "iperfudp":
            net.iperf(*args, l4Type="UDP", **kwargs)
        elif name == "all":
            ok = ok and net.ping() == 0
            net.iperf()
    return ok


def _run_network(setup: MnSetup) -> int:
    from fidelnet.compat.cli import CLI
    from fidelnet.compat.net import Mininet

    opts = setup.options
    start = time.time()
    if opts.innamespace:
        _context.warn_once(
            "innamespace",
            "--innamespace ignored: fidelnet's switches always live in the run's fabric namespace",
        )
    if opts.xterms:
        _context.warn_once("xterms", "-x ignored: xterms are not supported")
    wait: Any = opts.twait if opts.twait is not None else opts.wait
    if setup.tests and setup.tests != ["none"] and isinstance(wait, bool):
        wait = True
    if "none" in opts.controller:
        mlog.info("*** No OpenFlow controller: switches are learning switches\n")
    net = Mininet(
        topo=setup.topo,
        switch=setup.switch,
        host=setup.host,
        controller=setup.controllers,
        link=setup.link,
        ipBase=opts.ipbase,
        autoSetMacs=opts.mac,
        autoStaticArp=opts.arp,
        autoPinCpus=opts.pin,
        ipv6=opts.ipv6 == "on",
        waitConnected=wait,
        listenPort=None if opts.nolistenport else opts.listenport,
        tdf=opts.tdf,
    )
    ok = True
    try:
        if opts.pre:
            CLI(net, script=opts.pre)
        net.start()
        if setup.tests:
            ok = _run_tests(net, setup.tests)
        else:
            from fidelnet.cli.interactive import run_cli

            run_cli(net)
        if opts.post:
            CLI(net, script=opts.post)
    finally:
        net.stop()
    mlog.info(f"completed in {time.time() - start:0.3f} seconds\n")
    return 0 if ok else 1


def _raise_exit(signum: int, _frame: types.FrameType | None) -> None:
    raise SystemExit(128 + signum)


def run_mn(argv: list[str]) -> int:
    """Mininet's ``mn`` with ``argv``; returns the exit status (see the module doc)."""
    old = {sig: signal.signal(sig, _raise_exit) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        setup = parse(argv)
        opts = setup.options
        mlog.setLogLevel(opts.verbosity)
        if opts.version:
            from fidelnet.compat.net import VERSION

            mlog.output(f"{VERSION} (fidelnet)\n")
            return 0
        if opts.clean:
            from fidelnet.compat.clean import cleanup

            cleanup()
            return 0
        if opts.nat:
            raise UnsupportedError("NAT support in fidelnet", "--nat")
        if opts.script:
            return _run_script(opts.script, opts.script_args)
        return _run_network(setup)
    except (ValidationError, UnsupportedError) as exc:
        print(f"fidelnet mn: {exc}", file=sys.stderr)
        return 2
    except FidelnetError as exc:
        print(f"fidelnet mn: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\n\nKeyboard Interrupt. Shutting down and cleaning up...\n", file=sys.stderr)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        _context.stop_all()
        for sig, handler in old.items():
            signal.signal(sig, handler)
