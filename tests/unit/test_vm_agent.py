"""``fidelnet-vm`` end to end without a VM: this test plays QEMU (a Unix socket that
accepts the multiplexer's one connection) and hands that connection to a real agent
(``agent --fd``), so the agent, the multiplexer and the client run exactly as they
do with a guest, only the serial port is a socket here."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fidelnet.nodes.shell import Shell
from fidelnet.vm import agent


class _Vm:
    def __init__(self, tmp: Path) -> None:
        self.chardev = str(tmp / "agent.sock")
        self.sock = str(tmp / "mux.sock")
        qemu = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        qemu.bind(self.chardev)
        qemu.listen(1)
        self.mux = subprocess.Popen(agent.mux_argv(self.chardev, self.sock, 5000))
        conn, _ = qemu.accept()
        qemu.close()
        self.agent = subprocess.Popen(
            [agent.find_tool(), "agent", "--fd", str(conn.fileno())], pass_fds=[conn.fileno()]
        )
        conn.close()

    def run(self, *argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            agent.run_argv(self.sock, list(argv)),
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            **kw,  # type: ignore[arg-type]
        )

    def close(self) -> None:
        for p in (self.agent, self.mux):
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def vm(tmp_path: Path) -> Iterator[_Vm]:
    v = _Vm(tmp_path)
    try:
        assert agent.wait_ready(v.sock, 10)
        yield v
    finally:
        v.close()


def test_a_program_runs_with_its_output_status_and_input(vm: _Vm, tmp_path: Path) -> None:
    r = vm.run("sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.stdout, r.stderr, r.returncode) == ("out\n", "err\n", 3)
    r = vm.run("tr", "a-z", "A-Z", input="hello guest\n")
    assert r.stdout == "HELLO GUEST\n" and r.returncode == 0
    big = "x" * 300_000 + "\n"  # more than a frame and a pipe buffer, both ways
    r = vm.run("cat", input=big)
    assert r.stdout == big
    r = vm.run(
        "sh", "-c", 'echo "$FROM_HOST"; pwd', env={"FROM_HOST": "a b", "PATH": "/usr/bin:/bin"}
    )
    assert r.stdout.splitlines()[0] == "a b"
    p = subprocess.run(
        agent.run_argv(vm.sock, ["pwd"], cwd=str(tmp_path)),
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    assert p.stdout.strip() == str(tmp_path)
    r = vm.run("no-such-program-here")
    assert r.returncode == 127 and "cannot start in the guest" in r.stderr


def test_signals_reach_the_program_and_a_killed_client_kills_it(vm: _Vm, tmp_path: Path) -> None:
    p = subprocess.Popen(agent.run_argv(vm.sock, ["sleep", "60"]))
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
    pidfile = tmp_path / "pid"
    script = f"echo $$ > {pidfile}; exec sleep 60"
    p = subprocess.Popen(agent.run_argv(vm.sock, ["sh", "-c", script]))
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    guest_pid = int(pidfile.read_text())
    p.kill()  # SIGKILL: the client cannot pass it on; the multiplexer ends the program
    p.wait()
    deadline = time.monotonic() + 10
    while _alive(guest_pid):
        assert time.monotonic() < deadline, "the program outlived its client"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split()[2] != "Z"
    except OSError:  # gone meanwhile (ESRCH while it exits, or ENOENT)
        return False


def test_a_node_shell_runs_over_the_agent_on_a_guest_pty(vm: _Vm) -> None:
    env = {"PATH": "/usr/bin:/bin", "PS1": "\x7f"}
    sh = Shell(
        "vm1", agent.run_argv(vm.sock, ["bash", "--norc", "--noediting", "-is"], pty=True), env
    )
    try:
        assert sh.run("echo hello $((6 * 7))").strip() == "hello 42"
        assert sh.run("cd /tmp; pwd").strip() == "/tmp"
        assert sh.run("pwd").strip() == "/tmp"
        assert sh.run("tty").strip().startswith("/dev/pts/")
    finally:
        sh.close()


def test_many_clients_at_once(vm: _Vm) -> None:
    procs = [
        subprocess.Popen(
            agent.run_argv(vm.sock, ["sh", "-c", f"sleep 0.2; echo {i}"]),
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(20)
    ]
    outs = [p.communicate(timeout=20)[0].strip() for p in procs]
    assert outs == [str(i) for i in range(20)]
    assert all(p.returncode == 0 for p in procs)
