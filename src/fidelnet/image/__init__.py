"""OCI images for ``container`` nodes: imported from local files (or pulled with skopeo),
verified, unpacked once into a store on disk, pinned by digest.

The API a node backend uses::

    from fidelnet.image import in_use, resolve

    image = resolve("oci-archive:web.tar", node="h1")   # imported unless already there
    with in_use(image):                                  # prune leaves it alone meanwhile
        ...  # image.rootfs: the overlay's lower layer; image.config: entrypoint, env...

:mod:`fidelnet.image.store` describes the store's layout, locks and size limit;
:mod:`fidelnet.image.formats` the formats read; :mod:`fidelnet.image.unpack` how layers
are applied (safely: nothing outside the root filesystem is ever touched).
"""

from __future__ import annotations

from fidelnet.image.model import Image, ImageConfig
from fidelnet.image.resolve import in_use, resolve
from fidelnet.image.store import Store

__all__ = ["Image", "ImageConfig", "Store", "in_use", "resolve"]
