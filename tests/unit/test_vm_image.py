"""The VM guest image's parts that need no package: the cpio writer (read back with
``cpio``'s format rules), module load order from ``modules.dep``, and /init."""

from __future__ import annotations

import gzip
import json
import lzma
import stat
from pathlib import Path

import pytest

from fidelnet.errors import UnsupportedError
from fidelnet.vm import image


def _read_newc(data: bytes) -> list[tuple[str, int, bytes]]:
    out = []
    at = 0
    while True:
        assert data[at : at + 6] == b"070701", at
        f = [int(data[at + 6 + 8 * i : at + 14 + 8 * i], 16) for i in range(13)]
        size, namesize, mode = f[6], f[11], f[1]
        at += 110
        name = data[at : at + namesize - 1].decode()
        at += namesize
        at += -at % 4
        body = data[at : at + size]
        at += size
        at += -at % 4
        if name == "TRAILER!!!":
            assert len(data) % 512 == 0
            return out
        out.append((name, mode, body))


def test_the_cpio_archive_reads_back_entry_by_entry() -> None:
    entries = [
        ("bin", stat.S_IFDIR | 0o755, b""),
        ("bin/busybox", stat.S_IFREG | 0o755, b"\x7fELF" + b"x" * 1001),
        ("bin/sh", stat.S_IFLNK | 0o777, b"busybox"),
        ("init", stat.S_IFREG | 0o755, b"#!/bin/sh\n"),
    ]
    data = image.cpio_newc(entries)
    assert _read_newc(data) == entries
    assert image.cpio_newc(entries) == data  # the same input, the same bytes


def _modtree(tmp: Path, compressed: bool) -> Path:
    d = tmp / "6.1.0-99-amd64"
    ext = ".ko.xz" if compressed else ".ko"
    deps = {
        f"kernel/drivers/virtio/virtio{ext}": [],
        f"kernel/drivers/virtio/virtio_ring{ext}": [],
        f"kernel/drivers/virtio/virtio_pci{ext}": [
            f"kernel/drivers/virtio/virtio_ring{ext}",
            f"kernel/drivers/virtio/virtio{ext}",
        ],
        f"kernel/drivers/net/virtio_net{ext}": [
            f"kernel/net/core/failover{ext}",
            f"kernel/drivers/virtio/virtio_ring{ext}",
        ],
        f"kernel/net/core/failover{ext}": [],
        f"kernel/drivers/char/virtio_console{ext}": [f"kernel/drivers/virtio/virtio{ext}"],
        f"kernel/net/9p/9pnet{ext}": [],
        f"kernel/net/9p/9pnet_virtio{ext}": [f"kernel/net/9p/9pnet{ext}"],
        f"kernel/fs/9p/9p{ext}": [f"kernel/net/9p/9pnet{ext}", f"kernel/fs/netfs/netfs{ext}"],
        f"kernel/fs/netfs/netfs{ext}": [],
        f"kernel/drivers/block/virtio_blk{ext}": [f"kernel/drivers/virtio/virtio{ext}"],
        f"kernel/fs/ext4/ext4{ext}": [f"kernel/fs/jbd2/jbd2{ext}", f"kernel/lib/crc16{ext}"],
        f"kernel/fs/jbd2/jbd2{ext}": [],
        f"kernel/lib/crc16{ext}": [],
        f"kernel/crypto/crc32c_generic{ext}": [],
    }
    for mod in deps:
        p = d / mod
        p.parent.mkdir(parents=True, exist_ok=True)
        body = f"module {mod}".encode()
        p.write_bytes(lzma.compress(body) if compressed else body)
    (d / "modules.dep").write_text("".join(f"{m}: {' '.join(v)}\n" for m, v in deps.items()))
    (d / "modules.builtin").write_text("kernel/fs/overlayfs/overlay.ko\n")
    return d


def test_modules_load_after_what_they_depend_on(tmp_path: Path) -> None:
    d = _modtree(tmp_path, compressed=False)
    order = image.load_order(d, image.MODULES)
    names = [Path(m).name for m in order]
    assert names.index("virtio_ring.ko") < names.index("virtio_pci.ko")
    assert names.index("virtio.ko") < names.index("virtio_console.ko")
    assert names.index("9pnet.ko") < names.index("9pnet_virtio.ko") < len(names)
    assert names.index("netfs.ko") < names.index("9p.ko")
    assert names.index("jbd2.ko") < names.index("ext4.ko")
    assert len(names) == len(set(names))
    assert not any("overlay" in n for n in names)  # built in: nothing to load
    with pytest.raises(UnsupportedError, match="kernel module nope"):
        image.load_order(d, ("nope",))


def test_the_initramfs_holds_busybox_modules_and_init(tmp_path: Path) -> None:
    d = _modtree(tmp_path, compressed=True)
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"\x7fELF busybox")
    entries = {n: (m, b) for n, m, b in _read_newc(gzip.decompress(image.initramfs(busybox, d)))}
    assert entries["bin/busybox"][1] == b"\x7fELF busybox"
    assert entries["bin/switch_root"] == (stat.S_IFLNK | 0o777, b"busybox")
    assert entries["lib/modules/virtio_net.ko"][1] == b"module kernel/drivers/net/virtio_net.ko.xz"
    init = entries["init"][1].decode()
    assert entries["init"][0] == stat.S_IFREG | 0o755
    assert init.index("insmod /lib/modules/virtio_ring.ko") < init.index("virtio_pci.ko")
    assert "mount -t 9p" in init and "mount -t overlay" in init
    assert 'exec switch_root /newroot "$agent" agent "$port"' in init
    assert f'= "{image.PORT}" ] && port="/dev/${{p##*/}}"' in init
    # A disk image: its root (first partition, else the whole disk) is the lower
    # layer, and the agent is run from the host's root mounted beside it.
    assert "fidelnet.disk) disk=1" in init and "root=/dev/vda1" in init
    assert 'mount -o ro "$root" /lower' in init
    assert 'agent="/run/fidelnet/host$agent"' in init


def test_no_image_is_found_in_an_empty_or_broken_cache(tmp_path: Path) -> None:
    assert image.find(tmp_path) is None
    (tmp_path / "current.json").write_text("{not json")
    assert image.find(tmp_path) is None
    (tmp_path / "current.json").write_text('{"digest": "abc", "kernel_package": "k"}')
    assert image.find(tmp_path) is None  # its files are missing
    d = tmp_path / "abc"
    d.mkdir()
    (d / "vmlinuz").write_bytes(b"k")
    (d / "initrd.img").write_bytes(b"i")
    assert image.find(tmp_path) is None  # an image of an older layout: built again
    meta = {"digest": "abc", "kernel_package": "k", "format": image.FORMAT}
    (tmp_path / "current.json").write_text(json.dumps(meta))
    found = image.find(tmp_path)
    assert found is not None and found.digest == "abc"
