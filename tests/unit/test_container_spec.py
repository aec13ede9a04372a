"""Container nodes without root: what is refused before anything is made, the OCI
configuration a node's image and options give, Containernet's front door, the YAML
form (issue 37). The containers themselves run in tests/privileged/test_container_nodes.py."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fidelnet.compat._docker import Docker
from fidelnet.errors import NodeError, UnsupportedError, ValidationError
from fidelnet.kernel import oci
from fidelnet.nodes import container_config as cc
from fidelnet.scenario import loads
from fidelnet.topology.spec import ContainerSpec, NodeSpec, TopologySpec
from fidelnet.topology.validate import problems


@dataclass(frozen=True)
class _Config:
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    workdir: str = ""
    user: str = ""


@dataclass(frozen=True)
class _Image:
    ref: str
    rootfs: Path
    config: _Config
    digest: str = "sha256:" + "0" * 64


def _rootfs(tmp_path: Path, shell: str | None = "busybox") -> Path:
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\nweb:x:1000:1001::/w:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\nwww:x:33:\n")
    busybox = root / "bin" / "busybox"
    busybox.write_bytes(b"\x7fELF")
    busybox.chmod(0o755)
    if shell == "busybox":
        os.symlink("/bin/busybox", root / "bin" / "sh")  # absolute: the image's own
    return root


def _spec(nodes: dict[str, NodeSpec], **kw: Any) -> TopologySpec:
    spec = TopologySpec(**kw)
    for n in nodes.values():
        spec.add_node(n)
    return spec


def _messages(spec: TopologySpec) -> list[str]:
    return [str(p) for p in problems(spec)]


# -- refused before anything is made ----------------------------------------------


def test_a_container_node_without_an_image_names_the_field() -> None:
    got = _messages(_spec({"c1": NodeSpec("c1", backend="container")}))
    assert any(m.startswith("nodes.c1.image: a container node needs an image") for m in got), got


def test_an_image_on_a_namespace_node_is_refused() -> None:
    spec = _spec({"h1": NodeSpec("h1", container=ContainerSpec(image="web"))})
    got = _messages(spec)
    assert any(m.startswith("nodes.h1.image: an image is only for backend container") for m in got)


@pytest.mark.parametrize(
    ("options", "field", "words"),
    [
        ({"volumes": ("/etc",)}, "nodes.c1.volumes[0]", "HOST:CONTAINER"),
        ({"volumes": ("/no/such/dir:/x",)}, "nodes.c1.volumes[0]", "host path does not exist"),
        ({"volumes": ("/etc:/x:rx",)}, "nodes.c1.volumes[0]", "HOST:CONTAINER"),
        ({"volumes": ("etc:/x",)}, "nodes.c1.volumes[0]", "absolute"),
        ({"volumes": ("/etc:/",)}, "nodes.c1.volumes[0]", "container's /"),
        ({"env": (("1BAD", "v"),)}, "nodes.c1.env", "variable name"),
        ({"cap_add": ("NET_FLY",)}, "nodes.c1.cap_add", "unknown capability"),
        ({"workdir": "relative"}, "nodes.c1.workdir", "absolute path"),
        ({"user": "a b"}, "nodes.c1.user", "user name or uid"),
        ({"image": "oci-archive:/no/such.tar"}, "nodes.c1.image", "no such file"),
        ({"image": "docker-archive:/no/such.tar"}, "nodes.c1.image", "no such file"),
        ({"image": "/no/such/dir"}, "nodes.c1.image", "no such file"),
        ({"entrypoint": ()}, "nodes.c1.entrypoint", "run nothing"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, Any], field: str, words: str) -> None:
    c = ContainerSpec(**{"image": "web", **options})
    got = _messages(_spec({"c1": NodeSpec("c1", backend="container", container=c)}))
    assert any(m.startswith(f"{field}:") and words in m for m in got), got


def test_good_options_pass(tmp_path: Path) -> None:
    c = ContainerSpec(
        image=f"oci:{tmp_path}",
        volumes=(f"{tmp_path}:/data:ro", "/etc/hostname:/etc/h2"),
        env=(("GREETING", "hi"),),
        cap_add=("sys_admin", "CAP_NET_BROADCAST"),
        user="web:www",
        workdir="/srv",
    )
    assert _messages(_spec({"c1": NodeSpec("c1", backend="container", container=c)})) == []


def test_virtual_time_with_a_container_is_refused_with_the_choices() -> None:
    c = NodeSpec("c1", backend="container", container=ContainerSpec(image="web"))
    got = problems(_spec({"c1": c}, tdf=4.0))
    assert any(p.field == "nodes.c1.backend" and "virtual time" in p.problem for p in got)


# -- the OCI configuration -----------------------------------------------------------


def _config(tmp_path: Path, spec: ContainerSpec, image_cfg: _Config, **kw: Any) -> dict[str, Any]:
    image = _Image(spec.image, _rootfs(tmp_path), image_cfg)
    return cc.build_config(
        spec,
        image,  # type: ignore[arg-type]
        node="c1",
        netns="/run/netns/fnX-c1",
        bundle=tmp_path / "b",
        rootfs=tmp_path / "b" / "rootfs",
        helper=kw.get("helper"),
    )


def test_the_image_config_is_run_in_the_nodes_network_namespace(tmp_path: Path) -> None:
    cfg = _config(
        tmp_path,
        ContainerSpec(image="web", env=(("EXTRA", "1"), ("GREETING", "override"))),
        _Config(("/bin/httpd", "-f"), ("-p", "80"), ("GREETING=hello", "PATH=/bin"), "/www"),
    )
    proc = cfg["process"]
    assert proc["args"] == ["/bin/httpd", "-f", "-p", "80"]
    assert proc["cwd"] == "/www"
    assert proc["user"] == {"uid": 0, "gid": 0}
    env = dict(e.split("=", 1) for e in proc["env"])
    assert env == {"GREETING": "override", "PATH": "/bin", "HOSTNAME": "c1", "EXTRA": "1"}
    assert cfg["hostname"] == "c1"
    ns = {n["type"]: n.get("path") for n in cfg["linux"]["namespaces"]}
    assert ns == {
        "pid": None,
        "ipc": None,
        "uts": None,
        "mount": None,
        "network": "/run/netns/fnX-c1",
    }
    assert "CAP_NET_ADMIN" in proc["capabilities"]["bounding"]
    assert "CAP_SYS_ADMIN" not in proc["capabilities"]["bounding"]
    assert "/proc/kcore" in cfg["linux"]["maskedPaths"]
    dests = [m["destination"] for m in cfg["mounts"]]
    assert {"/proc", "/dev", "/sys", "/etc/hostname", "/etc/hosts"} <= set(dests)


@pytest.mark.parametrize(
    ("spec_kw", "want"),
    [
        ({}, ["/ep", "cmd"]),
        ({"command": ("other",)}, ["/ep", "other"]),
        ({"entrypoint": ("/new",)}, ["/new"]),  # a new entrypoint drops the image's cmd
        ({"entrypoint": ("/new",), "command": ("x",)}, ["/new", "x"]),
        ({"entrypoint": (), "command": ("/bin/sh",)}, ["/bin/sh"]),
    ],
)
def test_dockers_rules_for_entrypoint_and_command(
    tmp_path: Path, spec_kw: dict[str, Any], want: list[str]
) -> None:
    cfg = _config(tmp_path, ContainerSpec(image="web", **spec_kw), _Config(("/ep",), ("cmd",)))
    assert cfg["process"]["args"] == want


def test_an_image_with_nothing_to_run_is_an_error_naming_node_and_image(tmp_path: Path) -> None:
    with pytest.raises(NodeError, match=r"c1: image 'web' has neither an entrypoint nor a command"):
        _config(tmp_path, ContainerSpec(image="web"), _Config())


def test_users_by_name_are_the_images_own(tmp_path: Path) -> None:
    spec = ContainerSpec(image="web", command=("x",))
    assert _config(tmp_path / "a", spec, _Config(user="web"))["process"]["user"] == {
        "uid": 1000,
        "gid": 1001,
    }
    named = ContainerSpec(image="web", command=("x",), user="web:www")
    assert _config(tmp_path / "b", named, _Config())["process"]["user"] == {"uid": 1000, "gid": 33}
    numeric = ContainerSpec(image="web", command=("x",), user="4242")
    assert _config(tmp_path / "c", numeric, _Config())["process"]["user"] == {
        "uid": 4242,
        "gid": 4242,
    }
    with pytest.raises(NodeError, match="c1: user 'nobody' is not in the image's /etc/passwd"):
        _config(
            tmp_path / "d", ContainerSpec(image="web", command=("x",), user="nobody"), _Config()
        )


def test_privileged_volumes_capabilities_and_the_lent_shell(tmp_path: Path) -> None:
    spec = ContainerSpec(
        image="web",
        command=("x",),
        volumes=("/etc:/host-etc:ro", "/tmp:/scratch"),
        cap_add=("sys_admin",),
    )
    cfg = _config(tmp_path / "a", spec, _Config(), helper="/bin/busybox")
    caps = cfg["process"]["capabilities"]["bounding"]
    assert "CAP_SYS_ADMIN" in caps and len(caps) == len(set(caps))
    binds = {m["destination"]: m for m in cfg["mounts"] if m["type"] == "bind"}
    assert binds["/host-etc"]["options"] == ["rbind", "rprivate", "ro"]
    assert binds["/scratch"]["options"] == ["rbind", "rprivate"]
    assert binds[f"{cc.HELPER_DIR}/busybox"]["source"] == "/bin/busybox"
    priv = _config(
        tmp_path / "b", ContainerSpec(image="web", command=("x",), privileged=True), _Config()
    )
    assert "CAP_SYS_ADMIN" in priv["process"]["capabilities"]["bounding"]
    assert "maskedPaths" not in priv["linux"]


def test_the_images_shell_is_found_through_its_own_symlinks(tmp_path: Path) -> None:
    root = _rootfs(tmp_path / "a")
    assert cc.image_shell(_Image("x", root, _Config())) == "/bin/sh"  # type: ignore[arg-type]
    bare = _rootfs(tmp_path / "b", shell=None)
    assert cc.image_shell(_Image("x", bare, _Config())) is None  # type: ignore[arg-type]
    escape = _rootfs(tmp_path / "c", shell=None)
    os.symlink("/../../../../bin/bash", escape / "bin" / "sh")  # never the host's bash
    assert cc.image_shell(_Image("x", escape, _Config())) is None  # type: ignore[arg-type]


def test_a_static_busybox_is_told_from_a_dynamic_program(tmp_path: Path) -> None:
    assert not cc._is_static("/bin/ls") if os.path.exists("/bin/ls") else True
    fake = tmp_path / "busybox"
    fake.write_bytes(b"not an elf")
    with pytest.raises(NodeError, match="busybox-static"):
        cc.find_static_shell((str(fake),))


# -- crun ----------------------------------------------------------------------------


def test_crun_never_sees_a_hybrid_trees_v2_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("hugetlb\n")
    monkeypatch.setattr(oci, "UNIFIED", str(unified))
    monkeypatch.setattr(oci, "find_runtime", lambda: "/usr/bin/crun")
    if os.path.isdir("/sys/fs/cgroup/cpu") or os.path.isdir("/sys/fs/cgroup/cpuacct"):
        argv = oci.runtime_argv("/run/fidelnet/r-crun", ["list"])
        assert argv[argv.index("--unmount") + 1] == str(unified)
        tail = argv[argv.index("--") + 1 :]
        assert tail == [
            "/usr/bin/crun",
            "--cgroup-manager=disabled",
            "--root",
            "/run/fidelnet/r-crun",
            "list",
        ]
    (unified / "cgroup.controllers").write_text("")
    assert oci.hidden_mounts() == []


def test_no_crun_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UnsupportedError, match="apt-get install crun"):
        oci.find_runtime()


def test_an_overlay_path_that_cannot_be_said_is_refused_before_mounting() -> None:
    with pytest.raises(Exception, match="cannot be mounted"):
        oci.mount_overlay("/a,b", "/u", "/w", "/t")


# -- front doors ---------------------------------------------------------------------


def test_containernets_docker_host_maps_to_a_container_node() -> None:
    with pytest.raises(ValidationError, match="d1.dimage"):
        Docker("d1")
    with pytest.raises(UnsupportedError, match="port_bindings"):
        Docker("d1", dimage="web", port_bindings={80: 8080})


def test_containernets_options_become_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    captured: dict[str, Any] = {}

    def fake_host_init(self: Any, name: str, **params: Any) -> None:
        captured.update(params)
        self.name = name
        self.inNamespace = True

    monkeypatch.setattr("fidelnet.compat._node.Host.__init__", fake_host_init)
    d = Docker(
        "d1",
        dimage="web:1",
        dcmd="httpd -f -p '80'",
        volumes=["/srv:/www:rw", "/etc:/e:ro"],
        environment=["A=1", "B=two=2"],
        cpu_quota=25000,
        cpu_period=100000,
        ports=[80],
        ip="10.0.0.9/24",
    )
    c = d.fn_container
    assert c.image == "web:1"
    assert c.command == ("httpd", "-f", "-p", "80")
    assert c.volumes == ("/srv:/www", "/etc:/e:ro")
    assert c.env == (("A", "1"), ("B", "two=2"))
    assert d.fn_cpu == pytest.approx(0.25)
    assert captured == {"ip": "10.0.0.9/24"}


def test_a_scenario_node_with_an_image_is_a_container_node(tmp_path: Path) -> None:
    (tmp_path / "www").mkdir()
    (tmp_path / "web.tar").write_bytes(b"")
    text = """
name: web
topology:
  nodes:
    web:
      image: docker-archive:./web.tar
      container:
        command: [httpd, -f]
        env: {GREETING: hi}
        volumes: ["./www:/www:ro"]
    h1: {}
  links: [{a: web, b: h1}]
"""
    scenario = loads(text, base_dir=tmp_path)
    spec = scenario.topology_spec()
    web = spec.nodes["web"]
    assert web.backend == "container"
    assert web.container is not None
    assert web.container.image == f"docker-archive:{tmp_path}/web.tar"
    assert web.container.volumes == (f"{tmp_path}/www:/www:ro",)
    assert web.container.command == ("httpd", "-f")
    assert web.container.env == (("GREETING", "hi"),)
    assert spec.nodes["h1"].backend == "netns"
