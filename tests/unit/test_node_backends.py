"""The node backend protocol, with the fake backend: what a node does with its shell,
``popen`` and interfaces goes through its backend, without root."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fidelnet.errors import UnsupportedError, ValidationError
from fidelnet.nodes.backends import make_backend
from fidelnet.nodes.fake import FakeNodeBackend
from fidelnet.nodes.intf import Interface
from fidelnet.nodes.netns import NetnsBackend
from fidelnet.nodes.node import Host, Router, Switch
from fidelnet.topology import NodeSpec, TopologySpec
from fidelnet.topology.validate import problems


class _Net:
    """What a node asks of its network: a backend by kind, and a state to record in."""

    run_id = "t"

    def __init__(self, backend: FakeNodeBackend) -> None:
        self.backend = backend
        self.asked: list[str] = []
        self.records: list[tuple[str, dict[str, Any]]] = []

    def node_backend(self, kind: str) -> FakeNodeBackend:
        self.asked.append(kind)
        return self.backend

    def state_record(self, kind: str, **fields: Any) -> None:
        self.records.append((kind, fields))


def test_a_node_runs_its_shell_and_programs_through_its_backend(tmp_path: Path) -> None:
    fake = FakeNodeBackend()
    net = _Net(fake)
    h1 = Host(net, NodeSpec("h1"))  # type: ignore[arg-type]
    assert h1.backend is fake and net.asked == ["netns"]
    try:
        assert h1.cmd("echo hello $((6 * 7))").strip() == "hello 42"
        assert h1.cmd("cd /tmp && pwd").strip() == "/tmp"  # one persistent shell
        assert h1.cmd("pwd").strip() == "/tmp"
        assert ("process", {"pid": h1.shell_if_started().pid}) in [
            (k, {"pid": f["pid"]}) for k, f in net.records
        ]  # the shell was recorded before anyone could leak it
        out, err, code = h1.pexec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (out, err, code) == ("out\n", "err\n", 3)
        p = h1.popen(["pwd"], cwd=str(tmp_path), stdout=subprocess.PIPE, text=True)
        assert p.communicate(timeout=10)[0].strip() == str(tmp_path)
        with pytest.raises(ValidationError, match="argv"):
            h1.popen("echo not a list")  # type: ignore[arg-type]
    finally:
        h1.close()
    assert ("shell", "h1") in fake.calls and ("exec", "h1", "pwd") in fake.calls
    assert fake.calls[-1] == ("close", "h1")
    assert not h1.has_shell()


def test_interface_and_router_configuration_goes_to_the_interior() -> None:
    fake = FakeNodeBackend()
    net = _Net(fake)
    r1 = Router(net, NodeSpec("r1", kind="router"))  # type: ignore[arg-type]
    intf = Interface(r1, "r1-eth0", 0, 7)
    r1.add_intf(intf)
    intf.set_ip("10.0.0.1/24")
    intf.set_ip("10.0.0.2/24", replace=False)
    intf.set_mac("02:00:00:00:00:AA")
    intf.set_up(False)
    r1.configure()
    inside = fake.interiors["r1"]
    assert inside.addresses(7) == ["10.0.0.1/24", "10.0.0.2/24"]
    assert intf.ip == "10.0.0.2" and intf.prefixlen == 24
    assert intf.mac == "02:00:00:00:00:aa" and not intf.is_up()
    assert inside.sysctls["net.ipv4.ip_forward"] == "1"
    assert ("flush_addresses", "r1", 7) in fake.calls


def test_switches_always_run_on_netns_and_backends_are_chosen_by_name() -> None:
    net = _Net(FakeNodeBackend())
    s1 = Switch(net, NodeSpec("s1", kind="switch"))  # type: ignore[arg-type]
    assert isinstance(s1.backend, NetnsBackend) and net.asked == []
    assert isinstance(make_backend("netns"), NetnsBackend)
    assert make_backend("qemu").kind == "qemu"
    with pytest.raises(UnsupportedError, match="cgroup"):
        make_backend("cgroup")


def test_an_unknown_node_backend_is_refused_naming_the_field_and_the_choices() -> None:
    t = TopologySpec()
    t.add_node(NodeSpec("h1", backend="vm"))  # type: ignore[arg-type]
    found = problems(t)
    assert len(found) == 1
    assert found[0].field == "nodes.h1.backend" and "netns" in str(found[0])


def test_a_vm_spec_is_checked_field_by_field_before_anything_is_built(tmp_path: Path) -> None:
    from fidelnet.topology.spec import VMSpec

    def vm_problems(**kw: Any) -> list[str]:
        t = TopologySpec()
        t.add_node(NodeSpec("h1", backend="qemu", vm=VMSpec(**kw)))
        return [f"{p.field}: {p}" for p in problems(t)]

    assert vm_problems() == []
    assert vm_problems(memory_mb=64)[0].startswith("nodes.h1.vm.memory_mb")
    assert vm_problems(cpus=0)[0].startswith("nodes.h1.vm.cpus")
    cores = os.cpu_count() or 1
    too_many = vm_problems(cpus=cores + 1)
    assert too_many[0].startswith("nodes.h1.vm.cpus") and f"has {cores} cores" in too_many[0]
    assert vm_problems(cpus=2, cpupin=(0,))[0].startswith("nodes.h1.vm.cpupin")
    assert vm_problems(cpupin=(4096,))[0].startswith("nodes.h1.vm.cpupin")
    assert vm_problems(kernel=str(tmp_path / "none"), initrd=str(tmp_path / "none"))[0].startswith(
        "nodes.h1.vm.kernel: "
    )
    k = tmp_path / "vmlinuz"
    k.write_bytes(b"k")
    assert "give both kernel and initrd" in vm_problems(kernel=str(k))[0]
    assert vm_problems(accel="hvf")[0].startswith("nodes.h1.vm.accel")
    assert (
        vm_problems(image=str(tmp_path / "none.img"))[0]
        == (f"nodes.h1.vm.image: no such file: {tmp_path / 'none.img'!r}")
        or "nodes.h1.vm.image: " in vm_problems(image=str(tmp_path / "none.img"))[0]
    )
    disk = tmp_path / "disk.img"
    disk.write_bytes(b"\0" * 512)
    assert vm_problems(image=str(disk)) == []
    both = vm_problems(image=str(disk), kernel=str(k), initrd=str(k))
    assert both and both[0].startswith("nodes.h1.vm.image: ") and "not both" in both[0]
    assert vm_problems(boot_timeout_s=0)[0].startswith("nodes.h1.vm.boot_timeout_s")
    t = TopologySpec()
    t.add_node(NodeSpec("h1", vm=VMSpec()))  # a machine without backend qemu
    assert [p.field for p in problems(t)] == ["nodes.h1.vm"]
    t = TopologySpec()
    t.add_node(NodeSpec("s1", kind="switch", backend="qemu"))
    assert [p.field for p in problems(t)] == ["nodes.s1.backend"]


def test_the_qemu_command_line_boots_the_image_with_the_agent_port_and_each_nic() -> None:
    from fidelnet.vm import qemu

    g = qemu.Guest(
        name="r1-h1",
        dir="/run/fidelnet/r1-vm-h1",
        cpus=2,
        memory_mb=256,
        accel="tcg",
        boot=qemu.Boot("/img/vmlinuz", "/img/initrd.img", "abc"),
        cmdline="idle=poll",
        agent_path="/opt/fidelnet-vm",
        nics=(("vmtap0", "02:00:00:00:00:01"), ("vmtap1", "02:00:00:00:00:02")),
    )
    try:
        argv = qemu.argv(g)
    except UnsupportedError:
        pytest.skip("qemu-system-x86_64 is not installed")  # make install installs it
    joined = " ".join(argv)
    assert "-machine q35,accel=tcg" in joined and "-cpu max" in joined
    assert "-smp 2" in joined and "-m 256" in joined
    assert "fidelnet.agent=/opt/fidelnet-vm idle=poll" in joined
    assert "name=fidelnet.agent" in joined and "path=/run/fidelnet/r1-vm-h1/agent.sock" in joined
    assert "tap,id=n1,ifname=vmtap1,script=no,downscript=no" in joined
    assert "virtio-net-pci,netdev=n1,mac=02:00:00:00:00:02" in joined
    assert "readonly=on" in joined  # the host's root is shared read-only
    assert "virtio-blk" not in joined and "fidelnet.disk" not in joined


def test_a_disk_image_is_attached_never_written_and_named_to_init(tmp_path: Path) -> None:
    import dataclasses

    from fidelnet.vm import qemu

    raw = tmp_path / "a,b.img"
    raw.write_bytes(b"\0" * 1024)
    qcow = tmp_path / "c.qcow2"
    qcow.write_bytes(b"QFI\xfb" + b"\0" * 100)
    assert qemu.disk_format(str(raw)) == "raw"
    assert qemu.disk_format(str(qcow)) == "qcow2"
    g = qemu.Guest(
        name="r1-h1", dir="/run/x", cpus=1, memory_mb=256, accel="tcg",
        boot=qemu.Boot("/img/vmlinuz", "/img/initrd.img", "abc"), cmdline="",
        agent_path="/opt/fidelnet-vm", nics=(), disk=str(raw),
    )  # fmt: skip
    try:
        argv = qemu.argv(g)
    except UnsupportedError:
        pytest.skip("qemu-system-x86_64 is not installed")
    drive = argv[argv.index("-drive") + 1]
    # A comma in the path is doubled, as QEMU's option syntax wants; snapshot=on.
    assert drive == f"file={tmp_path}/a,,b.img,if=none,id=disk0,format=raw,snapshot=on"
    assert "virtio-blk-pci,drive=disk0" in argv
    assert "fidelnet.disk" in argv[argv.index("-append") + 1]
    g2 = dataclasses.replace(g, disk=str(qcow))
    assert "format=qcow2" in qemu.argv(g2)[qemu.argv(g2).index("-drive") + 1]


def test_vmhost_memory_sizes_read_as_qemu_reads_them() -> None:
    from fidelnet.compat._vmhost import memory_mb

    assert memory_mb("h1", 512) == 512
    assert memory_mb("h1", "512M") == 512
    assert memory_mb("h1", "1G") == 1024
    assert memory_mb("h1", "2GiB") == 2048
    assert memory_mb("h1", "131072K") == 128
    for bad in ("lots", "1.5G", "100K"):
        with pytest.raises(ValidationError, match="h1.memory"):
            memory_mb("h1", bad)
