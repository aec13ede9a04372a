"""Open vSwitch owned by one run: its own ``ovsdb-server`` and ``ovs-vswitchd``.

A run with OVS switches never touches the machine's own Open vSwitch, another run's,
or bridges a user made: it starts a database server and a switch daemon of its own,
inside the run's fabric namespace (where every switch port is), with their database,
sockets, pid files and logs in ``/run/fidelnet/<run>.ovs/`` (mode 0700). The
directory is recorded in the run state before it exists, each daemon right after it
starts (pid and start time), so a normal stop and ``fidelnet clean`` after a crash
remove exactly these.

The datapath is the kernel's (``system``) where the ``openvswitch`` module is
loaded, else OVS's userspace datapath (``netdev``: packets read and written on the
ports with AF_PACKET sockets by ``ovs-vswitchd`` itself). The OVS tools reach this
run's daemons when ``OVS_RUNDIR`` names the directory (:meth:`OvsDaemons.env`):
``ovs-vsctl`` finds ``db.sock`` there, ``ovs-ofctl`` a bridge's ``<bridge>.mgmt``
socket and ``ovs-appctl`` the daemons' control sockets.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

from fidelnet.errors import KernelError, UnsupportedError
from fidelnet.kernel import launcher, procfs
from fidelnet.kernel.state import STATE_DIR, process_start_time

__all__ = ["OvsDaemons", "datapath_type", "missing", "run_env"]

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


def missing() -> str | None:
    """Why a run cannot have OVS switches here, or None."""
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if absent or not os.path.isfile(SCHEMA):
        return (
            "Open vSwitch (" + ", ".join(absent or [SCHEMA]) + " missing; Debian: "
            "apt-get install openvswitch-switch)"
        )
    return None


def run_dir(run_id: str) -> str:
    """Where run ``run_id``'s OVS keeps its database, sockets and logs."""
    return os.path.join(STATE_DIR, f"{run_id}.ovs")


def run_env(run_id: str) -> dict[str, str]:
    """Environment variables that point the OVS tools at run ``run_id``'s daemons."""
    d = run_dir(run_id)
    return {"OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d}


def datapath_type() -> str:
    """``system`` where the kernel module is loaded, else ``netdev`` (userspace)."""
    return "system" if os.path.isdir("/sys/module/openvswitch") else "netdev"


class OvsDaemons:
    """One run's ``ovsdb-server`` and ``ovs-vswitchd``, started by :meth:`start`."""

    def __init__(
        self,
        run_id: str,
        netns: str | None,
        record: Callable[..., None],
        gone: Callable[..., None],
    ) -> None:
        self.run_id = run_id
        self.netns = netns
        self._record = record
        self._gone = gone
        self.dir = run_dir(run_id)
        self.db = os.path.join(self.dir, "db.sock")
        self.datapath_type = datapath_type()
        self._procs: list[tuple[subprocess.Popen[bytes], int, str]] = []
        self._log_offset = 0
        self._rconn: dict[tuple[str, str], bool] = {}

    def env(self) -> dict[str, str]:
        """Environment variables that point the OVS tools at this run's daemons."""
        return run_env(self.run_id)

    def start(self) -> None:
        why = missing()
        if why is not None:
            raise UnsupportedError(why, "an OVS switch", "use datapath bpf or bridge")
        self._record("tree", path=self.dir)
        os.makedirs(self.dir, mode=0o700)
        conf = os.path.join(self.dir, "conf.db")
        self._tool(["ovsdb-tool", "create", conf, SCHEMA])
        self._daemon(
            "ovsdb-server",
            [
                conf,
                f"--remote=punix:{self.db}",
                "--remote=db:Open_vSwitch,Open_vSwitch,manager_options",
            ],
            self.db,
        )
        self.vsctl("--no-wait", "init")
        self.vsctl(
            "--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"
        )
        self._daemon(
            "ovs-vswitchd", [f"unix:{self.db}"], os.path.join(self.dir, "ovs-vswitchd.ctl")
        )

    def start_controller(self, name: str, port: int, protocols: Sequence[str] = ()) -> None:
        """Open vSwitch's test controller (a learning switch) listening on ``port`` of
        the fabric's loopback, as controller ``name`` of this run, speaking the
        OpenFlow versions ``protocols`` (all it knows when empty)."""
        if shutil.which("ovs-testcontroller") is None:
            raise UnsupportedError(
                "ovs-testcontroller (Debian: apt-get install openvswitch-testcontroller)",
                f"controller {name}",
            )
        self._daemon(
            "ovs-testcontroller",
            [
                *([f"--protocols={','.join(protocols)}"] if protocols else []),
                f"ptcp:{port}:127.0.0.1",
            ],
            None,
            label=f"controller-{name}",
            listening=port,
        )

    def _daemon(
        self,
        name: str,
        args: Sequence[str],
        ready_path: str | None,
        *,
        label: str | None = None,
        listening: int | None = None,
    ) -> None:
        label = label or name
        argv = [
            name,
            *args,
            f"--pidfile={os.path.join(self.dir, label + '.pid')}",
            f"--log-file={os.path.join(self.dir, label + '.log')}",
            "--no-chdir",
        ]
        if name != "ovs-testcontroller":
            argv.append(f"--unixctl={os.path.join(self.dir, label + '.ctl')}")
        full = launcher.exec_argv(argv, netns=self.netns) if self.netns else argv
        proc = subprocess.Popen(
            full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=dict(os.environ, **self.env()),
        )
        start = process_start_time(proc.pid)
        if start is not None:
            self._record("process", pid=proc.pid, start=start, what=name)
            self._procs.append((proc, start, name))
        deadline = time.monotonic() + READY_TIMEOUT_S

        def ready() -> bool:
            if listening is not None:
                return procfs.tcp_listening(proc.pid, listening)
            return ready_path is not None and os.path.exists(ready_path)

        while not ready():
            code = proc.poll()
            if code is not None or time.monotonic() > deadline:
                how = f"exited {code}" if code is not None else "timed out"
                raise KernelError(
                    f"{label} of run {self.run_id} did not start ({how}){self._log_tail(label)}"
                )
            time.sleep(0.01)

    def _log_tail(self, name: str) -> str:
        try:
            with open(
                os.path.join(self.dir, name + ".log"), encoding="utf-8", errors="replace"
            ) as f:
                lines = f.read().splitlines()[-3:]
        except OSError:
            return ""
        return "; its log ends: " + " | ".join(lines) if lines else ""

    def _tool(self, argv: Sequence[str]) -> str:
        p = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, **self.env()),
        )
        if p.returncode != 0:
            raise KernelError(f"{' '.join(argv[:3])}: {p.stderr.strip() or p.stdout.strip()}")
        return p.stdout

    def controller_connections(self) -> dict[tuple[str, str], bool]:
        """Per (bridge, controller target), whether the bridge is connected to that
        controller now, read from ``ovs-vswitchd``'s log (its ``rconn`` lines, in
        order; the last one for a pair tells). The database's ``is_connected`` says
        the same, but ``ovs-vswitchd`` writes it only every 5 s, and a network
        waiting for its switches would wait that long for nothing."""
        path = os.path.join(self.dir, "ovs-vswitchd.log")
        try:
            with open(path, "rb") as f:
                f.seek(self._log_offset)
                chunk = f.read()
        except OSError:
            return dict(self._rconn)
        end = chunk.rfind(b"\n") + 1
        self._log_offset += end
        for line in chunk[:end].decode("utf-8", "replace").splitlines():
            parts = line.split("|", 4)
            if len(parts) < 5 or parts[2] != "rconn" or "<->" not in parts[4]:
                continue
            who, _, what = parts[4].partition(": ")
            bridge, _, target = who.partition("<->")
            self._rconn[(bridge, target)] = what.strip() == "connected"
        return dict(self._rconn)

    def vsctl(self, *args: str) -> str:
        """``ovs-vsctl`` on this run's database (argv, never a shell)."""
        return self._tool(["ovs-vsctl", f"--db=unix:{self.db}", "--timeout=10", *args])

    def ofctl(self, *args: str) -> str:
        """``ovs-ofctl`` with this run's bridges' management sockets."""
        return self._tool(["ovs-ofctl", *args])

    def stop(self, graceful: bool = True) -> None:
        """Stop the daemons (switch first), then remove the directory. Without
        ``graceful`` they are killed at once: when the fabric namespace goes next,
        it takes the bridges' devices with it, and ``ovs-vswitchd``'s own orderly
        removal of a hundred bridges took seconds."""
        for proc, start, name in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
                try:
                    proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self._gone("process", pid=proc.pid, start=start)
            del name
        self._procs.clear()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.dir)
        self._gone("tree", path=self.dir)
