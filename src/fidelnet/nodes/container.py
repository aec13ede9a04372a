"""The ``container`` node backend: an OCI image run by crun in the node's namespace.

The node keeps its network namespace (made as a ``netns`` node's is, so its links,
shaping and engine endpoints are the same); its interior is a container:

1. the image is resolved and pinned by digest (:func:`fidelnet.image.resolve`; the
   store keeps it unpacked, read-only, and held in use while the run lasts);
2. its root is an overlay (the image below, the node's writable layer above), in a
   directory of the run's, recorded before it is made, as is the mount;
3. ``crun run --detach`` starts the image's entrypoint (:mod:`fidelnet.nodes.container_config`)
   in new mount, PID, IPC and UTS namespaces and the node's network namespace, from
   ``fidelnet-exec`` in the node's cgroups, so CPU limits and the monitor see it;
   its first process is recorded (pid and start time) as soon as it exists, and the
   container by crun state directory and id before it is made;
4. the node's shell (``cmd``) and ``popen`` are ``crun exec`` in it: the image's
   ``/bin/sh``, or fidelnet's static busybox bound at ``/.fidelnet`` when the image
   has no shell.

Its standard input is a FIFO the container itself holds open for writing, so an
entrypoint that reads it (a shell) waits, as under ``docker run -it``, instead of
ending at once; its output goes to ``entry.log`` in the node's directory, shown in
the error when the entrypoint ends before the network is up.

Teardown is by the records (:mod:`fidelnet.kernel.teardown`): the first process is
killed (its PID namespace with it), then the container deleted by crun with the
run's own state directory (``crun list`` shows the user's containers elsewhere; they
are never touched), the overlay unmounted, the directories removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fidelnet.errors import FidelnetError, NodeError
from fidelnet.kernel import launcher, oci, procwait
from fidelnet.kernel.state import STATE_DIR, process_start_time
from fidelnet.nodes.container_config import (
    HELPER_DIR,
    build_config,
    find_static_shell,
    image_shell,
    inside,
)
from fidelnet.nodes.netns import make_namespace
from fidelnet.topology.spec import ContainerSpec

if TYPE_CHECKING:
    from fidelnet.image import Image
    from fidelnet.kernel.netlink import Netlink
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node

__all__ = ["ContainerBackend"]

START_TIMEOUT_S = 30.0
LOG_TAIL = 20


@dataclass
class _Container:
    root: str
    cid: str
    bundle: Path
    image: Image
    shell: list[str]
    exec_opts: list[str]
    pid: int
    start: int
    holds: contextlib.ExitStack

    @property
    def log(self) -> Path:
        return self.bundle / "entry.log"

    def tail(self) -> str:
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-LOG_TAIL:])


class ContainerBackend:
    """Nodes as containers from OCI images, run by crun."""

    kind = "container"
    host_cpus = True

    def __init__(self) -> None:
        self._ctrs: dict[str, _Container] = {}
        self._root: str | None = None

    # -- making -----------------------------------------------------------------

    def create(self, node: Node) -> None:
        from fidelnet.image import in_use, resolve

        spec = node.spec.container
        if spec is None:
            raise NodeError(f"{node.name}: a container node needs an image")
        oci.find_runtime()  # what to install, before anything is made
        image = resolve(spec.image, node=node.name)
        holds = contextlib.ExitStack()
        holds.enter_context(in_use(image))
        try:
            helper = None if image_shell(image) else find_static_shell()
            make_namespace(node)
            self._ctrs[node.name] = self._run(node, spec, image, helper, holds)
        except BaseException:
            holds.close()
            raise

    def _run_root(self, node: Node) -> str:
        """The run's crun state directory (one for all its containers)."""
        if self._root is None:
            root = os.path.join(STATE_DIR, f"{node.net.run_id}-crun")
            node.net.state_record("tree", path=root)
            os.makedirs(root, mode=0o700, exist_ok=True)
            self._root = root
        return self._root

    def _run(
        self,
        node: Node,
        spec: ContainerSpec,
        image: Image,
        helper: str | None,
        holds: contextlib.ExitStack,
    ) -> _Container:
        net = node.net
        root = self._run_root(node)
        bundle = Path(STATE_DIR) / f"{net.run_id}-ctr-{node.name}"
        net.state_record("tree", path=str(bundle))
        for sub in ("", "upper", "work", "rootfs"):
            (bundle / sub).mkdir(mode=0o700 if not sub else 0o755, exist_ok=True)
        (bundle / "hostname").write_text(f"{node.name}\n", encoding="utf-8")
        (bundle / "hosts").write_text(
            f"127.0.0.1\tlocalhost\n127.0.1.1\t{node.name}\n::1\tlocalhost ip6-localhost\n",
            encoding="utf-8",
        )
        rootfs = bundle / "rootfs"
        net.state_record("overlay", path=str(rootfs))
        oci.mount_overlay(
            str(image.rootfs), str(bundle / "upper"), str(bundle / "work"), str(rootfs)
        )
        assert node.netns is not None
        config = build_config(
            spec,
            image,
            node=node.name,
            netns=node.netns,
            bundle=bundle,
            rootfs=rootfs,
            helper=helper,
        )
        (bundle / "config.json").write_text(json.dumps(config), encoding="utf-8")
        fifo = bundle / "stdin"
        os.mkfifo(fifo, 0o600)
        cid = net.ns_name(node.name)
        argv = oci.runtime_argv(
            root,
            ["run", "--detach", "--pid-file", str(bundle / "pid"), "--bundle", str(bundle), cid],
            cgroups=node.cgroup_dirs(),
        )
        net.state_record("container", root=root, id=cid)
        stdin = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
        try:
            with open(bundle / "entry.log", "ab") as out, oci.adopting():
                res = subprocess.run(
                    argv,
                    stdin=stdin,
                    stdout=out,
                    stderr=out,
                    check=False,
                    timeout=START_TIMEOUT_S,
                )
        except subprocess.TimeoutExpired as exc:
            raise NodeError(
                f"{node.name}: crun did not start the container within {START_TIMEOUT_S:.0f} s"
            ) from exc
        finally:
            os.close(stdin)
        shell = (
            [f"{HELPER_DIR}/busybox", "sh"] if helper is not None else [image_shell(image) or "sh"]
        )
        ctr = _Container(root, cid, bundle, image, shell, _exec_opts(config), 0, 0, holds)
        if res.returncode != 0:
            raise NodeError(
                f"{node.name}: the container of image {spec.image!r} did not start "
                f"(crun exit {res.returncode}): {ctr.tail() or 'no output'}"
            )
        # Its first process, this process's child (oci.adopting), recorded even when it
        # already ended: a zombie the teardown reaps.
        try:
            ctr.pid = int((bundle / "pid").read_text().strip())
        except (OSError, ValueError):
            raise self._ended(node, ctr) from None
        start = process_start_time(ctr.pid)
        if start is not None:
            ctr.start = start
            net.state_record("process", pid=ctr.pid, start=start)
        st = oci.state(root, cid)
        if start is None or st is None or st.get("status") != "running":
            raise self._ended(node, ctr)
        return ctr

    def _ended(self, node: Node, ctr: _Container) -> NodeError:
        out = ctr.tail()
        shown = f"; its output:\n{out}" if out else " with no output"
        try:
            args = json.loads((ctr.bundle / "config.json").read_text())["process"]["args"]
        except (OSError, ValueError, KeyError):
            args = []
        return NodeError(
            f"{node.name}: the entrypoint of image {ctr.image.ref!r} "
            f"({' '.join(map(str, args))}) exited{shown}"
        )

    def start(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            ctr = self._ctrs[node.name]
            st = procwait.read_stat(ctr.pid)
            if st is None or st.start != ctr.start or st.zombie:
                raise self._ended(node, ctr)

    # -- reaching ---------------------------------------------------------------

    def _get(self, node: Node) -> _Container:
        try:
            return self._ctrs[node.name]
        except KeyError:
            raise NodeError(f"{node.name}: its container is not running") from None

    def shell_argv(self, node: Node) -> tuple[list[str], bool]:
        ctr = self._get(node)
        args = ["exec", *ctr.exec_opts, "--env", "PS1=\x7f", ctr.cid, *ctr.shell, "-i"]
        return oci.runtime_argv(ctr.root, args, cgroups=node.cgroup_dirs(), session=True), True

    def exec_argv(self, node: Node, argv: Sequence[str], cwd: str | None) -> list[str]:
        ctr = self._get(node)
        opts = [*ctr.exec_opts, "--cwd", cwd] if cwd else ctr.exec_opts
        return oci.runtime_argv(
            ctr.root, ["exec", *opts, ctr.cid, *argv], cgroups=node.cgroup_dirs()
        )

    def tool_argv(self, node: Node, argv: Sequence[str], cwd: str | None) -> list[str]:
        """fidelnet's instruments (:meth:`fidelnet.nodes.node.Node.tool_popen`): in the
        node's network namespace and cgroups, with this machine's files (a mount
        namespace of their own, so /sys shows the node's interfaces)."""
        template = getattr(node.net, "mount_template", None)
        return launcher.exec_argv(
            list(argv),
            netns=node.netns,
            new_mount=True,
            mount_base=template.path if template else None,
            cgroups=node.cgroup_dirs(),
            cwd=cwd,
        )

    def write_file(self, node: Node, path: str, content: str, mode: int) -> None:
        """Write a file in the container's own file system (a scenario's setup file
        step): its directory resolved as the container resolves it, made if missing;
        it goes with the container."""
        ctr = self._get(node)
        rootfs = ctr.bundle / "rootfs"
        parent, _, name = path.rstrip("/").rpartition("/")
        if not path.startswith("/") or not name or name in (".", ".."):
            raise NodeError(f"{node.name}: {path!r}: an absolute file path is needed")
        here = rootfs
        for part in [p for p in parent.split("/") if p]:
            found = inside(rootfs, str((here / part).relative_to(rootfs)))
            if found is None:
                found = here / part
                found.mkdir(mode=0o755)
            if not found.is_dir():
                raise NodeError(f"{node.name}: {path!r}: {part} is not a directory")
            here = found
        target = here / name
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise NodeError(f"{node.name}: {path!r} is not a plain file in the container")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        os.chmod(target, mode)

    def intf_added(self, node: Node, intf: Interface) -> None:
        del node, intf  # the container shares the node's namespace: it sees the end at once

    def interior(self, node: Node) -> Netlink:
        return node.netlink()

    def describe(self, node: Node) -> dict[str, Any]:
        out: dict[str, Any] = {"backend": self.kind}
        ctr = self._ctrs.get(node.name)
        if ctr is not None:
            out.update(
                image=ctr.image.ref,
                digest=ctr.image.digest,
                image_source=ctr.image.source,
                runtime=_version(),
            )
        return out

    def owned(self, node: Node) -> list[tuple[str, str, object]]:
        """The records of the node's own objects beyond its namespace, cgroups and
        shell, as (kind, field, value): for removing it alone from a running network."""
        ctr = self._ctrs.get(node.name)
        if ctr is None:
            return []
        return [
            ("process", "pid", ctr.pid),
            ("container", "id", ctr.cid),
            ("overlay", "path", str(ctr.bundle / "rootfs")),
            ("tree", "path", str(ctr.bundle)),
        ]

    def close(self, node: Node) -> None:
        """The container itself is the records' to end (teardown); the image is no
        longer held in use by this node."""
        ctr = self._ctrs.pop(node.name, None)
        if ctr is not None:
            ctr.holds.close()


def _exec_opts(config: dict[str, Any]) -> list[str]:
    """What ``crun exec`` needs to run a program as the container's own (``docker
    exec`` does): its environment, working directory and user; crun takes neither
    from the container's config."""
    proc = config["process"]
    out = [f"--env={e}" for e in proc["env"]]
    user = proc["user"]
    out += ["--cwd", proc["cwd"], "--user", f"{user['uid']}:{user['gid']}"]
    return out


def _version() -> str:
    try:
        return oci.runtime_version()
    except FidelnetError:
        return "unknown"
