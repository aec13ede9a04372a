"""The parts of pyroute2 the kernel layer uses, without pyroute2's package import.

``import pyroute2.anything`` first runs ``pyroute2/__init__.py``, which in 0.7
imports every API the library has: NDB with its SQL schema, IPDB, the console and
its HTTP server, conntrack, nftables, wireless... About 0.5 s on a small machine,
which was most of ``fidelnet mn``'s start-up, for the two names fidelnet needs.

:func:`_light_package` registers the ``pyroute2`` package without running its
``__init__``: submodules import as usual (a package only needs its ``__path__``).
The first access to any other attribute of ``pyroute2`` (``pyroute2.NDB``,
``from pyroute2 import IPDB`` in a user's script) runs the real ``__init__`` then,
so code sharing the process with fidelnet sees the whole package as before.

The rest of the kernel layer imports pyroute2's names from here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

__all__ = ["IPRoute", "NetlinkError"]


class _Deferred(ModuleType):
    """The ``pyroute2`` package before its ``__init__`` ran."""

    def __getattr__(self, name: str) -> object:
        full = f"{self.__name__}.{name}"
        if not name.startswith("__") and importlib.util.find_spec(full) is not None:
            return importlib.import_module(full)  # a submodule: import just it
        # Anything else (``IPDB``, ``__version__``, ``__all__``): the whole package.
        object.__setattr__(self, "__class__", ModuleType)  # once; then plain lookups
        spec = self.__spec__
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(self)
        return getattr(self, name)


def _light_package() -> None:
    if "pyroute2" in sys.modules:
        return
    spec = importlib.util.find_spec("pyroute2")
    if spec is None or spec.loader is None:
        raise ImportError("pyroute2 is not installed", name="pyroute2")
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    sys.modules["pyroute2"] = module


_light_package()

from pyroute2.iproute.linux import IPRoute  # noqa: E402
from pyroute2.netlink.exceptions import NetlinkError  # noqa: E402
