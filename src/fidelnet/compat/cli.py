"""Mininet's ``mininet.cli``: the ``mininet>`` command line.

:class:`CLI` ``(net)`` reads commands until ``exit``, ``quit`` or end of input;
``CLI(net, script=FILE)`` runs a file of commands instead. Commands: ``nodes``,
``net``, ``dump``, ``links``, ``intfs``, ``ports``, ``pingall``, ``pingpair``,
``pingallfull``, ``pingpairfull``, ``iperf [h1 h2]``, ``iperfudp [bw h1 h2]``,
``link s1 h1 up|down``, ``switch s1 start|stop``, ``sh CMD`` (a shell command on
the host, as typed), ``py EXPR``, ``px STMT``, ``noecho``, ``source FILE``,
``time CMD``, ``wait``, ``dpctl``, ``help``, and ``<node> <command>``, where node
names after the first word are replaced by their IP addresses.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import subprocess
import sys
import time
from cmd import Cmd
from typing import IO, Any

from fidelnet.compat import _context
from fidelnet.compat.log import error, info, output
from fidelnet.compat.util import dumpNodeConnections, dumpPorts, quietRun
from fidelnet.errors import FidelnetError

__all__ = ["CLI"]


class CLI(Cmd):
    """A simple command line to look at and drive a network."""

    prompt = "mininet> "
    readlineInited = False

    helpStr = (
        "You may also send a command to a node using:\n"
        "  <node> command {args}\n"
        "For example:\n"
        "  mininet> h1 ifconfig\n"
        "\n"
        "The interpreter automatically substitutes IP addresses\n"
        "for node names when a node is the first arg, so commands\n"
        "like\n"
        "  mininet> h2 ping h3\n"
        "should work.\n"
        "\n"
        "Some character-oriented interactive commands require\n"
        "noecho:\n"
        "  mininet> noecho h2 vi foo.py\n\n"
    )

    def __init__(
        self, mininet: Any, stdin: IO[str] = sys.stdin, script: str | None = None, **kwargs: Any
    ) -> None:
        self.mn = mininet
        self.locals: dict[str, Any] = {"net": mininet}
        self.inputFile: Any = script
        super().__init__(stdin=stdin, **kwargs)
        if stdin is not sys.stdin:
            self.use_rawinput = False
        info("*** Starting CLI:\n")
        if self.inputFile:
            self.do_source(self.inputFile)
            return
        self.initReadline()
        self.run()

    @classmethod
    def initReadline(cls) -> None:
        """Command history in ~/.mininet_history, for interactive use on a terminal."""
        if cls.readlineInited or not sys.stdin.isatty():
            return
        cls.readlineInited = True
        try:
            import readline
        except ImportError:
            return
        path = os.path.expanduser("~/.mininet_history")
        if os.path.isfile(path):
            readline.read_history_file(path)
            readline.set_history_length(1000)

        def write_history() -> None:
            with contextlib.suppress(OSError):
                readline.write_history_file(path)

        atexit.register(write_history)

    def run(self) -> None:
        """The command loop; ^C interrupts the current command, not the CLI."""
        while True:
            try:
                for node in self.mn.values():
                    while node.waiting:
                        info("stopping", node, "\n")
                        node.sendInt()
                        node.waitOutput()
                self.cmdloop()
                break
            except KeyboardInterrupt:
                output("\nInterrupt\n")

    def onecmd(self, line: str) -> bool:
        """One command; an error of fidelnet's (a bad argument, a failed measurement) is
        printed and the CLI goes on, where Mininet's would end with a traceback."""
        try:
            return bool(super().onecmd(line))
        except FidelnetError as exc:
            error(f"*** {exc}\n")
            return False

    def emptyline(self) -> bool:
        """An empty line does nothing (it does not repeat the last command)."""
        return False

    def getLocals(self) -> dict[str, Any]:
        self.locals.update({name: self.mn[name] for name in self.mn})
        return self.locals

    def precmd(self, line: str) -> str:
        """Everything after '#' is a comment."""
        return line.split("#")[0] if "#" in line else line

    def do_help(self, arg: str) -> bool | None:
        """Describe the commands."""
        super().do_help(arg)
        if arg == "":
            output(self.helpStr)
        return None

    def do_nodes(self, _line: str) -> None:
        """List all nodes."""
        output("available nodes are: \n{}\n".format(" ".join(sorted(self.mn))))

    def do_ports(self, _line: str) -> None:
        """Show each switch's ports and interfaces."""
        dumpPorts(self.mn.switches)

    def do_net(self, _line: str) -> None:
        """List the network's connections."""
        dumpNodeConnections(self.mn.values())

    def do_sh(self, line: str) -> None:
        """Run a shell command on the host: sh CMD (the OVS tools reach the run's own
        Open vSwitch, as Mininet's reach the machine's)."""
        env = dict(os.environ)
        for net in _context.open_networks():
            env.update(net.node_env())
        subprocess.call(line, shell=True, env=env)  # the user typed a shell command

    def do_py(self, line: str) -> None:
        """Evaluate a Python expression (node names are variables): py h1.IP()."""
        try:
            result = eval(line, globals(), self.getLocals())
        except Exception as exc:
            output(str(exc) + "\n")
            return
        if not result:
            return
        output((result if isinstance(result, str) else repr(result)) + "\n")

    def do_px(self, line: str) -> None:
        """Execute a Python statement: px print(h1.IP())."""
        try:
            exec(line, globals(), self.getLocals())
        except Exception as exc:
            output(str(exc) + "\n")

    def do_pingall(self, line: str) -> None:
        """Ping between all hosts."""
        self.mn.pingAll(line or None)

    def do_pingpair(self, _line: str) -> None:
        """Ping between the first two hosts."""
        self.mn.pingPair()

    def do_pingallfull(self, _line: str) -> None:
        """Ping between all hosts, with round-trip times."""
        self.mn.pingAllFull()

    def do_pingpairfull(self, _line: str) -> None:
        """Ping between the first two hosts, with round-trip times."""
        self.mn.pingPairFull()

    def _hosts(self, names: list[str]) -> list[Any] | None:
        missing = [n for n in names if n not in self.mn]
        for name in missing:
            error(f"node '{name}' not in network\n")
        return None if missing else [self.mn[n] for n in names]

    def do_iperf(self, line: str) -> None:
        """TCP iperf between two hosts: iperf [h1 h2]."""
        args = line.split()
        if not args:
            self.mn.iperf()
        elif len(args) == 2:
            hosts = self._hosts(args)
            if hosts:
                self.mn.iperf(hosts)
        else:
            error("invalid number of args: iperf src dst\n")

    def do_iperfudp(self, line: str) -> None:
        """UDP iperf between two hosts: iperfudp [bw h1 h2]."""
        args = line.split()
        if not args:
            self.mn.iperf(l4Type="UDP")
        elif len(args) == 3:
            hosts = self._hosts(args[1:])
            if hosts:
                self.mn.iperf(hosts, l4Type="UDP", udpBw=args[0])
        else:
            error("invalid number of args: iperfudp bw src dst\nbw examples: 10M\n")

    def do_intfs(self, _line: str) -> None:
        """List interfaces."""
        for node in self.mn.values():
            output("{}: {}\n".format(node.name, ",".join(node.intfNames())))

    def do_dump(self, _line: str) -> None:
        """Show every node."""
        for node in self.mn.values():
            output(f"{node!r}\n")

    def do_link(self, line: str) -> None:
        """Bring the links between two nodes up or down: link s1 h1 down."""
        args = line.split()
        if len(args) != 3:
            error("invalid number of args: link end1 end2 [up down]\n")
        elif args[2] not in ("up", "down"):
            error("invalid type: link end1 end2 [up down]\n")
        else:
            self.mn.configLinkStatus(*args)

    def do_links(self, _line: str) -> None:
        """Report on links."""
        for link in self.mn.links:
            output(str(link), link.status(), "\n")

    def do_switch(self, line: str) -> None:
        """Start or stop a switch: switch s1 stop."""
        args = line.split()
        if len(args) != 2:
            error("invalid number of args: switch <switch name>{start, stop}\n")
            return
        name, command = args
        if name not in self.mn or self.mn[name] not in self.mn.switches:
            error(f"invalid switch: {name}\n")
        elif command == "start":
            self.mn[name].start(self.mn.controllers)
        elif command == "stop":
            self.mn[name].stop(deleteIntfs=False)
        else:
            error("invalid command: switch <switch name> {start, stop}\n")

    def do_wait(self, _line: str) -> None:
        """Wait until every switch forwards."""
        self.mn.waitConnected()

    def do_dpctl(self, line: str) -> None:
        """Run a datapath command on every switch: dpctl dump-flows (``ovs-ofctl`` on
        OVS switches)."""
        args = line.split()
        if not args:
            error("usage: dpctl command [arg1] [arg2] ...\n")
            return
        for sw in self.mn.switches:
            output("*** " + sw.name + " " + ("-" * 72) + "\n")
            output(sw.dpctl(*args))

    def do_time(self, line: str) -> None:
        """Time a command: time pingall."""
        start = time.time()
        self.onecmd(line)
        output(f"*** Elapsed time: {time.time() - start:0.6f} secs\n")

    def do_xterm(self, _line: str) -> None:
        """Not supported: run commands with `<node> <command>`."""
        error("xterm: not supported by fidelnet; use `<node> <command>`\n")

    do_x = do_gterm = do_xterm

    def do_exit(self, _line: str) -> str:
        """Exit."""
        return "exited by user command"

    def do_quit(self, line: str) -> str:
        """Exit."""
        return self.do_exit(line)

    def do_EOF(self, line: str) -> str:
        """Exit."""
        output("\n")
        return self.do_exit(line)

    def isatty(self) -> bool:
        try:
            return os.isatty(self.stdin.fileno())
        except (AttributeError, OSError, ValueError):
            return False

    def do_noecho(self, line: str) -> None:
        """Run an interactive command with echo off: noecho h2 vi foo.py."""
        if self.isatty():
            quietRun("stty -echo")
        self.default(line)
        if self.isatty():
            quietRun("stty echo")

    def do_source(self, line: str) -> None:
        """Read commands from a file: source FILE."""
        args = line.split()
        if len(args) != 1:
            error("usage: source <file>\n")
            return
        try:
            with open(args[0], encoding="utf-8") as f:
                self.inputFile = f
                for cmdline in f:
                    if self.onecmd(self.precmd(cmdline)):
                        break
        except OSError:
            error(f"error reading file {args[0]}\n")
        self.inputFile = None

    def default(self, line: str) -> None:
        """``<node> <command>``: run the command in the node's shell; later node names
        become their IP addresses."""
        first, args, line = self.parseline(line)
        if first in self.mn:
            if not args:
                error(f"*** Please enter a command for node: {first} <cmd>\n")
                return
            node = self.mn[first]
            words = []
            for arg in args.split(" "):
                other = self.mn.nameToNode.get(arg)
                intf = other.defaultIntf() if other is not None and other.intfs else None
                words.append((intf.updateIP() if intf is not None else None) or arg)
            node.sendCmd(" ".join(words))
            self.waitForNode(node)
        else:
            error(f"*** Unknown command: {line}\n")

    def waitForNode(self, node: Any) -> None:
        """Print the node's output until its command ends (keys typed on a terminal go
        to the command)."""
        tty = self.isatty()
        while node.waiting:
            try:
                if tty:
                    fds = [self.stdin.fileno(), node.stdout.fileno()]
                    ready = [fd for fd, _ in _poll(fds)]
                    if self.stdin.fileno() in ready:
                        node.write(self.stdin.read(1))
                    if node.stdout.fileno() not in ready:
                        continue
                output(node.monitor())
            except KeyboardInterrupt:
                node.sendInt()


def _poll(fds: list[int]) -> list[tuple[int, int]]:
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return poller.poll()
