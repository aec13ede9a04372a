"""Container nodes for real (issue 37): images built here with buildah
(tests/_images.py), run by crun in the nodes' namespaces, beside namespace hosts.

Each test builds a small network and asserts what answered: an image's HTTP server
reached from a namespace host; BIRD from an image routing between namespace hosts
(OSPF converged, every pair pings); a CPU-limited container throttled and named by
the monitor's verdict; an image without a shell; an entrypoint that exits at once;
an image that does not exist; a container added to and removed from a running
network; a Containernet script unchanged; ``kill -9`` of the run and ``fidelnet
clean`` leaving nothing (and a user's own crun container untouched).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _images import build
from fidelnet import Network
from fidelnet.errors import FidelnetError
from fidelnet.kernel import launcher, oci
from fidelnet.kernel.state import STATE_DIR
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import ContainerSpec

pytestmark = pytest.mark.privileged

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")


@pytest.fixture(scope="module")
def httpd() -> dict[str, Path]:
    return build("busybox-httpd")


@pytest.fixture(scope="module")
def bird() -> dict[str, Path]:
    return build("bird")


@pytest.fixture(autouse=True)
def own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test imports into an image store of its own."""
    monkeypatch.setenv("FIDELNET_IMAGE_STORE", str(tmp_path / "store"))
    yield


def _overlays() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [ln.split()[4] for ln in f if " - overlay " in ln and "/fidelnet/" in ln.split()[4]]


def _container(name: str, image: str, ip: str, **kw: object) -> NodeSpec:
    return NodeSpec(
        name,
        ip=ip,
        backend="container",
        container=ContainerSpec(image=image, **kw),  # type: ignore[arg-type]
    )


def test_an_images_http_server_is_reached_from_a_namespace_host(httpd: dict[str, Path]) -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(
        _container("web", f"docker-archive:{httpd['docker-archive']}", "10.0.0.2/24",
                   env=(("EXTRA", "1"),))
    )  # fmt: skip
    spec.add_link(LinkSpec("h1", "web"))
    with Network(spec) as net:
        web = net["web"]
        out, err, rc = net["h1"].pexec(["wget", "-qO-", "http://10.0.0.2:8080/"], timeout=20)
        assert rc == 0 and "hello from the image" in out, err
        # The node's shell is the image's: its hostname, env and working directory.
        assert web.cmd("hostname").strip() == "web"
        assert web.cmd("echo $GREETING $EXTRA; pwd").split() == ["hello", "1", "/www"]
        assert "/bin/httpd -f -p 8080" in web.cmd("ps")
        # Its files are the image's, not this machine's.
        assert web.cmd("test -e /usr/bin/python3 && echo host || echo image").strip() == "image"
        # Pinned by digest, with the runtime, in what results carry.
        desc = web.backend.describe(web)
        assert desc["digest"].startswith("sha256:") and len(desc["digest"]) == 71
        assert desc["runtime"].startswith("crun version")
        # Its processes are in the node's cgroups (CPU limits, the monitor).
        ctr_pid = web.backend._ctrs["web"].pid  # type: ignore[attr-defined]
        cg = Path(f"/proc/{ctr_pid}/cgroup").read_text()
        assert f"fidelnet-{net.run_id}" in cg and "/web" in cg, cg
        # fidelnet's instruments run beside it, on this machine's files, same network.
        out, _, rc = web.tool_pexec(["ping", "-c1", "-W2", "10.0.0.1"], timeout=10)
        assert rc == 0, out
    assert _overlays() == []


def test_the_three_image_forms_give_the_same_files(httpd: dict[str, Path]) -> None:
    spec = TopologySpec()
    refs = {
        "a": f"oci-archive:{httpd['oci-archive']}",
        "b": f"oci:{httpd['oci']}",
        "c": f"docker-archive:{httpd['docker-archive']}",
    }
    for i, (name, ref) in enumerate(refs.items()):
        spec.add_node(_container(name, ref, f"10.0.0.{i + 1}/24"))
    spec.add_node(NodeSpec("s1", kind="switch"))
    for name in refs:
        spec.add_link(LinkSpec(name, "s1"))
    with Network(spec) as net:
        lists = {n: net[n].cmd("ls /bin | wc -l; cat /www/index.html").split() for n in refs}
        assert lists["a"] == lists["b"] == lists["c"], lists
        assert net.ping_all() == 0.0


BIRD_CONF = """\
router id {rid};
protocol device {{ scan time 2; }}
protocol direct {{ ipv4; interface "*-eth*"; }}
protocol kernel {{ ipv4 {{ export where source = RTS_OSPF; }}; }}
protocol ospf v2 {{
  tick 1;
  ipv4 {{ import all; export where source = RTS_DEVICE; }};
  area 0 {{ interface "*-eth*" {{ hello 1; dead 4; }}; }};
}}
"""


def test_bird_from_an_image_routes_between_namespace_hosts(
    bird: dict[str, Path], tmp_path: Path
) -> None:
    """h1 -- ra -- rb -- h2: ra and rb are BIRD 2 from an image; OSPF gives each the
    other's host network, and every pair pings."""
    image = f"docker-archive:{bird['docker-archive']}"
    spec = TopologySpec()
    for name, rid in (("ra", "10.9.0.1"), ("rb", "10.9.0.2")):
        conf = tmp_path / f"{name}.conf"
        conf.write_text(BIRD_CONF.format(rid=rid))
        spec.add_node(
            NodeSpec(
                name,
                kind="router",
                backend="container",
                container=ContainerSpec(image=image, volumes=(f"{conf}:/etc/bird/bird.conf:ro",)),
            )
        )
    spec.add_node(NodeSpec("h1", ip="10.1.0.10/24", default_route="10.1.0.1"))
    spec.add_node(NodeSpec("h2", ip="10.2.0.10/24", default_route="10.2.0.1"))
    spec.add_link(LinkSpec("h1", "ra", b_ip="10.1.0.1/24"))
    spec.add_link(LinkSpec("ra", "rb", a_ip="10.3.0.1/24", b_ip="10.3.0.2/24"))
    spec.add_link(LinkSpec("rb", "h2", a_ip="10.2.0.1/24"))
    with Network(spec) as net:
        for router, dest, via in (
            ("ra", "10.2.0.0/24", "10.3.0.2"),
            ("rb", "10.1.0.0/24", "10.3.0.1"),
        ):
            deadline = time.monotonic() + 60
            route = ""
            while time.monotonic() < deadline:
                route = net[router].cmd(f"ip route show {dest}")
                if f"via {via}" in route:
                    break
                time.sleep(0.5)
            assert f"via {via}" in route, net[router].cmd("birdc -s /run/bird/bird.ctl show ospf")
        assert "bird" in net["ra"].cmd("ps")
        assert net.ping_all(timeout=2.0) == 0.0


def test_a_cpu_limited_container_is_throttled_and_named_in_the_verdict(
    httpd: dict[str, Path],
) -> None:
    from fidelnet.measure import udp

    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    busy = _container(
        "busy", f"docker-archive:{httpd['docker-archive']}", "10.0.0.3/24",
        entrypoint=("/bin/sh", "-c", "while :; do :; done"),
    )  # fmt: skip
    busy.cpu = 0.05
    spec.add_node(busy)
    spec.add_node(NodeSpec("s1", kind="switch"))
    for n in ("h1", "h2", "busy"):
        spec.add_link(LinkSpec(n, "s1"))
    with Network(spec) as net:
        r = udp(net, "h1", "h2", rate_pps=500, duration=1.5)
    assert r.verdict is not None
    throttled = [x for x in r.verdict.reasons if x.code == "node_throttled"]
    assert throttled and "busy" in throttled[0].message, r.verdict.reasons


def test_an_image_without_a_shell_is_reached_through_fidelnets_busybox() -> None:
    images = build("busybox-noshell")
    spec = TopologySpec()
    spec.add_node(_container("bare", f"oci-archive:{images['oci-archive']}", "10.0.0.1/24"))
    spec.add_node(NodeSpec("h1", ip="10.0.0.2/24"))
    spec.add_link(LinkSpec("bare", "h1"))
    with Network(spec) as net:
        assert net["bare"].cmd("echo $((6 * 7))").strip() == "42"
        assert net["bare"].cmd("ls /bin").split() == ["httpd"]  # the image's own files
        out, _, rc = net["h1"].pexec(["wget", "-qO-", "http://10.0.0.1:8080/"], timeout=20)
        assert rc == 0 and "hello from the image" in out


def test_an_entrypoint_that_exits_at_once_is_an_error_with_its_output(
    httpd: dict[str, Path],
) -> None:
    spec = TopologySpec()
    spec.add_node(
        _container("c1", f"docker-archive:{httpd['docker-archive']}", "10.0.0.1/24",
                   entrypoint=("/bin/sh", "-c", "echo no config found >&2; exit 3"))
    )  # fmt: skip
    spec.add_node(NodeSpec("h1", ip="10.0.0.2/24"))
    spec.add_link(LinkSpec("c1", "h1"))
    with pytest.raises(FidelnetError, match=r"c1: the entrypoint of image .* exited") as info:
        Network(spec).start()
    assert "no config found" in str(info.value)
    assert _overlays() == []


def test_an_image_that_does_not_exist_names_node_and_image() -> None:
    spec = TopologySpec()
    spec.add_node(_container("c1", "no-such-image:1", "10.0.0.1/24"))
    with pytest.raises(FidelnetError, match=r"c1.*no-such-image:1"):
        Network(spec).start()


def test_a_container_is_added_to_and_removed_from_a_running_network(
    httpd: dict[str, Path],
) -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("s1", kind="switch"))
    spec.add_link(LinkSpec("h1", "s1"))
    with Network(spec) as net:
        net.add_node(_container("late", f"docker-archive:{httpd['docker-archive']}", "10.0.0.9/24"))
        net.add_link(LinkSpec("late", "s1"))
        out, _, rc = net["h1"].pexec(["wget", "-qO-", "http://10.0.0.9:8080/"], timeout=20)
        assert rc == 0 and "hello from the image" in out
        bundle = Path(STATE_DIR) / f"{net.run_id}-ctr-late"
        assert bundle.is_dir()
        net.remove_node(net["late"])
        assert not bundle.exists() and _overlays() == []
        assert net["h1"].pexec(["ping", "-c1", "-W1", "10.0.0.9"], timeout=10)[2] != 0


CONTAINERNET_SCRIPT = """\
#!/usr/bin/python
# As in Containernet's examples/containernet_example.py.
from mininet.net import Containernet
from mininet.node import Controller, Docker
from mininet.link import TCLink
from mininet.log import info, setLogLevel

setLogLevel('info')
net = Containernet(controller=Controller)
info('*** Adding controller\\n')
net.addController('c0')
info('*** Adding docker containers\\n')
d1 = net.addDocker('d1', ip='10.0.0.251', dimage="fidelnet-test/httpd:1")
d2 = net.addDocker('d2', ip='10.0.0.252', dimage="fidelnet-test/httpd:1",
                   environment={"WHO": "d2"}, volumes=["{www}:/www:ro"])
info('*** Adding switches\\n')
s1 = net.addSwitch('s1')
s2 = net.addSwitch('s2')
info('*** Creating links\\n')
net.addLink(d1, s1)
net.addLink(s1, s2, cls=TCLink, delay='10ms', bw=1)
net.addLink(s2, d2)
info('*** Starting network\\n')
net.start()
info('*** Testing connectivity\\n')
print("LOSS", net.ping([d1, d2]))
print("GOT", d1.cmd('wget -qO- http://10.0.0.252:8080/'))
print("WHO", d2.cmd('echo $WHO'))
info('*** Stopping network\\n')
net.stop()
"""


def test_a_containernet_script_runs_unchanged(httpd: dict[str, Path], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    imported = subprocess.run(
        [sys.executable, "-m", "fidelnet", "image", "import", str(httpd["docker-archive"]),
         "--name", "fidelnet-test/httpd:1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("served from a volume\n")
    script = tmp_path / "containernet_example.py"
    script.write_text(CONTAINERNET_SCRIPT.replace("{www}", str(www)))
    compat = subprocess.run(
        [sys.executable, "-m", "fidelnet", "compat-path"], capture_output=True, text=True, env=env
    ).stdout.strip()
    p = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": f"{compat}:{SRC}"},
        timeout=180,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if " " in ln}
    assert float(lines["LOSS"]) == 0.0, p.stdout
    assert "served from a volume" in lines["GOT"], p.stdout
    assert lines["WHO"].strip() == "d2", p.stdout


KILLED_RUN = """\
import sys, time
from fidelnet import Network
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import ContainerSpec
spec = TopologySpec()
spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
for i in range(2):
    spec.add_node(NodeSpec(f"c{i}", ip=f"10.0.0.{i + 2}/24", backend="container",
                           container=ContainerSpec(image=sys.argv[1])))
spec.add_node(NodeSpec("s1", kind="switch"))
for n in ("h1", "c0", "c1"):
    spec.add_link(LinkSpec(n, "s1"))
net = Network(spec).start()
net["c0"].cmd("sleep 1000 &")
print(net.run_id, flush=True)
time.sleep(600)
"""


def _user_container(tmp_path: Path, httpd: dict[str, Path], cid: str) -> None:
    """A container of the user's own, in crun's default state directory, from the same
    image unpacked by hand: it must outlive fidelnet's clean."""
    rootfs = tmp_path / "user-rootfs"
    rootfs.mkdir()
    subprocess.run(["tar", "xf", str(httpd["docker-archive"]), "-C", str(tmp_path)], check=True)
    manifest = json.loads((tmp_path / "manifest.json").read_text())[0]
    for layer in manifest["Layers"]:
        subprocess.run(["tar", "xf", str(tmp_path / layer), "-C", str(rootfs)], check=True)
    for d in ("dev", "proc"):
        (rootfs / d).mkdir(exist_ok=True)
    bundle = tmp_path / "user-bundle"
    bundle.mkdir()
    config = {
        "ociVersion": "1.0.2",
        "process": {"args": ["/bin/sleep", "600"], "cwd": "/", "user": {"uid": 0, "gid": 0},
                    "env": ["PATH=/bin"]},
        "root": {"path": str(rootfs)},
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
        "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]},
    }  # fmt: skip
    (bundle / "config.json").write_text(json.dumps(config))
    _crun(["run", "--detach", "--bundle", str(bundle), cid], check=True)


def _crun(args: list[str], check: bool = False) -> None:
    """crun with its default state directory (the user's), its output to a file: a
    detached container keeps its standard streams open."""
    argv = launcher.exec_argv(
        [oci.find_runtime(), "--cgroup-manager=disabled", *args], unmounts=oci.hidden_mounts()
    )
    with open(os.devnull, "rb") as null, open("/dev/null", "wb") as out:
        subprocess.run(argv, check=check, stdin=null, stdout=out, stderr=out, timeout=30)


def test_kill_9_then_clean_leaves_nothing_and_spares_the_users_container(
    httpd: dict[str, Path], tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    cid, user_root = f"user-{os.getpid()}", "/run/crun"
    had_root = os.path.isdir(user_root)
    try:
        _user_container(tmp_path, httpd, cid)
        script = tmp_path / "run.py"
        script.write_text(KILLED_RUN)
        proc = subprocess.Popen(
            [sys.executable, str(script), f"docker-archive:{httpd['docker-archive']}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        assert run_id, proc.stderr.read() if proc.stderr else ""
        crun_root = Path(STATE_DIR) / f"{run_id}-crun"
        pids = [oci.state(str(crun_root), f"fn{run_id}-c{i}") for i in range(2)]
        assert all(p is not None and p["status"] == "running" for p in pids), pids
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        assert _overlays(), "the killed run's overlays should still be there before clean"
        p = subprocess.run(
            [sys.executable, "-m", "fidelnet", "clean"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert p.returncode == 0, p.stdout + p.stderr
        assert _overlays() == []
        assert not crun_root.exists()
        assert not list(Path(STATE_DIR).glob(f"{run_id}*"))
        for st in pids:
            assert st is not None and not Path(f"/proc/{st['pid']}").exists()
        user = oci.state(user_root, cid)
        assert user is not None and user["status"] == "running", "the user's container was touched"
    finally:
        _crun(["delete", "--force", cid])
        if not had_root:
            with contextlib.suppress(OSError):
                os.rmdir(user_root)


@pytest.fixture(autouse=True)
def _gc_each() -> Iterator[None]:
    """Unclosed handles are the test's that made them (a ResourceWarning at collection
    fails the test running then)."""
    yield
    import gc

    gc.collect()


def test_a_container_beside_a_vm_router_an_ovs_switch_and_a_namespace_host(
    httpd: dict[str, Path],
) -> None:
    """Every node kind in one run: web (a container) on an Open vSwitch switch, a
    router that is a QEMU VM, h1 a namespace host; h1 fetches web's page through the
    VM's kernel."""
    from fidelnet.topology.spec import VMSpec

    spec = TopologySpec()
    spec.add_node(_container("web", f"docker-archive:{httpd['docker-archive']}", "10.1.0.10/24"))
    spec.nodes["web"].default_route = "10.1.0.1"
    spec.add_node(NodeSpec("s1", kind="switch", datapath="ovs"))
    spec.add_node(NodeSpec("r1", kind="router", backend="qemu", vm=VMSpec(memory_mb=256)))
    spec.add_node(NodeSpec("h1", ip="10.2.0.10/24", default_route="10.2.0.1"))
    spec.add_link(LinkSpec("web", "s1"))
    spec.add_link(LinkSpec("s1", "r1", b_ip="10.1.0.1/24"))
    spec.add_link(LinkSpec("r1", "h1", a_ip="10.2.0.1/24"))
    with Network(spec) as net:
        out, err, rc = net["h1"].pexec(["wget", "-qO-", "http://10.1.0.10:8080/"], timeout=60)
        assert rc == 0 and "hello from the image" in out, err
        assert net["web"].cmd("ping -c1 -W5 10.2.0.10 >/dev/null && echo ok").strip() == "ok"
        kinds = {n: net[n].backend.kind for n in ("web", "r1", "h1")}
        assert kinds == {"web": "container", "r1": "qemu", "h1": "netns"}
