"""``fidelnet vm``: the guest image of VM nodes (:mod:`fidelnet.vm.image`)."""

from __future__ import annotations

import click

__all__ = ["vm"]


@click.group()
def vm() -> None:
    """VM nodes (backend qemu): their guest image."""


@vm.command()
@click.option("--rebuild", is_flag=True, help="Build again even when an image exists.")
def image(rebuild: bool) -> None:
    """Build (or show) the guest image: Debian's kernel and busybox-static, fetched
    with apt-get download, and an initramfs made here; cached under
    /var/lib/fidelnet/vm. VM nodes build it on first use otherwise."""
    from fidelnet.vm import image as img

    found = None if rebuild else img.find()
    built = found or img.build()
    click.echo(f"image {built.digest} ({built.kernel_package})")
    click.echo(f"  kernel  {built.kernel}")
    click.echo(f"  initrd  {built.initrd}")
    click.echo(f"  modules {built.modules}")
