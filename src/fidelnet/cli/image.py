"""``fidelnet image``: the store of OCI images that container nodes run
(:mod:`fidelnet.image`): import a file, list, remove, prune to a size."""

from __future__ import annotations

import time
from pathlib import Path

import click

__all__ = ["image"]

MiB = 1 << 20


@click.group()
@click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The store's directory (default: $FIDELNET_IMAGE_STORE, else /var/cache/fidelnet/images).",
)
@click.pass_context
def image(ctx: click.Context, store_dir: Path | None) -> None:
    """OCI images for container nodes: import, ls, rm, prune."""
    ctx.obj = {"store": store_dir}


@image.command("import")
@click.argument("file")
@click.option("--name", default=None, metavar="NAME[:TAG]", help="A name to give it.")
@click.pass_context
def import_(ctx: click.Context, file: str, name: str | None) -> None:
    """Import FILE: an OCI layout directory, an OCI archive or a docker save archive
    (gzip-compressed or not; also oci:DIR[:REF], oci-archive:PATH[:REF],
    docker-archive:PATH[:NAME]). Nodes then name it by NAME or by its digest."""
    from fidelnet.image import Store

    store = Store(ctx.obj["store"])
    t0 = time.time()
    img = store.import_path(file, name=name)
    store.prune(keep={img.digest})
    rec = store.record(img.digest) or {}
    fresh = float(rec.get("imported", 0)) >= t0
    what = "imported" if fresh else "already in the store:"
    click.echo(f"{what} {img.digest} ({img.source}, {img.size / MiB:.1f} MiB)")
    click.echo(f"  names  {', '.join(img.names) or '(none: refer to it by digest)'}")
    click.echo(f"  rootfs {img.rootfs}")


@image.command("ls")
@click.pass_context
def ls(ctx: click.Context) -> None:
    """List the images in the store, most recently used first."""
    from fidelnet.image import Store

    store = Store(ctx.obj["store"])
    images = store.list()
    if not images:
        click.echo(f"no images in {store.root}")
        return
    click.echo(f"{'DIGEST':19}  {'SIZE':>9}  {'LAST USED':16}  {'SOURCE':14}  NAMES")
    total = 0
    for img in images:
        rec = store.record(img.digest) or {}
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(rec.get("last_used", 0))))
        size = f"{img.size / MiB:.1f} MiB"
        click.echo(
            f"{img.short:19}  {size:>9}  {used:16}  {img.source:14}  {', '.join(img.names) or '-'}"
        )
        total += img.size
    click.echo(
        f"{len(images)} image{'' if len(images) == 1 else 's'}, {total / MiB:.1f} MiB of "
        f"{store.max_bytes / MiB:.0f} MiB "
        f"in {store.root}"
    )


@image.command("rm")
@click.argument("ref")
@click.pass_context
def rm(ctx: click.Context, ref: str) -> None:
    """Remove the image REF (NAME[:TAG], sha256:HEX or a unique prefix of 12 digits
    or more) and its names; refused while a run uses it."""
    from fidelnet.image import Store

    store = Store(ctx.obj["store"])
    img = store.find(ref)
    store.remove(ref)
    if img is not None:
        click.echo(f"removed {img.digest} ({', '.join(img.names) or 'no names'})")


@image.command("prune")
@click.option(
    "--max-mb",
    type=click.IntRange(min=0),
    default=None,
    help="Size to prune to, in MiB (default: the store's limit, $FIDELNET_IMAGE_STORE_MB "
    "or 8192; 0 removes every image not in use).",
)
@click.pass_context
def prune(ctx: click.Context, max_mb: int | None) -> None:
    """Remove images, least recently used first, until the store fits its size
    limit; images in use by a run stay."""
    from fidelnet.image import Store

    store = Store(ctx.obj["store"])
    removed = store.prune(None if max_mb is None else max_mb * MiB)
    for img in removed:
        click.echo(f"removed {img.digest} ({', '.join(img.names) or 'no names'})")
    left = store.list()
    click.echo(
        f"{len(removed)} removed; {len(left)} left, "
        f"{sum(i.size for i in left) / MiB:.1f} MiB in {store.root}"
    )
