"""The image store on images a real producer made: buildah (tests/_images.py), each in
its three forms (OCI archive, docker save archive, OCI layout), resolved into a store of
the test's own; what buildah's layers hold, whiteouts included, comes out as built, and
the programs in them run (chroot). Also: the size limit evicts the least recently used
image but never one in use, and building the images leaves the host's /var/lib as it
was."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

import _images
from _images import build, buildah_missing
from fidelnet.image import Store, in_use, resolve

pytestmark = pytest.mark.privileged

TRANSPORT = {"oci-archive": "oci-archive:", "docker-archive": "docker-archive:", "oci": "oci:"}


@pytest.fixture(autouse=True)
def _buildah() -> None:
    why = buildah_missing()
    if why is not None:  # make test installs buildah, crun and busybox-static
        pytest.fail(f"the test images cannot be built: {why}")


def _tree(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under root: its mode, owner and (files) content hash or (links) target."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        what = (os.readlink(p) if p.is_symlink() else
                str(hash(p.read_bytes())) if stat.S_ISREG(st.st_mode) else "")  # fmt: skip
        out[str(p.relative_to(root))] = (st.st_mode, st.st_uid, what)
    return out


@pytest.mark.parametrize("recipe", ["busybox-httpd", "bird"])
def test_the_three_forms_of_an_image_unpack_alike(recipe: str, tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    paths = build(recipe)
    images = {  # the OCI layout last
        form: resolve(TRANSPORT[form] + str(paths[form]), node="h1", store=store)
        for form in ("docker-archive", "oci-archive", "oci")
    }
    oci, archive, docker = images["oci"], images["oci-archive"], images["docker-archive"]
    # The OCI layout and archive are one push of one image: the same manifest. The docker
    # archive has no manifest: its digest is of the one skopeo and podman make for it
    # (Docker schema 2, uncompressed layers), so it differs; its config is the same.
    assert oci.digest == archive.digest
    assert docker.digest != oci.digest
    rec_oci, rec_docker = store.record(oci.digest), store.record(docker.digest)
    assert rec_oci is not None and rec_docker is not None
    assert rec_oci["config_digest"] == rec_docker["config_digest"]
    assert (oci.source, archive.source, docker.source) == ("oci", "oci-archive", "docker-archive")
    assert _tree(oci.rootfs) == _tree(docker.rootfs)
    ref = f"localhost/fidelnet-test/{recipe}:latest"
    assert docker.names == (ref,) and oci.names == (ref,)
    found = store.find(f"fidelnet-test/{recipe}")  # podman's localhost/ may be left out
    assert found is not None and found.digest == oci.digest  # a name: the image imported last
    assert rec_docker["names"] == []

    for img in images.values():
        cfg = img.config
        root = img.rootfs
        assert stat.S_IMODE((root / "bin" / "busybox").stat().st_mode) == 0o755
        assert (root / "bin" / "busybox").stat().st_uid == 0
        assert os.readlink(root / "bin" / "sh") == "busybox"
        assert {p.name for p in (root / "bin").iterdir()} >= {"sh", "httpd", "ip", "[", "nc"}
        sh = subprocess.run(["chroot", str(root), "/bin/sh", "-c", "echo $((6*7))"],
                            capture_output=True, text=True, check=False)  # fmt: skip
        assert sh.stdout == "42\n", sh.stderr
        if recipe == "busybox-httpd":
            assert cfg.entrypoint == ("/bin/httpd", "-f", "-p", "8080", "-h", "/www")
            assert cfg.env == ("GREETING=hello",) and cfg.workdir == "/www"
            assert (root / "www" / "index.html").read_text() == "hello from the image\n"
            assert "web:x:1000:1000:" in (root / "etc" / "passwd").read_text()
        else:
            assert cfg.entrypoint == (
                "/usr/sbin/bird", "-f", "-c", "/etc/bird/bird.conf", "-s", "/run/bird/bird.ctl"
            )  # fmt: skip
            assert cfg.env == () and cfg.workdir == ""
            assert (
                list((root / "etc" / "bird").iterdir()) == [] and (root / "run" / "bird").is_dir()
            )
            bird = subprocess.run(["chroot", str(root), "/usr/sbin/bird", "--version"],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            assert bird.returncode == 0 and "BIRD version 2" in bird.stderr + bird.stdout


def test_an_image_without_a_shell(tmp_path: Path) -> None:
    img = resolve(str(build("busybox-noshell")["oci-archive"]), store=Store(tmp_path / "s"))
    bins = sorted(p.name for p in (img.rootfs / "bin").iterdir())
    assert bins == ["httpd"] and img.config.entrypoint[0] == "/bin/httpd"


@pytest.mark.parametrize("form", ["oci-archive", "docker-archive"])
def test_buildahs_whiteouts_remove_what_the_lower_layer_had(form: str, tmp_path: Path) -> None:
    path = build("whiteout")[form]
    img = resolve(str(path), store=Store(tmp_path / "store"))
    assert sorted(str(p.relative_to(img.rootfs)) for p in img.rootfs.rglob("*")) == ["a", "a/keep"]


def test_the_size_limit_evicts_the_least_recently_used_but_not_one_in_use(tmp_path: Path) -> None:
    roomy = Store(tmp_path / "store")
    httpd = resolve(str(build("busybox-httpd")["oci"]), store=roomy)
    noshell = resolve(str(build("busybox-noshell")["oci"]), store=roomy)
    assert httpd.size > 1 << 20 and noshell.size > 1 << 20
    with in_use(httpd):  # the least recently used, but a run holds it
        bird_path = str(build("bird")["oci"])
        bird_size = resolve(bird_path, store=Store(tmp_path / "probe")).size
        tight = Store(tmp_path / "store", max_bytes=bird_size + (1 << 20))
        bird = resolve(bird_path, store=tight)
        assert {i.digest for i in tight.list()} == {httpd.digest, bird.digest}
        assert not noshell.rootfs.exists() and httpd.rootfs.is_dir()
    assert [i.digest for i in tight.prune()] == [httpd.digest]
    assert [i.digest for i in tight.list()] == [bird.digest]


def _snapshot(path: str) -> dict[str, tuple[int, int]] | None:
    if not os.path.lexists(path):
        return None
    out = {}
    for top, dirs, files in os.walk(path):
        for name in [top, *(os.path.join(top, n) for n in dirs + files)]:
            st = os.lstat(name)
            out[name] = (st.st_size, st.st_mtime_ns)
    return out


def test_building_an_image_leaves_var_lib_as_it_was(tmp_path: Path) -> None:
    before = (_snapshot("/var/lib/containers"), sorted(os.listdir("/var/lib")))
    out = _images._build("whiteout", _images._recipe("whiteout"), tmp_path)
    after = (_snapshot("/var/lib/containers"), sorted(os.listdir("/var/lib")))
    assert after == before
    assert json.loads((out / "oci" / "index.json").read_text())["manifests"]
    mounts = Path("/proc/self/mountinfo").read_text()
    assert "fidelnet-buildah" not in mounts
