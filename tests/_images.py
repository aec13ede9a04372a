"""OCI images for the privileged tests, built here with buildah, once, and cached.

``build(recipe)`` returns the same image in three forms: ``oci-archive`` (a tar),
``docker-archive`` (a tar, as ``docker save`` writes) and ``oci`` (a layout directory),
under ``/var/cache/fidelnet/test-images/<recipe>-<hash>/`` (``FIDELNET_TEST_IMAGES``
overrides the directory). The hash covers the recipe and the host files it copies (their
paths, sizes and modification times), so an upgraded busybox or BIRD makes a new image.

Recipes (:data:`RECIPES`), each made from scratch of files of this machine:

* ``busybox-httpd``: the static ``/bin/busybox`` (busybox-static) with links for a
  shell and the usual tools, ``/www/index.html``, an ``/etc/passwd`` with ``root`` and
  ``web`` (uid 1000); entrypoint busybox's httpd on port 8080;
* ``busybox-noshell``: the same without any shell: busybox only as ``/bin/httpd``;
* ``bird``: Debian's BIRD 2 (``bird``, ``birdc``) with the libraries ``ldd`` lists, at
  the same paths, and busybox for a shell; ``/etc/bird/`` empty, ``/run/bird/``;
* ``whiteout``: two layers, the second removing ``/a/x`` and all of ``/b`` (whiteouts
  written by a real producer).

How buildah runs. Every call is an argv list (no shell string is built from anything
variable) with buildah's own storage (``--root``, ``--runroot``, ``--storage-driver
vfs``) and ``TMPDIR`` in a scratch directory removed afterwards. One thing buildah writes
outside them cannot be moved by any option: as root, containers/image keeps a
blob-info cache in ``/var/lib/containers/cache/`` (its path is fixed for uid 0) and
creates the directory if needed. So each buildah call runs in a private mount namespace
(``unshare --mount --propagation private``) in which an empty tmpfs is mounted over
``/var/lib`` first, by the constant script ``mount -t tmpfs ... /var/lib && exec "$@"``
with buildah's argv passed as its arguments. Whatever buildah writes there lives in that
tmpfs and disappears with the namespace when buildah exits: the host's ``/var/lib``
(whether ``/var/lib/containers`` exists or not, whatever its cache holds) is never
written, and nothing needs to be restored. Nothing else under ``/var/lib`` is needed by
the commands used here (``from scratch``, ``copy``, ``mount``, ``config``, ``commit``,
``push``: no registry, no runtime); the scratch and cache directories must not be under
``/var/lib`` (checked).

Builds are serialized per recipe with a ``flock`` (two pytest workers asking for the
same image: one builds, the other waits and finds it), made in a scratch directory
beside the cache (one left by a killed build is removed by the next, under the lock)
and renamed into place complete.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CACHE", "FORMS", "RECIPES", "build", "buildah_missing"]

CACHE = Path(os.environ.get("FIDELNET_TEST_IMAGES", "/var/cache/fidelnet/test-images"))
FORMS = ("oci-archive", "docker-archive", "oci")
VERSION = 1
"""Bumped when how images are built changes (a cached one is then built again)."""

BUSYBOX = "/bin/busybox"
APPLETS = (
    "sh", "ls", "cat", "echo", "sleep", "httpd", "wget", "ip", "ping", "hostname", "id",
    "env", "ps", "kill", "mkdir", "touch", "grep", "cut", "head", "tail", "true", "false",
    "printf", "test", "[", "nc", "date", "seq", "yes", "ifconfig", "route",
)  # fmt: skip
HTTPD = ("/bin/httpd", "-f", "-p", "8080", "-h", "/www")
PASSWD = "root:x:0:0:root:/root:/bin/sh\nweb:x:1000:1000:web:/www:/bin/sh\n"
GROUP = "root:x:0:\nweb:x:1000:\n"
INDEX = "hello from the image\n"
BUILDAH_TIMEOUT_S = 300
_IN_PRIVATE_VAR_LIB = 'mount -t tmpfs -o mode=0755,size=64m fidelnet-buildah /var/lib && exec "$@"'


@dataclass(frozen=True)
class Layer:
    """What one layer adds (paths in the image) and removes from the layers below."""

    files: tuple[tuple[str, str], ...] = ()  # (path, host file copied)
    links: tuple[tuple[str, str], ...] = ()  # (path, target)
    texts: tuple[tuple[str, str], ...] = ()  # (path, content)
    dirs: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True)
class Recipe:
    layers: tuple[Layer, ...]
    entrypoint: tuple[str, ...]
    env: tuple[str, ...] = ()
    workdir: str = ""


def _busybox(*applets: str) -> Layer:
    return Layer(files=(("bin/busybox", BUSYBOX),),
                 links=tuple((f"bin/{a}", "busybox") for a in applets))  # fmt: skip


def _www() -> Layer:
    return Layer(texts=(("www/index.html", INDEX), ("etc/passwd", PASSWD), ("etc/group", GROUP)))


def _merge(*layers: Layer) -> Layer:
    return Layer(
        files=tuple(f for layer in layers for f in layer.files),
        links=tuple(x for layer in layers for x in layer.links),
        texts=tuple(t for layer in layers for t in layer.texts),
        dirs=tuple(d for layer in layers for d in layer.dirs),
    )


def _libraries(*programs: str) -> tuple[tuple[str, str], ...]:
    """The shared libraries ``ldd`` lists for ``programs``: (path in the image, host file)."""
    found: dict[str, str] = {}
    for prog in programs:
        out = subprocess.run(["ldd", prog], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            words = line.split()
            path = words[2] if len(words) >= 3 and words[1] == "=>" else words[0]
            if path.startswith("/"):
                found[path.lstrip("/")] = os.path.realpath(path)
    return tuple(sorted(found.items()))


def _recipe(name: str) -> Recipe:
    env = ("GREETING=hello",)
    if name == "busybox-httpd":
        return Recipe((_merge(_busybox(*APPLETS), _www()),), HTTPD, env, "/www")
    if name == "busybox-noshell":
        return Recipe((_merge(Layer(files=(("bin/httpd", BUSYBOX),)), _www()),), HTTPD, env,
                      "/www")  # fmt: skip
    if name == "bird":
        programs = ("/usr/sbin/bird", "/usr/sbin/birdc")
        bird = Layer(
            files=tuple((p.lstrip("/"), p) for p in programs) + _libraries(*programs),
            dirs=("etc/bird", "run/bird"),
        )
        entry = ("/usr/sbin/bird", "-f", "-c", "/etc/bird/bird.conf", "-s", "/run/bird/bird.ctl")
        return Recipe((_merge(bird, _busybox(*APPLETS)),), entry)
    if name == "whiteout":
        base = Layer(texts=(("a/x", "x\n"), ("a/keep", "keep\n"), ("b/y", "y\n")))
        return Recipe((base, Layer(remove=("a/x", "b"))), ("/nothing",))
    raise KeyError(f"no test image recipe {name!r} (recipes: {', '.join(RECIPES)})")


RECIPES = ("busybox-httpd", "busybox-noshell", "bird", "whiteout")


def _digest(recipe: Recipe) -> str:
    """The hash naming a recipe's cached build: the recipe and its host files' state."""
    doc: list[object] = [VERSION, repr(recipe)]
    for layer in recipe.layers:
        for _, host in layer.files:
            st = os.stat(host)
            doc.append([host, st.st_size, st.st_mtime_ns])
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:16]


def buildah_missing() -> str | None:
    """Why images cannot be built here (None when they can)."""
    if os.geteuid() != 0:
        return "building test images needs root"
    for tool in ("buildah", "unshare"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs buildah)"
    if not os.path.isfile(BUSYBOX):
        return f"{BUSYBOX} is missing (make test installs busybox-static)"
    return None


@functools.cache
def build(name: str) -> dict[str, Path]:
    """The image ``name`` (one of :data:`RECIPES`) in its three forms, built once."""
    recipe = _recipe(name)
    final = CACHE / f"{name}-{_digest(recipe)}"
    forms = {
        "oci-archive": final / "oci-archive.tar",
        "docker-archive": final / "docker-archive.tar",
        "oci": final / "oci",
    }
    if final.is_dir():
        return forms
    why = buildah_missing()
    if why is not None:
        raise RuntimeError(f"cannot build the test image {name}: {why}")
    CACHE.mkdir(parents=True, exist_ok=True)
    if os.path.realpath(CACHE).startswith("/var/lib/"):
        raise RuntimeError(f"{CACHE}: under /var/lib, which buildah sees as a tmpfs here")
    with _flock(CACHE / f".{name}.lock"):
        if final.is_dir():
            return forms
        for stale in CACHE.glob(f".build-{name}-*"):  # a build killed midway
            shutil.rmtree(stale)
        with tempfile.TemporaryDirectory(prefix=f".build-{name}-", dir=CACHE) as work:
            out = _build(name, recipe, Path(work))
            os.rename(out, final)
    return forms


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class _Buildah:
    """buildah with a storage of its own, run as the module's description says."""

    def __init__(self, work: Path) -> None:
        self.storage = ["--root", str(work / "root"), "--runroot", str(work / "run"),
                        "--storage-driver", "vfs"]  # fmt: skip
        (work / "tmp").mkdir()
        self.env = {**os.environ, "TMPDIR": str(work / "tmp")}

    def __call__(self, *args: str) -> str:
        argv = ["unshare", "--mount", "--propagation", "private", "--",
                "sh", "-c", _IN_PRIVATE_VAR_LIB, "sh",
                "buildah", *self.storage, *args]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env,
                              timeout=BUILDAH_TIMEOUT_S, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args)}: exit {proc.returncode}: {proc.stderr}")
        return proc.stdout.strip()


def _stage(layer: Layer, stage: Path) -> None:
    stage.mkdir()
    for d in layer.dirs:
        (stage / d).mkdir(parents=True, exist_ok=True)
    for path, host in layer.files:
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(host, stage / path)  # modes kept: 0755 programs, 0644 libraries
    for path, target in layer.links:
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, stage / path)
    for path, text in layer.texts:
        (stage / path).parent.mkdir(parents=True, exist_ok=True)
        (stage / path).write_text(text)
        (stage / path).chmod(0o644)
    for p in [stage, *stage.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)


def _build(name: str, recipe: Recipe, work: Path) -> Path:
    buildah = _Buildah(work)
    ref = f"localhost/fidelnet-test/{name}:latest"
    ctr = buildah("from", "--name", f"fidelnet-test-{name}", "scratch")
    for i, layer in enumerate(recipe.layers):
        if i:  # each layer but the last is committed, and the next one starts from it
            below = f"localhost/fidelnet-test/{name}-layer{i}:latest"
            buildah("commit", "--quiet", "--format", "oci", "--rm", ctr, below)
            ctr = buildah("from", "--name", f"fidelnet-test-{name}-{i}", below)
        if layer.files or layer.links or layer.texts or layer.dirs:
            stage = work / f"stage{i}"
            _stage(layer, stage)
            buildah("copy", "--quiet", ctr, str(stage), "/")
        if layer.remove:
            mnt = Path(buildah("mount", ctr))
            for path in layer.remove:
                target = mnt / path
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                else:
                    target.unlink()
            buildah("umount", ctr)
    buildah("config", "--entrypoint", json.dumps(list(recipe.entrypoint)),
            *[a for e in recipe.env for a in ("--env", e)],
            *(("--workingdir", recipe.workdir) if recipe.workdir else ()),
            "--os", "linux", ctr)  # fmt: skip
    buildah("commit", "--quiet", "--format", "oci", "--rm", ctr, ref)
    out = work / "out"
    out.mkdir()
    buildah("push", "--quiet", ref, f"oci-archive:{out / 'oci-archive.tar'}:{ref}")
    buildah("push", "--quiet", ref, f"docker-archive:{out / 'docker-archive.tar'}:{ref}")
    buildah("push", "--quiet", ref, f"oci:{out / 'oci'}:{ref}")
    out.chmod(0o755)
    return out
