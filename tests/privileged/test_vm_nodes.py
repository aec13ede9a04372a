"""VM nodes on real QEMU (TCG on this machine): a VM host beside a namespace host,
both on one switch; the guest runs its own kernel, reaches the other host, runs
programs with their output and exit status, and changes what a namespace cannot
(a sysctl that is not per namespace, a kernel module) without touching the host.
Teardown leaves no QEMU, no multiplexer and no run directory."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.kernel.state import STATE_DIR
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import VMSpec

pytestmark = pytest.mark.privileged


def _spec() -> TopologySpec:
    t = TopologySpec()
    t.add_node(NodeSpec("s1", kind="switch"))
    vm = VMSpec(memory_mb=256, cpupin=(1,))
    t.add_node(NodeSpec("h1", ip="10.0.0.1/24", backend="qemu", vm=vm))
    t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    t.add_link(LinkSpec("h1", "s1"))
    t.add_link(LinkSpec("h2", "s1"))
    return t


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def test_a_vm_host_runs_its_own_kernel_beside_a_namespace_host() -> None:
    host_swappiness = _read("/proc/sys/vm/swappiness")
    host_dummy = os.path.exists("/sys/module/dummy")
    with Network(_spec()) as net:
        h1, h2 = net["h1"], net["h2"]
        run_id = net.run_id
        run_dir = os.path.join(STATE_DIR, f"{net.run_id}-vm-h1")
        assert os.path.isdir(run_dir)
        assert h1.cmd("uname -r").strip() != platform.release()  # the guest's own kernel
        assert h1.cmd("hostname").strip() == "h1"
        assert "h1-eth0" in h1.cmd("ip -o link show")
        assert "10.0.0.1/24" in h1.cmd("ip -o -4 address show dev h1-eth0")
        out = h1.cmd("ping -c 3 -i 0.2 -W 2 10.0.0.2")
        assert " 0% packet loss" in out, out
        out = h2.cmd("ping -c 3 -i 0.2 -W 2 10.0.0.1")
        assert " 0% packet loss" in out, out
        stdout, stderr, code = h1.pexec(["sh", "-c", "echo out; echo err >&2; exit 4"])
        assert (stdout, stderr, code) == ("out\n", "err\n", 4)
        # What a namespace cannot do: a machine-wide sysctl, a kernel module.
        h1.cmd("sysctl -qw vm.swappiness=7")
        assert h1.cmd("cat /proc/sys/vm/swappiness").strip() == "7"
        assert _read("/proc/sys/vm/swappiness") == host_swappiness
        h1.cmd("modprobe dummy")
        assert "dummy" in h1.cmd("cat /proc/modules")
        assert os.path.exists("/sys/module/dummy") == host_dummy
        qemu_pids = [
            int(p) for p in os.listdir("/proc") if p.isdigit() and _is_qemu(int(p), net.run_id)
        ]
        assert len(qemu_pids) == 1
        # The one vCPU's thread is pinned to core 1, as cpupin asks.
        pinned = [
            t
            for t in os.listdir(f"/proc/{qemu_pids[0]}/task")
            if "CPU 0/" in _read(f"/proc/{qemu_pids[0]}/task/{t}/comm")
        ]
        assert len(pinned) == 1
        assert os.sched_getaffinity(int(pinned[0])) == {1}
        # A link added to the running VM: a NIC hot-plugged, named, addressed.
        net.add_node(NodeSpec("h3", ip="10.0.9.2/24"))
        net.add_link(LinkSpec("h1", "h3", a_ip="10.0.9.1/24", b_ip="10.0.9.2/24"))
        assert "10.0.9.1/24" in h1.cmd("ip -o -4 address show dev h1-eth1")
        out = h1.cmd("ping -c 3 -i 0.2 -W 2 10.0.9.2")
        assert " 0% packet loss" in out, out
    assert not os.path.exists(run_dir)
    assert not any(p.isdigit() and _is_qemu(int(p), run_id) for p in os.listdir("/proc"))


def _is_qemu(pid: int, run_id: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    name = f"fidelnet-{run_id}-h1,".encode()  # -name guest=fidelnet-<run>-h1,debug-threads=on
    return bool(argv) and argv[0].endswith(b"qemu-system-x86_64") and any(name in a for a in argv)


_CHILD = """
import sys, time
from fidelnet import Network
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import VMSpec
t = TopologySpec()
t.add_node(NodeSpec("h1", ip="10.0.0.1/24", backend="qemu", vm=VMSpec()))
t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
t.add_link(LinkSpec("h1", "h2"))
net = Network(t).start()
net["h1"].cmd("true")
print("READY", net.run_id, flush=True)
time.sleep(600)
"""


def _vm_processes(run_id: str) -> list[int]:
    """QEMU and multiplexer processes of the run (by their command lines)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(
            f"{run_id}-vm-h1".encode() in a or f"fidelnet-{run_id}-h1".encode() in a for a in argv
        ):
            found.append(int(p))
    return found


def test_kill_9_then_clean_leaves_no_qemu_socket_or_namespace() -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY "), line
    run_id = line.split()[1]
    os.kill(proc.pid, signal.SIGKILL)  # this process only: QEMU and the mux live on
    proc.wait()
    proc.stdout.close()
    assert _vm_processes(run_id), "QEMU should outlive the killed run"
    run_dir = os.path.join(STATE_DIR, f"{run_id}-vm-h1")
    assert os.path.isdir(run_dir)
    clean = subprocess.run(
        [sys.executable, "-m", "fidelnet", "clean"], capture_output=True, text=True, env=env
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    deadline = time.monotonic() + 10
    while _vm_processes(run_id):
        assert time.monotonic() < deadline, _vm_processes(run_id)
        time.sleep(0.1)
    assert not os.path.exists(run_dir)
    assert (
        not [n for n in os.listdir("/run/netns") if run_id in n]
        if os.path.isdir("/run/netns")
        else True
    )


_MININET = """
from mininet.net import Mininet
from mininet.node import VMHost, VMLinuxBridge
from mininet.topo import Topo


class Line(Topo):
    def build(self):
        s1 = self.addSwitch("s1")
        self.addLink(self.addHost("h1"), s1)
        self.addLink(self.addHost("h2"), s1)


net = Mininet(topo=Line(), host=VMHost, switch=VMLinuxBridge, controller=None)
net.start()
print("LOSS", net.pingAll())
h1, h2 = net.get("h1", "h2")
s1 = net.get("s1")
print("KERNEL", h1.cmd("uname -r").strip())
print("BRIDGE", s1.cmd("ip -o link show master br0 | wc -l").strip())
h2.cmd("iperf3 -s -D -1")
import time
time.sleep(1)
print("IPERF", h1.cmd("iperf3 -c %s -t 1 -J | grep -c bits_per_second" % h2.IP()).strip())
net.stop()
"""


def test_a_cimininet_style_script_with_vm_hosts_and_a_vm_bridge(tmp_path: Path) -> None:
    """``Mininet(topo, host=VMHost, switch=VMLinuxBridge)`` on a 3-node line (every
    node a VM; the switch is a Linux bridge in its guest): built, pinged, iperf3
    run, torn down."""
    script = tmp_path / "vmline.py"
    script.write_text(_MININET)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "mn", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "LOSS 0.0" in out, out
    kernel = next(line.split()[1] for line in out.splitlines() if line.startswith("KERNEL"))
    assert kernel != platform.release()
    iperf = next(line.split()[1] for line in out.splitlines() if line.startswith("IPERF"))
    assert int(iperf) > 0, out
    bridged = next(line.split()[1] for line in out.splitlines() if line.startswith("BRIDGE"))
    assert bridged == "2", out  # both of s1's NICs in the guest's bridge


def test_mn_host_vm_linear_3_pingall() -> None:
    """``fidelnet mn --host vm --topo linear,3 --test pingall``: three VM hosts on
    three Open vSwitch switches with the reference controller, 0 % dropped."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "mn", "--host", "vm", "--topo", "linear,3",
         "--test", "pingall"],
        capture_output=True, text=True, env=env, timeout=400, check=False,
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "Results: 0% dropped (6/6 received)" in out, out


def test_a_guest_that_does_not_boot_is_an_error_naming_the_node(tmp_path: Path) -> None:
    """A kernel that is not one: the error names the node and keeps the console log;
    the rollback leaves no QEMU and no run directory."""
    from fidelnet.errors import NodeError

    kernel, initrd = tmp_path / "vmlinuz", tmp_path / "initrd.img"
    kernel.write_bytes(b"not a kernel" * 100)
    initrd.write_bytes(b"not an initramfs")
    t = TopologySpec()
    vm = VMSpec(kernel=str(kernel), initrd=str(initrd), boot_timeout_s=20)
    t.add_node(NodeSpec("h1", ip="10.0.0.1/24", backend="qemu", vm=vm))
    t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    t.add_link(LinkSpec("h1", "h2"))
    net = Network(t)
    with pytest.raises(NodeError) as exc:
        net.start()
    msg = str(exc.value)
    assert msg.startswith("h1: the VM did not answer"), msg
    kept = msg.split("console kept in ")[1].split()[0]
    assert kept.endswith("-h1-console.log")
    if os.path.exists(kept):
        os.unlink(kept)
    assert not net.is_open
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _is_vm_of(int(p), "h1")]


def _is_vm_of(pid: int, node: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return (
        bool(argv)
        and argv[0].endswith(b"qemu-system-x86_64")
        and any(f"-{node},debug-threads".encode() in a for a in argv)
    )


def _disk_image(tmp_path: Path) -> Path:
    """A small ext4 disk image of its own: bash, sh, ip, cat and what they link
    against, copied from this machine, and a marker file; no partition table."""
    import shutil

    root = tmp_path / "root"
    programs = [shutil.which(p) for p in ("bash", "sh", "ip", "cat", "uname", "sysctl")]
    files: set[str] = set()
    for prog in programs:
        assert prog is not None
        files.add(os.path.realpath(prog))
        out = subprocess.run(["ldd", prog], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            for word in line.split():
                if word.startswith("/"):
                    files.add(word)
    for f in sorted(files):
        dest = root / f.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    (root / "bin").mkdir(exist_ok=True)
    for prog in programs:
        assert prog is not None
        name = os.path.basename(prog)
        link = root / "bin" / name
        if not link.exists():
            link.symlink_to(os.path.realpath(prog))
    for d in ("proc", "sys", "dev", "tmp", "run", "etc", "lib/modules"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "fidelnet-disk").write_text("disk-image-root\n")
    img = tmp_path / "disk.img"
    subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-d", str(root), str(img), "96M"],
        check=True,
        capture_output=True,
    )
    return img


def test_a_vm_runs_on_a_disk_image_of_its_own_which_it_never_writes(tmp_path: Path) -> None:
    import hashlib

    img = _disk_image(tmp_path)
    before = hashlib.sha256(img.read_bytes()).hexdigest()
    t = TopologySpec()
    vm = VMSpec(memory_mb=256, image=str(img))
    t.add_node(NodeSpec("h1", ip="10.0.1.1/24", backend="qemu", vm=vm))
    t.add_node(NodeSpec("h2", ip="10.0.1.2/24"))
    t.add_link(LinkSpec("h1", "h2"))
    with Network(t) as net:
        h1, h2 = net["h1"], net["h2"]
        run_dir = os.path.join(STATE_DIR, f"{net.run_id}-vm-h1")
        assert h1.cmd("cat /etc/fidelnet-disk").strip() == "disk-image-root"
        assert os.path.exists("/usr/bin/python3")
        # Not the host's root: what the host has, the guest does not.
        assert h1.cmd("[ -e /usr/bin/python3 ] && echo yes || echo no").strip() == "no"
        assert "10.0.1.1/24" in h1.cmd("ip -o -4 address show dev h1-eth0")
        out = h2.cmd("ping -c 3 -i 0.2 -W 2 10.0.1.1")
        assert " 0% packet loss" in out, out
        h1.cmd("echo changed > /etc/fidelnet-disk")
        assert h1.cmd("cat /etc/fidelnet-disk").strip() == "changed"
        assert net.node_backend("qemu").describe(h1)["disk"] == str(img)
        # A result measured on this network says what machine the VM was.
        from fidelnet.measure.provenance import collect

        vm_prov = collect(net).vms
        assert list(vm_prov) == ["h1"]
        assert vm_prov["h1"]["disk"] == str(img) and vm_prov["h1"]["memory_mb"] == 256
        assert vm_prov["h1"]["accel"] in ("kvm", "tcg") and vm_prov["h1"]["rss_kib"] > 0
    assert hashlib.sha256(img.read_bytes()).hexdigest() == before
    assert not os.path.exists(run_dir)


def test_a_disk_image_without_a_file_system_fails_at_once_naming_the_node(
    tmp_path: Path,
) -> None:
    """/init cannot mount its root and powers the VM off: the error comes when QEMU
    stops, not at the boot timeout, and the console says why."""
    from fidelnet.errors import NodeError

    img = tmp_path / "zeros.img"
    img.write_bytes(b"\0" * (4 << 20))
    t = TopologySpec()
    t.add_node(NodeSpec("h1", backend="qemu", vm=VMSpec(image=str(img), boot_timeout_s=600)))
    net = Network(t)
    began = time.monotonic()
    with pytest.raises(NodeError) as exc:
        net.start()
    assert time.monotonic() - began < 120
    msg = str(exc.value)
    assert msg.startswith("h1: the VM did not answer (QEMU stopped after"), msg
    assert "cannot mount the disk image's root /dev/vda" in msg
    kept = msg.split("console kept in ")[1].split()[0]
    if os.path.exists(kept):
        os.unlink(kept)
    assert not net.is_open
