"""The image store (fidelnet.image) on images made here with tarfile, json and hashlib:
the three formats, verification, whiteouts, links, modes, hostile layers, names, the
size limit, concurrent imports, registry pulls through a fake skopeo, the CLI.

No root needed: ownership is checked only when the tests run as root.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fidelnet.errors import StateError, ValidationError
from fidelnet.image import Image, Store, in_use, resolve
from fidelnet.image.refs import host_platform

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
MTIME = 1_600_000_000
ROOT = os.geteuid() == 0

Member = tuple[tarfile.TarInfo, bytes]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- layers -----------------------------------------------------------------------------


def _info(name: str, kind: bytes, mode: int, uid: int = 0, gid: int = 0) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.uid, ti.gid, ti.mtime = kind, mode, uid, gid, MTIME
    return ti


def F(name: str, data: bytes = b"", mode: int = 0o644, uid: int = 0, gid: int = 0) -> Member:
    ti = _info(name, tarfile.REGTYPE, mode, uid, gid)
    ti.size = len(data)
    return ti, data


def D(name: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Member:
    return _info(name, tarfile.DIRTYPE, mode, uid, gid), b""


def S(name: str, target: str) -> Member:
    ti = _info(name, tarfile.SYMTYPE, 0o777)
    ti.linkname = target
    return ti, b""


def H(name: str, target: str) -> Member:
    ti = _info(name, tarfile.LNKTYPE, 0o644)
    ti.linkname = target
    return ti, b""


def FIFO(name: str) -> Member:
    return _info(name, tarfile.FIFOTYPE, 0o640), b""


def tar(*members: Member) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if ti.isreg() else None)
    return buf.getvalue()


BASE = tar(
    D("bin"),
    F("bin/busybox", b"\x7fELF busybox" * 100, 0o755),
    S("bin/sh", "/bin/busybox"),
    D("etc"),
    F("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nweb:x:1000:1000::/www:/bin/sh\n"),
    D("www", 0o750, uid=1000, gid=1000),
    F("www/index.html", b"hello from the image\n", uid=1000, gid=1000),
)


# -- images -----------------------------------------------------------------------------


@dataclass
class Built:
    path: Path
    digest: str
    config_digest: str
    layers: list[str]


def _config(diff_ids: list[str], arch: str | None = None, **cfg: Any) -> dict[str, Any]:
    return {
        "architecture": arch or host_platform().split("/")[1],
        "os": "linux",
        "config": {
            "Entrypoint": ["/bin/httpd", "-f"],
            "Env": ["GREETING=hello"],
            "WorkingDir": "/www",
            **cfg,
        },  # fmt: skip
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }


def _blob(layout: Path, data: bytes) -> str:
    d = sha(data)
    p = layout / "blobs" / "sha256" / d[7:]
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return d


def _manifest(layout: Path, layers: list[bytes], *, gz: bool, arch: str | None = None,
              **cfg: Any) -> tuple[bytes, str, list[str]]:  # fmt: skip
    blobs = [gzip.compress(raw, mtime=0) if gz else raw for raw in layers]
    config = json.dumps(_config([sha(raw) for raw in layers], arch, **cfg)).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": _blob(layout, config), "size": len(config)},
        "layers": [
            {
                "mediaType": LAYER_GZIP if gz else LAYER_TAR,
                "digest": _blob(layout, b),
                "size": len(b),
            }
            for b in blobs
        ],  # fmt: skip
    }
    data = json.dumps(manifest).encode()
    _blob(layout, data)
    return data, sha(config), [sha(b) for b in blobs]


def oci_layout(layout: Path, layers: list[bytes], *, gz: bool = False,
               ref_name: str | None = "example.com/web:1", **cfg: Any) -> Built:  # fmt: skip
    data, config_digest, layer_digests = _manifest(layout, layers, gz=gz, **cfg)
    desc: dict[str, Any] = {"mediaType": OCI_MANIFEST, "digest": sha(data), "size": len(data)}
    if ref_name:
        desc["annotations"] = {REF_NAME: ref_name}
    _write_index(layout, [desc])
    return Built(layout, sha(data), config_digest, layer_digests)


def _write_index(layout: Path, descs: list[dict[str, Any]]) -> None:
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descs}
    (layout / "index.json").write_text(json.dumps(index))


def tar_dir(src: Path, out: Path, *, gz: bool = False) -> Path:
    with tarfile.open(out, "w:gz" if gz else "w") as t:
        for p in sorted(src.rglob("*")):
            t.add(p, arcname=str(p.relative_to(src)), recursive=False)
    return out


def _member(t: tarfile.TarFile, name: str) -> bytes:
    f = t.extractfile(name)
    assert f is not None
    return f.read()


def docker_archive(out: Path, layers: list[bytes], tags: list[str], **cfg: Any) -> Path:
    config = json.dumps(_config([sha(raw) for raw in layers], **cfg)).encode()
    cid = sha(config)[7:]
    files: dict[str, bytes] = {f"{cid}.json": config}
    paths = []
    for i, raw in enumerate(layers):
        files[f"layer{i}/layer.tar"] = raw
        paths.append(f"layer{i}/layer.tar")
    manifest = [{"Config": f"{cid}.json", "RepoTags": tags, "Layers": paths}]
    files["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(out, "w") as t:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    return out


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store", max_bytes=1 << 30)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


# -- the formats ------------------------------------------------------------------------


def test_an_oci_layout_is_unpacked_with_its_config_modes_and_links(
    tmp_path: Path, store: Store
) -> None:
    built = oci_layout(tmp_path / "layout", [BASE], User="web", ExposedPorts={"8080/tcp": {}})
    img = resolve(str(built.path), node="h1", store=store)
    assert img.digest == built.digest and img.source == "oci"
    assert img.names == ("example.com/web:1",)
    cfg = img.config
    assert cfg.entrypoint == ("/bin/httpd", "-f") and cfg.cmd == ()
    assert (cfg.env, cfg.workdir, cfg.user) == (("GREETING=hello",), "/www", "web")
    assert cfg.exposed_ports == ("8080/tcp",) and cfg.stop_signal == ""
    root = img.rootfs
    assert _mode(root / "bin" / "busybox") == 0o755
    assert os.readlink(root / "bin" / "sh") == "/bin/busybox"  # kept, never resolved here
    assert (root / "www" / "index.html").read_text() == "hello from the image\n"
    assert _mode(root / "www") == 0o750
    assert int((root / "www" / "index.html").stat().st_mtime) == MTIME
    assert int((root / "www").stat().st_mtime) == MTIME  # set after its entries
    if ROOT:
        assert (root / "www").stat().st_uid == 1000 and (root / "etc").stat().st_uid == 0
    assert img.size > 0 and img.rootfs.parent.name == "sha256-" + built.digest[7:]
    assert _mode(store.root) == 0o700 and _mode(img.rootfs.parent) == 0o700
    rec = store.record(img.digest)
    assert rec is not None and rec["names"] == ["example.com/web:1"]
    assert rec["imported"] <= rec["last_used"] and rec["source"] == "oci"


def test_oci_archives_plain_and_gzipped_pin_the_same_digest(tmp_path: Path, store: Store) -> None:
    built = oci_layout(tmp_path / "layout", [BASE], gz=True)
    plain = tar_dir(built.path, tmp_path / "img.tar")
    packed = tar_dir(built.path, tmp_path / "img.tar.gz", gz=True)
    a = resolve(f"oci-archive:{plain}", store=store)
    b = resolve(str(packed), store=store)
    assert a.digest == b.digest == built.digest
    assert (a.source, b.source) == ("oci-archive", "oci-archive")
    assert a.rootfs == b.rootfs and (a.rootfs / "bin" / "busybox").is_file()
    assert not list(store.root.glob(".tmp*")), "the decompressed archive is never left behind"


def test_a_docker_save_archive_gets_the_manifest_digest_skopeo_makes(
    tmp_path: Path, store: Store
) -> None:
    extra = tar(F("www/extra.html", b"more"))
    path = docker_archive(tmp_path / "d.tar", [BASE, extra], ["web:2"], Cmd=["-v"])
    img = resolve(f"docker-archive:{path}", node="h1", store=store)
    with tarfile.open(path) as t:
        config = json.loads(_member(t, "manifest.json"))[0]["Config"]
        config_bytes = _member(t, config)
    manifest = (
        '{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",'
        '"config":{"mediaType":"application/vnd.docker.container.image.v1+json",'
        f'"size":{len(config_bytes)},"digest":"{sha(config_bytes)}"}},"layers":['
        + ",".join(
            '{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip",'
            f'"size":{len(raw)},"digest":"{sha(raw)}"}}'
            for raw in (BASE, extra)
        )
        + "]}"
    )
    assert img.digest == sha(manifest.encode()) and img.source == "docker-archive"
    assert img.names == ("web:2",) and img.config.cmd == ("-v",)
    assert (img.rootfs / "www" / "extra.html").read_bytes() == b"more"
    assert resolve("web:2", store=store).digest == img.digest


def test_a_multi_platform_index_gives_this_machines_manifest(tmp_path: Path, store: Store) -> None:
    layout = tmp_path / "layout"
    other = "arm64" if host_platform() != "linux/arm64" else "amd64"
    here, _, _ = _manifest(layout, [BASE], gz=False)
    there, _, _ = _manifest(layout, [tar(F("wrong", b"x"))], gz=False, arch=other)
    plat = host_platform().split("/")
    inner = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": sha(there), "size": len(there),
         "platform": {"os": "linux", "architecture": other}},
        {"mediaType": OCI_MANIFEST, "digest": sha(here), "size": len(here),
         "platform": {"os": plat[0], "architecture": plat[1]}},
    ]}  # fmt: skip
    data = json.dumps(inner).encode()
    _blob(layout, data)
    _write_index(layout, [{"mediaType": OCI_INDEX, "digest": sha(data), "size": len(data),
                           "annotations": {REF_NAME: "1.0"}}])  # fmt: skip
    img = resolve(f"oci:{layout}:1.0", store=store)  # a nested index, followed one level
    assert img.digest == sha(here) and (img.rootfs / "bin" / "busybox").exists()
    assert img.names == ()  # a bare tag names nothing

    # Only the other platform: the error names what there is.
    _write_index(layout, [
        {"mediaType": OCI_MANIFEST, "digest": sha(there), "size": len(there),
         "platform": {"os": "linux", "architecture": other}},
        {"mediaType": OCI_MANIFEST, "digest": sha(there), "size": len(there),
         "platform": {"os": "windows", "architecture": "amd64"}},
    ])  # fmt: skip
    with pytest.raises(ValidationError, match=rf"no manifest for {host_platform()}.*linux/{other}"):
        resolve(str(layout), node="h1", store=Store(tmp_path / "s2"))


def test_an_unknown_select_and_several_images_name_the_choices(
    tmp_path: Path, store: Store
) -> None:
    layout = tmp_path / "layout"
    a, _, _ = _manifest(layout, [BASE], gz=False)
    b, _, _ = _manifest(layout, [BASE], gz=False, Cmd=["x"])
    _write_index(layout, [
        {"mediaType": OCI_MANIFEST, "digest": sha(m), "size": len(m), "annotations": {REF_NAME: t}}
        for m, t in ((a, "a"), (b, "b"))
    ])  # fmt: skip
    with pytest.raises(ValidationError, match=r"several images.*valid: a, b"):
        resolve(str(layout), store=store)
    with pytest.raises(ValidationError, match=r"no image named 'c'.*valid: a, b"):
        resolve(f"oci:{layout}:c", store=store)
    assert resolve(f"oci:{layout}:b", store=store).config.cmd == ("x",)


def test_not_an_image_is_refused(tmp_path: Path, store: Store) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "text").write_text("hello")
    tar_dir(tmp_path / "dir", tmp_path / "empty.tar")
    with pytest.raises(ValidationError, match="without an oci-layout file"):
        resolve(str(tmp_path / "dir"), store=store)
    with pytest.raises(ValidationError, match="neither an OCI layout directory nor a tar"):
        resolve(str(tmp_path / "text"), store=store)
    with pytest.raises(ValidationError, match="without oci-layout .* or manifest.json"):
        resolve(str(tmp_path / "empty.tar"), store=store)
    with pytest.raises(ValidationError, match="no such file"):
        resolve("oci-archive:/nonexistent/x.tar", store=store)
    with pytest.raises(ValidationError, match="missing.tar: no such file"):
        resolve("missing.tar", store=store)  # a file, not a name to pull


# -- verification -----------------------------------------------------------------------


def test_a_layer_that_does_not_match_its_digest_fails_and_leaves_nothing(
    tmp_path: Path, store: Store
) -> None:
    built = oci_layout(tmp_path / "layout", [BASE, tar(F("x", b"1"))])
    blob = built.path / "blobs" / "sha256" / built.layers[1][7:]
    blob.write_bytes(tar(F("x", b"2")))  # same size, other content
    with pytest.raises(ValidationError) as exc:
        resolve(str(built.path), node="h1", store=store)
    msg = str(exc.value)
    assert msg.startswith(f"node h1: image {str(built.path)!r}: layer 2 of 2 ({built.layers[1]})")
    assert "does not match its digest" in msg
    assert not [p.name for p in store.root.iterdir() if p.name.startswith(("sha256-", ".tmp"))]
    assert store.list() == []


def test_a_manifest_or_config_that_does_not_match_is_refused(tmp_path: Path, store: Store) -> None:
    built = oci_layout(tmp_path / "layout", [BASE])
    cfg = built.path / "blobs" / "sha256" / built.config_digest[7:]
    cfg.write_bytes(cfg.read_bytes().replace(b"hello", b"HELLO"))
    with pytest.raises(ValidationError, match=rf"config blob {built.config_digest} does not match"):
        resolve(str(built.path), store=store)
    man = built.path / "blobs" / "sha256" / built.digest[7:]
    man.write_bytes(man.read_bytes() + b" ")
    with pytest.raises(ValidationError, match=rf"manifest blob {built.digest} does not match"):
        resolve(str(built.path), store=store)


def test_a_missing_blob_names_the_image_and_the_blob(tmp_path: Path, store: Store) -> None:
    built = oci_layout(tmp_path / "layout", [BASE])
    (built.path / "blobs" / "sha256" / built.layers[0][7:]).unlink()
    with pytest.raises(ValidationError) as exc:
        resolve(f"oci:{built.path}", node="r1", store=store)
    assert str(exc.value) == (
        f"node r1: image 'oci:{built.path}': layer 1 of 1 ({built.layers[0]}): "
        f"blob missing from {built.path}"
    )


def test_a_wrong_diff_id_is_refused(tmp_path: Path, store: Store) -> None:
    layout = tmp_path / "layout"
    data, _, _ = _manifest(layout, [BASE], gz=True)
    doc = json.loads(data)
    config = json.dumps(_config([sha(b"other")])).encode()
    doc["config"] = {"mediaType": OCI_CONFIG, "digest": _blob(layout, config), "size": len(config)}
    data = json.dumps(doc).encode()
    _blob(layout, data)
    _write_index(layout, [{"mediaType": OCI_MANIFEST, "digest": sha(data), "size": len(data)}])
    with pytest.raises(ValidationError, match="not the config's diff_id"):
        resolve(str(layout), store=store)


def test_zstd_layers_are_refused_clearly(tmp_path: Path, store: Store) -> None:
    try:
        import zstandard  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the zstandard module is installed: zstd layers are read")
    built = oci_layout(tmp_path / "layout", [BASE])
    blob = built.path / "blobs" / "sha256" / built.layers[0][7:]
    blob.write_bytes(b"\x28\xb5\x2f\xfd" + blob.read_bytes()[4:])  # zstd's magic
    with pytest.raises(ValidationError, match="zstd layers are not supported"):
        resolve(str(built.path), store=store)


# -- layers: whiteouts, links, modes ----------------------------------------------------


def test_whiteouts_remove_lower_files_and_opaque_directories_empty_them(
    tmp_path: Path, store: Store
) -> None:
    lower = tar(D("a"), F("a/x", b"x"), F("a/y", b"y"), D("b"), F("b/z", b"z"), D("o"),
                F("o/old", b"old"), D("o/sub"), F("o/sub/deep", b"d"))  # fmt: skip
    upper = tar(F("a/.wh.x"), F(".wh.b"), D("o"), F("o/.wh..wh..opq"), F("o/new", b"new"),
                D("o/sub"), F("o/sub/mine", b"m"), F("a/.wh.never-there"))  # fmt: skip
    img = resolve(str(oci_layout(tmp_path / "layout", [lower, upper]).path), store=store)
    r = img.rootfs
    assert sorted(os.listdir(r / "a")) == ["y"]
    assert not (r / "b").exists()
    assert sorted(os.listdir(r / "o")) == ["new", "sub"] and os.listdir(r / "o" / "sub") == ["mine"]
    found = [p.name for p in r.rglob(".wh.*")]
    assert found == []


def test_hard_links_setuid_fifos_and_replacements(tmp_path: Path, store: Store) -> None:
    lower = tar(D("bin"), F("bin/su", b"su", 0o4755), F("bin/wall", b"w", 0o2755),
                D("tmp", 0o1777), S("etc", "/nonexistent"), D("dir"), F("dir/f", b"f"),
                D("dir/sub"), D("dir/sub/deeper"), F("dir/sub/deeper/g", b"g"),
                D("tree"), D("tree/sub"), F("tree/sub/h", b"h"))  # fmt: skip
    upper = tar(H("bin/su2", "bin/su"), H("/bin/su3", "/bin/su"), FIFO("run.fifo"),
                D("etc"), F("etc/hosts", b"h"), F("dir", b"now a file"), F("dir2", b"next"),
                S("tree", "/elsewhere"), F("after", b"a"))  # fmt: skip
    img = resolve(str(oci_layout(tmp_path / "layout", [lower, upper]).path), store=store)
    r = img.rootfs
    assert _mode(r / "bin" / "su") == 0o4755 and _mode(r / "bin" / "wall") == 0o2755
    assert _mode(r / "tmp") == 0o1777
    su = (r / "bin" / "su").stat()
    assert su.st_nlink == 3 and (r / "bin" / "su3").stat().st_ino == su.st_ino
    assert stat.S_ISFIFO((r / "run.fifo").lstat().st_mode)
    assert (r / "etc").is_dir() and not (r / "etc").is_symlink()  # a link replaced by a dir
    assert (r / "dir").read_bytes() == b"now a file" and (r / "dir2").read_bytes() == b"next"
    assert os.readlink(r / "tree") == "/elsewhere" and (r / "after").read_bytes() == b"a"


def _device(name: str, major: int, minor: int) -> Member:
    ti = _info(name, tarfile.CHRTYPE, 0o666)
    ti.devmajor, ti.devminor = major, minor
    return ti, b""


def test_device_nodes_are_made_by_root_and_skipped_otherwise(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = tar(D("dev"), _device("dev/null", 1, 3), D("ro", 0o555), F("ro/f", b"f", 0o444))
    if ROOT:
        img = resolve(str(oci_layout(tmp_path / "a", [layer], ref_name=None).path), store=store)
        st = (img.rootfs / "dev" / "null").lstat()
        assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == 3
        assert _mode(img.rootfs / "dev" / "null") == 0o666
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # what an unprivileged user gets
    img = resolve(str(oci_layout(tmp_path / "b", [layer], ref_name="x.io/dev:1").path),
                  store=Store(tmp_path / "user-store"))  # fmt: skip
    assert not (img.rootfs / "dev" / "null").exists() and (img.rootfs / "dev").is_dir()
    rec = Store(tmp_path / "user-store").record(img.digest)
    assert rec is not None and rec["skipped_devices"] == ["dev/null"]
    assert _mode(img.rootfs / "ro") == 0o555
    assert [i.digest for i in Store(tmp_path / "user-store").prune(0)] == [img.digest]
    assert not img.rootfs.exists()  # read-only directories made writable to remove them


def test_padding_after_the_end_of_a_layer_is_hashed_too(tmp_path: Path, store: Store) -> None:
    padded = tar(F("f", b"data")) + bytes(3 << 20)  # beyond what the reader buffers
    aufs = tar(D(".wh..wh.plnk"), F(".wh..wh.plnk/123.456", b"x"), F(".wh..wh.aufs"))
    built = oci_layout(tmp_path / "layout", [padded, aufs])
    img = resolve(str(built.path), store=store)
    assert sorted(os.listdir(img.rootfs)) == ["f"]  # AUFS's own files left out


# -- hostile layers ---------------------------------------------------------------------


def test_a_file_through_an_earlier_layers_symlink_is_refused(tmp_path: Path, store: Store) -> None:
    outside = tmp_path / "host-etc"
    outside.mkdir()
    lower = tar(S("etc", str(outside)), S("rel", "../../../../" + str(outside)))
    for upper in (tar(F("etc/passwd", b"pwned")), tar(D("rel/sub")), tar(F("etc/.wh.x"))):
        layout = tmp_path / f"layout-{sha(upper)[7:15]}"
        with pytest.raises(ValidationError) as exc:
            resolve(str(oci_layout(layout, [lower, upper]).path), node="h1", store=store)
        assert "is a symbolic link" in str(exc.value) and "refusing to write through it" in str(
            exc.value
        )
        assert str(exc.value).startswith("node h1: image ")
    assert list(outside.iterdir()) == []
    assert store.list() == [] and not list(store.root.glob(".tmp*"))


def test_a_hard_link_to_the_host_writes_nothing_outside(tmp_path: Path, store: Store) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host")
    lower = tar(S("up", str(tmp_path)))
    for upper in (tar(H("stolen", "up/secret")), tar(H("stolen", "../../secret"))):
        layout = tmp_path / f"layout-{sha(upper)[7:15]}"
        with pytest.raises(ValidationError, match="refused"):
            resolve(str(oci_layout(layout, [lower, upper]).path), store=store)
    assert secret.stat().st_nlink == 1


def test_dot_dot_members_are_refused_and_absolute_ones_stay_inside(
    tmp_path: Path, store: Store
) -> None:
    for name in ("../escape", "a/../../escape", "./x/../../escape"):
        layout = tmp_path / f"layout-{sha(name.encode())[7:15]}"
        with pytest.raises(ValidationError, match=r"'\.\.' component would leave the root"):
            resolve(str(oci_layout(layout, [tar(F(name, b"x"))]).path), store=store)
    assert not (tmp_path / "escape").exists() and not (store.root / "escape").exists()
    img = resolve(str(oci_layout(tmp_path / "abs", [tar(F("/etc/absolute", b"in"))]).path),
                  store=store)  # fmt: skip
    assert (img.rootfs / "etc" / "absolute").read_bytes() == b"in"


# -- names, lookups, errors -------------------------------------------------------------


def test_names_tags_and_digests_find_the_image(tmp_path: Path, store: Store) -> None:
    built = oci_layout(tmp_path / "layout", [BASE], ref_name="docker.io/library/web:latest")
    img = store.import_path(built.path, name="mirror.local:5000/team/web:v2")
    assert img.names == ("docker.io/library/web:latest", "mirror.local:5000/team/web:v2")
    for ref in ("web", "web:latest", "library/web", "docker.io/library/web:latest",
                "mirror.local:5000/team/web:v2", built.digest, built.digest[:19],
                f"web@{built.digest}"):  # fmt: skip
        found = store.find(ref)
        assert found is not None and found.digest == built.digest, ref
        assert found.source == "store" and found.ref == ref
    assert store.find("web:v3") is None and store.find("other") is None
    assert store.find("sha256:" + "0" * 64) is None
    again = resolve("mirror.local:5000/team/web:v2", node="h1", store=store)
    assert again.source == "store" and again.rootfs == img.rootfs


def test_a_name_moves_to_the_image_imported_last(tmp_path: Path, store: Store) -> None:
    one = store.import_path(oci_layout(tmp_path / "one", [BASE], ref_name=None).path, name="app")
    two = store.import_path(
        oci_layout(tmp_path / "two", [BASE], ref_name=None, Cmd=["2"]).path, name="app"
    )
    assert one.digest != two.digest
    found = store.find("app")
    assert found is not None and found.digest == two.digest
    rec = store.record(one.digest)
    assert rec is not None and rec["names"] == []
    with pytest.raises(ValidationError, match="not an image name"):
        store.import_path(tmp_path / "one", name="Bad Name")


def test_an_unknown_name_without_skopeo_says_how_to_import_it(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(ValidationError) as exc:
        resolve("busybox", node="h7", store=store)
    msg = str(exc.value)
    assert msg.startswith("node h7: image: no image named busybox:latest was imported")
    assert "fidelnet image import FILE --name busybox:latest" in msg
    assert "skopeo is not installed" in msg and "skopeo on PATH and a reachable registry" in msg
    assert msg.endswith("(got 'busybox')")
    with pytest.raises(ValidationError, match=r"^node h7: image: not an image reference"):
        resolve("Not A Ref!", node="h7", store=store)
    with pytest.raises(ValidationError, match=r"^image: no image with digest sha256:0+ in"):
        resolve("sha256:" + "0" * 64, store=store)
    with pytest.raises(ValidationError, match=r"^image: not an image reference"):
        resolve("sha256:abc", store=store)


def _fake_skopeo(bindir: Path, body: str) -> None:
    bindir.mkdir(exist_ok=True)
    script = bindir / "skopeo"
    script.write_text(f"#!{sys.executable}\nimport sys, shutil, json\n" + textwrap.dedent(body))
    script.chmod(0o755)


def test_a_name_not_in_the_store_is_pulled_with_skopeo(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = oci_layout(tmp_path / "registry", [BASE], ref_name="image")
    calls = tmp_path / "calls.json"
    _fake_skopeo(tmp_path / "bin", f"""
        args = sys.argv[1:]
        json.dump(args, open({str(calls)!r}, "w"))
        assert args[0] == "copy" and args[-2].startswith("docker://"), args
        path, tag = args[-1].removeprefix("oci:").rsplit(":", 1)
        shutil.copytree({str(built.path)!r}, path)
    """)  # fmt: skip
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    img = resolve("quay.io/team/web:3", node="h1", store=store)
    assert img.source == "registry" and img.digest == built.digest
    assert img.names == ("quay.io/team/web:3",)
    args = json.loads(calls.read_text())
    assert args[-2] == "docker://quay.io/team/web:3" and args[-1].endswith(":image")
    again = resolve("quay.io/team/web:3", store=store)  # in the store now: no second pull
    calls.unlink()
    assert again.source == "store" and not calls.exists()
    assert not [p for p in store.root.iterdir() if p.name.startswith(".pull")]


def test_a_failed_pull_names_the_node_the_ref_and_skopeos_error(
    tmp_path: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_skopeo(tmp_path / "bin", """
        sys.stderr.write("time=x level=fatal msg=\\"pinging container registry: no route\\"\\n")
        sys.exit(1)
    """)  # fmt: skip
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(ValidationError) as exc:
        resolve("alpine:3.20", node="h2", store=store)
    msg = str(exc.value)
    assert msg.startswith("node h2: image: no image named alpine:3.20 was imported")
    assert "skopeo copy docker://alpine:3.20 failed: time=x level=fatal" in msg
    assert "no route" in msg and "fidelnet image import FILE --name alpine:3.20" in msg
    assert not [p for p in store.root.iterdir() if p.name.startswith(".pull")]


# -- the size limit, use, concurrency ---------------------------------------------------


def _three(tmp_path: Path, store: Store) -> list[Image]:
    out = []
    for i in range(3):
        layer = tar(F("big", os.urandom(64 * 1024) + bytes([i])))
        built = oci_layout(tmp_path / f"img{i}", [layer], ref_name=f"example.com/img{i}:1")
        out.append(resolve(str(built.path), store=store))
    return out


def test_prune_removes_least_recently_used_first_and_spares_images_in_use(
    tmp_path: Path, store: Store
) -> None:
    a, b, c = _three(tmp_path, store)
    resolve("example.com/img0:1", store=store)  # a is now the most recently used
    with in_use(b):
        removed = store.prune(0)
        assert [i.digest for i in removed] == [c.digest, a.digest]
        assert [i.digest for i in store.list()] == [b.digest]
        with pytest.raises(ValidationError, match="in use by a running node"):
            store.remove(b.digest)
    assert not a.rootfs.exists() and b.rootfs.is_dir()
    assert store.find("example.com/img0:1") is None
    assert [i.digest for i in store.prune(0)] == [b.digest]
    with pytest.raises(StateError, match="no longer in the store"), in_use(b):
        pass
    assert sorted(p.name for p in store.root.iterdir()) == [".lock", ".locks", "names.json"]
    assert list((store.root / ".locks").iterdir()) == []


def test_resolve_keeps_the_store_under_its_limit_but_never_evicts_what_it_resolved(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "store", max_bytes=100 * 1024)  # room for one image
    a, b, c = _three(tmp_path, store)
    assert [i.digest for i in store.list()] == [c.digest]
    assert c.rootfs.is_dir() and not a.rootfs.exists() and not b.rootfs.exists()
    tiny = Store(tmp_path / "store", max_bytes=0)
    again = resolve("example.com/img2:1", store=tiny)
    assert again.rootfs.is_dir()


def test_a_store_limit_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FIDELNET_IMAGE_STORE", str(tmp_path / "env-store"))
    monkeypatch.setenv("FIDELNET_IMAGE_STORE_MB", "12")
    s = Store()
    assert s.root == tmp_path / "env-store" and s.max_bytes == 12 << 20
    monkeypatch.setenv("FIDELNET_IMAGE_STORE_MB", "lots")
    with pytest.raises(ValidationError, match="FIDELNET_IMAGE_STORE_MB"):
        Store()


def test_two_threads_resolving_one_image_both_get_it(tmp_path: Path, store: Store) -> None:
    built = oci_layout(tmp_path / "layout", [BASE, tar(F("more", os.urandom(1 << 20)))], gz=True)
    results: list[Image | BaseException] = []

    def go() -> None:
        try:
            results.append(resolve(str(built.path), store=store))
        except BaseException as exc:  # reported below
            results.append(exc)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, Image) and r.digest == built.digest for r in results), results
    assert [p.name for p in store.root.iterdir() if p.name.startswith(("sha256-", ".tmp"))] == [
        "sha256-" + built.digest[7:]
    ]


def test_two_processes_resolving_one_image_both_get_it(tmp_path: Path, store: Store) -> None:
    built = oci_layout(tmp_path / "layout", [BASE, tar(F("more", os.urandom(1 << 20)))])
    code = (
        "import sys; from fidelnet.image import Store, resolve; "
        "print(resolve(sys.argv[1], store=Store(sys.argv[2])).digest)"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(built.path), str(store.root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o.strip() for o, _ in outs] == [built.digest, built.digest]
    assert len(store.list()) == 1


def test_an_image_unpacked_twice_keeps_the_first_copy(tmp_path: Path, store: Store) -> None:
    from fidelnet.image.formats import open_image

    built = oci_layout(tmp_path / "layout", [BASE])
    store._ensure()
    for _ in range(2):  # as if two processes raced past the unpack lock
        with open_image(built.path, kind=None, select=None, what="x", scratch=store.root) as src:
            store._unpack(src, "oci", "x", origin="")
    assert [p.name for p in store.root.iterdir() if not p.name.startswith((".lock", "names"))] == [
        "sha256-" + built.digest[7:]
    ]


def test_leftovers_of_a_crashed_import_are_never_used_and_pruned(
    tmp_path: Path, store: Store
) -> None:
    built = oci_layout(tmp_path / "layout", [BASE])
    store._ensure()
    dead = store.root / f".tmp-sha256-{built.digest[7:]}-deadbeef0000"
    (dead / "rootfs").mkdir(parents=True)
    (dead / "rootfs" / "half").write_text("half an image")
    assert store.find(built.digest) is None
    img = resolve(str(built.path), store=store)
    assert not (img.rootfs / "half").exists()
    assert not dead.exists()  # swept by the prune after the import


# -- the CLI ----------------------------------------------------------------------------


def test_the_cli_imports_lists_removes_and_prunes(tmp_path: Path) -> None:
    from fidelnet.cli.image import image

    built = oci_layout(tmp_path / "layout", [BASE], ref_name=None)
    archive = tar_dir(built.path, tmp_path / "web.tar")
    run: Callable[..., Any] = CliRunner().invoke
    st = ["--store", str(tmp_path / "store")]
    out = run(image, [*st, "import", str(archive), "--name", "web"])
    assert out.exit_code == 0, out.output
    assert f"imported {built.digest} (oci-archive" in out.output and "web:latest" in out.output
    out = run(image, [*st, "import", str(archive)])
    assert "already in the store" in out.output
    out = run(image, [*st, "ls"])
    assert out.exit_code == 0 and built.digest[:19] in out.output and "web:latest" in out.output
    assert "1 image, " in out.output
    out = run(image, [*st, "rm", "nosuch"])
    assert isinstance(out.exception, ValidationError) and "no such image" in str(out.exception)
    out = run(image, [*st, "rm", built.digest[:19]])
    assert out.exit_code == 0 and f"removed {built.digest}" in out.output
    run(image, [*st, "import", f"oci:{built.path}", "--name", "web:2"])
    out = run(image, [*st, "prune", "--max-mb", "0"])
    assert out.exit_code == 0 and "1 removed; 0 left" in out.output
    out = run(image, [*st, "ls"])
    assert "no images in" in out.output
