"""Public names a package exports but imports only on first use (PEP 562).

A package ``__init__`` that re-exports heavy modules (the kernel layer, pydantic
models, pyroute2) makes every ``import fidelnet.x.y`` below it pay for them: the
``fidelnet`` command would start in a second instead of a few tens of ms. Such a
package lists its names here instead::

    if TYPE_CHECKING:
        from fidelnet.network import Network      # what type checkers see

    lazy_exports(__name__, {"Network": "fidelnet.network"})  # what Python does

Where a name is also the name of the submodule defining it (``fidelnet.measure.tcp``
the module, ``tcp`` the function), the package attribute is the function, as it was
with eager imports, even after ``import fidelnet.measure.tcp``.

No module-level ``__getattr__`` is declared for type checkers on purpose: one would
make any misspelt name type-check as ``object``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from types import ModuleType

__all__ = ["lazy_exports"]


class _LazyPackage(ModuleType):
    """A package module that imports ``_lazy_names`` on first access."""

    _lazy_names: Mapping[str, str]

    def __getattr__(self, name: str) -> object:
        module = self.__dict__.get("_lazy_names", {}).get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(self, name, value)  # later lookups skip this method
        return value

    def __setattr__(self, name: str, value: object) -> None:
        # The import system binds a loaded submodule on its package; keep the
        # exported object of the same name there instead (``tcp``, not ``tcp.py``).
        names = self.__dict__.get("_lazy_names", {})
        if isinstance(value, ModuleType) and names.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.__dict__.get("_lazy_names", {})))


def lazy_exports(package: str, names: Mapping[str, str]) -> None:
    """Make ``package`` import ``names`` (public name -> the module defining it under
    the same name) on first access."""
    module = sys.modules[package]
    module.__class__ = _LazyPackage
    module.__dict__["_lazy_names"] = dict(names)
