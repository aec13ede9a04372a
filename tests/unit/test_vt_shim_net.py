"""The clock shim's sockets, timers and CPU time (``shim/vt_net.c``, ``vt_timer.c``,
``vt.c``), on real processes without root at TDF 4: the kernel's receive timestamps
a program reads are virtual, socket timeouts last their virtual time, POSIX timers,
``sigtimedwait`` and ``times()`` follow the factor."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fidelnet.vt import TimePage, preload_env, shim_path

# Virtual time is measured against the real clock: these run alone (make test).
pytestmark = pytest.mark.timing

TDF = 4.0


@pytest.fixture
def page(tmp_path: Path) -> TimePage:
    shim_path()
    return TimePage(tmp_path / "vt-page", TDF)


def _py(page: TimePage, code: str) -> tuple[float, str]:
    began = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-c", code], env=preload_env(page), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return time.monotonic() - began, p.stdout.strip()


_UDP = (
    "import socket, struct, time, fcntl\n"
    "time.sleep(0.2)  # virtual realtime now lags the real clock by 0.6 s\n"
    "a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(('127.0.0.1', 0))\n"
    "b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
)


def test_receive_timestamps_in_control_messages_are_virtual(page: TimePage) -> None:
    code = _UDP + (
        "a.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS\n"
        "b.sendto(b'x', a.getsockname())\n"
        "data, anc, _, _ = a.recvmsg(16, 256)\n"
        "now = time.time()\n"
        "sec, ns = struct.unpack('qq', anc[0][2][:16])\n"
        "print(now - (sec + ns / 1e9))\n"
        "a.setsockopt(socket.SOL_SOCKET, 29, 1)  # SO_TIMESTAMP\n"
        "b.sendto(b'y', a.getsockname())\n"
        "data, anc, _, _ = a.recvmsg(16, 256)\n"
        "now = time.time()\n"
        "sec, us = struct.unpack('qq', anc[-1][2][:16])\n"
        "print(now - (sec + us / 1e6))\n"
    )
    _, out = _py(page, code)
    for age in (float(x) for x in out.split()):
        # Without the rewrite the stamp would be 0.6 s in the program's future.
        # (The kernel's stamp and the vDSO's clock differ by some µs either way.)
        assert abs(age) < 0.02, out


def test_the_siocgstamp_ioctl_is_virtual(page: TimePage) -> None:
    code = _UDP + (
        "b.sendto(b'x', a.getsockname()); a.recv(16)\n"
        "now = time.time()\n"
        "sec, us = struct.unpack('qq', fcntl.ioctl(a.fileno(), 0x8906, bytes(16)))\n"
        "print(now - (sec + us / 1e6))\n"
    )
    _, out = _py(page, code)
    assert abs(float(out)) < 0.02, out


def test_socket_timeouts_last_their_virtual_time(page: TimePage) -> None:
    code = (
        "import socket, struct, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', 0))\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack('qq', 0, 200000))\n"
        "print(struct.unpack('qq', s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)))\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    s.recv(16)\n"
        "except BlockingIOError:\n"
        "    pass\n"
        "print(time.monotonic() - t)\n"
        "c = socket.socket()\n"
        "c.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 5000)\n"
        "print(c.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT))\n"
    )
    wall, out = _py(page, code)
    seen, waited, user_timeout = out.splitlines()
    assert seen == "(0, 200000)", out
    assert 0.19 <= float(waited) <= 0.3, out
    assert 0.75 <= wall <= 1.8, wall
    assert user_timeout == "5000", out


def test_posix_timers_sigtimedwait_and_times_follow_the_factor(page: TimePage) -> None:
    code = (
        "import ctypes, os, signal, time\n"
        "rt = ctypes.CDLL(None, use_errno=True)\n"
        "class TS(ctypes.Structure): _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
        "class ITS(ctypes.Structure): _fields_ = [('i', TS), ('v', TS)]\n"
        "class EV(ctypes.Structure): _fields_ = [('pad', ctypes.c_byte * 64)]\n"
        "ev = EV(); ctypes.memmove(ctypes.addressof(ev) + 12, ctypes.byref(ctypes.c_int(1)), 4)\n"
        "tid = ctypes.c_void_p()\n"
        "assert rt.timer_create(time.CLOCK_MONOTONIC, ctypes.byref(ev), ctypes.byref(tid)) == 0\n"
        "assert rt.timer_settime(tid, 0, ctypes.byref(ITS(TS(0, 0), TS(1, 0))), None) == 0\n"
        "time.sleep(0.1)\n"
        "cur = ITS(); rt.timer_gettime(tid, ctypes.byref(cur))\n"
        "print(cur.v.s + cur.v.ns / 1e9)\n"
        "t = time.monotonic()\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
        "signal.sigtimedwait([signal.SIGUSR1], 0.2)\n"
        "print(time.monotonic() - t)\n"
        "e0 = os.times().elapsed; time.sleep(0.2); print(os.times().elapsed - e0)\n"
    )
    wall, out = _py(page, code)
    left, waited, elapsed = (float(x) for x in out.splitlines())
    assert 0.85 <= left <= 0.91, out  # 1 s armed, 0.1 virtual s later
    assert 0.19 <= waited <= 0.3, out
    assert 0.18 <= elapsed <= 0.3, out
    assert wall >= 4 * 0.5, wall


def _static_and_go(tmp_path: Path) -> tuple[Path, Path]:
    """A static binary (gcc -static) and a Go-looking one (a .go.buildinfo section)."""
    src = tmp_path / "s.c"
    src.write_text("int main(void) { return 0; }\n")
    static, go = tmp_path / "static-prog", tmp_path / "go-prog"
    subprocess.run(["gcc", "-static", "-o", str(static), str(src)], check=True, timeout=60)
    subprocess.run(
        ["objcopy", "--add-section", ".go.buildinfo=/dev/null", "/bin/true", str(go)],
        check=True, timeout=60,
    )  # fmt: skip
    return static, go


def test_programs_the_shim_cannot_reach_are_named_as_they_start(
    page: TimePage, tmp_path: Path
) -> None:
    from fidelnet.vt.reach import Watch, parse

    static, go = _static_and_go(tmp_path)
    watch = Watch(str(tmp_path / "vt.log"))
    try:
        env = {**preload_env(page), "FIDELNET_VT_LOG": watch.path}
        script = f"{static}; {go}; true; python3 -c 'import subprocess; subprocess.run([\"{go}\"])'"
        subprocess.run(["bash", "-c", script], env=env, check=True, timeout=60)
        lines = Path(watch.path).read_text().splitlines()
        assert [ln.split()[2:] for ln in lines] == [
            ["static", str(static)], ["go", str(go)], ["go", str(go)],
        ], lines  # fmt: skip
        found = watch.poll()
        assert [(u.path, u.why) for u in found] == [(str(static), "static"), (str(go), "go")]
    finally:
        watch.stop()
    assert parse("unreached 7 static /usr/lib/x/fidelnet-exec\nnoise\n") == []
